//! Job files: several benchmark jobs run at once and summed, like gdsio's config files.
//!
//! ```text
//! # comments start with '#'
//! [global]            # defaults for every job
//! engine=staged
//! io_size=1M          # sizes as fio reads them: K/M/G are powers of 1024
//! queue_depth=8
//! duration=10s         # or 10 (seconds), 500ms, 2min
//! [gpu0]
//! gpu=0
//! numa_node=0         # run the job's threads on this node's CPUs
//! dataset=/data/storm # or: files=/mnt/lanes/0/a,/mnt/lanes/1/b
//! lanes=0-3           # only the extents on these lanes
//! threads=16
//! [gpu1]
//! ...
//! ```

use std::path::PathBuf;

use serde::Serialize;

use super::{BenchConfig, BenchResult, report, run};
use crate::dataset::Dataset;
use crate::ingest::{EngineKind, IngestError, IoBackend, Result, Source};
use crate::units;

/// Parses a list like `0,2,4-7`.
pub fn parse_list(text: &str) -> std::result::Result<Vec<u32>, String> {
    let mut v = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let a: u32 = a
                .trim()
                .parse()
                .map_err(|_| format!("'{part}' is not a range"))?;
            let b: u32 = b
                .trim()
                .parse()
                .map_err(|_| format!("'{part}' is not a range"))?;
            if a > b || b - a > 65536 {
                return Err(format!("'{part}' is not a usable range"));
            }
            v.extend(a..=b);
        } else {
            v.push(
                part.parse()
                    .map_err(|_| format!("'{part}' is not a number"))?,
            );
        }
    }
    Ok(v)
}

/// Where a job reads from.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceSpec {
    /// A dataset directory (or manifest).
    Dataset(PathBuf),
    /// Plain files, cut into frames of `frame_size`.
    Files(Vec<PathBuf>, u64),
}

/// One job of a job file.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// Section name.
    pub name: String,
    /// Run settings.
    pub cfg: BenchConfig,
    /// What to read.
    pub source: SourceSpec,
    /// Only extents on these lanes.
    pub lanes: Option<Vec<u32>>,
    /// NUMA node whose CPUs run the job.
    pub numa_node: Option<u32>,
}

/// A yes/no value, as fio writes them (`1`/`0`) or in words; anything else is an error
/// rather than a silent "no".
fn switch(key: &str, val: &str) -> std::result::Result<bool, String> {
    match val {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "{key}: '{val}' is not 1 or 0 (true/false, yes/no, on/off)"
        )),
    }
}

fn apply(
    cfg: &mut JobSpec,
    key: &str,
    val: &str,
    have_source: &mut bool,
) -> std::result::Result<(), String> {
    let size = |v: &str| units::parse_size(v).map_err(|e| format!("{key}: {e}"));
    let num = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|_| format!("{key}: '{v}' is not a number"))
    };
    match key {
        "engine" | "path" => {
            cfg.cfg.engine = match val {
                "gds" => EngineKind::Gds,
                "staged" => EngineKind::Staged,
                "portable" => EngineKind::Portable,
                "cpu-only" => EngineKind::CpuOnly,
                _ => {
                    return Err(format!(
                        "{key}: '{val}' is not gds, staged, portable or cpu-only"
                    ));
                }
            }
        }
        "threads" => {
            let (n, max) = (num(val)?, crate::probe::max_io_threads());
            if n > max {
                return Err(format!(
                    "{key}: {n} is more than this machine can use ({max} I/O threads: 16 per \
                     usable CPU, at least 32)"
                ));
            }
            cfg.cfg.threads = n;
        }
        "io_size" | "iosize" => cfg.cfg.io_size = size(val)? as usize,
        "queue_depth" => cfg.cfg.queue_depth = num(val)?,
        "slots" => cfg.cfg.slots = Some(num(val)?),
        "streams" => cfg.cfg.streams = num(val)?,
        "frames" => cfg.cfg.frames = Some(num(val)? as u64),
        "duration" => {
            cfg.cfg.duration = Some(
                units::parse_positive_duration(val)
                    .map_err(|e| format!("{key}: {e}"))?
                    .as_secs_f64(),
            )
        }
        "gpu" => cfg.cfg.gpu = num(val)?,
        "cold" => cfg.cfg.cold = switch(key, val)?,
        "buffered" => cfg.cfg.buffered = switch(key, val)?,
        "verify" => cfg.cfg.verify = switch(key, val)?,
        "backend" => {
            cfg.cfg.backend = match val {
                "auto" => IoBackend::Auto,
                // `io-uring` as on the command line; `io_uring` as fio's ioengine names it.
                "io-uring" | "io_uring" => IoBackend::IoUring,
                "pread" => IoBackend::Pread,
                _ => return Err(format!("backend: '{val}' is not auto, io-uring or pread")),
            }
        }
        "numa_node" => cfg.numa_node = Some(num(val)? as u32),
        "lanes" => cfg.lanes = Some(parse_list(val)?),
        "dataset" => {
            cfg.source = SourceSpec::Dataset(PathBuf::from(val));
            *have_source = true;
        }
        "files" => {
            let fs = match &cfg.source {
                SourceSpec::Files(_, fs) => *fs,
                SourceSpec::Dataset(_) => 256 << 20,
            };
            cfg.source = SourceSpec::Files(
                val.split(',').map(|p| PathBuf::from(p.trim())).collect(),
                fs,
            );
            *have_source = true;
        }
        "frame_size" => {
            let fs = size(val)?;
            if let SourceSpec::Files(p, _) = &cfg.source {
                cfg.source = SourceSpec::Files(p.clone(), fs);
            } else {
                cfg.source = SourceSpec::Files(Vec::new(), fs);
            }
        }
        _ => return Err(format!("unknown key '{key}'")),
    }
    Ok(())
}

/// Parses a job file (see the module documentation).
pub fn parse(text: &str) -> std::result::Result<Vec<JobSpec>, String> {
    let blank = JobSpec {
        name: "global".into(),
        cfg: BenchConfig {
            duration: Some(10.0),
            ..BenchConfig::default()
        },
        source: SourceSpec::Files(Vec::new(), 256 << 20),
        lanes: None,
        numa_node: None,
    };
    let mut global = blank.clone();
    let mut global_source = false;
    let mut jobs: Vec<(JobSpec, bool)> = Vec::new();
    let mut in_global = true;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |m: String| format!("line {}: {m}", n + 1);
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim();
            if name.eq_ignore_ascii_case("global") {
                in_global = true;
            } else {
                in_global = false;
                let mut j = global.clone();
                j.name = name.to_string();
                jobs.push((j, global_source));
            }
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| at(format!("'{line}' is not key=value")))?;
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if in_global {
            apply(&mut global, &k, v, &mut global_source).map_err(at)?;
        } else {
            let (j, have) = jobs.last_mut().expect("a section was opened");
            apply(j, &k, v, have).map_err(at)?;
        }
    }
    if jobs.is_empty() {
        return Err("the job file defines no job (add a [name] section)".into());
    }
    for (j, have) in &jobs {
        let empty_files = matches!(&j.source, SourceSpec::Files(f, _) if f.is_empty());
        if !have || empty_files {
            return Err(format!("job [{}] names no dataset= or files=", j.name));
        }
    }
    Ok(jobs.into_iter().map(|(j, _)| j).collect())
}

/// Builds the job's workload.
pub fn load_source(spec: &JobSpec) -> Result<Source> {
    let mut s = match &spec.source {
        SourceSpec::Dataset(p) => Source::from_manifest(Dataset::open(p)?.manifest()),
        SourceSpec::Files(p, fs) => {
            Source::from_files(p, *fs, (spec.cfg.io_size as u64).max(4096))?
        }
    };
    if let Some(lanes) = &spec.lanes {
        for f in &mut s.frames {
            f.extents
                .retain(|e| lanes.contains(&s.files[e.file as usize].lane));
        }
        s.frames.retain(|f| !f.extents.is_empty());
        if s.frames.is_empty() {
            return Err(IngestError::Usage(format!(
                "job [{}]: no extent lies on lanes {lanes:?}",
                spec.name
            )));
        }
    }
    Ok(s)
}

/// CPUs of a NUMA node, from sysfs.
pub fn numa_cpus(node: u32) -> Option<Vec<usize>> {
    let text =
        std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/cpulist")).ok()?;
    parse_list(text.trim())
        .ok()
        .map(|v| v.into_iter().map(|c| c as usize).collect())
}

fn bind_to_cpus(cpus: &[usize]) -> std::result::Result<(), String> {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity(0) affects the calling thread,
    // and threads it starts afterwards inherit the mask.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
    }
    Ok(())
}

/// The outcome of a job file: each job and their sum.
#[derive(Clone, Debug, Serialize)]
pub struct JobsResult {
    /// Per job: name and result (or error text).
    pub jobs: Vec<(String, std::result::Result<BenchResult, String>)>,
    /// Bytes moved by all jobs.
    pub total_bytes: u64,
    /// Longest job wall time, seconds.
    pub wall_s: f64,
    /// Sum of the jobs' GB/s.
    pub sum_gbps: f64,
    /// All bytes over the longest wall time, GB/s.
    pub aggregate_gbps: f64,
}

impl JobsResult {
    /// The job file's outcome in fio's JSON shape (what `bench --job --json` writes).
    pub fn fio_report(&self) -> report::FioReport {
        let j = self;
        let mut r = report::FioReport::new(
            j.jobs
                .iter()
                .map(|(name, res)| match res {
                    Ok(b) => report::FioJob::from_result(name, b),
                    Err(e) => report::FioJob::failed(name, e),
                })
                .collect(),
        );
        r.disk_util = j
            .jobs
            .iter()
            .find_map(|(_, res)| res.as_ref().ok())
            .map(|b| b.disk_util.clone())
            .unwrap_or_default();
        r.aggregate = Some(report::Aggregate {
            total_bytes: j.total_bytes,
            wall_s: j.wall_s,
            sum_gbps: j.sum_gbps,
            aggregate_gbps: j.aggregate_gbps,
        });
        r
    }
}

/// Binds the calling thread (and the threads it starts afterwards) to the CPUs of NUMA
/// node `node`; what went wrong, in words, where it could not.
pub(crate) fn bind_to_node(node: u32) -> Option<String> {
    match numa_cpus(node) {
        Some(cpus) if !cpus.is_empty() => bind_to_cpus(&cpus)
            .err()
            .map(|e| format!("could not bind to NUMA node {node}: {e}")),
        _ => Some(format!("NUMA node {node} does not exist here; not bound")),
    }
}

/// Runs every job at once, each on its own thread (bound to its NUMA node when given).
pub fn run_jobs(specs: &[JobSpec]) -> JobsResult {
    let results: Vec<(String, std::result::Result<BenchResult, String>)> =
        std::thread::scope(|s| {
            let handles: Vec<_> = specs
                .iter()
                .map(|spec| {
                    s.spawn(move || {
                        let notes: Vec<String> =
                            spec.numa_node.and_then(bind_to_node).into_iter().collect();
                        let r = load_source(spec).and_then(|src| run(&src, &spec.cfg));
                        (
                            spec.name.clone(),
                            r.map(|mut r| {
                                r.notes.extend(notes);
                                r
                            })
                            .map_err(|e| e.to_string()),
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| ("?".into(), Err("job thread panicked".into())))
                })
                .collect()
        });
    JobsResult::of(results)
}

impl JobsResult {
    /// The jobs' `results` (name, outcome) and their sums: bytes of the jobs that ran over
    /// the longest one's wall time (the jobs started together).
    pub fn of(results: Vec<(String, std::result::Result<BenchResult, String>)>) -> JobsResult {
        let ok: Vec<&BenchResult> = results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .collect();
        let total_bytes = ok.iter().map(|r| r.summary.bytes).sum();
        let wall_s = ok.iter().map(|r| r.total_time_s).fold(0.0, f64::max);
        JobsResult {
            sum_gbps: ok.iter().map(|r| r.summary.gbps).sum(),
            aggregate_gbps: if wall_s > 0.0 {
                total_bytes as f64 / wall_s / 1e9
            } else {
                0.0
            },
            total_bytes,
            wall_s,
            jobs: results,
        }
    }
}

// ---------------------------------------------------------------------------------------
// One job per GPU (`bench --gpus`)

/// Most GPUs (or jobs) one `--gpus` may name: more than any host holds, few enough that a
/// typing slip cannot start thousands of threads.
pub const MAX_GPUS: usize = 64;

/// The GPUs `--gpus` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSelection {
    /// `all`: every CUDA device.
    All,
    /// `N`: GPUs `0..N`.
    Count(usize),
    /// `0,1` or `0-3` (a list or a range): exactly these ordinals, in this order; one may
    /// appear twice (two contexts on one GPU, each with its own engine).
    List(Vec<usize>),
}

/// Parses `--gpus`: `all`, a count `N` (GPUs 0..N), or ordinals `0,1` / `0-3` / `0,0`.
/// A bare number is a count; one GPU by ordinal is `--gpu K` (or `K-K`).
pub fn parse_gpus(text: &str) -> std::result::Result<GpuSelection, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("all") {
        return Ok(GpuSelection::All);
    }
    if !t.contains([',', '-']) {
        let n: usize = t
            .parse()
            .map_err(|_| format!("'{t}' is not all, a GPU count or a list like 0,1"))?;
        if n == 0 || n > MAX_GPUS {
            return Err(format!("{n} GPUs: a count is 1 to {MAX_GPUS}"));
        }
        return Ok(GpuSelection::Count(n));
    }
    let list = parse_list(t)?;
    if list.is_empty() {
        return Err(format!("'{t}' names no GPU"));
    }
    if list.len() > MAX_GPUS {
        return Err(format!(
            "'{t}' names {} GPUs; at most {MAX_GPUS}",
            list.len()
        ));
    }
    Ok(GpuSelection::List(
        list.into_iter().map(|g| g as usize).collect(),
    ))
}

impl GpuSelection {
    /// The ordinals selected, given how many CUDA devices there are (`None`: no CUDA here).
    /// `all` needs CUDA; named ordinals must exist where CUDA can say which do.
    pub fn resolve(&self, cuda_devices: Option<usize>) -> std::result::Result<Vec<usize>, String> {
        let gpus: Vec<usize> = match self {
            GpuSelection::All => match cuda_devices {
                Some(n) if n > 0 => (0..n.min(MAX_GPUS)).collect(),
                Some(_) => return Err("all: CUDA sees no GPU here".into()),
                None => {
                    return Err(
                        "all means every CUDA device, and CUDA is not available here; name a count (--gpus 2) to run that many jobs without a GPU".into(),
                    );
                }
            },
            GpuSelection::Count(n) => (0..*n).collect(),
            GpuSelection::List(v) => v.clone(),
        };
        if let Some(n) = cuda_devices
            && let Some(bad) = gpus.iter().find(|&&g| g >= n)
        {
            return Err(format!("GPU {bad} does not exist (CUDA sees {n})"));
        }
        Ok(gpus)
    }
}

/// A lane of the source and the NUMA node of the device it is stored on, where known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneNode {
    /// Lane number.
    pub lane: u32,
    /// NUMA node of the lane's block device (its PCIe controller); `None`: unknown (no
    /// block device, a virtual one, or a machine without NUMA information).
    pub numa_node: Option<u32>,
}

/// How the lanes were shared between GPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LaneSplit {
    /// Per GPU (in the order named), its lanes, ascending.
    pub lanes: Vec<Vec<u32>>,
    /// Whether the NUMA topology chose (`true`), or lanes were dealt out evenly because it
    /// is not known (`false`).
    pub by_topology: bool,
    /// What was done that was not asked for (a GPU with no near lane read a far one).
    pub notes: Vec<String>,
}

/// Where a device sits in the PCIe tree: its sysfs path from the root complex down, e.g.
/// `pci0000:00`, `0000:00:01.0`, `0000:01:00.0`, ..., the device itself.
pub type PciePath = Vec<String>;

/// PCIe hops between two devices: up from one to their nearest common bridge, and down to
/// the other (devices under different root complexes share nothing, so the whole way).
pub fn pcie_hops(a: &[String], b: &[String]) -> usize {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    a.len() + b.len() - 2 * common
}

/// Shares `lanes` between GPUs whose NUMA nodes are `gpu_nodes` (one entry per GPU named;
/// an ordinal named twice appears twice), so each lane is read by exactly one GPU; see
/// [`split_lanes_by`], which also weighs the PCIe tree.
pub fn split_lanes(
    lanes: &[LaneNode],
    gpu_nodes: &[Option<u32>],
) -> std::result::Result<LaneSplit, String> {
    split_lanes_by(lanes, gpu_nodes, &[], &[])
}

/// Shares `lanes` between GPUs, so each lane is read by exactly one GPU, the nearest where
/// the topology says. `gpu_nodes` has one entry per GPU named (an ordinal named twice
/// appears twice); `lane_pcie` gives the PCIe path of a lane's drive controller by lane
/// number, `gpu_pcie` each GPU's (both may be empty: unknown).
///
/// A lane's nearest GPUs: those on its NUMA node (where every GPU's node and the lane's are
/// known and one matches), else all; of those, the fewest PCIe hops away (where the lane's
/// path and theirs are known), so GPUs on one node are told apart by their PCIe switches.
/// Lanes with nearest GPUs go to the least loaded of them; the others to the least loaded
/// GPU overall, so without topology lanes are dealt out in turn. A GPU left without a lane
/// then takes one from the GPU with the most (noted). Fewer lanes than GPUs is an error: a
/// job without a lane would read nothing.
pub fn split_lanes_by(
    lanes: &[LaneNode],
    gpu_nodes: &[Option<u32>],
    lane_pcie: &[(u32, PciePath)],
    gpu_pcie: &[Option<PciePath>],
) -> std::result::Result<LaneSplit, String> {
    let g = gpu_nodes.len();
    if g == 0 {
        return Err("no GPU to share the lanes between".into());
    }
    let mut sorted: Vec<LaneNode> = lanes.to_vec();
    sorted.sort_by_key(|l| l.lane);
    sorted.dedup_by_key(|l| l.lane);
    if sorted.len() < g {
        return Err(format!(
            "{g} GPUs but the source has {} lane(s): each GPU reads lanes of its own, so name at most {} GPUs",
            sorted.len(),
            sorted.len()
        ));
    }
    let numa_known = gpu_nodes.iter().all(Option::is_some);
    let near = |l: &LaneNode| -> Vec<usize> {
        let mut cands: Vec<usize> = (0..g)
            .filter(|&k| numa_known && l.numa_node.is_some() && gpu_nodes[k] == l.numa_node)
            .collect();
        if cands.is_empty() {
            cands = (0..g).collect();
        }
        let lane_path = lane_pcie.iter().find(|(n, _)| *n == l.lane).map(|(_, p)| p);
        let paths: Option<Vec<&PciePath>> = cands
            .iter()
            .map(|&k| gpu_pcie.get(k).and_then(Option::as_ref))
            .collect();
        if let (Some(lp), Some(paths)) = (lane_path, paths) {
            let hops: Vec<usize> = paths.iter().map(|p| pcie_hops(lp, p)).collect();
            let best = hops.iter().copied().min().unwrap_or(0);
            cands = cands
                .into_iter()
                .zip(hops)
                .filter(|&(_, h)| h == best)
                .map(|(k, _)| k)
                .collect();
        }
        cands
    };
    let by_topology = sorted.iter().any(|l| near(l).len() < g);
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); g];
    let least_loaded = |out: &Vec<Vec<u32>>, among: &[usize]| -> usize {
        *among
            .iter()
            .min_by_key(|&&k| (out[k].len(), k))
            .expect("at least one candidate")
    };
    let all: Vec<usize> = (0..g).collect();
    // Lanes with nearest GPUs first, so the others fill in around them.
    let (placed, rest): (Vec<LaneNode>, Vec<LaneNode>) =
        sorted.iter().partition(|l| near(l).len() < g);
    for l in &placed {
        let k = least_loaded(&out, &near(l));
        out[k].push(l.lane);
    }
    for l in &rest {
        let k = least_loaded(&out, &all);
        out[k].push(l.lane);
    }
    let mut notes = Vec::new();
    while let Some(empty) = out.iter().position(Vec::is_empty) {
        let donor = (0..g)
            .max_by_key(|&k| (out[k].len(), std::cmp::Reverse(k)))
            .expect("g > 0");
        let lane = out[donor].pop().expect("the donor has at least two lanes");
        out[empty].push(lane);
        notes.push(format!(
            "GPU #{empty} (NUMA node {}) is nearest no lane; it reads lane {lane}, which GPU #{donor} would have read",
            gpu_nodes[empty].map_or("unknown".into(), |n| n.to_string())
        ));
    }
    for v in &mut out {
        v.sort_unstable();
    }
    Ok(LaneSplit {
        lanes: out,
        by_topology,
        notes,
    })
}

/// The name of the job of GPU `gpus[k]`: `gpu0`, `gpu1`, ...; a GPU named twice gives
/// `gpu0#1`, `gpu0#2`.
pub(crate) fn job_name(gpus: &[usize], k: usize) -> String {
    let gpu = gpus[k];
    let same = gpus.iter().filter(|&&o| o == gpu).count();
    let nth = gpus[..=k].iter().filter(|&&o| o == gpu).count();
    if same > 1 {
        format!("gpu{gpu}#{nth}")
    } else {
        format!("gpu{gpu}")
    }
}

/// The jobs of `bench --gpus`: one per GPU named (`gpus[k]` with NUMA node
/// `gpu_nodes[k]`), each with the command line's settings (`base`: threads, queue depth,
/// slots, ... per job, as gdsio's per-job settings), reading `split.lanes[k]` of `source`,
/// its threads on its GPU's NUMA node where known. Jobs are named `gpu0`, `gpu1`, ...; a
/// GPU named twice gives `gpu0#1`, `gpu0#2`.
pub fn gpu_jobs(
    base: &BenchConfig,
    source: &SourceSpec,
    gpus: &[usize],
    gpu_nodes: &[Option<u32>],
    split: &LaneSplit,
) -> Vec<JobSpec> {
    gpus.iter()
        .enumerate()
        .map(|(k, &gpu)| JobSpec {
            name: job_name(gpus, k),
            cfg: BenchConfig {
                gpu,
                ..base.clone()
            },
            source: source.clone(),
            lanes: split.lanes.get(k).cloned(),
            numa_node: gpu_nodes.get(k).copied().flatten(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(parse_list("0,2-4").unwrap(), vec![0, 2, 3, 4]);
        assert!(parse_list("3-1").is_err());
    }

    #[test]
    fn job_files_parse_with_globals() {
        let jobs = parse(
            "[global]\npath=staged\nio_size=2M\n[a]\ngpu=1\ndataset=/d\nlanes=0-1\n[b]\nfiles=/x,/y\nthreads=4 # four\n",
        )
        .unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].cfg.engine, EngineKind::Staged);
        assert_eq!(jobs[0].cfg.gpu, 1);
        assert_eq!(jobs[0].lanes, Some(vec![0, 1]));
        assert_eq!(jobs[1].cfg.io_size, 2 << 20);
        assert_eq!(jobs[1].cfg.threads, 4);
        assert!(matches!(&jobs[1].source, SourceSpec::Files(f, _) if f.len() == 2));
        assert!(
            parse("[a]\nthreads=2\n")
                .unwrap_err()
                .contains("names no dataset")
        );
        assert!(parse("[a]\nbogus=1\n").unwrap_err().contains("line 2"));
        // Sizes and durations read as on the command line (8M = 8 MiB), and a bad one
        // names the key and the value.
        let jobs = parse("[a]\nfiles=/x\nframe_size=8M\nio_size=8MB\nduration=1.5s\n").unwrap();
        assert!(matches!(&jobs[0].source, SourceSpec::Files(_, fs) if *fs == 8 << 20));
        assert_eq!(jobs[0].cfg.io_size, 8 << 20);
        assert_eq!(jobs[0].cfg.duration, Some(1.5));
        let e = parse("[a]\nfiles=/x\nio_size=lots\n").unwrap_err();
        assert!(
            e.contains("line 3") && e.contains("io_size") && e.contains("'lots'"),
            "{e}"
        );
        let e = parse("[a]\nfiles=/x\nduration=0\n").unwrap_err();
        assert!(e.contains("duration") && e.contains("'0'"), "{e}");
        assert!(parse("").is_err());
    }

    #[test]
    fn values_are_spelled_as_on_the_command_line_and_switches_are_strict() {
        let jobs =
            parse("[a]\nfiles=/x\nengine=cpu-only\nverify=1\ncold=no\nbackend=io-uring\n").unwrap();
        assert_eq!(jobs[0].cfg.engine, EngineKind::CpuOnly);
        assert!(jobs[0].cfg.verify && !jobs[0].cfg.cold);
        assert_eq!(jobs[0].cfg.backend, IoBackend::IoUring);
        for bad in [
            "engine=cpu",
            "engine=cpuonly",
            "verify=maybe",
            "backend=uring",
        ] {
            let e = parse(&format!("[a]\nfiles=/x\n{bad}\n")).unwrap_err();
            let key = bad.split('=').next().unwrap();
            assert!(e.contains("line 3") && e.contains(key), "{bad}: {e}");
        }
    }

    #[test]
    fn gpu_selections_parse_strictly() {
        assert_eq!(parse_gpus("all").unwrap(), GpuSelection::All);
        assert_eq!(parse_gpus(" ALL ").unwrap(), GpuSelection::All);
        assert_eq!(parse_gpus("2").unwrap(), GpuSelection::Count(2));
        assert_eq!(parse_gpus("0,1").unwrap(), GpuSelection::List(vec![0, 1]));
        assert_eq!(parse_gpus("0,0").unwrap(), GpuSelection::List(vec![0, 0]));
        assert_eq!(
            parse_gpus("1-3").unwrap(),
            GpuSelection::List(vec![1, 2, 3])
        );
        assert_eq!(parse_gpus("1-1").unwrap(), GpuSelection::List(vec![1]));
        for bad in ["", "0", "none", "-1", "1.5", "65", "3-1", ",", "0-99"] {
            assert!(parse_gpus(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn gpu_selections_resolve_against_cuda() {
        assert_eq!(GpuSelection::All.resolve(Some(2)).unwrap(), vec![0, 1]);
        let e = GpuSelection::All.resolve(None).unwrap_err();
        assert!(
            e.contains("CUDA is not available") && e.contains("count"),
            "{e}"
        );
        assert!(GpuSelection::All.resolve(Some(0)).is_err());
        assert_eq!(GpuSelection::Count(3).resolve(None).unwrap(), vec![0, 1, 2]);
        let e = GpuSelection::Count(3).resolve(Some(2)).unwrap_err();
        assert!(e.contains("GPU 2 does not exist"), "{e}");
        assert_eq!(
            GpuSelection::List(vec![0, 0]).resolve(Some(1)).unwrap(),
            vec![0, 0]
        );
        assert!(GpuSelection::List(vec![1]).resolve(Some(1)).is_err());
        assert_eq!(GpuSelection::List(vec![7]).resolve(None).unwrap(), vec![7]);
    }

    fn lanes(nodes: &[Option<u32>]) -> Vec<LaneNode> {
        nodes
            .iter()
            .enumerate()
            .map(|(i, &n)| LaneNode {
                lane: i as u32,
                numa_node: n,
            })
            .collect()
    }

    #[test]
    fn lanes_are_dealt_evenly_without_topology() {
        let s = split_lanes(&lanes(&[None; 5]), &[None, None]).unwrap();
        assert_eq!(s.lanes, vec![vec![0, 2, 4], vec![1, 3]]);
        assert!(!s.by_topology && s.notes.is_empty());
        // A GPU named twice is two jobs.
        let s = split_lanes(&lanes(&[Some(0); 4]), &[Some(0), Some(0)]).unwrap();
        assert_eq!(s.lanes, vec![vec![0, 2], vec![1, 3]]);
        // Known lanes but unknown GPU nodes: even.
        let s = split_lanes(&lanes(&[Some(0), Some(1)]), &[Some(1), None]).unwrap();
        assert!(!s.by_topology);
        assert_eq!(s.lanes, vec![vec![0], vec![1]]);
    }

    #[test]
    fn lanes_go_to_the_gpu_on_their_numa_node() {
        // Lanes 0,1,4 on node 1 and 2,3,5 on node 0; GPU #0 on node 0, GPU #1 on node 1.
        let l = lanes(&[Some(1), Some(1), Some(0), Some(0), Some(1), Some(0)]);
        let s = split_lanes(&l, &[Some(0), Some(1)]).unwrap();
        assert!(s.by_topology && s.notes.is_empty());
        assert_eq!(s.lanes, vec![vec![2, 3, 5], vec![0, 1, 4]]);
        // A lane of unknown node fills the less loaded GPU.
        let l = lanes(&[Some(0), Some(0), Some(1), None]);
        let s = split_lanes(&l, &[Some(0), Some(1)]).unwrap();
        assert_eq!(s.lanes, vec![vec![0, 1], vec![2, 3]]);
    }

    #[test]
    fn a_gpu_without_near_lanes_still_gets_one_and_says_so() {
        let l = lanes(&[Some(0), Some(0), Some(0)]);
        let s = split_lanes(&l, &[Some(0), Some(1)]).unwrap();
        assert!(s.by_topology);
        assert_eq!(s.lanes, vec![vec![0, 1], vec![2]]);
        assert_eq!(s.notes.len(), 1);
        assert!(s.notes[0].contains("lane 2"), "{:?}", s.notes);
    }

    fn path(p: &str) -> PciePath {
        p.split('/').map(str::to_string).collect()
    }

    #[test]
    fn gpus_on_one_node_are_told_apart_by_their_pcie_switches() {
        assert_eq!(pcie_hops(&path("r/a/b"), &path("r/a/c")), 2);
        assert_eq!(pcie_hops(&path("r/a/b/c"), &path("s/x")), 6);
        // Both GPUs and all lanes on node 0; GPU #0 and lanes 1, 2 behind switch A, GPU #1
        // and lanes 0, 3 behind switch B, lane 4's controller unknown.
        let gpus = [Some(path("pci0/rp1/swA/g0")), Some(path("pci0/rp2/swB/g1"))];
        let lane_pcie = [
            (0, path("pci0/rp2/swB/n0")),
            (1, path("pci0/rp1/swA/n1")),
            (2, path("pci0/rp1/swA/n2")),
            (3, path("pci0/rp2/swB/n3")),
        ];
        let l = lanes(&[Some(0); 5]);
        let s = split_lanes_by(&l, &[Some(0), Some(0)], &lane_pcie, &gpus).unwrap();
        assert!(s.by_topology);
        assert_eq!(s.lanes, vec![vec![1, 2, 4], vec![0, 3]]);
        // NUMA first: a lane on GPU #1's node goes there however the PCIe tree looks.
        let l = lanes(&[Some(1), Some(0), Some(0), Some(0)]);
        let s = split_lanes_by(&l, &[Some(0), Some(1)], &lane_pcie, &gpus).unwrap();
        assert_eq!(s.lanes, vec![vec![1, 2, 3], vec![0]]);
        // Without the GPUs' paths: NUMA alone (here the same node: evenly).
        let l = lanes(&[Some(0); 4]);
        let s = split_lanes_by(&l, &[Some(0), Some(0)], &lane_pcie, &[None, None]).unwrap();
        assert!(!s.by_topology);
        assert_eq!(s.lanes, vec![vec![0, 2], vec![1, 3]]);
    }

    #[test]
    fn every_lane_is_read_by_exactly_one_gpu() {
        for n_lanes in 1..9u32 {
            for g in 1..=n_lanes as usize {
                for pattern in 0..4u32 {
                    let l: Vec<LaneNode> = (0..n_lanes)
                        .map(|i| LaneNode {
                            lane: i,
                            numa_node: match pattern {
                                0 => None,
                                1 => Some(i % 2),
                                2 => Some(0),
                                _ => (i % 3 != 0).then_some(i % 2),
                            },
                        })
                        .collect();
                    let nodes: Vec<Option<u32>> = (0..g as u32).map(|k| Some(k % 2)).collect();
                    // PCIe paths for some lanes and every GPU: switch i % 3.
                    let lane_pcie: Vec<(u32, PciePath)> = (0..n_lanes)
                        .filter(|i| i % 4 != 1)
                        .map(|i| (i, path(&format!("r/sw{}/n{i}", i % 3))))
                        .collect();
                    let gpu_pcie: Vec<Option<PciePath>> = (0..g)
                        .map(|k| Some(path(&format!("r/sw{}/g{k}", k % 3))))
                        .collect();
                    for s in [
                        split_lanes(&l, &nodes).unwrap(),
                        split_lanes_by(&l, &nodes, &lane_pcie, &gpu_pcie).unwrap(),
                    ] {
                        let mut seen: Vec<u32> = s.lanes.concat();
                        seen.sort_unstable();
                        assert_eq!(seen, (0..n_lanes).collect::<Vec<_>>());
                        assert!(s.lanes.iter().all(|v| !v.is_empty()));
                    }
                }
            }
        }
        let e = split_lanes(&lanes(&[None]), &[None, None]).unwrap_err();
        assert!(e.contains("2 GPUs") && e.contains("1 lane"), "{e}");
    }

    #[test]
    fn gpu_jobs_carry_the_gpu_its_lanes_and_node() {
        let base = BenchConfig {
            threads: 3,
            ..BenchConfig::default()
        };
        let split = split_lanes(&lanes(&[None; 3]), &[Some(1), Some(1)]).unwrap();
        let src = SourceSpec::Dataset(PathBuf::from("/d"));
        let jobs = gpu_jobs(&base, &src, &[0, 0], &[Some(1), Some(1)], &split);
        assert_eq!(jobs[0].name, "gpu0#1");
        assert_eq!(jobs[1].name, "gpu0#2");
        assert_eq!(jobs[1].lanes, Some(vec![1]));
        assert_eq!(jobs[1].numa_node, Some(1));
        assert_eq!(jobs[1].cfg.threads, 3);
        let jobs = gpu_jobs(&base, &src, &[1, 0], &[None, None], &split);
        assert_eq!((jobs[0].name.as_str(), jobs[0].cfg.gpu), ("gpu1", 1));
        assert_eq!(jobs[1].numa_node, None);
    }
}
