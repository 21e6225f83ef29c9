//! `bench` across ranks, as IOR measures many clients of one storage system: every rank
//! opens its engine and ring, a barrier starts them together, each reads its share, and
//! rank 0 gathers what each measured and reports the aggregate two ways: over the wall time
//! of the slowest rank, and stonewalled (IOR's convention: the bytes all ranks had landed
//! when the fastest rank finished, over that rank's time), beside every rank's own figures
//! and place (host, GPU, lanes).
//!
//! The shares ([`plan_share`]): the frames are dealt out over the hosts (every N-th, so
//! each host's share spans the series), and the ranks of one host share its lanes as
//! `bench --gpus` shares them between GPUs (by NUMA node and PCIe switch where the topology
//! says, else evenly), each reading its lanes' part of every frame of its host. Where a
//! host has more ranks than the source has lanes, the frames are dealt out over every rank
//! instead.
//!
//! A rank may drive several GPUs (`--gpus` within a rank, [`RankTopology::gpus`]): its
//! share's lanes are shared again between its GPUs as `bench --gpus` shares them, one job
//! each, and its jobs start together with every other rank's ([`gpus`]).

use serde::{Deserialize, Serialize};

mod gpus;

pub use gpus::{RankGpu, RankJob};

use super::jobs::{LaneNode, PciePath, split_lanes_by};
use super::{BenchConfig, BenchResult};
use crate::cluster::{Ranks, Silent, barrier_within, gather_within, share};
use crate::ingest::{IngestError, Result, Source};

/// What the binary read of this rank's storage and GPU (sysfs), from which the ranks of a
/// host share its lanes. Empty fields mean unknown: the lanes are then shared evenly.
#[derive(Clone, Debug, Default)]
pub struct RankTopology {
    /// The source's lanes and their NUMA nodes.
    pub lanes: Vec<LaneNode>,
    /// The PCIe path of each lane's drive controller, by lane number.
    pub lane_pcie: Vec<(u32, PciePath)>,
    /// The NUMA node of this rank's GPU (GPU engines).
    pub gpu_node: Option<u32>,
    /// The PCIe path of this rank's GPU.
    pub gpu_pcie: Option<PciePath>,
    /// The GPUs `--gpus` names within this rank, each reading its own part of the rank's
    /// lanes (one job each); empty: the rank reads with one GPU, its local rank's
    /// ([`rank_gpu`]).
    pub gpus: Vec<RankGpu>,
}

impl RankTopology {
    /// `lanes` with the NUMA node of each where known.
    fn lane_nodes(&self, lanes: impl IntoIterator<Item = u32>) -> Vec<LaneNode> {
        lanes
            .into_iter()
            .map(|lane| LaneNode {
                lane,
                numa_node: self
                    .lanes
                    .iter()
                    .find(|l| l.lane == lane)
                    .and_then(|l| l.numa_node),
            })
            .collect()
    }
}

/// What one rank tells the others before the run: where it is.
#[derive(Serialize, Deserialize)]
struct Placement {
    host: String,
    gpu_node: Option<u32>,
    gpu_pcie: Option<PciePath>,
}

/// One rank's share of the work, the same decision on every rank.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankShare {
    /// How frames are dealt: over the hosts (`nodes` groups), or over every rank where a
    /// host has more ranks than lanes (then `node` is the rank and `nodes` the ranks).
    pub node: usize,
    /// How many groups the frames are dealt over.
    pub nodes: usize,
    /// Whether the groups are hosts (else ranks).
    pub by_host: bool,
    /// The lanes this rank reads (ascending); `None`: every lane.
    pub lanes: Option<Vec<u32>>,
    /// Whether the topology chose the lanes (else they were dealt evenly).
    pub lanes_by_topology: bool,
}

/// The rank's share of a source striped over `lanes` lanes, from every rank's place (an
/// all-gather: every rank calls it, and every rank decides alike). The hosts are numbered
/// in the order of their first rank; a host's ranks, in rank order, share its lanes through
/// [`split_lanes_by`]. Where any host has more ranks than there are lanes, the frames are
/// dealt out over every rank instead.
pub fn plan_share(ranks: &dyn Ranks, lanes: u32, topo: &RankTopology) -> RankShare {
    let mine = Placement {
        host: ranks.host(),
        gpu_node: topo.gpu_node,
        gpu_pcie: topo.gpu_pcie.clone(),
    };
    let all: Vec<Placement> = ranks
        .all_gather(&serde_json::to_vec(&mine).expect("a placement is JSON"))
        .iter()
        .map(|b| serde_json::from_slice(b).expect("every rank sends a placement"))
        .collect();
    let mut hosts: Vec<&str> = Vec::new();
    for p in &all {
        if !hosts.contains(&p.host.as_str()) {
            hosts.push(&p.host);
        }
    }
    let on = |h: &str| all.iter().filter(|p| p.host == h).count();
    let most = hosts.iter().map(|h| on(h)).max().unwrap_or(1);
    if most > lanes as usize {
        return RankShare {
            node: ranks.rank(),
            nodes: ranks.size(),
            by_host: false,
            lanes: None,
            lanes_by_topology: false,
        };
    }
    let node = hosts.iter().position(|h| *h == mine.host).unwrap_or(0);
    let peers: Vec<&Placement> = all.iter().filter(|p| p.host == mine.host).collect();
    let mut out = RankShare {
        node,
        nodes: hosts.len(),
        by_host: true,
        lanes: None,
        lanes_by_topology: false,
    };
    if peers.len() > 1 {
        let index = all[..ranks.rank()]
            .iter()
            .filter(|p| p.host == mine.host)
            .count();
        let lane_nodes = topo.lane_nodes(0..lanes);
        let gpu_nodes: Vec<Option<u32>> = peers.iter().map(|p| p.gpu_node).collect();
        let gpu_pcie: Vec<Option<PciePath>> = peers.iter().map(|p| p.gpu_pcie.clone()).collect();
        // At least as many lanes as ranks on the host (checked above): this cannot fail.
        if let Ok(split) = split_lanes_by(&lane_nodes, &gpu_nodes, &topo.lane_pcie, &gpu_pcie) {
            out.lanes = split.lanes.get(index).cloned();
            out.lanes_by_topology = split.by_topology;
        }
    }
    out
}

/// `source` cut to `share`: its group's frames, each cut to the share's lanes (frames
/// with nothing on those lanes dropped), and the dataset's number of each frame kept.
fn share_of(source: &Source, share_: &RankShare) -> (Source, Vec<u32>) {
    let numbers: Vec<u32> = share(source.frames.len(), share_.node, share_.nodes)
        .map(|i| i as u32)
        .collect();
    let frames = numbers
        .iter()
        .map(|&i| source.frames[i as usize].clone())
        .collect();
    let group = Source {
        frames,
        ..source.clone()
    };
    match &share_.lanes {
        Some(lanes) => cut_to_lanes(&group, &numbers, lanes),
        None => (group, numbers),
    }
}

/// `source` (whose frames are the dataset's `numbers`) with each frame cut to `lanes`,
/// frames with nothing on them dropped, and the dataset's number of each frame kept.
fn cut_to_lanes(source: &Source, numbers: &[u32], lanes: &[u32]) -> (Source, Vec<u32>) {
    let mut frames: Vec<(u32, _)> = numbers
        .iter()
        .copied()
        .zip(source.frames.iter().cloned())
        .collect();
    for (_, f) in &mut frames {
        f.extents
            .retain(|e| lanes.contains(&source.files[e.file as usize].lane));
    }
    frames.retain(|(_, f)| !f.extents.is_empty());
    let (numbers, frames) = frames.into_iter().unzip();
    let cut = Source {
        frames,
        ..source.clone()
    };
    (cut, numbers)
}

/// One rank's run, as rank 0 gathers it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    /// The rank.
    pub rank: usize,
    /// Its host.
    pub host: String,
    /// Its place among the ranks on that host.
    pub local_rank: usize,
    /// The GPU ordinal it used (GPU engines).
    pub gpu: Option<usize>,
    /// The frames of the dataset it owned (its lanes' part of each, where it has lanes).
    pub frames_owned: usize,
    /// How its share was dealt (its group of frames, its lanes).
    pub share: Option<RankShare>,
    /// Engine that ran and how (empty where the rank failed before running).
    pub engine: String,
    /// Bytes of the frames that landed.
    pub bytes: u64,
    /// Frames that landed.
    pub frames: u64,
    /// Seconds from the common start (the barrier) to the rank's end.
    pub wall_s: f64,
    /// Every landed frame: (seconds from the start when it was done, its bytes), in order.
    pub done: Vec<(f64, u64)>,
    /// The dataset's number of every frame (or frame part) landed, as often as it landed.
    pub landed: Vec<u32>,
    /// The dataset's numbers of the frames (or frame parts) it owned.
    pub owned: Vec<u32>,
    /// Why the rank failed, if it did.
    pub error: Option<String>,
    /// The rank's full result (the one-process `bench --json` object; with several GPUs in
    /// the rank, the one-process `bench --gpus --json` object of its jobs).
    pub result: Option<serde_json::Value>,
    /// The rank's jobs where it drives several GPUs (`--gpus` within a rank), one per GPU;
    /// empty where it reads with one.
    #[serde(default)]
    pub jobs: Vec<RankJob>,
}

/// What all ranks did together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// Ranks.
    pub ranks: usize,
    /// Distinct hosts.
    pub hosts: usize,
    /// Bytes landed by all ranks.
    pub bytes: u64,
    /// Frames landed whole by all ranks together (a frame whose lanes several ranks share
    /// counts once, when all its parts landed).
    pub frames: u64,
    /// The slowest rank's wall time, seconds.
    pub wall_s: f64,
    /// `bytes` over `wall_s`, GB/s (1e9 bytes).
    pub gbps: f64,
    /// The fastest rank's wall time, seconds (IOR's stonewall point).
    pub stonewall_s: f64,
    /// Bytes every rank had landed by `stonewall_s`.
    pub stonewall_bytes: u64,
    /// `stonewall_bytes` over `stonewall_s`, GB/s.
    pub stonewall_gbps: f64,
}

/// Rank 0's report of a run across ranks (what `bench --json` writes under `mpirun`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RanksResult {
    /// The totals.
    pub aggregate: Aggregate,
    /// Every rank, in rank order.
    pub per_rank: Vec<RankReport>,
}

/// Why a run across ranks failed.
#[derive(Debug, thiserror::Error)]
pub enum RanksError {
    /// This rank's own run, or the ranks' setup, failed; on rank 0 also another rank's
    /// failure, named.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// Ranks stopped answering (died, or hung): the caller should end the run
    /// ([`Ranks::abort`]), or the silent ranks would be waited for forever.
    #[error("{0}: a rank died or stopped answering")]
    Silent(#[from] Silent),
}

/// Runs `cfg` on this rank's share of `source` ([`plan_share`] with `topo`), started
/// together with every other rank. Returns the gathered result on rank 0 and `None` on the
/// others. Every rank takes part in the start and the gather whatever happens to it, so
/// one rank's failure is reported (by rank 0, naming the rank and host); a rank that died
/// or stopped answering is named ([`RanksError::Silent`]) once the others have waited
/// `cfg.read_timeout` at the start, and at the end that plus their own run's time.
///
/// `cfg.frames` counts frames over all groups (split as the frames are); `cfg.duration` is
/// every rank's. A GPU engine's rank uses GPU [`rank_gpu`].
pub fn run_ranks(
    ranks: &dyn Ranks,
    source: &Source,
    cfg: &BenchConfig,
    gpus: usize,
    topo: &RankTopology,
) -> std::result::Result<Option<RanksResult>, RanksError> {
    let share_ = plan_share(ranks, source.lanes, topo);
    let groups = share_.nodes;
    if source.frames.len() < groups {
        let what = if share_.by_host { "host" } else { "rank" };
        return Err(IngestError::Usage(format!(
            "{groups} {what}s but only {} frames: every {what} needs at least one",
            source.frames.len(),
        ))
        .into());
    }
    let (mine, numbers) = share_of(source, &share_);
    let mut rank_cfg = cfg.clone();
    rank_cfg.frames = cfg
        .frames
        .map(|f| f / groups as u64 + u64::from((share_.node as u64) < f % groups as u64));
    // Only rank 0 draws a progress line (N bars on one terminal would interleave).
    rank_cfg.progress = cfg.progress && ranks.rank() == 0;
    let wait = cfg.read_timeout;
    let mut report = if topo.gpus.is_empty() {
        let gpu = rank_gpu(cfg, ranks, gpus);
        if let Some(g) = gpu {
            rank_cfg.gpu = g;
        }
        let mut start = Ok(());
        let outcome = if mine.frames.is_empty() {
            start = barrier_within(ranks, wait);
            Err(nothing_on_lanes(&share_))
        } else {
            super::run::run_when_ready(&mine, &rank_cfg, || {
                start = barrier_within(ranks, wait);
                start.is_ok()
            })
        };
        start?;
        RankReport::of(ranks, gpu, &numbers, outcome)
    } else {
        gpus::run_jobs(ranks, &mine, &numbers, &rank_cfg, topo, &share_)?
    };
    report.share = Some(share_);
    let bytes = serde_json::to_vec(&report).expect("a rank's report is JSON");
    // The others may run longer than this rank: as long again, then the read timeout.
    let wait = wait.map(|w| w + std::time::Duration::from_secs_f64(report.wall_s));
    let Some(all) = gather_within(ranks, &bytes, wait)? else {
        return Ok(None);
    };
    collect(&all).map(Some).map_err(RanksError::from)
}

/// A rank's share with no extent on its lanes.
fn nothing_on_lanes(share_: &RankShare) -> IngestError {
    IngestError::Usage(format!(
        "no extent of its frames lies on its lanes {:?}",
        share_.lanes.as_deref().unwrap_or_default()
    ))
}

/// Rank 0's result from every rank's report, or the first failure, naming its rank.
fn collect(all: &[Vec<u8>]) -> Result<RanksResult> {
    let per_rank = all
        .iter()
        .map(|b| serde_json::from_slice::<RankReport>(b))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| IngestError::Usage(format!("a rank's report did not parse: {e}")))?;
    if let Some(bad) = per_rank.iter().find(|r| r.error.is_some()) {
        return Err(IngestError::Usage(format!(
            "rank {} on {}: {}",
            bad.rank,
            bad.host,
            bad.error.as_deref().unwrap_or_default()
        )));
    }
    Ok(RanksResult {
        aggregate: aggregate(&per_rank),
        per_rank,
    })
}

/// The GPU a GPU engine's rank uses: `cfg.gpu` plus its place on its host, modulo the
/// host's `gpus` (one rank per GPU); `None` for host engines.
pub fn rank_gpu(cfg: &BenchConfig, ranks: &dyn Ranks, gpus: usize) -> Option<usize> {
    cfg.engine
        .needs_cuda()
        .then(|| (cfg.gpu + ranks.local_rank()) % gpus.max(1))
}

impl RankReport {
    fn of(
        ranks: &dyn Ranks,
        gpu: Option<usize>,
        numbers: &[u32],
        outcome: Result<BenchResult>,
    ) -> RankReport {
        let mut report = RankReport {
            rank: ranks.rank(),
            host: ranks.host(),
            local_rank: ranks.local_rank(),
            gpu,
            frames_owned: numbers.len(),
            share: None,
            engine: String::new(),
            bytes: 0,
            frames: 0,
            wall_s: 0.0,
            done: Vec::new(),
            landed: Vec::new(),
            owned: numbers.to_vec(),
            error: None,
            result: None,
            jobs: Vec::new(),
        };
        match outcome {
            Err(e) => report.error = Some(e.to_string()),
            Ok(r) => {
                report.engine = format!("{} ({})", r.engine, r.mode);
                report.done = r
                    .frames
                    .iter()
                    .filter_map(|f| Some((f.done()?, f.bytes)))
                    .collect();
                report.done.sort_by(|a, b| a.0.total_cmp(&b.0));
                report.landed = r
                    .frames
                    .iter()
                    .filter(|f| f.done().is_some())
                    .filter_map(|f| numbers.get(f.frame as usize).copied())
                    .collect();
                report.bytes = report.done.iter().map(|d| d.1).sum();
                report.frames = report.done.len() as u64;
                report.wall_s = r.total_time_s;
                report.result = serde_json::to_value(&r).ok();
            }
        }
        report
    }
}

/// The totals of the ranks' runs: over the slowest rank's time, and stonewalled at the
/// fastest rank's end.
pub fn aggregate(per_rank: &[RankReport]) -> Aggregate {
    let rate = |bytes: u64, s: f64| if s > 0.0 { bytes as f64 / s / 1e9 } else { 0.0 };
    let bytes = per_rank.iter().map(|r| r.bytes).sum();
    let wall_s = per_rank.iter().map(|r| r.wall_s).fold(0.0, f64::max);
    let stonewall_s = per_rank
        .iter()
        .map(|r| r.wall_s)
        .fold(f64::INFINITY, f64::min);
    let stonewall_s = if stonewall_s.is_finite() {
        stonewall_s
    } else {
        0.0
    };
    let stonewall_bytes = per_rank
        .iter()
        .flat_map(|r| r.done.iter())
        .filter(|(t, _)| *t <= stonewall_s)
        .map(|(_, b)| b)
        .sum();
    let mut hosts: Vec<&str> = per_rank.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    Aggregate {
        ranks: per_rank.len(),
        hosts: hosts.len(),
        bytes,
        frames: whole_frames(per_rank),
        wall_s,
        gbps: rate(bytes, wall_s),
        stonewall_s,
        stonewall_bytes,
        stonewall_gbps: rate(stonewall_bytes, stonewall_s),
    }
}

/// Frames landed whole: a frame (each time it was read) counts once every rank that owns a
/// part of it (the ranks sharing a host's lanes each own their lanes' part) has landed
/// that part; a rank reading whole frames owns all of each of its frames.
fn whole_frames(per_rank: &[RankReport]) -> u64 {
    use std::collections::BTreeMap;
    // Per frame: how often each of its owners landed its part.
    let mut landed: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for r in per_rank {
        let mut mine: BTreeMap<u32, u64> = r.owned.iter().map(|&f| (f, 0)).collect();
        for f in &r.landed {
            *mine.entry(*f).or_default() += 1;
        }
        for (f, n) in mine {
            landed.entry(f).or_default().push(n);
        }
    }
    landed
        .values()
        .map(|counts| counts.iter().copied().min().unwrap_or(0))
        .sum()
}

#[cfg(test)]
mod tests;
