//! `supercell-data sample PATH [--grid NAME|INDEX] (--at I,J,K ... | --world X,Y,Z ...)
//! [--interpolation linear|nearest] [--json]`.

use crate::args::{json_f32, parse_coord, parse_world};
use crate::target;
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::ExitCode;
use supercell::format::{Coord, Grid, Interpolation, Value};

/// Arguments of `sample`.
#[derive(clap::Args, Debug)]
pub struct SampleArgs {
    /// A .nvdb file, a raw NanoVDB grid buffer, or a dataset directory.
    pub path: PathBuf,
    /// The grid: its name, or its index in the file (default: the first grid).
    #[arg(long)]
    pub grid: Option<String>,
    /// For a dataset: the frame (default 0).
    #[arg(long)]
    pub frame: Option<usize>,
    /// An index coordinate I,J,K; repeat for several. Negative values: `--at=-5,0,7`.
    #[arg(long = "at", value_parser = parse_coord, allow_hyphen_values = true,
          required_unless_present = "world", conflicts_with = "world")]
    pub at: Vec<Coord>,
    /// A world position X,Y,Z in the grid's world units (metres for imported simulations
    /// and the built-in storm); repeat for several. The value there is interpolated between
    /// voxel centres (`--interpolation`), as NanoVDB's samplers and warp-lang read it.
    #[arg(long = "world", value_parser = parse_world, allow_hyphen_values = true)]
    pub world: Vec<[f64; 3]>,
    /// With `--world`: `linear` (trilinear over the eight surrounding voxel centres) or
    /// `nearest` (the nearest centre; the only choice for integer, boolean and colour grids).
    #[arg(long, value_enum, default_value = "linear", requires = "world")]
    pub interpolation: InterpolationArg,
    /// Print a JSON array of the values, in the order asked; floats read back exactly.
    #[arg(long)]
    pub json: bool,
    /// Sample a grid whose stored checksum does not match its bytes (with a warning)
    /// instead of refusing it.
    #[arg(long)]
    pub allow_bad_checksum: bool,
}

/// `--interpolation` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum InterpolationArg {
    /// Trilinear over the eight surrounding voxel centres.
    Linear,
    /// The nearest voxel centre.
    Nearest,
}

impl From<InterpolationArg> for Interpolation {
    fn from(a: InterpolationArg) -> Interpolation {
        match a {
            InterpolationArg::Linear => Interpolation::Linear,
            InterpolationArg::Nearest => Interpolation::Nearest,
        }
    }
}

fn f64_text(v: f64) -> String {
    if v.is_finite() {
        format!("{v:?}")
    } else if v.is_nan() {
        "\"nan\"".into()
    } else if v > 0.0 {
        "\"inf\"".into()
    } else {
        "\"-inf\"".into()
    }
}

/// JSON text of a value: a number, or an array of numbers for vectors.
fn value_json(v: &Value) -> String {
    let list = |items: Vec<String>| format!("[{}]", items.join(","));
    match *v {
        Value::Float(x) => json_f32(x),
        Value::Double(x) => f64_text(x),
        Value::Int(x) => x.to_string(),
        Value::Bool(x) => x.to_string(),
        Value::Vec3f(x) => list(x.iter().map(|c| json_f32(*c)).collect()),
        Value::Vec4f(x) => list(x.iter().map(|c| json_f32(*c)).collect()),
        Value::Vec3d(x) => list(x.iter().map(|c| f64_text(*c)).collect()),
        Value::Vec4d(x) => list(x.iter().map(|c| f64_text(*c)).collect()),
        Value::Rgba8(x) => list(x.iter().map(u8::to_string).collect()),
        Value::Vec3u8(x) => list(x.iter().map(u8::to_string).collect()),
        Value::Vec3u16(x) => list(x.iter().map(u16::to_string).collect()),
    }
}

/// Plain-text value: numbers separated by spaces.
fn value_text(v: &Value) -> String {
    value_json(v)
        .trim_matches(|c| c == '[' || c == ']')
        .replace(',', " ")
}

/// Runs `sample`.
pub fn run(args: &SampleArgs) -> Result<ExitCode> {
    let loaded = target::load(&args.path, args.frame)?;
    let grids = &loaded.grids;
    let index = match &args.grid {
        None => 0,
        Some(sel) => {
            let names: Vec<String> = grids.iter().map(|g| g.name.clone()).collect();
            target::select_grid(&names, sel).with_context(|| {
                let listed: Vec<String> =
                    supercell::format::openvdb::unique_grid_names(names.iter().map(String::as_str))
                        .iter()
                        .enumerate()
                        .map(|(i, n)| format!("{i}:{n:?}"))
                        .collect();
                format!(
                    "{}: no grid named or numbered {sel:?} (grids: {})",
                    args.path.display(),
                    listed.join(", ")
                )
            })?
        }
    };
    let Some(fg) = grids.get(index) else {
        bail!("{}: holds no grids", args.path.display());
    };
    let grid = fg.grid()?;
    let frame = loaded
        .frame
        .map_or(String::new(), |f| format!("frame {f} "));
    target::check_checksum(
        &format!(
            "{}: {frame}grid {index} ({:?})",
            args.path.display(),
            fg.name
        ),
        &fg.bytes,
        grid.version(),
        args.allow_bad_checksum,
    )?;
    let what = format!(
        "{}: grid {index} ({:?}, {})",
        args.path.display(),
        fg.name,
        grid.grid_type()
    );
    if args.world.is_empty() {
        sample_index(&grid, &args.at, args.json, &what)
    } else {
        sample_world(
            &grid,
            &args.world,
            args.interpolation.into(),
            args.json,
            &what,
        )
    }
}

/// Values at index coordinates, exactly as stored.
fn sample_index(grid: &Grid<'_>, at: &[Coord], json: bool, what: &str) -> Result<ExitCode> {
    let mut acc = grid.accessor();
    let mut values = Vec::with_capacity(at.len());
    for ijk in at {
        values.push(
            acc.value(*ijk)
                .map_err(|e| anyhow::anyhow!("{what}: {e}"))?,
        );
    }
    if json {
        let items: Vec<String> = values.iter().map(value_json).collect();
        println!("[{}]", items.join(","));
    } else {
        for (ijk, v) in at.iter().zip(&values) {
            println!("{},{},{}: {}", ijk[0], ijk[1], ijk[2], value_text(v));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Values at world positions, interpolated; the text form also gives each position's
/// continuous index coordinate, the JSON form only the values (as `--at` does).
fn sample_world(
    grid: &Grid<'_>,
    world: &[[f64; 3]],
    how: Interpolation,
    json: bool,
    what: &str,
) -> Result<ExitCode> {
    let mut acc = grid.accessor();
    let mut samples = Vec::with_capacity(world.len());
    for xyz in world {
        let s = acc.sample_world(*xyz, how).map_err(|e| {
            anyhow::anyhow!("{what}: at world ({}, {}, {}): {e}", xyz[0], xyz[1], xyz[2])
        })?;
        samples.push(s);
    }
    if json {
        let items: Vec<String> = samples.iter().map(|s| value_json(&s.value)).collect();
        println!("[{}]", items.join(","));
    } else {
        for (xyz, s) in world.iter().zip(&samples) {
            let [i, j, k] = s.index;
            println!(
                "{},{},{} (index {i:.3},{j:.3},{k:.3}): {}",
                xyz[0],
                xyz[1],
                xyz[2],
                value_text(&s.value)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
