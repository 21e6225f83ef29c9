use super::*;
use crate::bench::jobs::LaneNode;
use crate::cluster::threads;

fn report(rank: usize, host: &str, wall_s: f64, done: &[(f64, u64)]) -> RankReport {
    RankReport {
        rank,
        host: host.into(),
        local_rank: 0,
        gpu: None,
        frames_owned: done.len(),
        share: None,
        landed: (0..done.len() as u32)
            .map(|i| rank as u32 * 100 + i)
            .collect(),
        owned: (0..done.len() as u32)
            .map(|i| rank as u32 * 100 + i)
            .collect(),
        engine: "cpu-only".into(),
        bytes: done.iter().map(|d| d.1).sum(),
        frames: done.len() as u64,
        wall_s,
        done: done.to_vec(),
        error: None,
        result: None,
        jobs: Vec::new(),
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
fn a_frame_shared_by_ranks_counts_once_all_its_parts_landed() {
    let g = 1_000_000_000;
    let mut a = report(0, "a", 1.0, &[(0.5, g), (1.0, g)]);
    let mut b = report(1, "a", 2.0, &[(0.6, g)]);
    // Both own parts of frames 7 and 8; rank 0 landed both parts, rank 1 only 7's.
    (a.owned, a.landed) = (vec![7, 8], vec![7, 8]);
    (b.owned, b.landed) = (vec![7, 8], vec![7]);
    assert_eq!(aggregate(&[a.clone(), b.clone()]).frames, 1);
    // Read twice each by rank 0 and once more by rank 1: frame 7 twice, frame 8 once.
    a.landed = vec![7, 8, 7, 8];
    b.landed = vec![7, 8, 7];
    assert_eq!(aggregate(&[a, b]).frames, 3);
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
fn run_threads(
    source: &Source,
    cfg: &BenchConfig,
    size: usize,
) -> std::result::Result<Option<RanksResult>, RanksError> {
    run_threads_on(source, cfg, size, 2)
}

/// Runs `size` thread ranks, `per_host` to a host, and returns rank 0's outcome.
fn run_threads_on(
    source: &Source,
    cfg: &BenchConfig,
    size: usize,
    per_host: usize,
) -> std::result::Result<Option<RanksResult>, RanksError> {
    std::thread::scope(|s| {
        let handles: Vec<_> = threads::ranks(size, per_host)
            .into_iter()
            .map(|r| s.spawn(move || run_ranks(&r, source, cfg, 0, &RankTopology::default())))
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
    // Three ranks, two to a host: host0's two share its two lanes, host1's one reads whole
    // frames; the frames go to the hosts in turn (0,2,4,6 and 1,3,5).
    let got = run_threads(&source, &cpu_cfg(), 3).unwrap().unwrap();
    let hosts: Vec<&str> = got.per_rank.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(hosts, vec!["host0", "host0", "host1"]);
    assert_eq!(got.aggregate.hosts, 2);
    let shares: Vec<(usize, Option<Vec<u32>>)> = got
        .per_rank
        .iter()
        .map(|r| {
            let s = r.share.clone().unwrap();
            assert!(s.by_host && s.nodes == 2);
            (s.node, s.lanes)
        })
        .collect();
    assert_eq!(
        shares,
        vec![(0, Some(vec![0])), (0, Some(vec![1])), (1, None)]
    );
    // Frames 0,2,4,6: lane 0 holds frames 0..3 (0, 2), lane 1 frames 3..7 (4, 6).
    let owned: Vec<usize> = got.per_rank.iter().map(|r| r.frames_owned).collect();
    assert_eq!(owned, vec![2, 2, 3]);
    // One pass each: every byte of the workload once, over all ranks.
    assert_eq!(got.aggregate.bytes, source.total_bytes());
    for r in &got.per_rank {
        assert!(r.error.is_none() && r.wall_s > 0.0 && r.wall_s <= got.aggregate.wall_s);
        assert_eq!(r.frames as usize, r.frames_owned);
        let result = r.result.as_ref().expect("each rank's full result");
        assert_eq!(result["io_bytes"].as_u64(), Some(r.bytes));
    }
    // Whole frames: each of these small frames lies on one lane, so each has one owner.
    assert_eq!(got.aggregate.frames, 7);
    let owned: Vec<Vec<u32>> = got.per_rank.iter().map(|r| r.owned.clone()).collect();
    assert_eq!(owned, vec![vec![0, 2], vec![4, 6], vec![1, 3, 5]]);
    assert!(got.aggregate.stonewall_bytes <= got.aggregate.bytes);
    assert!(got.aggregate.stonewall_s <= got.aggregate.wall_s);
}

#[test]
fn a_host_with_more_ranks_than_lanes_deals_frames_over_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let source = workload(dir.path(), 7);
    // Three ranks on one host, two lanes: whole frames 0,3,6 / 1,4 / 2,5.
    let got = run_threads_on(&source, &cpu_cfg(), 3, 3).unwrap().unwrap();
    let owned: Vec<usize> = got.per_rank.iter().map(|r| r.frames_owned).collect();
    assert_eq!(owned, vec![3, 2, 2]);
    assert!(got.per_rank.iter().all(|r| {
        let s = r.share.as_ref().unwrap();
        !s.by_host && s.lanes.is_none() && s.nodes == 3
    }));
    assert_eq!(got.aggregate.bytes, source.total_bytes());
    assert_eq!(got.aggregate.frames, 7);
}

#[test]
fn the_ranks_of_a_host_share_its_lanes_by_numa_node() {
    // Four lanes, two on each NUMA node; two ranks on one host whose GPUs sit on nodes 1
    // and 0: each rank takes the lanes of its GPU's node.
    let lanes: Vec<LaneNode> = (0..4)
        .map(|lane| LaneNode {
            lane,
            numa_node: Some(lane / 2),
        })
        .collect();
    let shares: Vec<RankShare> = std::thread::scope(|s| {
        let handles: Vec<_> = threads::ranks(2, 2)
            .into_iter()
            .map(|r| {
                let topo = RankTopology {
                    lanes: lanes.clone(),
                    gpu_node: Some(1 - r.rank() as u32),
                    ..RankTopology::default()
                };
                s.spawn(move || plan_share(&r, 4, &topo))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(shares[0].lanes, Some(vec![2, 3]));
    assert_eq!(shares[1].lanes, Some(vec![0, 1]));
    assert!(
        shares
            .iter()
            .all(|s| s.lanes_by_topology && s.by_host && s.nodes == 1)
    );
}

#[test]
fn a_frame_count_is_split_over_the_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let source = workload(dir.path(), 4);
    let cfg = BenchConfig {
        frames: Some(9),
        ..cpu_cfg()
    };
    // Two hosts of one rank: 9 frames are 5 and 4.
    let got = run_threads_on(&source, &cfg, 2, 1).unwrap().unwrap();
    let frames: Vec<u64> = got.per_rank.iter().map(|r| r.frames).collect();
    assert_eq!(frames, vec![5, 4]);
    // One host of two ranks sharing its lanes: each reads its lanes' part of 9 frames.
    // These frames lie on one lane each (frames 0-1 on lane 0, 2-3 on lane 1), so the
    // parts are whole frames: 18 in all.
    let got = run_threads_on(&source, &cfg, 2, 2).unwrap().unwrap();
    let frames: Vec<u64> = got.per_rank.iter().map(|r| r.frames).collect();
    assert_eq!(frames, vec![9, 9]);
    assert_eq!(got.aggregate.frames, 18);
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
                s.spawn(move || run_ranks(&r, src, cfg, 0, &RankTopology::default()))
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
        &RankTopology::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("but only 0 frames"), "{err}");
}

#[test]
fn a_rank_that_never_starts_is_named_and_nobody_waits_for_it_forever() {
    let dir = tempfile::tempdir().unwrap();
    let source = workload(dir.path(), 4);
    let cfg = BenchConfig {
        read_timeout: Some(std::time::Duration::from_millis(400)),
        ..cpu_cfg()
    };
    let started = std::time::Instant::now();
    let out = std::thread::scope(|s| {
        let handles: Vec<_> = threads::ranks(3, 1)
            .into_iter()
            .map(|r| {
                let (source, cfg) = (&source, &cfg);
                s.spawn(move || {
                    // Rank 2 dies after the placement exchange, before the start.
                    if r.rank() == 2 {
                        plan_share(&r, source.lanes, &RankTopology::default());
                        return None;
                    }
                    Some(run_ranks(&r, source, cfg, 0, &RankTopology::default()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    match &out[0] {
        Some(Err(RanksError::Silent(s))) => assert_eq!(s.ranks, vec![2]),
        other => panic!("rank 0 should name rank 2: {other:?}"),
    }
    // Rank 1 waited for rank 0's go, which never came: it names rank 0.
    match &out[1] {
        Some(Err(RanksError::Silent(s))) => assert_eq!(s.ranks, vec![0]),
        other => panic!("rank 1 should name rank 0: {other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

/// `frames` frames of 4 × 16 KiB striped over four lanes (a file each): every frame has a
/// part on every lane, as a dataset's frames do.
fn striped(dir: &std::path::Path, frames: usize) -> Source {
    use crate::ingest::{ReadExtent, SourceFile, SourceFrame};
    let part = 16u64 << 10;
    let files: Vec<SourceFile> = (0..4u32)
        .map(|lane| {
            let path = dir.join(format!("stripe{lane}.bin"));
            let bytes: Vec<u8> = (0..part as usize * frames)
                .map(|b| (b as u32 * 3 + lane) as u8)
                .collect();
            std::fs::write(&path, bytes).unwrap();
            SourceFile {
                path,
                lane,
                size: part * frames as u64,
            }
        })
        .collect();
    let frames = (0..frames as u64)
        .map(|i| SourceFrame {
            len: 4 * part,
            extents: (0..4u32)
                .map(|lane| ReadExtent {
                    file: lane,
                    offset: i * part,
                    len: part,
                    dst: u64::from(lane) * part,
                    crc32: None,
                })
                .collect(),
        })
        .collect();
    Source {
        files,
        frames,
        lanes: 4,
        skipped_tail_bytes: 0,
    }
}

/// Runs `size` thread ranks, `per_host` to a host, each driving `gpus` (ordinals; no GPU
/// is opened with the cpu-only engine), and returns rank 0's outcome.
fn run_threads_with_gpus(
    source: &Source,
    size: usize,
    per_host: usize,
    gpus: &[usize],
) -> std::result::Result<Option<RanksResult>, RanksError> {
    let topo = RankTopology {
        gpus: gpus
            .iter()
            .map(|&ordinal| RankGpu {
                ordinal,
                ..RankGpu::default()
            })
            .collect(),
        ..RankTopology::default()
    };
    let cfg = cpu_cfg();
    std::thread::scope(|s| {
        let handles: Vec<_> = threads::ranks(size, per_host)
            .into_iter()
            .map(|r| {
                let (cfg, topo) = (&cfg, &topo);
                s.spawn(move || run_ranks(&r, source, cfg, 0, topo))
            })
            .collect();
        let mut outs: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        outs.swap_remove(0)
    })
}

#[test]
fn a_rank_with_several_gpus_shares_its_lanes_between_them_and_reports_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let source = striped(dir.path(), 6);
    // Two hosts of one rank each, each rank driving two GPUs: host k reads frames k, k+2,
    // ...; each rank's four lanes are dealt to its two jobs in turn (0,2 and 1,3).
    let got = run_threads_with_gpus(&source, 2, 1, &[0, 1])
        .unwrap()
        .unwrap();
    assert_eq!(got.aggregate.bytes, source.total_bytes());
    // A frame lies on every lane: it is whole once both of its rank's jobs landed their part.
    assert_eq!(got.aggregate.frames, 6);
    for r in &got.per_rank {
        assert!(r.error.is_none(), "{r:?}");
        assert_eq!((r.frames_owned, r.frames), (3, 3));
        let lanes: Vec<Vec<u32>> = r.jobs.iter().map(|j| j.lanes.clone()).collect();
        assert_eq!(lanes, vec![vec![0, 2], vec![1, 3]]);
        let names: Vec<&str> = r.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, vec!["gpu0", "gpu1"]);
        assert_eq!(r.jobs.iter().map(|j| j.bytes).sum::<u64>(), r.bytes);
        // Each job reads its two lanes' parts of the rank's three frames.
        assert!(
            r.jobs
                .iter()
                .all(|j| j.frames == 3 && j.bytes == 3 * 2 * (16 << 10))
        );
        let slowest = r.jobs.iter().map(|j| j.wall_s).fold(0.0, f64::max);
        assert_eq!(r.wall_s, slowest);
        // The jobs' one-process `bench --gpus` object rides along.
        let result = r.result.as_ref().unwrap();
        assert_eq!(result["jobs"].as_array().map(Vec::len), Some(2), "{result}");
        assert_eq!(result["aggregate"]["total_bytes"].as_u64(), Some(r.bytes));
    }
}

#[test]
fn a_rank_with_more_gpus_than_its_lanes_is_named_and_nobody_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let source = striped(dir.path(), 4);
    // Two ranks on one host share its four lanes (two each); three GPUs in a rank would
    // leave one without a lane.
    let e = run_threads_with_gpus(&source, 2, 2, &[0, 1, 2]).unwrap_err();
    let e = e.to_string();
    assert!(
        e.contains("rank 0 on host0") && e.contains("3 GPUs") && e.contains("2 lane"),
        "{e}"
    );
}
