//! `bench` across ranks, as IOR measures many clients of one storage system: every rank
//! opens its engine and ring, a barrier starts them together, each reads its share of the
//! frames (every N-th, so each share spans the series), and rank 0 gathers what each
//! measured and reports the aggregate two ways: over the wall time of the slowest rank, and
//! stonewalled (IOR's convention: the bytes all ranks had landed when the fastest rank
//! finished, over that rank's time), beside every rank's own figures and place (host, GPU).

use serde::{Deserialize, Serialize};

use super::{BenchConfig, BenchResult};
use crate::cluster::{Ranks, share};
use crate::ingest::{IngestError, Result, Source};

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
    /// The frames of the dataset it owned.
    pub frames_owned: usize,
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
    /// Why the rank failed, if it did.
    pub error: Option<String>,
    /// The rank's full result (the one-process `bench --json` object).
    pub result: Option<serde_json::Value>,
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
    /// Frames landed by all ranks.
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

/// Runs `cfg` on this rank's share of `source`'s frames, started together with every other
/// rank. Returns the gathered result on rank 0 and `None` on the others. Every rank takes
/// part in the barrier and the gather whatever happens to it, so one rank's failure is
/// reported (by rank 0, naming the rank and host) instead of hanging the others.
///
/// `cfg.frames` counts frames over all ranks (split as the frames are); `cfg.duration` is
/// every rank's. A GPU engine's rank uses GPU `cfg.gpu + local rank` (modulo `gpus`).
pub fn run_ranks(
    ranks: &dyn Ranks,
    source: &Source,
    cfg: &BenchConfig,
    gpus: usize,
) -> Result<Option<RanksResult>> {
    let (rank, size) = (ranks.rank(), ranks.size());
    if source.frames.len() < size {
        return Err(IngestError::Usage(format!(
            "{size} ranks but only {} frames: every rank needs at least one",
            source.frames.len()
        )));
    }
    let mine = Source {
        frames: share(source.frames.len(), rank, size)
            .map(|i| source.frames[i].clone())
            .collect(),
        ..source.clone()
    };
    let mut rank_cfg = cfg.clone();
    rank_cfg.frames = cfg
        .frames
        .map(|f| f / size as u64 + u64::from((rank as u64) < f % size as u64));
    let gpu = cfg
        .engine
        .needs_cuda()
        .then(|| (cfg.gpu + ranks.local_rank()) % gpus.max(1));
    if let Some(g) = gpu {
        rank_cfg.gpu = g;
    }
    // Only rank 0 draws a progress line (N bars on one terminal would interleave).
    rank_cfg.progress = cfg.progress && rank == 0;
    let outcome = super::run::run_when_ready(&mine, &rank_cfg, || ranks.barrier());
    let report = RankReport::of(ranks, gpu, mine.frames.len(), outcome);
    let bytes = serde_json::to_vec(&report).expect("a rank's report is JSON");
    let Some(all) = ranks.gather(&bytes) else {
        return Ok(None);
    };
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
    Ok(Some(RanksResult {
        aggregate: aggregate(&per_rank),
        per_rank,
    }))
}

impl RankReport {
    fn of(
        ranks: &dyn Ranks,
        gpu: Option<usize>,
        frames_owned: usize,
        outcome: Result<BenchResult>,
    ) -> RankReport {
        let mut report = RankReport {
            rank: ranks.rank(),
            host: ranks.host(),
            local_rank: ranks.local_rank(),
            gpu,
            frames_owned,
            engine: String::new(),
            bytes: 0,
            frames: 0,
            wall_s: 0.0,
            done: Vec::new(),
            error: None,
            result: None,
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
        frames: per_rank.iter().map(|r| r.frames).sum(),
        wall_s,
        gbps: rate(bytes, wall_s),
        stonewall_s,
        stonewall_bytes,
        stonewall_gbps: rate(stonewall_bytes, stonewall_s),
    }
}

#[cfg(test)]
mod tests;
