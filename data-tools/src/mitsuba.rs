//! `supercell-data export-mitsuba`: one attribute of one frame, and the scene's camera and
//! lights, as files an independent renderer (Mitsuba 3) reads: the extinction as a `.vol`
//! grid and the rest as JSON (`scripts/mitsuba_compare.py` builds the Mitsuba scene).
//!
//! The extinction written is the renderer's own: the grid's value trilinearly interpolated
//! in index space (values at integer index coordinates, the voxel centres), mapped through
//! the baked transfer-function table as `shaders/march.wgsl` and `render::render_cpu` do,
//! times the attribute's extinction. Samples lie on a lattice of `1 / supersample` voxels
//! over the box the ray marcher marches, the active index box grown by one voxel on every
//! side; Mitsuba's `gridvolume` puts sample `k` of `n` at `(k + 0.5) / n` of its unit cube,
//! so the unit cube is placed half a lattice step outside the first and last samples, and
//! the medium's cube shape covers exactly the marched box.

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use supercell::dataset::{AlignedBuf, CrcCheck};
use supercell::format::Grid;
use supercell::render::{MediumKind, Projection, SUPPORTED_TYPES, TF_SIZE, TransferFunction};
use supercell::scene::{LoadedScene, Scene};

/// Arguments of `export-mitsuba`.
#[derive(clap::Args, Debug)]
pub struct ExportMitsubaArgs {
    /// A scene file (`.toml`) or a dataset directory, as `supercell render` takes.
    pub scene: PathBuf,
    /// The frame to export.
    #[arg(long, default_value_t = 0)]
    pub frame: usize,
    /// The attribute (grid name) to export: one enabled attribute of the scene (default: the
    /// only enabled one).
    #[arg(long)]
    pub attribute: Option<String>,
    /// Image size, `WIDTHxHEIGHT`: the camera is fitted for its aspect as `supercell render
    /// --size` fits it.
    #[arg(long, default_value = "1280x720")]
    pub size: String,
    /// Extinction samples per voxel edge (1: one per voxel centre). More samples bring
    /// Mitsuba's interpolation of the extinction closer to the renderer's, which applies the
    /// transfer function after interpolating.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub supersample: u32,
    /// Output directory: `sigma_t.vol`, `albedo.vol` (where the colour varies) and
    /// `scene.json`.
    #[arg(long)]
    pub out: PathBuf,
}

/// The renderer's transfer-function lookup for one attribute: the baked table, the value
/// range and the extinction, read the way `render_cpu` reads them.
struct Lookup {
    table: Vec<[f32; 4]>,
    range_lo: f32,
    range_inv: f32,
    extinction: f32,
}

impl Lookup {
    fn new(tf: &TransferFunction) -> Lookup {
        Lookup {
            table: tf.bake_path(),
            range_lo: tf.range[0],
            range_inv: tf.range_inv(),
            extinction: tf.extinction,
        }
    }

    /// Colour and opacity at value `v` (`tf_eval` of march.wgsl).
    fn eval(&self, v: f32) -> [f32; 4] {
        if !v.is_finite() {
            return [0.0; 4];
        }
        let u = ((v - self.range_lo) * self.range_inv).clamp(0.0, 1.0);
        let x = u * (TF_SIZE - 1) as f32;
        let i = (x as u32).min(TF_SIZE as u32 - 2) as usize;
        let fr = x - i as f32;
        let (l, h) = (self.table[i], self.table[i + 1]);
        std::array::from_fn(|c| l[c] * (1.0 - fr) + h[c] * fr)
    }
}

/// `trilerp` of the renderer: `v[n]` is the corner `(n >> 2 & 1, n >> 1 & 1, n & 1)`.
fn trilerp(v: &[f32; 8], f: [f32; 3]) -> f32 {
    let a00 = v[0] + (v[1] - v[0]) * f[2];
    let a01 = v[2] + (v[3] - v[2]) * f[2];
    let a10 = v[4] + (v[5] - v[4]) * f[2];
    let a11 = v[6] + (v[7] - v[6]) * f[2];
    let b0 = a00 + (a01 - a00) * f[1];
    let b1 = a10 + (a11 - a10) * f[1];
    b0 + (b1 - b0) * f[0]
}

/// The grid's values at the integer index points of a box, as the renderer's accessor
/// reads them (non-scalar or unreadable values read 0).
struct Lattice {
    origin: [i32; 3],
    dims: [usize; 3],
    values: Vec<f32>,
}

impl Lattice {
    fn read(grid: &Grid<'_>, origin: [i32; 3], dims: [usize; 3]) -> Lattice {
        let mut acc = grid.accessor();
        let mut values = Vec::with_capacity(dims[0] * dims[1] * dims[2]);
        for z in 0..dims[2] {
            for y in 0..dims[1] {
                for x in 0..dims[0] {
                    let ijk = [
                        origin[0] + x as i32,
                        origin[1] + y as i32,
                        origin[2] + z as i32,
                    ];
                    let v = acc.value(ijk).ok().and_then(|v| v.as_f32()).unwrap_or(0.0);
                    values.push(v);
                }
            }
        }
        Lattice {
            origin,
            dims,
            values,
        }
    }

    fn at(&self, i: [i64; 3]) -> f32 {
        let mut lin = 0usize;
        for k in (0..3).rev() {
            let c = i[k] - i64::from(self.origin[k]);
            if c < 0 || c as usize >= self.dims[k] {
                return 0.0;
            }
            lin = lin * self.dims[k] + c as usize;
        }
        self.values[lin]
    }

    /// The renderer's trilinear sample at index point `p`.
    fn sample(&self, p: [f32; 3]) -> f32 {
        let fl = p.map(f32::floor);
        let i = fl.map(|x| x as i64);
        let f = [p[0] - fl[0], p[1] - fl[1], p[2] - fl[2]];
        let mut v = [0.0f32; 8];
        for (n, out) in v.iter_mut().enumerate() {
            let d = [(n >> 2) as i64 & 1, (n >> 1) as i64 & 1, n as i64 & 1];
            *out = self.at([i[0] + d[0], i[1] + d[1], i[2] + d[2]]);
        }
        trilerp(&v, f)
    }
}

/// Writes a Mitsuba `.vol` grid: "VOL", version 3, encoding 1 (float32), x/y/z resolution,
/// channel count, a bounding box (Mitsuba's `gridvolume` ignores it unless `use_grid_bbox`
/// is set; it is written as the unit cube the data spans before `to_world`), then the data
/// with x varying fastest, channels innermost.
fn write_vol(path: &Path, dims: [usize; 3], channels: usize, data: &[f32]) -> Result<()> {
    debug_assert_eq!(data.len(), dims[0] * dims[1] * dims[2] * channels);
    let mut header = Vec::with_capacity(48);
    header.extend_from_slice(b"VOL");
    header.push(3);
    header.extend_from_slice(&1i32.to_le_bytes());
    for d in dims {
        let d = i32::try_from(d).context("grid too large for a .vol file")?;
        header.extend_from_slice(&d.to_le_bytes());
    }
    header.extend_from_slice(&(channels as i32).to_le_bytes());
    for b in [0.0f32, 0.0, 0.0, 1.0, 1.0, 1.0] {
        header.extend_from_slice(&b.to_le_bytes());
    }
    let write = || -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        f.write_all(&header)?;
        for v in data {
            f.write_all(&v.to_le_bytes())?;
        }
        f.flush()
    };
    write().with_context(|| format!("writing {}", path.display()))
}

/// Row-major 4×4 matrix of `world = M · (index, 1)` composed with `index = o + diag(s) · u`.
fn affine(map: &supercell::format::grid::Map, o: [f64; 3], s: [f64; 3]) -> [[f64; 4]; 4] {
    let m = &map.mat;
    let mut out = [[0.0; 4]; 4];
    for (r, row) in out.iter_mut().take(3).enumerate() {
        for c in 0..3 {
            row[c] = m[3 * r + c] * s[c];
        }
        row[3] = map.vec[r] + (0..3).map(|c| m[3 * r + c] * o[c]).sum::<f64>();
    }
    out[3][3] = 1.0;
    out
}

/// Runs `export-mitsuba`.
pub fn run(args: &ExportMitsubaArgs) -> Result<ExitCode> {
    let (w, h) = supercell::units::parse_image_size("--size", &args.size, u32::MAX)?;
    let scene = Scene::load(&args.scene)?;
    let ls = scene.open(w as f32 / h as f32, None)?;
    let view = &ls.view;
    let s = &view.settings;
    let (slot, attr, name) = chosen_attribute(args, &ls)?;
    let tf = &view.attributes[slot]
        .as_ref()
        .expect("enabled slots have a view")
        .tf;
    check_exportable(tf, view, &name)?;

    let frame_count = ls.dataset.frame_count();
    if args.frame >= frame_count {
        bail!(
            "frame {} is not within the dataset's {frame_count} frames",
            args.frame
        );
    }
    let mut buf = AlignedBuf::new();
    ls.dataset
        .read_frame(args.frame, &mut buf, CrcCheck::Verify)
        .with_context(|| format!("reading frame {}", args.frame))?;
    let bytes = ls.dataset.grid_bytes(args.frame, attr, &buf)?;
    let grid =
        Grid::parse(bytes).with_context(|| format!("frame {}: grid {name:?}", args.frame))?;
    if !SUPPORTED_TYPES.contains(&grid.grid_type()) {
        bail!(
            "grid {name:?} holds {} values, which the renderer does not draw",
            grid.grid_type()
        );
    }
    let [bmin, bmax] = grid.index_bbox();
    if (0..3).any(|i| bmin[i] > bmax[i]) {
        bail!("grid {name:?} of frame {} is empty", args.frame);
    }

    // The marched box: the active box grown by one voxel (where the trilinear sample still
    // reaches active values). Lattice steps of 1/ss voxel; n samples per axis.
    let ss = args.supersample as usize;
    let lo = bmin.map(|v| v - 1);
    let cells: [usize; 3] = std::array::from_fn(|i| (bmax[i] - bmin[i] + 2) as usize);
    let n: [usize; 3] = cells.map(|c| c * ss + 1);
    let total = (n[0] * n[1] * n[2]) as u64;
    supercell::memory::check_available(
        || format!("a {}x{}x{} extinction grid", n[0], n[1], n[2]),
        total * 16,
    )?;
    let lattice = Lattice::read(
        &grid,
        lo,
        std::array::from_fn(|i| cells[i] + 2), // one more for the upper corners
    );
    let (sigma, albedo) = sample_medium(&lattice, tf, lo, n, ss);
    // The colour where the medium is: one colour (a constant albedo) or a grid of them.
    let mut colours = sigma
        .iter()
        .zip(albedo.chunks_exact(3))
        .filter(|(s, _)| **s > 0.0)
        .map(|(_, c)| [c[0], c[1], c[2]]);
    let first = colours.next().unwrap_or([0.0; 3]);
    let constant = colours.all(|c| (0..3).all(|k| (c[k] - first[k]).abs() <= 1e-6));

    std::fs::create_dir_all(&args.out).with_context(|| format!("{}", args.out.display()))?;
    write_vol(&args.out.join("sigma_t.vol"), n, 1, &sigma)?;
    let albedo_json = if constant {
        serde_json::json!(first)
    } else {
        write_vol(&args.out.join("albedo.vol"), n, 3, &albedo)?;
        serde_json::json!("albedo.vol")
    };

    // Unit cube u ↦ index lo − step/2 + u · n · step; the cube shape [−1, 1]³ ↦ the marched
    // box [lo, lo + cells].
    let stepd = 1.0 / ss as f64;
    let volume_to_world = affine(
        grid.map(),
        std::array::from_fn(|i| f64::from(lo[i]) - 0.5 * stepd),
        std::array::from_fn(|i| n[i] as f64 * stepd),
    );
    let cube_to_world = affine(
        grid.map(),
        std::array::from_fn(|i| f64::from(lo[i]) + 0.5 * cells[i] as f64),
        std::array::from_fn(|i| 0.5 * cells[i] as f64),
    );
    let f = view.camera.frame();
    let (az, el) = (
        s.sun_azimuth_deg.to_radians(),
        s.sun_elevation_deg.to_radians(),
    );
    let to_sun = [el.cos() * az.cos(), el.cos() * az.sin(), el.sin()];
    let sigma_max = sigma.iter().copied().fold(0.0f32, f32::max);
    let json = serde_json::json!({
        "format": "supercell-mitsuba-scene 1",
        "source": {
            "scene": args.scene.display().to_string(),
            "frame": args.frame,
            "attribute": name,
            "grid_type": grid.grid_type().to_string(),
            "index_bbox": [bmin, bmax],
        },
        "width": w,
        "height": h,
        "camera": {
            "origin": f.eye.to_array(),
            "target": (f.eye + f.forward).to_array(),
            "up": f.up.to_array(),
            "fov_y_deg": view.camera.fov_y_deg,
        },
        "sun": {
            "to_sun": to_sun,
            // The path tracer's sun: irradiance π · sun_color (shaders/path.wgsl, "Units").
            "irradiance": s.sun_color.map(|c| std::f32::consts::PI * c),
        },
        "sky": {
            "zenith": s.sky_zenith,
            "horizon": s.sky_horizon,
            "ambient": s.ambient,
        },
        "ground": s.ground,
        "phase_g": s.phase_g,
        "medium": {
            "sigma_t": "sigma_t.vol",
            "sigma_t_max": sigma_max,
            "resolution": n,
            "supersample": ss,
            "albedo": albedo_json,
            "volume_to_world": volume_to_world,
            "cube_to_world": cube_to_world,
        },
    });
    let path = args.out.join("scene.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    println!(
        "{}: {}x{}x{} extinction samples of {name:?} (frame {}, largest {sigma_max}), albedo {}",
        args.out.display(),
        n[0],
        n[1],
        n[2],
        args.frame,
        if constant { "constant" } else { "albedo.vol" }
    );
    Ok(ExitCode::SUCCESS)
}

/// The scene's one enabled attribute (`--attribute` names it where several are): its view
/// slot, manifest index and name. Several enabled are refused: the exported medium holds
/// one attribute, and supercell would render them all.
fn chosen_attribute(args: &ExportMitsubaArgs, ls: &LoadedScene) -> Result<(usize, usize, String)> {
    let m = ls.dataset.manifest();
    let view = &ls.view;
    // The enabled attributes: (slot, manifest attribute, name).
    let enabled: Vec<(usize, usize, String)> = ls
        .slots
        .iter()
        .enumerate()
        .filter_map(|(slot, a)| {
            let a = (*a)?;
            let on = view
                .attributes
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|v| v.enabled);
            on.then(|| (slot, a, m.attributes[a].name.clone()))
        })
        .collect();
    let names: Vec<&str> = enabled.iter().map(|e| e.2.as_str()).collect();
    let (slot, attr, name) = match (&args.attribute, enabled.as_slice()) {
        (None, [one]) => one.clone(),
        (None, _) => bail!(
            "{}: enables {} attributes ({}); name one with --attribute",
            args.scene.display(),
            enabled.len(),
            names.join(", ")
        ),
        (Some(want), _) => enabled
            .iter()
            .find(|e| &e.2 == want)
            .cloned()
            .with_context(|| {
                format!(
                    "{}: no enabled attribute {want:?} (enabled: {})",
                    args.scene.display(),
                    names.join(", ")
                )
            })?,
    };
    if enabled.len() > 1 {
        // The exported medium holds one attribute; supercell would render them all.
        bail!(
            "{}: enables {} besides {name:?}; the exported medium holds one attribute, so \
         disable the others (enabled = false) for a comparison",
            args.scene.display(),
            names
                .iter()
                .filter(|n| **n != name)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok((slot, attr, name))
}

/// Extinction and albedo at every lattice point of the marched box (`n` points per axis,
/// `ss` per voxel, from index `lo`), as the renderer's transfer function gives them.
fn sample_medium(
    lattice: &Lattice,
    tf: &TransferFunction,
    lo: [i32; 3],
    n: [usize; 3],
    ss: usize,
) -> (Vec<f32>, Vec<f32>) {
    let total = n[0] * n[1] * n[2];
    let lookup = Lookup::new(tf);
    let step = 1.0 / ss as f32;
    let mut sigma = Vec::with_capacity(total);
    let mut albedo = Vec::with_capacity(3 * total);
    for z in 0..n[2] {
        for y in 0..n[1] {
            for x in 0..n[0] {
                let p = [
                    lo[0] as f32 + x as f32 * step,
                    lo[1] as f32 + y as f32 * step,
                    lo[2] as f32 + z as f32 * step,
                ];
                let e = lookup.eval(lattice.sample(p));
                let sig = if e[3] > 0.0 {
                    e[3] * lookup.extinction
                } else {
                    0.0
                };
                sigma.push(sig);
                albedo.extend_from_slice(&e[..3]);
            }
        }
    }
    (sigma, albedo)
}

/// What Mitsuba is given must be what supercell draws: a scattering medium seen through a
/// perspective camera.
fn check_exportable(
    tf: &TransferFunction,
    view: &supercell::render::View,
    name: &str,
) -> Result<()> {
    if tf.kind != MediumKind::Scatter {
        bail!("attribute {name:?} is an emissive medium; only scattering media are exported");
    }
    if view.camera.projection != Projection::Perspective {
        bail!("the scene's camera is orthographic; only perspective cameras are exported");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vol_header_is_mitsubas() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.vol");
        write_vol(&p, [2, 3, 4], 1, &[0.5; 24]).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[..4], b"VOL\x03");
        let word = |i: usize| i32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        assert_eq!(
            [word(4), word(8), word(12), word(16), word(20)],
            [1, 2, 3, 4, 1]
        );
        assert_eq!(b.len(), 48 + 24 * 4);
    }

    #[test]
    fn lattice_samples_trilinearly_at_voxel_centres() {
        let lat = Lattice {
            origin: [0, 0, 0],
            dims: [2, 1, 1],
            values: vec![1.0, 3.0],
        };
        assert_eq!(lat.sample([0.0, 0.0, 0.0]), 1.0);
        assert_eq!(lat.sample([0.5, 0.0, 0.0]), 2.0);
        assert_eq!(lat.sample([1.0, 0.0, 0.0]), 3.0);
        // Outside the lattice: the background, 0.
        assert_eq!(lat.sample([1.5, 0.0, 0.0]), 1.5);
        assert_eq!(lat.sample([-1.0, 0.0, 0.0]), 0.0);
    }
}
