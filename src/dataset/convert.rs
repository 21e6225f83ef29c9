//! Import of `.nvdb` and OpenVDB `.vdb` sequences into the striped layout, and export of
//! frames back to standard `.nvdb` files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use super::AlignedBuf;
use super::error::{DatasetError, Result};
use super::manifest::{Manifest, Provenance, check_units};
use super::reader::{CrcCheck, Dataset};
use super::writer::{AttributeSpec, DatasetWriter, LaneSpec};

mod ranks;
use crate::format::checksum::{rename_grid, store_checksum};
use crate::format::file::meta_from_grid;
use crate::format::openvdb;
use crate::format::{
    BuildOptions, ChecksumKind, ChecksumState, Codec, Coord, FileGrid, Grid, GridClass, GridType,
    LeafBrick, SparseVolume, build_grid, read_nvdb, verify_checksum, write_nvdb,
};
pub use ranks::import_sequence_ranks;

/// How grids of later files are matched to attributes.
enum Matching {
    /// Every grid of the first file has a distinct non-empty name: match by name.
    ByName,
    /// Otherwise: match by position.
    ByPosition,
}

/// Options of [`import_sequence`].
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// The NanoVDB value encoding for grids converted from OpenVDB files: `Float` (exact),
    /// `Fp16` or `Fp8` (NanoVDB's quantisation, error reported). `.nvdb` grids are stored
    /// as they are.
    pub vdb_grid_type: GridType,
    /// Most leaves an OpenVDB grid's tiles may become (see
    /// [`crate::format::openvdb::to_scalar_grid`]).
    pub max_tile_leaves: u64,
    /// Besides a vector grid's length (attribute `NAME`), import its components as the
    /// attributes `NAME.x`, `NAME.y`, `NAME.z`.
    pub vector_components: bool,
    /// Import only these attributes (names as the manifest would list them: `density`,
    /// `density#1` for a file's second grid named `density`, `velocity.x`); `None`: all. A
    /// name the first file does not have is an error that lists the names it has.
    pub grids: Option<Vec<String>>,
    /// `.nvdb` grids whose stored NanoVDB checksum does not match their bytes are imported
    /// with their checksum cleared (NanoVDB's "no checksum"), and listed in
    /// [`ImportReport::notes`], instead of refusing the file.
    pub allow_bad_checksum: bool,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            vdb_grid_type: GridType::Float,
            // 4 Mi leaves: 8 GiB of f32 voxels.
            max_tile_leaves: 1 << 22,
            vector_components: false,
            grids: None,
            allow_bad_checksum: false,
        }
    }
}

/// What an import did besides writing the dataset.
#[derive(Clone, Debug, Default)]
pub struct ImportReport {
    /// Per attribute converted from OpenVDB with quantisation: the largest absolute
    /// difference between a source voxel and its stored value, over all frames.
    pub max_abs_error: Vec<(String, f64)>,
    /// Attributes that hold the length of an OpenVDB vector grid (the vector itself is kept
    /// only as `NAME.x`/`.y`/`.z` with [`ImportOptions::vector_components`]).
    pub vector_magnitudes: Vec<String>,
    /// OpenVDB grids not imported, with the reason (once per grid name).
    pub skipped: Vec<String>,
    /// Per attribute converted from an OpenVDB double-precision grid (stored as 32-bit
    /// floats): the largest absolute rounding error of a value, over all frames.
    pub narrowed: Vec<(String, f64)>,
    /// What the OpenVDB reader tolerated, per file (`file: grid "name": what`).
    pub notes: Vec<String>,
}

/// One file's grids, ready for the writer, with what the conversion found.
struct FileFrame {
    grids: Vec<FileGrid>,
    /// (grid name, max abs error) for quantised OpenVDB grids.
    errors: Vec<(String, f64)>,
    vectors: Vec<String>,
    skipped: Vec<String>,
    /// (grid name, largest rounding error) for double grids.
    narrowed: Vec<(String, f64)>,
    notes: Vec<String>,
    /// (grid name, its `units` metadata) for OpenVDB grids that have one.
    units: Vec<(String, String)>,
}

/// Imports a sequence of `.nvdb` files, one per frame, into a new dataset at `out`
/// (replacing any dataset there, crash-safely) and returns its manifest.
///
/// [`import_sequence`] with the default options, for `.nvdb` (and `.vdb`) files.
pub fn import_nvdb_sequence(
    files: &[PathBuf],
    out: impl AsRef<Path>,
    lanes: LaneSpec,
    chunk_size: u64,
    times: Option<&[f64]>,
    provenance: Provenance,
    progress: impl FnMut(usize),
) -> Result<Manifest> {
    import_sequence(
        files,
        out,
        lanes,
        chunk_size,
        times,
        provenance,
        &ImportOptions::default(),
        progress,
    )
    .map(|(m, _)| m)
}

/// Imports a sequence of `.nvdb` or OpenVDB `.vdb` files (told apart by their magic number,
/// not their names), one per frame, into a new dataset at `out` (replacing any dataset
/// there, crash-safely) and returns its manifest and what the conversion found.
///
/// The first file defines the attributes: its grids, in file order. When all of them have
/// distinct non-empty names, grids of later files are matched by name (their order may
/// differ); otherwise by position, and unnamed attributes are called `grid0`, `grid1`, ...
/// Every file must hold the same set of grids, of the same type and class; a mismatch is
/// an error naming the file. Compressed `.nvdb` grids (ZIP, Blosc) are decoded and stored
/// raw. OpenVDB grids (float, double, half, Vec3s/Vec3d as their length) are converted to
/// NanoVDB grids of `options.vdb_grid_type`; grids of other types are skipped and listed.
///
/// `times` gives each frame's time (one per file, finite, increasing); by default frame
/// `i` is at time `i`. `progress` is called with the number of frames written so far.
/// Files are read one ahead of the writer, so decoding overlaps striping.
#[allow(clippy::too_many_arguments)]
pub fn import_sequence(
    files: &[PathBuf],
    out: impl AsRef<Path>,
    lanes: LaneSpec,
    chunk_size: u64,
    times: Option<&[f64]>,
    provenance: Provenance,
    options: &ImportOptions,
    mut progress: impl FnMut(usize),
) -> Result<(Manifest, ImportReport)> {
    check_import(files, times, options)?;
    let mut report = ImportReport::default();
    let manifest = std::thread::scope(|s| {
        // Read (and decompress) the next file while the current one is striped. Bounded
        // so that at most two frames wait in memory.
        let (tx, rx) = mpsc::sync_channel::<(usize, Result<FileFrame>)>(1);
        s.spawn(move || {
            read_ahead(
                files,
                (0..files.len()).collect(),
                options,
                HashMap::new(),
                tx,
            )
        });
        let mut writer: Option<(DatasetWriter, Vec<String>, Matching)> = None;
        for (i, frame) in rx {
            let path = &files[i];
            let mut frame = frame?;
            fold_findings(&mut report, take_findings(&mut frame));
            let units = frame.units;
            let grids = select_grids(frame.grids, options.grids.as_deref(), path)?;
            let (w, names, matching) = match &mut writer {
                Some(w) => w,
                None => {
                    let (names, matching) = attribute_names(&grids);
                    let attrs = attribute_specs(&names, &units, path, &mut report.notes);
                    let w = DatasetWriter::create(
                        out.as_ref(),
                        lanes.clone(),
                        chunk_size,
                        attrs,
                        provenance.clone(),
                    )?;
                    writer.insert((w, names, matching))
                }
            };
            let ordered = match_grids(grids, names, matching, path, &files[0])?;
            let time = times.map_or(i as f64, |t| t[i]);
            w.push_frame(time, ordered)
                .map_err(|e| input(path, e.to_string()))?;
            progress(i + 1);
        }
        let (w, _, _) = writer.expect("at least one file was read");
        w.finish()
    })?;
    Ok((manifest, report))
}

/// Reads `files[i]` for each `i` of `order` in turn into `tx`, until one fails or the
/// receiver goes. `first_classes`: the first file's grid classes, for later files' grids
/// that have none (empty: learnt from the first file read, which must be the first file).
fn read_ahead(
    files: &[PathBuf],
    order: Vec<usize>,
    options: &ImportOptions,
    mut first_classes: HashMap<String, GridClass>,
    tx: mpsc::SyncSender<(usize, Result<FileFrame>)>,
) {
    for i in order {
        let r = read_frame_file(&files[i], options, &first_classes);
        if let (0, Ok(frame)) = (i, &r) {
            first_classes = grid_classes(frame);
        }
        let stop = r.is_err();
        if tx.send((i, r)).is_err() || stop {
            break;
        }
    }
}

/// The class of each grid of a file, by name.
fn grid_classes(frame: &FileFrame) -> HashMap<String, GridClass> {
    frame
        .grids
        .iter()
        .map(|g| (g.name.clone(), g.meta.grid_class))
        .collect()
}

/// The attributes the first file's grids (their `names`, with their `units` metadata)
/// define; notes of units left out go to `notes`.
fn attribute_specs(
    names: &[String],
    units: &[(String, String)],
    first: &Path,
    notes: &mut Vec<String>,
) -> Vec<AttributeSpec> {
    names
        .iter()
        .map(|n| AttributeSpec::new(n).with_units(attribute_units(n, units, first, notes)))
        .collect()
}

/// What converting one file found besides its grids, for the [`ImportReport`].
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Findings {
    errors: Vec<(String, f64)>,
    narrowed: Vec<(String, f64)>,
    notes: Vec<String>,
    vectors: Vec<String>,
    skipped: Vec<String>,
}

/// A file's findings, taken out of it.
fn take_findings(frame: &mut FileFrame) -> Findings {
    Findings {
        errors: std::mem::take(&mut frame.errors),
        narrowed: std::mem::take(&mut frame.narrowed),
        notes: std::mem::take(&mut frame.notes),
        vectors: std::mem::take(&mut frame.vectors),
        skipped: std::mem::take(&mut frame.skipped),
    }
}

/// Adds one file's findings to the report (files taken in frame order).
fn fold_findings(report: &mut ImportReport, found: Findings) {
    keep_worst(&mut report.max_abs_error, found.errors);
    keep_worst(&mut report.narrowed, found.narrowed);
    report.notes.extend(found.notes);
    for v in found.vectors {
        if !report.vector_magnitudes.contains(&v) {
            report.vector_magnitudes.push(v);
        }
    }
    for sk in found.skipped {
        if !report.skipped.contains(&sk) {
            report.skipped.push(sk);
        }
    }
}

/// The checks of an import's arguments that need no file: some files, a grid type OpenVDB
/// grids can become, one finite increasing time per file.
fn check_import(files: &[PathBuf], times: Option<&[f64]>, options: &ImportOptions) -> Result<()> {
    if files.is_empty() {
        return Err(DatasetError::Usage("no files to import".into()));
    }
    if !matches!(
        options.vdb_grid_type,
        GridType::Float | GridType::Fp16 | GridType::Fp8
    ) {
        return Err(DatasetError::Usage(format!(
            "OpenVDB grids are imported as float, fp16 or fp8, not {}",
            options.vdb_grid_type
        )));
    }
    if let Some(t) = times {
        if t.len() != files.len() {
            return Err(DatasetError::Usage(format!(
                "{} times given for {} files",
                t.len(),
                files.len()
            )));
        }
        for (i, w) in t.windows(2).enumerate() {
            if !(w[0].is_finite() && w[1].is_finite() && w[0] < w[1]) {
                return Err(DatasetError::Usage(format!(
                    "times must be finite and increasing: {} ({}) is followed by {} ({})",
                    w[0],
                    files[i].display(),
                    w[1],
                    files[i + 1].display()
                )));
            }
        }
    }
    Ok(())
}

/// The unit the first file gives attribute `name` (its grid's `units` metadata), where the
/// manifest can hold it; one it cannot (too long, control characters) is left out with a
/// note rather than failing an import over a label.
fn attribute_units(
    name: &str,
    units: &[(String, String)],
    path: &Path,
    notes: &mut Vec<String>,
) -> Option<String> {
    let (_, given) = units.iter().find(|(n, _)| n == name)?;
    let given = given.trim();
    if given.is_empty() {
        return None;
    }
    match check_units(given) {
        Ok(()) => Some(given.to_owned()),
        Err(why) => {
            notes.push(format!(
                "{}: grid {name:?}: its units metadata {why}; imported without a unit",
                path.display()
            ));
            None
        }
    }
}

/// Keeps the larger error per name.
fn keep_worst(into: &mut Vec<(String, f64)>, from: Vec<(String, f64)>) {
    for (name, e) in from {
        match into.iter_mut().find(|(n, _)| *n == name) {
            Some((_, worst)) => *worst = worst.max(e),
            None => into.push((name, e)),
        }
    }
}

/// The grids of one file that are imported: all, or those `wanted` names (as the manifest
/// would list them). An empty result, or a wanted name the file lacks, is an error.
fn select_grids(
    grids: Vec<FileGrid>,
    wanted: Option<&[String]>,
    path: &Path,
) -> Result<Vec<FileGrid>> {
    if grids.is_empty() {
        return Err(input(path, "holds no grids that can be imported".into()));
    }
    let Some(wanted) = wanted else {
        return Ok(grids);
    };
    let (names, _) = attribute_names(&grids);
    if let Some(missing) = wanted.iter().find(|w| !names.contains(w)) {
        return Err(input(
            path,
            format!(
                "has no grid {missing:?} that can be imported (it has {})",
                names.join(", ")
            ),
        ));
    }
    let picked: Vec<FileGrid> = grids
        .into_iter()
        .zip(&names)
        .filter(|(_, n)| wanted.contains(n))
        .map(|(mut g, n)| {
            // The attribute name it was chosen by, for matching later files.
            g.name.clone_from(n);
            g
        })
        .collect();
    Ok(picked)
}

/// Reads one frame's file: a `.nvdb` file as it is, an OpenVDB file converted.
///
/// An OpenVDB grid without a class (no `class` metadata: one frame of OpenUSD's smoke
/// sequence) takes the class the first file's grid of that name has, with a note, so that a
/// sequence is not refused over metadata one writer left out.
fn read_frame_file(
    path: &Path,
    options: &ImportOptions,
    first_classes: &HashMap<String, GridClass>,
) -> Result<FileFrame> {
    let head = openvdb::sniff(path).map_err(|err| DatasetError::Io {
        op: "cannot read",
        path: path.to_owned(),
        err,
    })?;
    if !openvdb::is_vdb(&head) {
        let mut frame = FileFrame {
            grids: read_nvdb(path)?,
            errors: Vec::new(),
            vectors: Vec::new(),
            skipped: Vec::new(),
            narrowed: Vec::new(),
            notes: Vec::new(),
            units: Vec::new(),
        };
        check_nvdb_checksums(path, &mut frame, options.allow_bad_checksum)?;
        return Ok(frame);
    }
    let file = openvdb::read_vdb(path).map_err(|e| match e {
        // The path is the one `input` names.
        openvdb::VdbError::Invalid {
            context,
            offset,
            detail,
            ..
        } => input(path, format!("{context}at byte {offset}: {detail}")),
        other => input(path, other.to_string()),
    })?;
    check_conversion_memory(path, &file, options)?;
    let mut frame = FileFrame {
        grids: Vec::with_capacity(file.grids.len()),
        errors: Vec::new(),
        vectors: Vec::new(),
        skipped: file
            .skipped
            .iter()
            .map(|s| format!("{:?}: {}", s.name, s.reason))
            .collect(),
        narrowed: Vec::new(),
        notes: Vec::new(),
        units: Vec::new(),
    };
    for g in &file.grids {
        frame.notes.extend(
            g.notes
                .iter()
                .map(|n| format!("{}: grid {:?}: {n}", path.display(), g.name)),
        );
        let vector = g.value_type.components() == 3;
        let mut parts = vec![(g.name.clone(), None)];
        if vector && options.vector_components {
            parts.extend(
                ["x", "y", "z"]
                    .iter()
                    .enumerate()
                    .map(|(c, axis)| (format!("{}.{axis}", g.name), Some(c))),
            );
        }
        for (name, component) in parts {
            let grid_err = |msg: String| input(path, format!("grid {name:?}: {msg}"));
            let scalar =
                openvdb::to_scalar_grid(g, component, options.max_tile_leaves).map_err(grid_err)?;
            let class = match (scalar.class, first_classes.get(&name)) {
                (GridClass::Unknown, Some(&first))
                    if first != GridClass::Unknown && component.is_none() && !vector =>
                {
                    frame.notes.push(format!(
                        "{}: grid {name:?} has no class; imported as {} like the first file's",
                        path.display(),
                        first.name()
                    ));
                    first
                }
                (c, _) => c,
            };
            let opts = BuildOptions {
                name: name.clone(),
                grid_type: options.vdb_grid_type,
                grid_class: class,
                voxel_size: scalar.voxel_size,
                world_origin: scalar.world_origin,
                ..BuildOptions::default()
            };
            let bytes = build_grid(&scalar.volume, &opts).map_err(|e| grid_err(e.to_string()))?;
            let built = Grid::parse(&bytes).map_err(|e| grid_err(e.to_string()))?;
            if built.active_voxel_count() == 0 && component.is_none() {
                frame.notes.push(format!(
                    "{}: grid {name:?} holds no active voxels",
                    path.display()
                ));
            }
            if options.vdb_grid_type != GridType::Float {
                let e = max_abs_error(&scalar.volume, &built).map_err(grid_err)?;
                frame.errors.push((name.clone(), e));
            }
            if vector && component.is_none() {
                frame.vectors.push(name.clone());
            }
            if let Some(e) = g.narrowing_error {
                frame.narrowed.push((name.clone(), e));
            }
            let meta = meta_from_grid(&built, Codec::None, bytes.len() as u64);
            drop(built);
            if let Some(units) = &g.units {
                frame.units.push((name.clone(), units.clone()));
            }
            frame.grids.push(FileGrid { name, meta, bytes });
        }
    }
    Ok(frame)
}

/// Most bytes the import of an OpenVDB file may take per byte of the file (the leaves of its
/// grids as read, and with the leaves of their tiles as bricks and as NanoVDB leaves). Real
/// files need at most about 40 (Blender's smoke with its level sets, python3-openvdb's test
/// frames with a 128³ tile); a file of active tiles claims
/// 4096 leaves for about a kilobyte, so the claim is checked before any tile is expanded.
pub const VDB_CONVERSION_BYTES_PER_FILE_BYTE: u64 = 64;

/// Bytes one leaf takes while a grid is converted: its brick (512 floats, active mask,
/// origin), the NanoVDB leaf built from it (up to 2144 bytes as `Float`) and its index
/// entry.
const CONVERTED_LEAF_BYTES: u64 = 4352;

/// Refuses a file whose grids would take more than [`VDB_CONVERSION_BYTES_PER_FILE_BYTE`] times
/// its size once converted, from what the file claims (leaves, and the leaves its tiles
/// become), before anything is expanded: naming the grid that goes past the bound, its
/// largest tile and the estimate.
fn check_conversion_memory(
    path: &Path,
    file: &openvdb::VdbFile,
    options: &ImportOptions,
) -> Result<()> {
    let file_len = std::fs::metadata(path)
        .map_err(|err| DatasetError::Io {
            op: "cannot read",
            path: path.to_owned(),
            err,
        })?
        .len();
    let bound = file_len.saturating_mul(VDB_CONVERSION_BYTES_PER_FILE_BYTE);
    let mut total = 0u64;
    for g in &file.grids {
        let tile_leaves: u64 = g.tiles.iter().map(|t| u64::from(t.size / 8).pow(3)).sum();
        let converted = if g.value_type.components() == 3 && options.vector_components {
            4
        } else {
            1
        };
        let leaves = (g.leaves.len() as u64).saturating_add(tile_leaves);
        // The leaves as read (kept until the file is done), then as converted.
        let decoded = (512 * 4 * g.value_type.components() + 96) as u64;
        total = total
            .saturating_add((g.leaves.len() as u64).saturating_mul(decoded))
            .saturating_add(
                leaves
                    .saturating_mul(converted)
                    .saturating_mul(CONVERTED_LEAF_BYTES),
            );
        if total > bound {
            let largest = g
                .tiles
                .iter()
                .max_by_key(|t| t.size)
                .map(|t| {
                    format!(
                        "; its largest tile is {}³ voxels at {:?} ({})",
                        t.size,
                        t.origin,
                        if t.active { "active" } else { "inactive" }
                    )
                })
                .unwrap_or_default();
            return Err(input(
                path,
                format!(
                    "grid {:?}: {} leaves and {tile_leaves} leaves made from its {} tiles{largest}: \
                     converting the file's grids up to this one needs about {total} bytes, more \
                     than {VDB_CONVERSION_BYTES_PER_FILE_BYTE} times the file's {file_len} bytes \
                     ({bound}); tiles are stored as leaves, so a file of large active tiles \
                     expands beyond what an import may take for its size",
                    g.name,
                    g.leaves.len(),
                    g.tiles.len()
                ),
            ));
        }
    }
    Ok(())
}

/// Checks every `.nvdb` grid's stored checksum against its bytes: a mismatch refuses the
/// file, naming the grid, or with `allow_bad` clears that grid's checksum (so that nothing
/// later vouches for it) and notes it.
fn check_nvdb_checksums(path: &Path, frame: &mut FileFrame, allow_bad: bool) -> Result<()> {
    let count = frame.grids.len();
    for (i, g) in frame.grids.iter_mut().enumerate() {
        let version = g
            .grid()
            .map_err(|e| input(path, format!("grid {i}: {e}")))?
            .version();
        let ChecksumState::Mismatch { stored, computed } = verify_checksum(&g.bytes, version)
        else {
            continue;
        };
        let problem = format!(
            "grid {i} of {count} ({:?}): NanoVDB checksum mismatch ({} checksum stored \
             {stored:016x}, the bytes give {computed:016x})",
            grid_name(g),
            ChecksumKind::of(stored).name()
        );
        if !allow_bad {
            return Err(input(
                path,
                format!(
                    "{problem}: the grid is damaged or was changed after its checksum was made (--allow-bad-checksum imports it without one)"
                ),
            ));
        }
        store_checksum(&mut g.bytes, None).map_err(|e| input(path, e.to_string()))?;
        frame.notes.push(format!(
            "{}: {problem}; imported with its checksum cleared (--allow-bad-checksum)",
            path.display()
        ));
    }
    Ok(())
}

/// The largest absolute difference between an active source voxel and the value the built
/// (quantised) grid stores for it.
fn max_abs_error(src: &SparseVolume, built: &Grid<'_>) -> std::result::Result<f64, String> {
    let by_origin: HashMap<Coord, &LeafBrick> = src.bricks.iter().map(|b| (b.origin, b)).collect();
    let mut worst = 0f64;
    for leaf in built.leaves() {
        let Some(b) = by_origin.get(&leaf.origin()) else {
            return Err(format!("written leaf at {:?} has no source", leaf.origin()));
        };
        let values = leaf.values_f32().map_err(|e| e.to_string())?;
        for (n, (&v, &s)) in values.iter().zip(b.values.iter()).enumerate() {
            if b.is_active(n) {
                worst = worst.max((f64::from(v) - f64::from(s)).abs());
            }
        }
    }
    Ok(worst)
}

fn input(path: &Path, msg: String) -> DatasetError {
    DatasetError::Input {
        path: path.to_path_buf(),
        msg,
    }
}

/// A grid's name: the file metadata's, else the one in the grid header.
fn grid_name(g: &FileGrid) -> String {
    if !g.name.is_empty() {
        return g.name.clone();
    }
    g.grid().map(|p| p.name().to_owned()).unwrap_or_default()
}

fn attribute_names(grids: &[FileGrid]) -> (Vec<String>, Matching) {
    let names: Vec<String> = grids.iter().map(grid_name).collect();
    let distinct = names
        .iter()
        .enumerate()
        .all(|(i, n)| !n.is_empty() && !names[..i].contains(n));
    if distinct {
        (names, Matching::ByName)
    } else {
        let named = names
            .into_iter()
            .enumerate()
            .map(|(i, n)| if n.is_empty() { format!("grid{i}") } else { n })
            .collect::<Vec<_>>();
        // Positional names must still be unique attribute names: a name's later grids are
        // `NAME#1`, `NAME#2`, ..., as the OpenVDB reader names same-name grids.
        let unique = openvdb::unique_grid_names(named.iter().map(String::as_str));
        (unique, Matching::ByPosition)
    }
}

/// Puts the grids of one file into attribute order.
fn match_grids(
    grids: Vec<FileGrid>,
    names: &[String],
    matching: &Matching,
    path: &Path,
    first: &Path,
) -> Result<Vec<Vec<u8>>> {
    match matching {
        Matching::ByPosition => {
            if grids.len() != names.len() {
                return Err(input(
                    path,
                    format!(
                        "holds {} grids, the first file ({}) holds {}",
                        grids.len(),
                        first.display(),
                        names.len()
                    ),
                ));
            }
            grids
                .into_iter()
                .zip(names)
                .map(|(g, n)| bytes_named(g, n, path))
                .collect()
        }
        Matching::ByName => {
            let mut by_name: HashMap<String, Vec<u8>> = HashMap::with_capacity(grids.len());
            for g in grids {
                let n = grid_name(&g);
                if !names.contains(&n) {
                    return Err(input(
                        path,
                        format!(
                            "grid {n:?} is not in the first file ({}), which has {names:?}",
                            first.display()
                        ),
                    ));
                }
                let bytes = bytes_named(g, &n, path)?;
                if by_name.insert(n.clone(), bytes).is_some() {
                    return Err(input(path, format!("holds two grids named {n:?}")));
                }
            }
            names
                .iter()
                .map(|n| {
                    by_name.remove(n).ok_or_else(|| {
                        input(
                            path,
                            format!(
                                "has no grid named {n:?} (the first file, {}, has)",
                                first.display()
                            ),
                        )
                    })
                })
                .collect()
        }
    }
}

/// The grid's bytes, with the name in its header made `attribute` where the header holds
/// another (a file's second grid named `density` becomes attribute `density#1`): `verify`
/// and every reader of the dataset take a grid's own name for its attribute's.
fn bytes_named(g: FileGrid, attribute: &str, path: &Path) -> Result<Vec<u8>> {
    let grid = g.grid().map_err(|e| input(path, e.to_string()))?;
    let (own, version) = (grid.name().to_owned(), grid.version());
    drop(grid);
    let mut bytes = g.bytes;
    if !own.is_empty() && own != attribute {
        rename_grid(&mut bytes, attribute, version)
            .map_err(|e| input(path, format!("grid {own:?} (attribute {attribute:?}): {e}")))?;
    }
    Ok(bytes)
}

/// Writes frame `frame` of `ds` as a standard `.nvdb` file at `out`: its grids in
/// attribute order, encoded with `codec`. The frame's extents are CRC-checked on the way.
pub fn export_frame(ds: &Dataset, frame: usize, out: impl AsRef<Path>, codec: Codec) -> Result<()> {
    let mut buf = AlignedBuf::new();
    ds.read_frame(frame, &mut buf, CrcCheck::Verify)?;
    // A bricked frame: every brick's grids, brick by brick.
    let grids = match ds.manifest().bricks.is_empty() {
        true => (0..ds.manifest().attributes.len())
            .map(|a| ds.grid_bytes(frame, a, &buf))
            .collect::<Result<Vec<&[u8]>>>()?,
        false => (ds.frame_grids(frame, &buf)?.into_iter())
            .map(|(_, bytes)| bytes)
            .collect(),
    };
    write_nvdb(out.as_ref(), &grids, codec)?;
    Ok(())
}
