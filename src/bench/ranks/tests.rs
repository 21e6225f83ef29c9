use super::*;
use crate::cluster::threads;

fn report(rank: usize, host: &str, wall_s: f64, done: &[(f64, u64)]) -> RankReport {
    RankReport {
        rank,
        host: host.into(),
        local_rank: 0,
        gpu: None,
        frames_owned: done.len(),
        engine: "cpu-only".into(),
        bytes: done.iter().map(|d| d.1).sum(),
        frames: done.len() as u64,
        wall_s,
        done: done.to_vec(),
        error: None,
        result: None,
    }
}

#[test]
fn the_aggregate_is_over_the_slowest_rank_and_stonewalled_at_the_fastest() {
    let g = 1_000_000_000;
    let ranks = [
        // Fast: 2 GB by 1 s.
        report(0, "a", 1.0, &[(0.5, g), (1.0, g)]),
        // Slow: 1 GB by 1 s, another by 1.5 s, another by 4 s.
        report(1, "a", 4.0, &[(0.8, g), (1.5, g), (4.0, g)]),
        report(2, "b", 2.0, &[(1.0, g), (2.0, g)]),
    ];
    let a = aggregate(&ranks);
    assert_eq!((a.ranks, a.hosts, a.frames), (3, 2, 7));
    assert_eq!(a.bytes, 7 * g);
    assert_eq!(a.wall_s, 4.0);
    assert!((a.gbps - 7.0 / 4.0).abs() < 1e-12);
    // At 1 s: rank 0's two, rank 1's first, rank 2's first (done at exactly 1 s).
    assert_eq!(a.stonewall_s, 1.0);
    assert_eq!(a.stonewall_bytes, 4 * g);
    assert!((a.stonewall_gbps - 4.0).abs() < 1e-12);
}

#[test]
fn an_empty_or_failed_run_aggregates_to_zero_rates() {
    let a = aggregate(&[]);
    assert_eq!((a.gbps, a.stonewall_gbps, a.stonewall_s), (0.0, 0.0, 0.0));
    let a = aggregate(&[report(0, "a", 0.0, &[])]);
    assert_eq!((a.bytes, a.gbps), (0, 0.0));
}

/// A workload of `frames` frames of 64 KiB over two files in a temporary directory.
fn workload(dir: &std::path::Path, frames: usize) -> Source {
    let size = 64 << 10;
    let paths: Vec<std::path::PathBuf> = [frames / 2, frames - frames / 2]
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            let p = dir.join(format!("lane{i}.bin"));
            let bytes: Vec<u8> = (0..size * n).map(|b| (b * 7 + i) as u8).collect();
            std::fs::write(&p, bytes).unwrap();
            p
        })
        .collect();
    let source = Source::from_files(&paths, size as u64, 16 << 10).unwrap();
    assert_eq!(source.frames.len(), frames);
    source
}

fn cpu_cfg() -> BenchConfig {
    BenchConfig {
        threads: 1,
        queue_depth: 2,
        io_size: 16 << 10,
        slots: Some(crate::bench::MIN_SLOTS),
        buffered: true,
        backend: crate::ingest::IoBackend::Pread,
        read_timeout: Some(std::time::Duration::from_secs(30)),
        ..BenchConfig::default()
    }
}

/// Runs `size` thread ranks (two to a host) and returns rank 0's outcome.
fn run_threads(source: &Source, cfg: &BenchConfig, size: usize) -> Result<Option<RanksResult>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = threads::ranks(size, 2)
            .into_iter()
            .map(|r| s.spawn(move || run_ranks(&r, source, cfg, 0)))
            .collect();
        let mut outs: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        for o in &outs[1..] {
            assert!(matches!(o, Ok(None)), "only rank 0 reports: {o:?}");
        }
        outs.swap_remove(0)
    })
}

#[test]
fn ranks_read_disjoint_shares_that_add_up_to_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let source = workload(dir.path(), 7);
    let got = run_threads(&source, &cpu_cfg(), 3).unwrap().unwrap();
    let owned: Vec<usize> = got.per_rank.iter().map(|r| r.frames_owned).collect();
    // Frames 0,3,6 / 1,4 / 2,5.
    assert_eq!(owned, vec![3, 2, 2]);
    let hosts: Vec<&str> = got.per_rank.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(hosts, vec!["host0", "host0", "host1"]);
    assert_eq!(got.aggregate.hosts, 2);
    // One pass each: every byte of the workload once, over all ranks.
    assert_eq!(got.aggregate.bytes, source.total_bytes());
    assert_eq!(got.aggregate.frames, 7);
    for r in &got.per_rank {
        assert!(r.error.is_none() && r.wall_s > 0.0 && r.wall_s <= got.aggregate.wall_s);
        assert_eq!(r.frames as usize, r.frames_owned);
        let result = r.result.as_ref().expect("each rank's full result");
        assert_eq!(result["io_bytes"].as_u64(), Some(r.bytes));
    }
    assert!(got.aggregate.stonewall_bytes <= got.aggregate.bytes);
    assert!(got.aggregate.stonewall_s <= got.aggregate.wall_s);
}

#[test]
fn a_frame_count_is_split_over_the_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let source = workload(dir.path(), 4);
    let cfg = BenchConfig {
        frames: Some(9),
        ..cpu_cfg()
    };
    let got = run_threads(&source, &cfg, 2).unwrap().unwrap();
    let frames: Vec<u64> = got.per_rank.iter().map(|r| r.frames).collect();
    assert_eq!(frames, vec![5, 4]);
}

#[test]
fn one_ranks_failure_is_reported_by_rank_zero_and_nobody_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let source = workload(dir.path(), 4);
    // Rank 1's files vanish: its engine cannot open them.
    let mut broken = source.clone();
    for f in &mut broken.files {
        f.path = dir.path().join("missing.bin");
    }
    let cfg = cpu_cfg();
    let out = std::thread::scope(|s| {
        let handles: Vec<_> = threads::ranks(2, 2)
            .into_iter()
            .map(|r| {
                let src = if r.rank() == 1 { &broken } else { &source };
                let cfg = &cfg;
                s.spawn(move || run_ranks(&r, src, cfg, 0))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    let msg = out[0].as_ref().unwrap_err().to_string();
    assert!(msg.contains("rank 1 on host0"), "{msg}");
    assert!(msg.contains("missing.bin"), "{msg}");
}

#[test]
fn more_ranks_than_frames_is_refused_on_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let source = workload(dir.path(), 2);
    let err = run_ranks(
        &crate::cluster::Solo,
        &Source {
            frames: vec![],
            ..source
        },
        &cpu_cfg(),
        0,
    )
    .unwrap_err();
    assert!(err.to_string().contains("but only 0 frames"), "{err}");
}
