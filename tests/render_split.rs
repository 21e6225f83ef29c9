//! `render --split space`, sort-last across MPI ranks (cargo feature `mpi`, Open MPI): a
//! frame forced over one rank's budget (`--frame-budget`) is refused whole, and rendered by
//! 2 and by 4 ranks, each reading and drawing only its brick of a dataset written with
//! `--bricks`, and by 2, 3 and 1 rank(s) holding several of 4 bricks each, composited onto
//! rank 0: the picture equals one process's render of the same frame from the unbricked
//! dataset. Runs where the feature is built and `mpirun` is
//! installed (scripts/test.sh runs it with `--features mpi`); elsewhere it says why it
//! skipped, unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where it fails.
#![cfg(feature = "mpi")]

mod mpi_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mpi_support::{have_mpirun, launch, rank_pid};
use supercell::dataset::{Dataset, LaneSpec, Provenance};
use supercell::synth::{Attribute, GenerateOptions, default_params, generate_dataset};

const SIZE: &str = "96x54";
const FRAME: &str = "1";

/// The storm's cloud and rain, `bricks` spatial bricks (0: whole grids).
fn storm(dir: &Path, bricks: u32) {
    storm_of(dir, bricks, 2);
}

fn storm_of(dir: &Path, bricks: u32, frames: u32) {
    let mut p = default_params();
    p.resolution = 48;
    p.frames = frames;
    p.attributes = vec![Attribute::Cloud, Attribute::Rain];
    let mut opts = GenerateOptions::default();
    if bricks > 0 {
        opts.bricks = p.bricks(bricks).unwrap();
    }
    generate_dataset(
        &p,
        &opts,
        dir,
        LaneSpec::Count(2),
        1 << 20,
        Provenance::new("render split test", Vec::<String>::new()),
        |_| {},
    )
    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}

/// `[mpirun -n RANKS] supercell render DATASET ...`.
fn render(ranks: Option<u32>, dataset: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut cmd = launch(
        ranks,
        env!("CARGO_BIN_EXE_supercell"),
        "supercell-render-split-xdg",
    );
    cmd.arg("render")
        .arg(dataset)
        .args([
            "--frame",
            FRAME,
            "--size",
            SIZE,
            "--read-timeout",
            "120s",
            "--out",
        ])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_png(path: &Path) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// The grids' bytes of the frame (both attributes), whole or of the largest brick.
fn frame_bytes(dir: &Path) -> (u64, u64) {
    let ds = Dataset::open(dir).unwrap();
    let f = ds.frame(1).unwrap();
    let whole: u64 = f.grids.iter().map(|g| g.size).sum();
    let largest = (0..ds.bricks().len().max(1) as u32)
        .map(|b| {
            f.grids
                .iter()
                .filter(|g| g.brick.unwrap_or(0) == b)
                .map(|g| g.size)
                .sum()
        })
        .max()
        .unwrap();
    (whole, largest)
}

fn frame_png(dir: &Path) -> PathBuf {
    dir.join(format!("frame_{:05}.png", FRAME.parse::<u32>().unwrap()))
}

#[test]
fn two_and_four_ranks_render_a_frame_one_rank_may_not_hold_as_one_rank_renders_it() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (whole, b2, b4) = (
        tmp.path().join("whole"),
        tmp.path().join("b2"),
        tmp.path().join("b4"),
    );
    storm(&whole, 0);
    storm(&b2, 2);
    storm(&b4, 4);
    let (whole_bytes, _) = frame_bytes(&whole);
    let (_, largest2) = frame_bytes(&b2);
    let (_, largest4) = frame_bytes(&b4);
    // A budget the whole frame is over but every brick of 2 (and of 4) fits.
    assert!(
        largest4 <= largest2 && largest2 < whole_bytes,
        "{largest4} {largest2} {whole_bytes}"
    );
    let budget = ((largest2 + whole_bytes) / 2).to_string();

    let refused = render(
        None,
        &whole,
        &tmp.path().join("refused"),
        &["--frame-budget", &budget],
    );
    assert!(!refused.status.success(), "the whole frame fit the budget");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("over --frame-budget"), "{err}");

    // The one-rank picture with rays marched to the end, as every region marches them.
    let scene = tmp.path().join("whole.toml");
    std::fs::write(
        &scene,
        format!(
            "dataset = {:?}\n\n[settings]\ntransmittance_cutoff = 0.0\n",
            whole.to_str().unwrap()
        ),
    )
    .unwrap();
    let reference_dir = tmp.path().join("one");
    ok(&render(None, &scene, &reference_dir, &[]), "one process");
    let (w, h, reference) = read_png(&frame_png(&reference_dir));
    assert_eq!((w, h), (96, 54));
    // The frame is not empty: a test of compositing nothing could not fail.
    let lit = reference
        .chunks_exact(4)
        .filter(|p| p[0] != reference[0])
        .count();
    assert!(lit > 200, "only {lit} pixels differ from the corner");

    // One brick per rank; then several per rank (4 bricks over 2 ranks, 2 + 1 + 1 over 3,
    // all 4 in one process), each rank binding one brick at a time.
    for (ranks, dir, per_rank) in [
        (2, &b2, "[1, 1]"),
        (4, &b4, "[1, 1, 1, 1]"),
        (2, &b4, "[2, 2]"),
        (3, &b4, "[2, 1, 1]"),
        (1, &b4, "[4]"),
    ] {
        let bricks = if dir == &b2 { 2 } else { 4 };
        let out_dir = tmp.path().join(format!("split{ranks}-of-{bricks}"));
        let out = render(
            (ranks > 1).then_some(ranks),
            dir,
            &out_dir,
            &["--split", "space", "--frame-budget", &budget],
        );
        let what = format!("{bricks} bricks over {ranks} rank(s)");
        ok(&out, &what);
        let (w2, h2, split) = read_png(&frame_png(&out_dir));
        assert_eq!((w2, h2), (w, h));
        let diffs: Vec<i32> = split
            .iter()
            .zip(&reference)
            .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
            .collect();
        let max = diffs.iter().copied().max().unwrap();
        let off = diffs.iter().filter(|&&d| d > 0).count();
        // The GPU renders both: equal but for rounding of the 8-bit encoding.
        assert!(
            max <= 1,
            "{what}: a channel differs by {max} ({off} channels differ)"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("over {ranks} ranks"))
                && stderr.contains(&format!("bricks per rank {per_rank}")),
            "{what}: {stderr}"
        );
    }

    // More ranks than bricks is refused, naming both counts.
    let out = render(
        Some(3),
        &b2,
        &tmp.path().join("mismatch"),
        &["--split", "space"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2 brick(s)") && err.contains("3 rank(s)"),
        "{err}"
    );

    // `info` lists the bricks and suggests the sort-last command, not play.
    let info = Command::new(env!("CARGO_BIN_EXE_supercell"))
        .arg("info")
        .arg(&b2)
        .output()
        .unwrap();
    ok(&info, "info");
    let said = String::from_utf8_lossy(&info.stdout);
    assert!(said.contains("2 spatial bricks"), "{said}");
    assert!(
        said.contains("mpirun -n 2 supercell render") && !said.contains("play it"),
        "{said}"
    );

    // A bricked dataset is not rendered as if one brick were the frame.
    let out = render(None, &b2, &tmp.path().join("plain"), &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("brick"), "{err}");
}

#[test]
fn a_rank_that_stops_answering_is_named_and_the_run_ends() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("b2");
    storm_of(&ds, 2, 6);
    let out_dir = tmp.path().join("out");
    let child = launch(
        Some(2),
        env!("CARGO_BIN_EXE_supercell"),
        "supercell-render-split-xdg",
    )
    .arg("render")
    .arg(&ds)
    .args(["--split", "space", "--frames", "0..6", "--size", SIZE])
    .args(["--read-timeout", "4s", "--out"])
    .arg(&out_dir)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let started = std::time::Instant::now();
    // Rank 1 freezes (as on a hung node) once the first frame is out.
    let first = out_dir.join("frame_00000.png");
    while !first.exists() {
        assert!(started.elapsed().as_secs() < 120, "no frame was written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = rank_pid(&ds, "render", 1).expect("rank 1 runs");
    let stopped = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let frozen = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("rank 1 did not answer within"), "{said}");
    // Ended by rank 0's bounded wait (4 s a step), not by a hang.
    assert!(
        frozen.elapsed().as_secs() < 30,
        "{:?}: {said}",
        frozen.elapsed()
    );
    assert!(!out_dir.join("frame_00005.png").exists(), "{said}");
}
