//! Several ranks writing one dataset (`supercell::dataset::ranks`), as `mpirun -n N
//! supercell-data generate|import` does, here with ranks as threads of one process: the
//! dataset is byte for byte the one a single process writes (apart from the write's id and
//! the time it finished), and a rank that fails is named on every rank and leaves no
//! dataset behind.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use supercell::cluster::Ranks;
use supercell::cluster::threads::{ThreadRanks, run_on};
use supercell::dataset::ranks::{
    FrameHandover, RankWriter, WriteRanks, comparable_contents, first_difference,
};
use supercell::dataset::{
    AlignedBuf, AttributeSpec, CrcCheck, Dataset, DatasetError, DatasetWriter, LaneSpec, Provenance,
};
use supercell::format::GridType;
use supercell::synth::{
    GenerateOptions, StormParams, default_params, generate_dataset, generate_dataset_ranks,
};

const CHUNK: u64 = 8192;

/// `r` as a rank of a shared write that waits at most `wait` for the others.
fn team(r: &ThreadRanks, wait: Duration) -> WriteRanks<'_> {
    WriteRanks {
        ranks: r,
        wait: Some(wait),
    }
}

/// Long enough for any rank of these tests to reach an exchange.
const PATIENT: Duration = Duration::from_secs(120);

/// A frame's time and grids.
type TimedFrame = (f64, Vec<Vec<u8>>);

fn storm() -> StormParams {
    StormParams {
        resolution: 32,
        frames: 7,
        ..default_params()
    }
}

fn opts() -> GenerateOptions {
    GenerateOptions {
        grid_type: GridType::Fp16,
        max_frames_in_flight: 2,
        ..GenerateOptions::default()
    }
}

fn provenance() -> Provenance {
    Provenance::new("convert_ranks test", ["--frames".to_string(), "7".into()])
}

fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    comparable_contents(dir).unwrap()
}

/// Asserts the datasets at `a` and `b` hold the same files with the same bytes.
fn assert_same(a: &Path, b: &Path, what: &str) {
    assert_eq!(first_difference(a, b).unwrap(), None, "{what}");
    assert!(
        contents(a).keys().any(|k| k.ends_with(".sclane")),
        "{what}: no lane files"
    );
}

/// Runs `f` on each of `n` thread ranks at once (one pretend host); their results.
fn on_ranks<T: Send>(n: usize, f: impl Fn(&ThreadRanks) -> T + Sync) -> Vec<T> {
    run_on(n, n, f)
}

#[test]
fn generate_on_two_and_three_ranks_writes_the_one_process_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one");
    generate_dataset(
        &storm(),
        &opts(),
        &one,
        LaneSpec::Count(3),
        CHUNK,
        provenance(),
        |_| {},
    )
    .unwrap();
    for n in [2, 3] {
        let dir = tmp.path().join(format!("ranks{n}"));
        let results = on_ranks(n, |r| {
            generate_dataset_ranks(
                &storm(),
                &opts(),
                &dir,
                LaneSpec::Count(3),
                CHUNK,
                provenance(),
                team(r, PATIENT),
                |_| {},
            )
            .map(|(_, m)| m.is_some())
            .map_err(|e| e.to_string())
        });
        // The manifest comes back on rank 0 only.
        let expected: Vec<Result<bool, String>> = (0..n).map(|r| Ok(r == 0)).collect();
        assert_eq!(results, expected);
        assert_same(&one, &dir, &format!("{n} ranks"));
        let ds = Dataset::open(&dir).unwrap();
        assert!(supercell::dataset::verify(&ds, |_| {}).is_ok());
    }
}

/// Each frame's grids of the dataset at `dir`, with its time.
fn frames_of(dir: &Path) -> Vec<TimedFrame> {
    let ds = Dataset::open(dir).unwrap();
    let mut buf = AlignedBuf::new();
    (0..ds.frame_count())
        .map(|f| {
            ds.read_frame(f, &mut buf, CrcCheck::Verify).unwrap();
            let grids = (0..ds.manifest().attributes.len())
                .map(|a| ds.grid_bytes(f, a, &buf).unwrap().to_vec())
                .collect();
            (ds.manifest().frames[f].time, grids)
        })
        .collect()
}

fn specs(dir: &Path) -> Vec<AttributeSpec> {
    let ds = Dataset::open(dir).unwrap();
    ds.manifest()
        .attributes
        .iter()
        .map(|a| AttributeSpec::new(a.name.clone()).with_units(a.units.clone()))
        .collect()
}

/// Writes `frames` as rank `r` of a shared write into `dir` (whole frames, as the importers
/// hand them over); `fail_after`: this rank fails after handing over that many frames.
fn write_share(
    r: &ThreadRanks,
    dir: &Path,
    frames: &[TimedFrame],
    attributes: Vec<AttributeSpec>,
    fail_after: Option<usize>,
) -> Result<bool, DatasetError> {
    write_share_within(r, dir, frames, attributes, fail_after, None, PATIENT)
}

/// [`write_share`], where this rank stops answering (returns, as a rank that died) after
/// handing over `silent_after` frames, and every rank waits at most `wait` for the others.
fn write_share_within(
    r: &ThreadRanks,
    dir: &Path,
    frames: &[TimedFrame],
    attributes: Vec<AttributeSpec>,
    fail_after: Option<usize>,
    silent_after: Option<usize>,
    wait: Duration,
) -> Result<bool, DatasetError> {
    let mut w = RankWriter::create(
        team(r, wait),
        dir,
        LaneSpec::Count(2),
        CHUNK,
        attributes,
        Vec::new(),
        provenance(),
        frames.len(),
        FrameHandover::Whole,
    )?;
    let mut pushed = 0;
    for (i, (time, grids)) in frames.iter().enumerate() {
        if !w.owns(i) {
            continue;
        }
        if silent_after == Some(pushed) {
            return Ok(false);
        }
        if fail_after == Some(pushed) {
            return w
                .finish(Err("injected: the input could not be read".into()))
                .map(|m| m.is_some());
        }
        w.push_frame(i, *time, grids)?;
        pushed += 1;
    }
    w.finish(Ok(())).map(|m| m.is_some())
}

/// The frames of a small generated storm (written to `tmp/source`), with its attributes.
fn source_frames(tmp: &Path) -> (Vec<TimedFrame>, Vec<AttributeSpec>) {
    let source = tmp.join("source");
    generate_dataset(
        &storm(),
        &opts(),
        &source,
        LaneSpec::Count(1),
        CHUNK,
        provenance(),
        |_| {},
    )
    .unwrap();
    (frames_of(&source), specs(&source))
}

/// Writes `frames` into `dir` as a single process does.
fn write_alone(dir: &Path, frames: &[TimedFrame], attributes: Vec<AttributeSpec>) {
    let mut w =
        DatasetWriter::create(dir, LaneSpec::Count(2), CHUNK, attributes, provenance()).unwrap();
    for (time, grids) in frames {
        w.push_frame_borrowed(*time, grids).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn whole_frames_on_two_and_three_ranks_write_the_one_process_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let (frames, attributes) = source_frames(tmp.path());
    let one = tmp.path().join("one");
    write_alone(&one, &frames, attributes.clone());
    for n in [2, 3] {
        let dir = tmp.path().join(format!("ranks{n}"));
        let results = on_ranks(n, |r| {
            write_share(r, &dir, &frames, attributes.clone(), None).map_err(|e| e.to_string())
        });
        assert_eq!(results, (0..n).map(|r| Ok(r == 0)).collect::<Vec<_>>());
        assert_same(&one, &dir, &format!("{n} ranks, whole frames"));
    }
}

/// The frames and attributes of [`source_frames`], with a dataset of its first two frames
/// already at `tmp/ds` (that a failed write must leave as it was) and its contents.
type OldDataset = (
    Vec<TimedFrame>,
    Vec<AttributeSpec>,
    std::path::PathBuf,
    BTreeMap<String, Vec<u8>>,
);

fn with_old_dataset(tmp: &Path) -> OldDataset {
    let (frames, attributes) = source_frames(tmp);
    let dir = tmp.join("ds");
    write_alone(&dir, &frames[..2], attributes.clone());
    let before = contents(&dir);
    (frames, attributes, dir, before)
}

#[test]
fn a_failing_rank_is_named_on_every_rank_and_leaves_the_old_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let (frames, attributes, dir, before) = with_old_dataset(tmp.path());
    for (n, failing) in [(2, 1), (3, 2), (3, 0)] {
        let results = on_ranks(n, |r| {
            let fail = (r.rank() == failing).then_some(1);
            write_share(r, &dir, &frames, attributes.clone(), fail)
        });
        for (rank, res) in results.iter().enumerate() {
            let err = match res {
                Err(e @ DatasetError::RankFailed { .. }) => e.to_string(),
                other => panic!("rank {rank} of {n}: {other:?}"),
            };
            assert!(
                err.contains(&format!("rank {failing} (host0) failed: injected")),
                "rank {rank} of {n}: {err}"
            );
        }
        // The old dataset, whole; nothing of the failed write left beside it.
        assert_eq!(contents(&dir), before, "{n} ranks, rank {failing} failing");
        assert_eq!(Dataset::open(&dir).unwrap().frame_count(), 2);
    }
}

#[test]
fn a_rank_that_stops_answering_is_named_and_rank_zero_leaves_the_old_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let (frames, attributes, dir, before) = with_old_dataset(tmp.path());
    let wait = Duration::from_millis(400);
    for (n, silent) in [(2, 1), (3, 2)] {
        let started = Instant::now();
        let results = on_ranks(n, |r| {
            let stop = (r.rank() == silent).then_some(1);
            let out = write_share_within(r, &dir, &frames, attributes.clone(), None, stop, wait);
            (out, started.elapsed())
        });
        for (rank, (res, took)) in results.iter().enumerate() {
            if rank == silent {
                continue;
            }
            let err = match res {
                Err(e @ DatasetError::RanksSilent(_)) => e.to_string(),
                other => panic!("rank {rank} of {n}: {other:?}"),
            };
            // Rank 0 names the silent rank; the others name rank 0, which stopped
            // answering them when it gave up.
            let named = if rank == 0 { silent } else { 0 };
            assert!(
                err.starts_with(&format!("rank {named} did not answer within")),
                "rank {rank} of {n}: {err}"
            );
            // Within the wait (twice it for the others), not a hang.
            assert!(*took < wait * 2 + Duration::from_secs(5), "{took:?}");
        }
        // Rank 0 removed what every rank wrote: the old dataset, whole, and nothing else.
        assert_eq!(contents(&dir), before, "{n} ranks, rank {silent} silent");
    }
}

/// Two writers sharing one write in one thread, as two ranks do, with lane files cut into
/// segments of a few chunks: every rank starts the same new segment files, opens those
/// another rank created, and the files equal a single writer's.
#[test]
fn shared_writers_cut_segments_where_a_single_writer_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (frames, attributes) = source_frames(tmp.path());
    let segment = 4 * CHUNK;
    let one = tmp.path().join("one");
    let mut alone = DatasetWriter::create(
        &one,
        LaneSpec::Count(2),
        CHUNK,
        attributes.clone(),
        provenance(),
    )
    .unwrap();
    alone.set_segment_size(segment).unwrap();
    for (time, grids) in &frames {
        alone.push_frame_borrowed(*time, grids).unwrap();
    }
    let manifest = alone.finish().unwrap();
    assert!(
        manifest.lanes.iter().all(|l| l.files.len() > 2),
        "the test needs several segments per lane"
    );
    let two = tmp.path().join("two");
    let mut lead = DatasetWriter::create(
        &two,
        LaneSpec::Count(2),
        CHUNK,
        attributes.clone(),
        provenance(),
    )
    .unwrap();
    lead.set_segment_size(segment).unwrap();
    let share = lead.share().unwrap();
    let mut other = DatasetWriter::join(&share, attributes).unwrap();
    for (i, (time, grids)) in frames.iter().enumerate() {
        let sizes: Vec<u64> = grids.iter().map(|g| g.len() as u64).collect();
        let (writes, skips) = match i % 2 {
            0 => (&mut lead, &mut other),
            _ => (&mut other, &mut lead),
        };
        writes.push_frame_borrowed(*time, grids).unwrap();
        skips.skip_frame(*time, &sizes, true).unwrap();
    }
    other.sync_own().unwrap();
    for (i, frame) in other.own_frames() {
        lead.adopt_frame(i, frame).unwrap();
    }
    lead.merge_attributes(other.attributes()).unwrap();
    drop(other);
    lead.finish().unwrap();
    assert_same(&one, &two, "segments");
}

/// The frames of [`source_frames`] as `.nvdb` files, one per frame, in `tmp/nvdb`.
fn nvdb_files(tmp: &Path) -> Vec<std::path::PathBuf> {
    let (frames, _) = source_frames(tmp);
    let dir = tmp.join("nvdb");
    std::fs::create_dir(&dir).unwrap();
    frames
        .iter()
        .enumerate()
        .map(|(f, (_, grids))| {
            let path = dir.join(format!("frame_{f}.nvdb"));
            let grids: Vec<&[u8]> = grids.iter().map(Vec::as_slice).collect();
            supercell::format::write_nvdb(&path, &grids, supercell::format::Codec::None).unwrap();
            path
        })
        .collect()
}

/// `import_sequence_ranks` of `files` into `dir` as rank `r`: whether it got the manifest.
fn import_share(
    r: &ThreadRanks,
    files: &[std::path::PathBuf],
    dir: &Path,
) -> Result<bool, DatasetError> {
    supercell::dataset::import_sequence_ranks(
        files,
        dir,
        LaneSpec::Count(2),
        CHUNK,
        None,
        provenance(),
        &supercell::dataset::ImportOptions::default(),
        team(r, PATIENT),
        |_| {},
    )
    .map(|m| m.is_some())
}

#[test]
fn nvdb_import_on_two_and_three_ranks_writes_the_one_process_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let files = nvdb_files(tmp.path());
    let one = tmp.path().join("one");
    let opts = supercell::dataset::ImportOptions::default();
    let (lanes, prov) = (LaneSpec::Count(2), provenance());
    supercell::dataset::import_sequence(&files, &one, lanes, CHUNK, None, prov, &opts, |_| {})
        .unwrap();
    for n in [2, 3] {
        let dir = tmp.path().join(format!("ranks{n}"));
        let results = on_ranks(n, |r| {
            import_share(r, &files, &dir).map_err(|e| e.to_string())
        });
        assert_eq!(results, (0..n).map(|r| Ok(r == 0)).collect::<Vec<_>>());
        assert_same(&one, &dir, &format!("{n} ranks, .nvdb import"));
    }
}

#[test]
fn a_first_file_rank_zero_cannot_read_is_named_on_every_rank_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let files = nvdb_files(tmp.path());
    std::fs::write(&files[0], b"not a NanoVDB file").unwrap();
    let dir = tmp.path().join("ds");
    let results = on_ranks(3, |r| import_share(r, &files, &dir));
    for (rank, res) in results.iter().enumerate() {
        let err = match res {
            Err(e @ DatasetError::RankFailed { .. }) => e.to_string(),
            other => panic!("rank {rank}: {other:?}"),
        };
        assert!(
            err.starts_with("rank 0 (host0) failed: ") && err.contains("frame_0.nvdb"),
            "rank {rank}: {err}"
        );
    }
    assert!(
        !dir.exists(),
        "nothing is created when the first file cannot be read"
    );
}
