//! `supercell bench` under `mpirun`: one rank per process (and per GPU), IOR-style (see
//! `supercell::bench::ranks`). The launch is recognised here, at the edge, from the
//! variables Open MPI, PMIx and PMI-2 launchers set.

use anyhow::{Result, bail};

use supercell::bench::{
    self,
    ranks::{RankTopology, RanksError, RanksResult},
};
use supercell::cluster::Ranks;
use supercell::ingest::EngineKind;

use super::{BenchArgs, EngineArg};

/// This process's ranks when `mpirun` (or another MPI launcher) started it: `None` for a
/// plain run. A build without the `mpi` feature started as one of several ranks is refused
/// (each process would measure alone and report as if it were the whole run).
pub(crate) fn launched() -> Result<Option<Box<dyn Ranks>>> {
    Ok(supercell::cluster::launched(|k| std::env::var(k).ok())?)
}

/// Runs `bench` as one rank of `ranks`; rank 0 prints the report and writes `--json`.
pub(super) fn run(args: &BenchArgs, ranks: &dyn Ranks) -> Result<()> {
    let refused = [
        (args.job.is_some(), "--job"),
        (args.sweep, "--sweep"),
        (args.peer.is_some(), "--peer"),
        (args.runs > 1, "--runs"),
        (
            args.source.is_empty(),
            "the built-in dataset (name a dataset)",
        ),
    ];
    if let Some((_, what)) = refused.iter().find(|(on, _)| *on) {
        bail!("bench across MPI ranks does not take {what}");
    }
    let within = match &args.gpus {
        Some(selection) => rank_gpus(selection)?,
        None => Vec::new(),
    };
    let engine = match args.engine {
        Some(EngineArg::Gds) => EngineKind::Gds,
        Some(EngineArg::Staged) => EngineKind::Staged,
        Some(EngineArg::CpuOnly) => EngineKind::CpuOnly,
        Some(EngineArg::Portable) => EngineKind::Portable,
        None => bench::default_engine(within.first().map_or(args.gpu, |g| g.ordinal)).0,
    };
    if engine.needs_cuda()
        && !within.is_empty()
        && let Err(why) = supercell::gpu::cuda_probe()
    {
        bail!(
            "--gpus with the {engine} engine needs CUDA, and it is not available here ({why}); --engine cpu-only runs one job per named GPU without one"
        );
    }
    let cfg = super::config(args, engine)?;
    let source = super::load(args, args.io_size)?;
    let gpus = if engine.needs_cuda() {
        supercell::gpu::device_count()
    } else {
        0
    };
    let mut topo = topology(&source, bench::ranks::rank_gpu(&cfg, ranks, gpus));
    if let Some(first) = within.first() {
        // The rank's place among its host's ranks is its first GPU's.
        topo.gpu_node = first.numa_node;
        topo.gpu_pcie = first.pcie.clone();
    }
    topo.gpus = within;
    let outcome = bench::ranks::run_ranks(ranks, &source, &cfg, gpus, &topo);
    let result = match outcome {
        Ok(Some(r)) => r,
        Ok(None) => return Ok(()),
        Err(RanksError::Silent(silent)) => crate::cmd::end_run(ranks, &silent),
        Err(e) => return Err(e.into()),
    };
    print!("{}", text(&result));
    if let Some(j) = &args.json {
        super::write_json(j, &result)?;
    }
    if result.aggregate.bytes == 0 {
        bail!("no rank landed a frame");
    }
    Ok(())
}

/// The GPUs `--gpus` names within this rank (ordinals on its host), with their places.
fn rank_gpus(selection: &bench::jobs::GpuSelection) -> Result<Vec<bench::ranks::RankGpu>> {
    let cuda_devices = supercell::gpu::cuda_probe()
        .is_ok()
        .then(supercell::gpu::device_count);
    let ordinals = selection
        .resolve(cuda_devices)
        .map_err(|e| anyhow::anyhow!("--gpus: {e}"))?;
    let (nodes, pcie) = super::gpu_places(&ordinals, cuda_devices);
    Ok(ordinals
        .into_iter()
        .zip(nodes.into_iter().zip(pcie))
        .map(|(ordinal, (numa_node, pcie))| bench::ranks::RankGpu {
            ordinal,
            numa_node,
            pcie,
        })
        .collect())
}

/// What sysfs says of this rank's lanes and GPU, for sharing a host's lanes between its
/// ranks by topology.
fn topology(source: &supercell::ingest::Source, gpu: Option<usize>) -> RankTopology {
    let (lanes, lane_pcie) = super::lane_topology(source);
    let bus = gpu.and_then(|g| supercell::gpu::Gpu::open(g).ok().map(|g| g.pci_bus_id));
    RankTopology {
        lanes,
        lane_pcie,
        gpu_node: bus.as_deref().and_then(super::pci_numa_node),
        gpu_pcie: bus.as_deref().and_then(super::pcie_path),
        gpus: Vec::new(),
    }
}

/// How the work was dealt, from rank 0's share (every rank decided alike).
fn layout_line(r: &RanksResult) -> String {
    let a = &r.aggregate;
    let share = r.per_rank.first().and_then(|p| p.share.as_ref());
    match share {
        Some(s) if s.by_host => format!(
            "frames dealt in turn over the {} host(s); the ranks of a host share its lanes{}, each reading its lanes' part of every frame of its host",
            a.hosts,
            if r.per_rank
                .iter()
                .any(|p| p.share.as_ref().is_some_and(|s| s.lanes_by_topology))
            {
                " by topology (NUMA node, then PCIe switch)"
            } else {
                " evenly"
            }
        ),
        _ => format!(
            "frames dealt in turn over the ranks (rank k reads frames k, k+{}, ...): a host has more ranks than the source has lanes",
            a.ranks
        ),
    }
}

/// The report: a row per rank, then the aggregate both ways.
fn text(r: &RanksResult) -> String {
    let a = &r.aggregate;
    let mut out = format!(
        "bench across {} MPI ranks on {} host(s); {}\n",
        a.ranks,
        a.hosts,
        layout_line(r)
    );
    out += &format!(
        "{:>4}  {:<16} {:>3}  {:>6} {:>9} {:>8} {:>8}  {:<8} engine\n",
        "rank", "host", "gpu", "frames", "GB", "s", "GB/s", "lanes"
    );
    for p in &r.per_rank {
        let gbps = if p.wall_s > 0.0 {
            p.bytes as f64 / p.wall_s / 1e9
        } else {
            0.0
        };
        let lanes = p
            .share
            .as_ref()
            .and_then(|s| s.lanes.as_ref())
            .map_or("all".to_string(), |l| {
                l.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            });
        out += &format!(
            "{:>4}  {:<16} {:>3}  {:>6} {:>9.3} {:>8.3} {:>8.3}  {:<8} {}\n",
            p.rank,
            p.host,
            p.gpu.map_or("-".into(), |g| g.to_string()),
            p.frames,
            p.bytes as f64 / 1e9,
            p.wall_s,
            gbps,
            lanes,
            p.engine
        );
        for j in &p.jobs {
            let lanes: Vec<String> = j.lanes.iter().map(u32::to_string).collect();
            let gbps = if j.wall_s > 0.0 {
                j.bytes as f64 / j.wall_s / 1e9
            } else {
                0.0
            };
            out += &format!(
                "{:>4}  {:<16} {:>3}  {:>6} {:>9.3} {:>8.3} {:>8.3}  {:<8} {}\n",
                "",
                format!("  {}", j.name),
                j.gpu,
                j.frames,
                j.bytes as f64 / 1e9,
                j.wall_s,
                gbps,
                lanes.join(","),
                j.error.as_deref().unwrap_or("")
            );
        }
    }
    out += &format!(
        "aggregate: {:.3} GB in {:.3} s (the slowest rank) = {:.3} GB/s\n\
         stonewalled: {:.3} GB by {:.3} s (the fastest rank's end) = {:.3} GB/s\n",
        a.bytes as f64 / 1e9,
        a.wall_s,
        a.gbps,
        a.stonewall_bytes as f64 / 1e9,
        a.stonewall_s,
        a.stonewall_gbps
    );
    out
}
