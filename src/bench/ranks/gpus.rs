//! Several GPUs within one rank (`bench --gpus` under `mpirun`): the rank's share of the
//! lanes is shared again between its GPUs as one process's `bench --gpus` shares a host's
//! (by NUMA node and PCIe switch where the topology says, else evenly), one job per GPU,
//! and every job of every rank starts at the one barrier. The rank reports as one client
//! (IOR's unit): its bytes are its jobs' sum, its time the slowest job's, a frame of its
//! share counts once every job has landed its part; each job's own figures ride along.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    RankReport, RankShare, RankTopology, RanksError, cut_to_lanes, nothing_on_lanes, split_lanes_by,
};
use crate::bench::jobs::{JobsResult, PciePath, bind_to_node, job_name};
use crate::bench::run::run_when_ready;
use crate::bench::{BenchConfig, BenchResult};
use crate::cluster::{Ranks, Silent, barrier_within};
use crate::ingest::{IngestError, Result, Source};

/// A GPU `--gpus` names within a rank, and where it sits (what sysfs says; `None`:
/// unknown).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankGpu {
    /// Its ordinal on the rank's host (CUDA's numbering where CUDA runs).
    pub ordinal: usize,
    /// Its NUMA node.
    pub numa_node: Option<u32>,
    /// Its PCIe path.
    pub pcie: Option<PciePath>,
}

/// One GPU's job within a rank, as rank 0 reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankJob {
    /// `gpu0`, `gpu1`, ... (`gpu0#2` for a GPU named twice).
    pub name: String,
    /// The GPU's ordinal on the rank's host.
    pub gpu: usize,
    /// The lanes it read (its part of the rank's).
    pub lanes: Vec<u32>,
    /// Bytes it landed.
    pub bytes: u64,
    /// Frame parts it landed.
    pub frames: u64,
    /// Seconds from the common start to its end.
    pub wall_s: f64,
    /// Its engine and how it ran.
    pub engine: String,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// A job ready to run: its part of the rank's share.
struct Job {
    source: Source,
    numbers: Vec<u32>,
    cfg: BenchConfig,
    numa_node: Option<u32>,
}

/// Runs this rank's share `mine` (the dataset's frames `numbers`) as one job per GPU of
/// `topo.gpus`, each on its part of the share's lanes, started with every other rank; the
/// rank's report. Every rank takes part in the start whatever fails here, so a bad split
/// is reported by rank 0 naming the rank rather than leaving the others waiting.
pub(super) fn run_jobs(
    ranks: &dyn Ranks,
    mine: &Source,
    numbers: &[u32],
    cfg: &BenchConfig,
    topo: &RankTopology,
    share_: &RankShare,
) -> std::result::Result<RankReport, RanksError> {
    let ordinals: Vec<usize> = topo.gpus.iter().map(|g| g.ordinal).collect();
    let jobs = match plan_jobs(mine, numbers, cfg, topo, share_) {
        Ok(jobs) => jobs,
        Err(e) => {
            barrier_within(ranks, cfg.read_timeout)?;
            let gpu = cfg.engine.needs_cuda().then_some(ordinals[0]);
            return Ok(RankReport::of(ranks, gpu, numbers, Err(e)));
        }
    };
    let (start, outcomes) = start_together(ranks, &jobs, cfg.read_timeout);
    start?;
    let mut parts = Vec::with_capacity(jobs.len());
    let mut results = Vec::with_capacity(jobs.len());
    let mut rows = Vec::with_capacity(jobs.len());
    for (k, (job, outcome)) in jobs.iter().zip(outcomes).enumerate() {
        let name = job_name(&ordinals, k);
        results.push((
            name.clone(),
            outcome.as_ref().map_err(ToString::to_string).cloned(),
        ));
        let part = RankReport::of(ranks, Some(ordinals[k]), &job.numbers, outcome);
        rows.push(RankJob {
            name,
            gpu: ordinals[k],
            lanes: lanes_of(job),
            bytes: part.bytes,
            frames: part.frames,
            wall_s: part.wall_s,
            engine: part.engine.clone(),
            error: part.error.clone(),
        });
        parts.push(part);
    }
    let mut report = RankReport::of(ranks, None, numbers, Err(nothing_on_lanes(share_)));
    report.gpu = cfg.engine.needs_cuda().then_some(ordinals[0]);
    report.error = rows
        .iter()
        .find_map(|j| Some(format!("{}: {}", j.name, j.error.as_ref()?)));
    report.engine = parts
        .iter()
        .find(|p| p.error.is_none())
        .map_or_else(String::new, |p| p.engine.clone());
    report.bytes = parts.iter().map(|p| p.bytes).sum();
    report.wall_s = parts.iter().map(|p| p.wall_s).fold(0.0, f64::max);
    report.done = parts.iter().flat_map(|p| p.done.iter().copied()).collect();
    report.done.sort_by(|a, b| a.0.total_cmp(&b.0));
    report.landed = whole_landings(numbers, &parts);
    report.frames = report.landed.len() as u64;
    report.result = serde_json::to_value(JobsResult::of(results).fio_report()).ok();
    report.jobs = rows;
    Ok(report)
}

/// The rank's jobs: its lanes (the share's, or every lane) split between its GPUs.
fn plan_jobs(
    mine: &Source,
    numbers: &[u32],
    cfg: &BenchConfig,
    topo: &RankTopology,
    share_: &RankShare,
) -> Result<Vec<Job>> {
    if mine.frames.is_empty() {
        return Err(nothing_on_lanes(share_));
    }
    let lanes: Vec<u32> = share_
        .lanes
        .clone()
        .unwrap_or_else(|| (0..mine.lanes).collect());
    let lane_nodes = topo.lane_nodes(lanes);
    let gpu_nodes: Vec<Option<u32>> = topo.gpus.iter().map(|g| g.numa_node).collect();
    let gpu_pcie: Vec<Option<PciePath>> = topo.gpus.iter().map(|g| g.pcie.clone()).collect();
    let split = split_lanes_by(&lane_nodes, &gpu_nodes, &topo.lane_pcie, &gpu_pcie)
        .map_err(|e| IngestError::Usage(format!("--gpus within the rank: {e}")))?;
    Ok(topo
        .gpus
        .iter()
        .zip(&split.lanes)
        .map(|(g, lanes)| {
            let (source, numbers) = cut_to_lanes(mine, numbers, lanes);
            Job {
                source,
                numbers,
                cfg: BenchConfig {
                    gpu: g.ordinal,
                    // Several progress lines at once would overwrite each other.
                    progress: false,
                    ..cfg.clone()
                },
                numa_node: g.numa_node,
            }
        })
        .collect())
}

/// The lanes a job reads.
fn lanes_of(job: &Job) -> Vec<u32> {
    let mut lanes: Vec<u32> = job
        .source
        .frames
        .iter()
        .flat_map(|f| &f.extents)
        .map(|e| job.source.files[e.file as usize].lane)
        .collect();
    lanes.sort_unstable();
    lanes.dedup();
    lanes
}

/// Every job opens its engine on its own thread; once all are ready the rank joins the
/// barrier of every rank, and the jobs start when it is passed (or give up where it was
/// not). A job that cannot open still arrives at the start, so none waits for it.
fn start_together(
    ranks: &dyn Ranks,
    jobs: &[Job],
    wait: Option<Duration>,
) -> (std::result::Result<(), Silent>, Vec<Result<BenchResult>>) {
    let ready = Barrier::new(jobs.len() + 1);
    let go = Barrier::new(jobs.len() + 1);
    let started = AtomicBool::new(false);
    let mut start = Ok(());
    let outcomes = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|job| {
                let (ready, go, started) = (&ready, &go, &started);
                s.spawn(move || {
                    let note = job.numa_node.and_then(bind_to_node);
                    let arrived = Cell::new(false);
                    let arrive = || {
                        arrived.set(true);
                        ready.wait();
                        go.wait();
                        started.load(Ordering::SeqCst)
                    };
                    let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        run_when_ready(&job.source, &job.cfg, arrive)
                    }));
                    if !arrived.get() {
                        ready.wait();
                        go.wait();
                    }
                    let run = run.unwrap_or_else(|_| {
                        Err(IngestError::Usage("the job's thread panicked".into()))
                    });
                    run.map(|mut r| {
                        r.notes.extend(note);
                        r
                    })
                })
            })
            .collect();
        ready.wait();
        start = barrier_within(ranks, wait);
        started.store(start.is_ok(), Ordering::SeqCst);
        go.wait();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(IngestError::Usage("the job's thread panicked".into())))
            })
            .collect()
    });
    (start, outcomes)
}

/// The rank's frames (`numbers`) landed whole: each as often as every job owning a part of
/// it landed that part.
fn whole_landings(numbers: &[u32], parts: &[RankReport]) -> Vec<u32> {
    use std::collections::HashMap;
    // Per job: how often it landed each frame's part (0 for a part it owns and missed).
    let counts: Vec<HashMap<u32, usize>> = parts
        .iter()
        .map(|p| {
            let mut c: HashMap<u32, usize> = p.owned.iter().map(|&f| (f, 0)).collect();
            for f in &p.landed {
                *c.entry(*f).or_default() += 1;
            }
            c
        })
        .collect();
    let mut out = Vec::new();
    for &f in numbers {
        let times = counts.iter().filter_map(|c| c.get(&f)).min().copied();
        out.extend(std::iter::repeat_n(f, times.unwrap_or(0)));
    }
    out
}
