//! The import across ranks (ranks as threads): byte for byte the one-process dataset, and
//! a rank that fails named on every rank.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use supercell::cluster::Ranks;
use supercell::dataset::LaneSpec;
use supercell::format::GridType;

use super::{NetcdfOptions, run};

/// CM1 output (four files of a 48x48x35 supercell run), where the shared folder has it.
fn cm1_files() -> Option<Vec<PathBuf>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/realdata/cm1/cm1r21.1_supercell_48x48x35_stretched");
    if !dir.is_dir() {
        println!("skipped: {} is absent", dir.display());
        return None;
    }
    Some(
        (1..=4)
            .map(|i| dir.join(format!("cm1out_00000{i}.nc")))
            .collect(),
    )
}

/// Imports `files` into `out` as the ranks `ranks`.
fn import(files: &[PathBuf], out: &Path, ranks: &dyn Ranks) -> Result<ExitCode> {
    import_bricked(files, out, ranks, None)
}

/// [`import`] with `--bricks`.
fn import_bricked(
    files: &[PathBuf],
    out: &Path,
    ranks: &dyn Ranks,
    bricks: Option<u32>,
) -> Result<ExitCode> {
    run(&NetcdfOptions {
        files,
        out,
        lanes: LaneSpec::Count(3),
        chunk_size: 8192,
        grid_type: GridType::Fp16,
        vars: Some("qr,dbz,w"),
        dz: None,
        dx: None,
        backgrounds: &[],
        wind_speed: false,
        ranks,
        bricks,
        wait: Some(std::time::Duration::from_secs(120)),
    })
}

/// Runs `f` on each of `n` thread ranks at once (one pretend host); their results.
fn on_ranks<T: Send>(n: usize, f: impl Fn(&dyn Ranks) -> T + Sync) -> Vec<T> {
    supercell::cluster::threads::run_on(n, n, |r| f(r))
}

#[test]
fn import_on_two_and_three_ranks_writes_the_one_process_dataset() {
    use supercell::dataset::ranks::first_difference;
    let Some(files) = cm1_files() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one");
    import(&files, &one, &supercell::cluster::Solo).unwrap();
    for n in [2, 3] {
        let dir = tmp.path().join(format!("ranks{n}"));
        let results = on_ranks(n, |r| import(&files, &dir, r).map_err(|e| format!("{e:#}")));
        assert!(
            results.iter().all(|r| r == &Ok(ExitCode::SUCCESS)),
            "{results:?}"
        );
        assert_eq!(first_difference(&one, &dir).unwrap(), None, "{n} ranks");
    }
}

#[test]
fn a_bricked_import_on_two_ranks_writes_the_one_process_dataset() {
    use supercell::dataset::ranks::first_difference;
    let Some(files) = cm1_files() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one");
    import_bricked(&files, &one, &supercell::cluster::Solo, Some(3)).unwrap();
    let ds = supercell::dataset::Dataset::open(&one).unwrap();
    assert_eq!(ds.bricks().len(), 3);
    let dir = tmp.path().join("ranks2");
    let results = on_ranks(2, |r| {
        import_bricked(&files, &dir, r, Some(3)).map_err(|e| format!("{e:#}"))
    });
    assert!(
        results.iter().all(|r| r == &Ok(ExitCode::SUCCESS)),
        "{results:?}"
    );
    assert_eq!(first_difference(&one, &dir).unwrap(), None);
}

#[test]
fn a_rank_whose_input_fails_is_named_and_no_dataset_is_written() {
    let Some(files) = cm1_files() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // Rank 1 converts frames 1 and 3: its copy of the third file is cut short.
    let broken = tmp.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    let mut theirs = files.clone();
    for (i, f) in files.iter().enumerate() {
        let dst = broken.join(f.file_name().unwrap());
        let mut bytes = std::fs::read(f).unwrap();
        if i == 3 {
            bytes.truncate(bytes.len() * 2 / 3);
        }
        std::fs::write(&dst, bytes).unwrap();
        theirs[i] = dst;
    }
    let out = tmp.path().join("ds");
    let errors = on_ranks(2, |r| {
        let input = if r.rank() == 1 { &theirs } else { &files };
        format!("{:#}", import(input, &out, r).unwrap_err())
    });
    for (rank, e) in errors.iter().enumerate() {
        assert!(e.contains("rank 1 (host0) failed"), "rank {rank}: {e}");
    }
    assert!(!out.join(supercell::dataset::MANIFEST_FILE).exists());
    let left: Vec<_> = walk(&out)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".sclane"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
