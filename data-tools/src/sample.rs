//! `supercell-data sample PATH [--grid NAME|INDEX] --at I,J,K ... [--json]`.

use crate::args::{json_f32, parse_coord};
use crate::target;
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::ExitCode;
use supercell::format::{Coord, Value};

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
    #[arg(long = "at", required = true, value_parser = parse_coord, allow_hyphen_values = true)]
    pub at: Vec<Coord>,
    /// Print a JSON array of the values, in the order asked; floats read back exactly.
    #[arg(long)]
    pub json: bool,
    /// Sample a grid whose stored checksum does not match its bytes (with a warning)
    /// instead of refusing it.
    #[arg(long)]
    pub allow_bad_checksum: bool,
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
    let mut acc = grid.accessor();
    let mut values = Vec::with_capacity(args.at.len());
    for ijk in &args.at {
        let v = acc.value(*ijk).map_err(|e| {
            anyhow::anyhow!(
                "{}: grid {index} ({:?}, {}): {e}",
                args.path.display(),
                fg.name,
                grid.grid_type()
            )
        })?;
        values.push(v);
    }
    if args.json {
        let items: Vec<String> = values.iter().map(value_json).collect();
        println!("[{}]", items.join(","));
    } else {
        for (ijk, v) in args.at.iter().zip(&values) {
            println!("{},{},{}: {}", ijk[0], ijk[1], ijk[2], value_text(v));
        }
    }
    Ok(ExitCode::SUCCESS)
}
