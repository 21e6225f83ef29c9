//! Sort-last rendering on whatever Vulkan device is present (Mesa's lavapipe in CI): a
//! frame rendered whole, then as 2 and as 4 regions of a k-d split of its domain (each from
//! bricks that hold only the region's voxels and a one-voxel halo, its sun extinction
//! combined over the regions, the regions composited front to back from the camera and
//! finished on the GPU) equals the whole render within the GPU-vs-CPU tolerance of
//! `render_gpu.rs` (`render_support::check_gpu_close`: mean |Δ| ≤ 1e-4, 99th percentile ≤
//! 1e-3, at most 0.2 % of pixels off by more than 0.05, on linear RGB). Without combining
//! the sun extinction (each region's own cells only) the picture differs: shadows that one
//! region's cloud casts on another's and on the ground go missing.

mod render_support;

use render_support::*;
use supercell::format::{Grid, LEAF_DIM, LeafBrick};
use supercell::render::{
    AttributeView, Image, Mode, PremultipliedImage, Region, RenderError, TransferFunction, View,
    combine_sun_extinction, premultiplied_over,
};

const W: u32 = 160;
const H: u32 = 90;
/// World units per voxel.
const VOXEL: f32 = 0.25;
/// Voxels of the domain per axis: x, y, z (multiples of 8).
const DOMAIN: [i32; 3] = [64, 48, 32];

/// Cloud density at index point `p`: three soft blobs, the one at large x standing in the
/// light of a low sun from +x so that it shadows the others.
fn density(p: [f32; 3]) -> f32 {
    let blobs = [
        ([16.0, 24.0, 16.0], 6.0),
        ([46.0, 22.0, 15.0], 6.5),
        ([36.0, 36.0, 20.0], 5.0),
    ];
    let mut v = 0.0f32;
    for (c, r) in blobs {
        let d2: f32 = (0..3).map(|i| (p[i] - c[i]).powi(2)).sum();
        v += (-d2 / (2.0 * r * r)).exp();
    }
    let ripple = 0.7 + 0.3 * (p[0] * 0.41).sin() * (p[1] * 0.33 + 1.0).cos();
    (v * ripple).min(1.0)
}

/// The nested grid's voxels: half the cloud's.
const FINE_VOXEL: f32 = 0.125;
/// The nested grid's index box (its own index space): straddling the split planes x = 8
/// and y = 6 (world units).
const FINE_LO: [i32; 3] = [48, 32, 16];
const FINE_HI: [i32; 3] = [80, 64, 48];

/// A column of finer structure (the nested grid's density at its index point `p`).
fn column(p: [f32; 3]) -> f32 {
    let r = 4.0 + 0.15 * (p[2] - 16.0);
    let d2 = (p[0] - 64.0).powi(2) + (p[1] - 48.0).powi(2);
    ((-d2 / (2.0 * r * r)).exp() * (0.75 + 0.25 * (0.9 * p[2]).sin())).min(1.0)
}

/// The leaves over index box [extent_lo, extent_hi) of `density` whose voxels lie in the
/// index box [lo, hi) (voxels outside it inactive at the background).
fn leaves(
    density: fn([f32; 3]) -> f32,
    extent: ([i32; 3], [i32; 3]),
    lo: [i32; 3],
    hi: [i32; 3],
) -> Vec<LeafBrick> {
    let mut bricks = Vec::new();
    let (elo, ehi) = extent;
    for bx in (elo[0]..ehi[0]).step_by(LEAF_DIM) {
        for by in (elo[1]..ehi[1]).step_by(LEAF_DIM) {
            for bz in (elo[2]..ehi[2]).step_by(LEAF_DIM) {
                let mut b = LeafBrick::filled([bx, by, bz], 0.0);
                let mut any = false;
                for n in 0..LEAF_DIM * LEAF_DIM * LEAF_DIM {
                    let (x, y, z) = (n / 64, (n / 8) % 8, n % 8);
                    let ijk = [bx + x as i32, by + y as i32, bz + z as i32];
                    if (0..3).any(|k| ijk[k] < lo[k] || ijk[k] >= hi[k]) {
                        continue;
                    }
                    let v = density(ijk.map(|c| c as f32));
                    if v >= 0.04 {
                        b.set_active(LeafBrick::index(x, y, z), v);
                        any = true;
                    }
                }
                if any {
                    bricks.push(b);
                }
            }
        }
    }
    bricks
}

/// The frame's grids over the cloud's index box [lo, hi) (the nested grid, where asked,
/// over the same world box), each with a one-voxel halo of its own voxels: the whole frame
/// for the domain, a region's bricks for its box.
fn grids(lo: [i32; 3], hi: [i32; 3], nested: bool) -> Vec<Vec<u8>> {
    let whole = lo == [0; 3] && hi == DOMAIN;
    let halo = if whole { 0 } else { 1 };
    let cloud = leaves(
        density,
        ([0; 3], DOMAIN),
        lo.map(|c| c - halo),
        hi.map(|c| c + halo),
    );
    let mut out = vec![grid_of_bricks("cloud", cloud, VOXEL)];
    if nested {
        // Twice the cloud's index: the same world box.
        let fine = leaves(
            column,
            (FINE_LO, FINE_HI),
            lo.map(|c| 2 * c - halo),
            hi.map(|c| 2 * c + halo),
        );
        out.push(grid_of_bricks("column", fine, FINE_VOXEL));
    }
    out
}

/// The view of `grids` (the cloud first): a low sun from +x (shadows cross the split
/// planes), the ground a little below the cloud.
fn view(grids: &[Vec<u8>]) -> View {
    let g = Grid::parse(&grids[0]).unwrap();
    let b = g.world_bbox();
    let mut bbox = [b[0].map(|v| v as f32), b[1].map(|v| v as f32)];
    bbox[0][2] -= 2.0;
    // A thin cloud (optical depths over 48 world units) and a dense column (over 8).
    let attributes = [("cloud", 48.0), ("funnel_cloud", 8.0)][..grids.len()]
        .iter()
        .map(|&(p, extent)| {
            let tf = TransferFunction::preset(p, [0.0, 1.0], extent);
            Some(AttributeView { enabled: true, tf })
        })
        .collect();
    let mut v = View::new(bbox, VOXEL, attributes, W as f32 / H as f32);
    v.settings.sun_azimuth_deg = 10.0;
    v.settings.sun_elevation_deg = 22.0;
    v.settings.max_steps = 4096;
    // Rays that stop where the transmittance falls below a cutoff do not decompose (a
    // region does not know the transmittance in front of it): sort-last refuses a cutoff,
    // and the whole render is made without one too.
    v.settings.transmittance_cutoff = 0.0;
    v.camera.yaw_deg += 25.0;
    v
}

/// A k-d split of index box [lo, hi) into `n` (a power of two) leaf-aligned boxes, halving
/// the longest axis each time, as a tree: the order a camera at `eye` sees them in is
/// the near side of each split first.
enum Split {
    Leaf([i32; 3], [i32; 3]),
    Node {
        axis: usize,
        at: i32,
        low: Box<Split>,
        high: Box<Split>,
    },
}

fn kd_split(lo: [i32; 3], hi: [i32; 3], n: usize) -> Split {
    if n == 1 {
        return Split::Leaf(lo, hi);
    }
    let axis = (0..3).max_by_key(|&k| hi[k] - lo[k]).unwrap();
    let at = lo[axis] + (hi[axis] - lo[axis]) / 2 / 8 * 8;
    let (mut hi_low, mut lo_high) = (hi, lo);
    hi_low[axis] = at;
    lo_high[axis] = at;
    Split::Node {
        axis,
        at,
        low: Box::new(kd_split(lo, hi_low, n / 2)),
        high: Box::new(kd_split(lo_high, hi, n / 2)),
    }
}

/// The leaves of `s` front to back from world point `eye` (index (0,0,0) at the world
/// origin, `VOXEL` units a voxel).
fn front_to_back(s: &Split, eye: [f32; 3], out: &mut Vec<([i32; 3], [i32; 3])>) {
    match s {
        Split::Leaf(lo, hi) => out.push((*lo, *hi)),
        Split::Node {
            axis,
            at,
            low,
            high,
        } => {
            let (near, far) = if eye[*axis] < *at as f32 * VOXEL {
                (low, high)
            } else {
                (high, low)
            };
            front_to_back(near, eye, out);
            front_to_back(far, eye, out);
        }
    }
}

/// The world box of index box [lo, hi).
fn world_box(lo: [i32; 3], hi: [i32; 3]) -> ([f64; 3], [f64; 3]) {
    let w = |c: [i32; 3]| c.map(|v| f64::from(v) * f64::from(VOXEL));
    (w(lo), w(hi))
}

/// Binds `grids`, grid i to channel i.
fn bind(gpu: &mut TestGpu, grids: &[Vec<u8>]) {
    let slices: Vec<&[u8]> = grids.iter().map(Vec::as_slice).collect();
    gpu.bind(&slices);
}

/// Renders the frame as the `n` regions of a k-d split and finishes the composite; with
/// `combine` false each region keeps its own sun extinction (what a rank would see if the
/// reduction were left out).
fn split_render(gpu: &mut TestGpu, view: &View, nested: bool, n: usize, combine: bool) -> Image {
    let whole_grids: Vec<_> = grids([0; 3], DOMAIN, nested)
        .iter()
        .map(|g| Some(Grid::parse(g).unwrap().index_bbox()))
        .collect();
    let (domain_lo, domain_hi) = world_box([0; 3], DOMAIN);
    let eye = view.camera.frame().eye.to_array();
    let mut order = Vec::new();
    front_to_back(&kd_split([0; 3], DOMAIN, n), eye, &mut order);
    let regions: Vec<(Region, Vec<Vec<u8>>)> = order
        .iter()
        .map(|&(lo, hi)| {
            let (wlo, whi) = world_box(lo, hi);
            let region = Region {
                lo: wlo,
                hi: whi,
                domain_lo,
                domain_hi,
                whole_grids: whole_grids.clone(),
            };
            (region, grids(lo, hi, nested))
        })
        .collect();
    // Each rank's share of the cells, then the reduction (in rank order).
    let mut shares = Vec::new();
    for (region, brick) in &regions {
        bind(gpu, brick);
        gpu.r.set_region(Some(region.clone())).unwrap();
        shares.push(gpu.r.sun_extinction(view).expect("sun extinction"));
    }
    let mut combined = shares[0].clone();
    for s in &shares[1..] {
        combine_sun_extinction(&mut combined, s);
    }
    let mut composite = PremultipliedImage::transparent(W, H);
    for ((region, brick), own) in regions.iter().zip(&shares) {
        // One renderer plays every rank: bind this rank's brick again and take its share
        // again (a rank's renderer took it just before), which also shows it repeatable.
        bind(gpu, brick);
        gpu.r.set_region(Some(region.clone())).unwrap();
        assert!(&gpu.r.sun_extinction(view).unwrap() == own, "share changed");
        gpu.r
            .set_sun_extinction(if combine { &combined } else { own })
            .unwrap();
        let part = gpu.r.render_premultiplied(view, W, H).expect("region");
        premultiplied_over(&mut composite.rgba, &part.rgba);
    }
    // The display rank finishes with its own region bound (the last one here).
    gpu.r
        .set_sun_extinction(if combine { &combined } else { &shares[n - 1] })
        .unwrap();
    gpu.r
        .finish_premultiplied(view, &composite)
        .expect("finish")
}

fn save(img: &Image, name: &str) {
    let _ = img.write_png(&out_dir().join(format!("regions_{name}.png")));
}

/// The whole frame's render of `view`.
fn whole_render(gpu: &mut TestGpu, view: &View, nested: bool) -> Image {
    bind(gpu, &grids([0; 3], DOMAIN, nested));
    gpu.r.render(view, W, H).expect("render");
    gpu.r.read_image().expect("read back")
}

/// Checks the composite of `n` regions against the whole render.
fn check_split(gpu: &mut TestGpu, view: &View, nested: bool, n: usize, reference: &Image) {
    let img = split_render(gpu, view, nested, n, true);
    let what = format!("{n} regions{}", if nested { ", nested grid" } else { "" });
    save(&img, &what.replace([' ', ','], "_"));
    let d = reference.diff(&img);
    check_gpu_close(&d, &what);
    // In fact they differ by rounding alone (the composite's sums in another order): a
    // sample taken at another position, or twice, would show.
    assert!(d.max <= 1e-4, "{what}: {d:?}");
}

#[test]
fn two_and_four_regions_composite_to_the_whole_frame_and_need_the_combined_sun_grid() {
    let Some(mut gpu) = gpu() else { return };
    let v = view(&grids([0; 3], DOMAIN, false));
    let reference = whole_render(&mut gpu, &v, false);
    save(&reference, "whole");
    let lit = reference.linear.iter().filter(|p| p[3] > 0.05).count();
    assert!(lit > (W * H / 10) as usize, "the cloud covers {lit} pixels");
    for n in [2, 4] {
        check_split(&mut gpu, &v, false, n, &reference);
    }
    let alone = split_render(&mut gpu, &v, false, 2, false);
    save(&alone, "2_uncombined");
    let d = reference.diff(&alone);
    eprintln!("2 regions, each with its own sun extinction: {d:?}");
    assert!(
        d.mean > 1e-3 && d.frac_over_5pct > 0.002,
        "leaving out the combination should lose the shadows across regions: {d:?}"
    );
}

/// A second channel, a nested grid of voxels half the cloud's (the march refines its steps
/// inside it, from where its empty cells end) across the split planes.
#[test]
fn a_nested_finer_grid_in_a_second_channel_splits_too() {
    let Some(mut gpu) = gpu() else { return };
    let v = view(&grids([0; 3], DOMAIN, true));
    let reference = whole_render(&mut gpu, &v, true);
    save(&reference, "whole_nested");
    let without = whole_render(&mut gpu, &v, false);
    let d = reference.diff(&without);
    assert!(d.frac_over_5pct > 0.002, "the nested grid shows: {d:?}");
    check_split(&mut gpu, &v, true, 4, &reference);
}

#[test]
fn no_region_renders_as_before_and_what_does_not_decompose_is_refused_by_name() {
    let Some(mut gpu) = gpu() else { return };
    let whole = grids([0; 3], DOMAIN, false);
    let mut v = view(&whole);
    let before = whole_render(&mut gpu, &v, false);
    // A sort-last render in between, then back to the whole frame.
    let (lo, hi) = world_box([0; 3], [32, 48, 32]);
    let (dlo, dhi) = world_box([0; 3], DOMAIN);
    let region = Region {
        lo,
        hi,
        domain_lo: dlo,
        domain_hi: dhi,
        whole_grids: vec![Some(Grid::parse(&whole[0]).unwrap().index_bbox())],
    };
    // A channel the whole frame has but this rank did not bind.
    let mut two = region.clone();
    two.whole_grids.push(two.whole_grids[0]);
    gpu.r.set_region(Some(two)).unwrap();
    let e = gpu.r.sun_extinction(&v).unwrap_err();
    assert!(
        e.to_string().contains("channel 1") && e.to_string().contains("none is bound"),
        "{e}"
    );
    gpu.r.set_region(Some(region)).unwrap();
    let own = gpu.r.sun_extinction(&v).unwrap();
    // Combined cells of another layout (a rank that bound another frame, say).
    gpu.r.set_sun_extinction(&own[3..]).unwrap();
    let e = gpu.r.render_premultiplied(&v, W, H).unwrap_err();
    assert!(e.to_string().contains("cells need"), "{e}");
    gpu.r.set_sun_extinction(&own).unwrap();
    gpu.r.render_premultiplied(&v, W, H).unwrap();
    for (mode, name) in [
        (Mode::Path, "path"),
        (Mode::Mip, "maximum"),
        (Mode::Isosurface, "iso"),
    ] {
        v.settings.mode = mode;
        let e = gpu.r.render_premultiplied(&v, W, H).unwrap_err();
        assert!(
            matches!(e, RenderError::NotDecomposable(_)) && e.to_string().contains(name),
            "{mode:?}: {e}"
        );
    }
    v.settings.mode = Mode::Shaded;
    v.settings.transmittance_cutoff = 0.01;
    let e = gpu.r.render_premultiplied(&v, W, H).unwrap_err();
    assert!(e.to_string().contains("transmittance cutoff"), "{e}");
    v.settings.transmittance_cutoff = 0.0;
    v.settings.accel = false;
    let e = gpu.r.sun_extinction(&v).unwrap_err();
    assert!(e.to_string().contains("acceleration cells"), "{e}");
    v.settings.accel = true;
    gpu.r.set_region(None).unwrap();
    gpu.r.render(&v, W, H).expect("render");
    let after = gpu.r.read_image().unwrap();
    assert_eq!(before.rgba8, after.rgba8, "8-bit images differ");
    let bits =
        |i: &Image| -> Vec<u32> { i.linear.iter().flat_map(|p| p.map(f32::to_bits)).collect() };
    assert!(bits(&before) == bits(&after), "linear images differ");
}
