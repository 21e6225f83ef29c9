//! `supercell-data inspect PATH [--grid NAME|INDEX] [--json]`.

use crate::target::{self, LoadedGrids};
use anyhow::{Context, Result};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use supercell::format::{ChecksumKind, ChecksumState, FileGrid, Grid, Value, verify_checksum};

/// Arguments of `inspect`.
#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// A .nvdb file, a raw NanoVDB grid buffer, or a dataset directory.
    pub path: PathBuf,
    /// For a dataset: which frame's grids to describe (default 0).
    #[arg(long)]
    pub frame: Option<usize>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Describe only this grid: its name as listed (a second grid named density is
    /// density#1), or its index.
    #[arg(long)]
    pub grid: Option<String>,
}

/// Everything `inspect` reports about one grid.
struct GridReport {
    index: usize,
    name: String,
    grid_type: String,
    class: String,
    version: String,
    bytes: u64,
    file_bytes: u64,
    codec: String,
    active_voxels: u64,
    nodes: [u32; 3],
    tiles: [u32; 3],
    index_bbox: [[i32; 3]; 2],
    world_bbox: [[f64; 3]; 2],
    voxel_size: [f64; 3],
    range: Option<(Value, Value)>,
    /// `valid`, `absent` or `MISMATCH`.
    checksum: &'static str,
    /// What the stored checksum covers.
    checksum_kind: ChecksumKind,
    /// The stored 64-bit checksum.
    checksum_stored: u64,
    /// Stored and computed values of a mismatching checksum.
    mismatch: Option<(u64, u64)>,
}

fn value_json(v: &Value) -> serde_json::Value {
    match *v {
        Value::Float(x) => json!(x),
        Value::Double(x) => json!(x),
        Value::Int(x) => json!(x),
        Value::Bool(x) => json!(x),
        Value::Vec3f(x) => json!(x),
        Value::Vec3d(x) => json!(x),
        Value::Vec4f(x) => json!(x),
        Value::Vec4d(x) => json!(x),
        Value::Rgba8(x) => json!(x),
        Value::Vec3u8(x) => json!(x),
        Value::Vec3u16(x) => json!(x),
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Float(x) => format!("{x}"),
        Value::Double(x) => format!("{x}"),
        Value::Int(x) => format!("{x}"),
        Value::Bool(x) => format!("{x}"),
        other => value_json(other).to_string(),
    }
}

fn report(index: usize, fg: &FileGrid, grid: &Grid<'_>) -> GridReport {
    let h = grid.header();
    let state = verify_checksum(&fg.bytes, h.version);
    let checksum = match state {
        ChecksumState::Absent => "absent",
        ChecksumState::Valid => "valid",
        ChecksumState::Mismatch { .. } => "MISMATCH",
    };
    let mismatch = match state {
        ChecksumState::Mismatch { stored, computed } => Some((stored, computed)),
        _ => None,
    };
    GridReport {
        index,
        name: fg.name.clone(),
        grid_type: h.grid_type.name().to_string(),
        class: h.grid_class.name().to_string(),
        version: h.version.to_string(),
        bytes: grid.grid_size(),
        file_bytes: fg.meta.file_size,
        codec: fg.meta.codec.to_string(),
        active_voxels: h.active_voxel_count,
        nodes: [
            h.node_counts.leaves,
            h.node_counts.lower,
            h.node_counts.upper,
        ],
        tiles: [h.tile_counts.lower, h.tile_counts.upper, h.tile_counts.root],
        index_bbox: h.index_bbox,
        world_bbox: h.world_bbox,
        voxel_size: h.voxel_size,
        range: grid.root_stats().map(|s| (s.min, s.max)),
        checksum,
        checksum_kind: ChecksumKind::of(grid.stored_checksum()),
        checksum_stored: grid.stored_checksum(),
        mismatch,
    }
}

/// The checksum in words: `checksum full, valid`, `checksum head-only (leaves not covered),
/// valid`, `checksum none`, `checksum full, MISMATCH (stored …, computed …)`.
fn checksum_text(r: &GridReport) -> String {
    let kind = match r.checksum_kind {
        ChecksumKind::Full => "full",
        ChecksumKind::HeadOnly => "head-only (leaves not covered)",
        ChecksumKind::None => return "checksum none".into(),
    };
    match r.mismatch {
        Some((stored, computed)) => {
            format!("checksum {kind}, MISMATCH (stored {stored:016x}, computed {computed:016x})")
        }
        None => format!("checksum {kind}, {}", r.checksum),
    }
}

/// Runs `inspect`.
pub fn run(args: &InspectArgs) -> Result<ExitCode> {
    let LoadedGrids { grids, frame } = target::load(&args.path, args.frame)?;
    let names: Vec<String> = grids.iter().map(|g| g.name.clone()).collect();
    let only = match &args.grid {
        None => None,
        Some(sel) => Some(target::select_grid(&names, sel).with_context(|| {
            format!(
                "{}: no grid named or numbered {sel:?} (grids: {})",
                args.path.display(),
                supercell::format::openvdb::unique_grid_names(names.iter().map(String::as_str))
                    .join(", ")
            )
        })?),
    };
    let mut reports = Vec::with_capacity(grids.len());
    for (i, fg) in grids.iter().enumerate() {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        // read_nvdb already validated the structure; parse again for the view.
        let grid = fg.grid().map_err(|e| {
            anyhow::anyhow!("{}: grid {i} ({:?}): {e}", args.path.display(), fg.name)
        })?;
        reports.push(report(i, fg, &grid));
    }
    let bad_checksum = reports.iter().any(|r| r.checksum == "MISMATCH");
    if args.json {
        let grids: Vec<_> = reports
            .iter()
            .map(|r| {
                json!({
                    "index": r.index,
                    "name": r.name,
                    "type": r.grid_type,
                    "class": r.class,
                    "version": r.version,
                    "bytes": r.bytes,
                    "file_bytes": r.file_bytes,
                    "codec": r.codec,
                    "active_voxels": r.active_voxels,
                    "nodes": {"leaf": r.nodes[0], "lower": r.nodes[1], "upper": r.nodes[2]},
                    "active_tiles": {"lower": r.tiles[0], "upper": r.tiles[1], "root": r.tiles[2]},
                    "index_bbox": r.index_bbox,
                    "world_bbox": r.world_bbox,
                    "voxel_size": r.voxel_size,
                    "value_range": r.range.map(|(a, b)| json!([value_json(&a), value_json(&b)])),
                    "checksum": r.checksum,
                    "checksum_kind": r.checksum_kind.name(),
                    "checksum_stored": format!("{:016x}", r.checksum_stored),
                    "checksum_computed": r.mismatch.map(|(_, c)| format!("{c:016x}")),
                })
            })
            .collect();
        let mut out = json!({ "path": args.path, "grids": grids });
        if let Some(f) = frame {
            let ds = target::open_dataset(&args.path)?;
            let m = ds.manifest();
            out["dataset"] = json!({
                "frame": f,
                "frames": m.frame_count(),
                "lanes": m.lanes.len(),
                "chunk_size": m.chunk_size,
                "total_bytes": m.total_bytes(),
                "attributes": m.attributes,
                "bricks": m.bricks,
                "grid_bricks": m.frames[f].grids.iter().map(|g| g.brick).collect::<Vec<_>>(),
            });
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let mut grid_bricks = Vec::new();
        if let Some(f) = frame {
            let ds = target::open_dataset(&args.path)?;
            let m = ds.manifest();
            grid_bricks = m.frames[f].grids.iter().map(|g| g.brick).collect();
            println!(
                "dataset {}: {} frames, {} attributes, {} lanes, chunk {} B, {:.3} GB in all",
                args.path.display(),
                m.frame_count(),
                m.attributes.len(),
                m.lanes.len(),
                m.chunk_size,
                m.total_bytes() as f64 / 1e9
            );
            print_bricks(m.bricks());
            println!("frame {f}:");
        }
        for r in &reports {
            println!(
                "grid {} {:?}: {} {} (NanoVDB {}), {} bytes{}, codec {}, {}",
                r.index,
                r.name,
                r.grid_type,
                r.class,
                r.version,
                r.bytes,
                if r.file_bytes != r.bytes {
                    format!(" ({} in file)", r.file_bytes)
                } else {
                    String::new()
                },
                r.codec,
                checksum_text(r)
            );
            println!(
                "  active voxels {}, nodes leaf/lower/upper {}/{}/{}, active tiles lower/upper/root {}/{}/{}",
                r.active_voxels,
                r.nodes[0],
                r.nodes[1],
                r.nodes[2],
                r.tiles[0],
                r.tiles[1],
                r.tiles[2]
            );
            println!(
                "  index bbox {:?} .. {:?}, voxel size {:?}",
                r.index_bbox[0], r.index_bbox[1], r.voxel_size
            );
            println!(
                "  world bbox {:?} .. {:?}",
                r.world_bbox[0], r.world_bbox[1]
            );
            match &r.range {
                Some((a, b)) => println!("  value range {} .. {}", value_text(a), value_text(b)),
                None => println!("  value range: not recorded for this grid type"),
            }
            if let Some(Some(b)) = grid_bricks.get(r.index) {
                println!("  brick {b} (its box and a halo of neighbouring leaves)");
            }
        }
    }
    Ok(if bad_checksum {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Lists a bricked dataset's bricks (nothing for whole grids).
pub(crate) fn print_bricks(bricks: &[supercell::dataset::Brick]) {
    if bricks.is_empty() {
        return;
    }
    println!(
        "{} spatial bricks (index boxes min inclusive, max exclusive; render with `mpirun -n R \
         supercell render --split space`, R from 1 to {}):",
        bricks.len(),
        bricks.len()
    );
    for (i, b) in bricks.iter().enumerate() {
        println!(
            "  brick {i}: index {:?} .. {:?}, world {:?} .. {:?}",
            b.index_box[0], b.index_box[1], b.world_box[0], b.world_box[1]
        );
    }
}
