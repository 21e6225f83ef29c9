//! `render --split space`: sort-last rendering across MPI ranks, for frames larger than one
//! GPU holds. The dataset is written in spatial bricks (`supercell-data … --bricks N`);
//! rank `k` of `N` reads only brick `k` of every frame, draws only that brick's box of the
//! domain (`Renderer::set_region`), and the ranks composite their premultiplied images
//! front to back in visibility order onto rank 0 (binary swap, `cluster::composite_within`),
//! which adds what lies behind the volume, tone-maps and writes the PNG. Sun shadows cross
//! the parts: every rank's coarse extinction cells are combined over all ranks before any
//! rank renders (`cluster::all_reduce_within`), so each draws with the whole frame's sun
//! grid. The picture equals one rank's render of the whole frame (tests/render_split.rs).
//!
//! One process (`Solo`) runs the same code where the dataset has one brick.

use std::ops::Range;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use supercell::cluster::{
    CompositeError, Ranks, Solo, all_reduce_within, composite_within, visibility_order,
};
use supercell::dataset::{AlignedBuf, GridEntry};
use supercell::format::Grid;
use supercell::render::{
    GpuContext, PremultipliedImage, Projection, Region, Renderer, combine_sun_extinction,
    premultiplied_over,
};
use supercell::scene::{LoadedScene, Scene};

use super::{
    RenderArgs, apply_args, bind_uploaded, check_headers, check_size, open_renderer, parse_size,
    progress_bar, read_frame, save, shown_grids, upload_shown,
};

/// Runs `render --split space` over `frames` as one rank of the run an MPI launcher
/// started (or alone). A rank that fails ends the run (every rank) with its error.
pub(super) fn run(args: &RenderArgs, frames: Range<usize>) -> Result<()> {
    let ranks: Box<dyn Ranks> =
        crate::cmd::bench::launched_ranks()?.unwrap_or_else(|| Box::new(Solo));
    let outcome = run_rank(args, &*ranks, frames);
    match outcome {
        Err(e) if ranks.size() > 1 => {
            eprintln!("render --split space: rank {}: {e:#}", ranks.rank());
            ranks.abort(1)
        }
        other => other,
    }
}

/// What every rank has at hand for the run.
struct Setup {
    ls: LoadedScene,
    ctx: GpuContext,
    renderer: Renderer,
    /// Each brick's world box (brick `k` is rank `k`'s).
    boxes: Vec<[[f64; 3]; 2]>,
    /// The whole domain's world box.
    domain: [[f64; 3]; 2],
    /// How long a rank waits for another.
    wait: Option<Duration>,
}

fn run_rank(args: &RenderArgs, ranks: &dyn Ranks, frames: Range<usize>) -> Result<()> {
    let mut s = setup(args, ranks)?;
    let (w, h) = parse_size(&args.size)?;
    let n = s.ls.dataset.frame_count();
    if frames.is_empty() || frames.end > n {
        bail!("frames {frames:?} are not within the dataset's {n} frames");
    }
    let rank = ranks.rank();
    let bar = progress_bar(
        "render [{elapsed_precise}] {bar:30} {pos}/{len} frames  {msg}",
        frames.len() as u64,
    );
    let show_bar = rank == 0;
    if !show_bar {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut slot = AlignedBuf::new();
    let started = Instant::now();
    for f in frames.clone() {
        bar.set_message(format!("frame {f}, {w}x{h}, {} ranks", ranks.size()));
        let (image, spent) = render_part(args, ranks, &mut s, &mut slot, f, (w, h))?;
        let eye = order_point(&s.ls);
        let order = visibility_order(eye, &s.boxes)
            .with_context(|| format!("{}: the bricks' boxes", args.scene.display()))?;
        let t1 = Instant::now();
        let frame = u32::try_from(f).unwrap_or(u32::MAX);
        let whole = composite_within(ranks, &order, frame, image.rgba, premultiplied_over, s.wait)
            .map_err(|e| abort_on_silent(ranks, e))?;
        let composited = t1.elapsed();
        if let Some(rgba) = whole {
            let composite = PremultipliedImage {
                width: w,
                height: h,
                rgba,
            };
            let img = s.renderer.finish_premultiplied(&s.ls.view, &composite)?;
            bar.suspend(|| {
                eprintln!(
                    "frame {f}: {w}x{h} over {} ranks: rank 0 read its brick in {:.1} ms, waited \
                     {:.1} ms for the others' boxes and sun cells, rendered its region in {:.1} \
                     ms; composited in {:.1} ms (order front to back: ranks {order:?})",
                    ranks.size(),
                    spent.read_ms,
                    spent.exchange_ms,
                    spent.render_ms,
                    composited.as_secs_f64() * 1e3,
                )
            });
            bar.suspend(|| save(args, &s.ls, img, f))?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if rank == 0 {
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "render: {} frames over {} ranks in {secs:.2} s ({:.2} frames/s)",
            frames.len(),
            ranks.size(),
            frames.len() as f64 / secs.max(1e-9)
        );
    }
    Ok(())
}

/// A rank that stopped answering ends the run from here, named ([`Ranks::abort`]); other
/// errors go back to the caller.
fn abort_on_silent(ranks: &dyn Ranks, e: CompositeError) -> anyhow::Error {
    if let CompositeError::Silent(silent) = &e {
        eprintln!("render --split space: rank {}: {silent}", ranks.rank());
        ranks.abort(3);
    }
    e.into()
}

/// Opens the scene, this rank's brick of the dataset, its GPU and renderer.
fn setup(args: &RenderArgs, ranks: &dyn Ranks) -> Result<Setup> {
    let (w, h) = parse_size(&args.size)?;
    let scene = crate::cmd::with_dataset(Scene::load(&args.scene)?)?;
    let mut ls = scene.open(w as f32 / h as f32, args.attributes.as_deref())?;
    apply_args(args, &mut ls, w as f32 / h as f32);
    if ls.view.settings.transmittance_cutoff > 0.0 {
        // A region cannot know the transmittance of the regions in front of it.
        if ranks.rank() == 0 {
            eprintln!(
                "render --split space: rays are marched through every region to the end \
                 (transmittance_cutoff {} set to 0): the picture is one rank's render with \
                 `[settings] transmittance_cutoff = 0`",
                ls.view.settings.transmittance_cutoff
            );
        }
        ls.view.settings.transmittance_cutoff = 0.0;
    }
    let bricks = ls.dataset.bricks().to_vec();
    if bricks.len() != ranks.size() {
        bail!(
            "{}: the dataset is split into {} brick(s) and this run has {} rank(s): run one rank \
             per brick (mpirun -n {} supercell render --split space ...), or write the dataset \
             again with --bricks {}",
            ls.dataset.manifest().path().display(),
            bricks.len(),
            ranks.size(),
            bricks.len(),
            ranks.size()
        );
    }
    let boxes: Vec<[[f64; 3]; 2]> = bricks.iter().map(|b| b.world_box).collect();
    let domain = union(&boxes);
    let brick = u32::try_from(ranks.rank())?;
    ls.dataset = ls.dataset.retain_brick(brick)?;
    let ctx = open_context(ranks)?;
    if ranks.rank() == 0 {
        eprintln!(
            "render --split space: {} ranks, rank 0 on {}",
            ranks.size(),
            ctx.describe()
        );
    }
    let renderer = open_renderer(&ctx)?;
    check_size("--size", Some(&renderer), w, h)?;
    let wait = (!args.read_timeout.is_zero()).then_some(args.read_timeout);
    Ok(Setup {
        ls,
        ctx,
        renderer,
        boxes,
        domain,
        wait,
    })
}

/// The GPU of this rank: the `local_rank`-th of its host where the host has that many,
/// else the best adapter (several ranks on one GPU, as on a machine without one).
fn open_context(ranks: &dyn Ranks) -> Result<GpuContext> {
    let local = ranks.local_rank();
    if ranks.local_size() > 1 {
        match supercell::app::gpus::open_gpu(local) {
            Ok(g) => {
                return Ok(GpuContext {
                    adapter: g.gpu.adapter.clone(),
                    device: g.gpu.device.clone(),
                    queue: g.gpu.queue.clone(),
                    caps: g.gpu.caps.clone(),
                });
            }
            Err(e) => eprintln!(
                "render --split space: rank {}: {e}; rendering on the best adapter",
                ranks.rank()
            ),
        }
    }
    Ok(GpuContext::headless()?)
}

/// Where one rank's part of a frame took its time, milliseconds.
struct Spent {
    /// Reading its brick and binding it.
    read_ms: f64,
    /// The exchanges of the whole grids' boxes and the sun cells (waiting for the others).
    exchange_ms: f64,
    /// The sun cells of its region and the region's render, read back.
    render_ms: f64,
}

/// Draws this rank's part of frame `f`: reads its brick, combines the sun's extinction
/// cells and the whole grids' boxes with the other ranks, and renders the region.
fn render_part(
    args: &RenderArgs,
    ranks: &dyn Ranks,
    s: &mut Setup,
    slot: &mut AlignedBuf,
    f: usize,
    (w, h): (u32, u32),
) -> Result<(PremultipliedImage, Spent)> {
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t0 = Instant::now();
    check_budget(args, &s.ls, f, ranks.size())?;
    read_frame(args, &s.ls, f, slot)?;
    check_headers(&s.ls, f, slot)?;
    let grids = shown_grids(&s.renderer, &s.ls, f)?;
    let uploaded = upload_shown(&s.ctx, &s.renderer, slot, &grids)
        .with_context(|| format!("{}: frame {f}", args.scene.display()))?;
    bind_uploaded(&mut s.renderer, &uploaded, &grids)?;
    let read_ms = ms(t0);
    let t1 = Instant::now();
    let whole_grids = whole_grid_boxes(ranks, &s.ls, f, slot, s.wait)?;
    let mut exchange_ms = ms(t1);
    let brick = s.boxes[ranks.rank()];
    s.renderer.set_region(Some(Region {
        lo: brick[0],
        hi: brick[1],
        domain_lo: s.domain[0],
        domain_hi: s.domain[1],
        whole_grids,
    }))?;
    let t2 = Instant::now();
    let mine = s.renderer.sun_extinction(&s.ls.view)?;
    let mut render_ms = ms(t2);
    let t3 = Instant::now();
    let combined = all_reduce_within(ranks, &mine, combine_sun_extinction, s.wait)
        .map_err(|e| abort_on_silent(ranks, e))?;
    exchange_ms += ms(t3);
    let t4 = Instant::now();
    s.renderer.set_sun_extinction(&combined)?;
    let image = s.renderer.render_premultiplied(&s.ls.view, w, h)?;
    render_ms += ms(t4);
    Ok((
        image,
        Spent {
            read_ms,
            exchange_ms,
            render_ms,
        },
    ))
}

/// `--frame-budget`: refuses frame `f` where the grids this rank would bind exceed it.
pub(super) fn check_budget(
    args: &RenderArgs,
    ls: &LoadedScene,
    f: usize,
    ranks: usize,
) -> Result<()> {
    let Some(budget) = args.frame_budget else {
        return Ok(());
    };
    let bytes: u64 = shown_entries(ls, f).iter().flatten().map(|g| g.size).sum();
    if bytes > budget {
        bail!(
            "{}: frame {f}: the grids shown{} are {bytes} bytes, over --frame-budget {budget}: \
             split the frame over more ranks (a dataset written with --bricks N, rendered with \
             mpirun -n N supercell render --split space)",
            ls.dataset.manifest().path().display(),
            if ranks > 1 {
                " of this rank's brick"
            } else {
                ""
            },
        );
    }
    Ok(())
}

/// Per shown channel, the whole frame's grid box (inclusive index bbox): the union of every
/// rank's brick grid's box, which holds every voxel of the whole grid that lies in the
/// brick's box and its halo. `None` for a channel no brick has voxels of.
fn whole_grid_boxes(
    ranks: &dyn Ranks,
    ls: &LoadedScene,
    f: usize,
    slot: &[u8],
    wait: Option<Duration>,
) -> Result<Vec<Option<[[i32; 3]; 2]>>> {
    let grids = shown_entries(ls, f);
    let mut mine = Vec::with_capacity(grids.len() * 6);
    for g in &grids {
        let bbox = match g {
            Some(g) => {
                let bytes = slot
                    .get(g.offset as usize..(g.offset + g.size) as usize)
                    .context("a grid past the frame's bytes")?;
                let grid = Grid::parse(bytes).with_context(|| {
                    format!("{}: frame {f}", ls.dataset.manifest().path().display())
                })?;
                (grid.active_voxel_count() > 0).then(|| grid.index_bbox())
            }
            None => None,
        };
        mine.extend(bbox_floats(bbox));
    }
    let all = all_reduce_within(ranks, &mine, combine_boxes, wait)
        .map_err(|e| abort_on_silent(ranks, e))?;
    Ok(all.chunks_exact(6).map(floats_bbox).collect())
}

/// Frame `f`'s grid of each channel the render shows (`None` for a channel it does not).
pub(super) fn shown_entries(ls: &LoadedScene, f: usize) -> Vec<Option<GridEntry>> {
    let frame = ls.dataset.frame(f);
    ls.slots
        .iter()
        .zip(&ls.view.attributes)
        .map(|(s, v)| {
            let a = (*s)?;
            v.as_ref().filter(|v| v.enabled)?;
            frame?
                .grids
                .iter()
                .find(|g| g.attribute as usize == a)
                .copied()
        })
        .collect()
}

/// A box as 6 floats (min then max; an absent box as an empty one, min above max). Index
/// coordinates are exact in `f32` below 2^24.
fn bbox_floats(bbox: Option<[[i32; 3]; 2]>) -> [f32; 6] {
    match bbox {
        Some([lo, hi]) => [
            lo[0] as f32,
            lo[1] as f32,
            lo[2] as f32,
            hi[0] as f32,
            hi[1] as f32,
            hi[2] as f32,
        ],
        None => [f32::MAX, f32::MAX, f32::MAX, f32::MIN, f32::MIN, f32::MIN],
    }
}

fn floats_bbox(v: &[f32]) -> Option<[[i32; 3]; 2]> {
    (v[0] <= v[3] && v[1] <= v[4] && v[2] <= v[5]).then(|| {
        [
            [v[0] as i32, v[1] as i32, v[2] as i32],
            [v[3] as i32, v[4] as i32, v[5] as i32],
        ]
    })
}

/// Union of boxes as [`bbox_floats`] writes them.
fn combine_boxes(acc: &mut [f32], next: &[f32]) {
    for (a, b) in acc.chunks_exact_mut(6).zip(next.chunks_exact(6)) {
        for k in 0..3 {
            a[k] = a[k].min(b[k]);
            a[k + 3] = a[k + 3].max(b[k + 3]);
        }
    }
}

fn union(boxes: &[[[f64; 3]; 2]]) -> [[f64; 3]; 2] {
    let mut u = [[f64::MAX; 3], [f64::MIN; 3]];
    for b in boxes {
        for k in 0..3 {
            u[0][k] = u[0][k].min(b[0][k]);
            u[1][k] = u[1][k].max(b[1][k]);
        }
    }
    u
}

/// The point the parts are ordered from: the eye, or for parallel rays a point far
/// behind the camera along its view direction.
fn order_point(ls: &LoadedScene) -> [f64; 3] {
    let cam = &ls.view.camera;
    let frame = cam.frame();
    let p = match cam.projection {
        Projection::Perspective => frame.eye,
        Projection::Orthographic => frame.eye - frame.forward * 1.0e7,
    };
    [f64::from(p.x), f64::from(p.y), f64::from(p.z)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_travel_as_floats_and_combine_into_their_union() {
        let a = bbox_floats(Some([[0, 8, -16], [63, 31, 7]]));
        let b = bbox_floats(Some([[56, 0, -8], [127, 15, 15]]));
        let mut acc = bbox_floats(None);
        combine_boxes(&mut acc, &a);
        combine_boxes(&mut acc, &bbox_floats(None));
        combine_boxes(&mut acc, &b);
        assert_eq!(floats_bbox(&acc), Some([[0, 0, -16], [127, 31, 15]]));
        assert_eq!(floats_bbox(&bbox_floats(None)), None);
    }
}
