//! `bench --peer fio`: fio on the same lane files in the same invocation, as a baseline.
//!
//! fio reads the files the run reads (the dataset's lane files, as the manifest names
//! them), with the run's block size (`--io-size` → `bs`), threads (`numjobs`), reads in
//! flight (`iodepth`, io_uring only: a synchronous engine has one per thread), O_DIRECT
//! setting (`direct`) and read mechanism (io_uring → `ioengine=io_uring`, pread threads →
//! `psync`), read-only, sequentially, time-based, as fio's processes (its default; fio 3.33
//! aborts with `thread` and `iomem=mmaphuge`). Each fio thread starts at its own offset
//! of every file (`offset_increment`), as supercell's threads read different parts of the
//! lanes at once, and wraps around at the end. fio runs before and after supercell's run,
//! so drift (a warming cache, a throttled disk) shows as a difference between the two.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use super::{BenchConfig, BenchResult};
use crate::ingest::{IoBackend, Source, io_uring_probe};

/// What went wrong running the peer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// `--peer` named something other than fio.
    #[error("--peer {0}: the only peer is fio (`--peer fio`, or `--peer fio=/path/to/fio`)")]
    Unknown(String),
    /// fio is not there, or does not run.
    #[error(
        "--peer fio: {0}; install fio (Debian/Ubuntu: apt-get install fio) or name it: --peer fio=/path/to/fio"
    )]
    Missing(String),
    /// fio ran and failed.
    #[error("fio failed ({status}): {stderr}\ncommand: {command}")]
    Failed {
        /// Exit status.
        status: String,
        /// What fio said.
        stderr: String,
        /// The command line.
        command: String,
    },
    /// A `--peer-fio-option` that cannot be used.
    #[error("--peer-fio-option {0}")]
    Option(String),
    /// fio's output is not the JSON expected.
    #[error("cannot read fio's JSON output: {0}")]
    Output(String),
}

/// Where `--peer` says fio is: `fio` (on PATH) or `fio=/path/to/fio`.
pub fn parse_peer(arg: &str) -> Result<Option<PathBuf>, PeerError> {
    match arg.split_once('=') {
        None if arg == "fio" => Ok(None),
        Some(("fio", path)) if !path.is_empty() => Ok(Some(PathBuf::from(path))),
        _ => Err(PeerError::Unknown(arg.to_string())),
    }
}

/// fio, found and answering.
#[derive(Clone, Debug, Serialize)]
pub struct Fio {
    /// The program run.
    pub program: PathBuf,
    /// What `fio --version` says, e.g. `fio-3.33`.
    pub version: String,
}

/// Finds fio: `named` (from `--peer fio=PATH`), else `fio` in the directories of
/// `path_env` (the caller's PATH); checks that it runs.
pub fn find_fio(
    named: Option<&Path>,
    path_env: Option<&std::ffi::OsStr>,
) -> Result<Fio, PeerError> {
    let program = match named {
        Some(p) => p.to_path_buf(),
        None => path_env
            .map(std::env::split_paths)
            .into_iter()
            .flatten()
            .map(|d| d.join("fio"))
            .find(|p| p.is_file())
            .ok_or_else(|| PeerError::Missing("fio is not on PATH".into()))?,
    };
    let out = Command::new(&program)
        .arg("--version")
        .output()
        .map_err(|e| PeerError::Missing(format!("cannot run {}: {e}", program.display())))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !version.starts_with("fio") {
        return Err(PeerError::Missing(format!(
            "{} --version said {:?}, not a fio version",
            program.display(),
            version
        )));
    }
    Ok(Fio { program, version })
}

/// The fio job that mirrors a run.
#[derive(Clone, Debug, Serialize)]
pub struct FioJobPlan {
    /// Job options in order, as `key=value` (`key` alone for a flag).
    pub options: Vec<(String, Option<String>)>,
    /// The lane files, as fio reads them.
    pub files: Vec<PathBuf>,
    /// How the settings were chosen, where they differ from supercell's run.
    pub notes: Vec<String>,
}

/// fio escapes a `:` in a file name (it separates names).
fn fio_filename(p: &Path) -> String {
    p.display().to_string().replace(':', "\\:")
}

/// Whether `path` opens with O_DIRECT (tmpfs and some others refuse it).
fn opens_direct(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .is_ok()
}

/// Options `--peer-fio-option` may not set: they would make fio read other files, other
/// ways, or write.
const FIXED_OPTIONS: [&str; 7] = [
    "filename",
    "directory",
    "rw",
    "readwrite",
    "readonly",
    "output-format",
    "name",
];

/// Sets fio options from `--peer-fio-option KEY=VALUE` (or `KEY` for a flag): replaces the
/// matched value of a key the plan has, adds others.
fn apply_extra(
    options: &mut Vec<(String, Option<String>)>,
    extra: &[String],
) -> Result<(), PeerError> {
    for e in extra {
        let (k, v) = match e.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.to_string())),
            None => (e.trim(), None),
        };
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(PeerError::Option(format!("{e:?}: not KEY=VALUE or KEY")));
        }
        if FIXED_OPTIONS.contains(&k) {
            return Err(PeerError::Option(format!(
                "{e:?}: `{k}` is set by the run (fio reads the run's lane files, read-only)"
            )));
        }
        match options.iter_mut().find(|(key, _)| key == k) {
            Some(slot) => slot.1 = v,
            None => options.push((k.to_string(), v)),
        }
    }
    Ok(())
}

/// The fio job for `source` read as `cfg` reads it, for `seconds`, with `extra` options
/// (`--peer-fio-option`) on top.
pub fn plan(
    source: &Source,
    cfg: &BenchConfig,
    seconds: f64,
    extra: &[String],
) -> Result<FioJobPlan, PeerError> {
    let mut notes = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for f in &source.files {
        let real = f.path.canonicalize().unwrap_or_else(|_| f.path.clone());
        if !files.contains(&real) {
            files.push(real);
        }
    }
    let uring = match cfg.backend {
        IoBackend::IoUring => true,
        IoBackend::Pread => false,
        IoBackend::Auto => io_uring_probe().is_ok(),
    };
    let mut direct = !cfg.buffered || cfg.cold;
    if direct && files.iter().any(|f| !opens_direct(f)) {
        direct = false;
        notes.push(
            "a lane file refuses O_DIRECT, so fio reads through the page cache (direct=0), as supercell falls back to"
                .into(),
        );
    }
    let bs = cfg.io_size.max(4096);
    // Each thread starts its own stretch of the smallest file, on a block boundary.
    let smallest = source.files.iter().map(|f| f.size).min().unwrap_or(0);
    let threads = cfg.threads.max(1) as u64;
    let stride = smallest / threads / bs as u64 * bs as u64;
    let mut options: Vec<(String, Option<String>)> = Vec::new();
    let mut set = |k: &str, v: Option<String>| options.push((k.to_string(), v));
    set("name", Some("supercell-peer".into()));
    set(
        "filename",
        Some(
            files
                .iter()
                .map(|f| fio_filename(f))
                .collect::<Vec<_>>()
                .join(":"),
        ),
    );
    set("readonly", None);
    set("rw", Some("read".into()));
    set("bs", Some(bs.to_string()));
    set(
        "ioengine",
        Some(if uring { "io_uring" } else { "psync" }.into()),
    );
    set(
        "iodepth",
        Some(if uring { cfg.queue_depth.max(1) } else { 1 }.to_string()),
    );
    set("numjobs", Some(threads.to_string()));
    set("direct", Some(u8::from(direct).to_string()));
    if stride > 0 {
        set("offset_increment", Some(stride.to_string()));
    }
    set("time_based", None);
    set(
        "runtime",
        Some(format!("{}ms", (seconds * 1e3).round().max(1.0))),
    );
    set("group_reporting", None);
    if !uring {
        notes.push("supercell reads with pread threads here, so fio runs psync with one read in flight per thread (iodepth=1)".into());
    }
    apply_extra(&mut options, extra)?;
    let has = |k: &str| options.iter().any(|(key, _)| key == k);
    if direct && !has("iomem") && !has("mem") {
        notes.push(
            "supercell's host buffers sit in 2 MiB huge pages where the kernel gives them (SUPERCELL_HOST_HUGEPAGES=0 turns that off), fio's in 4 KiB pages: where a device takes fewer than bs / 4 KiB segments per request (/sys/block/*/queue/max_segments), each fio read becomes two or more requests and fio reads slower for it (docs/PERFORMANCE.md, 2026-12-05); --peer-fio-option iomem=mmaphuge:/path/on/hugetlbfs gives fio huge pages too"
                .into(),
        );
    }
    Ok(FioJobPlan {
        options,
        files,
        notes,
    })
}

impl FioJobPlan {
    /// The command-line arguments (after the program).
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = self
            .options
            .iter()
            .map(|(k, v)| match v {
                Some(v) => format!("--{k}={v}"),
                None => format!("--{k}"),
            })
            .collect();
        a.push("--output-format=json".into());
        a
    }

    /// The same job as a job file.
    pub fn job_file(&self) -> String {
        let mut s = String::from("[supercell-peer]\n");
        for (k, v) in self.options.iter().filter(|(k, _)| k != "name") {
            match v {
                Some(v) => s.push_str(&format!("{k}={v}\n")),
                None => s.push_str(&format!("{k}\n")),
            }
        }
        s
    }

    /// Whether fio reads with O_DIRECT.
    pub fn direct(&self) -> bool {
        self.options
            .iter()
            .any(|(k, v)| k == "direct" && v.as_deref() == Some("1"))
    }
}

/// fio's figures of one run (from `--output-format=json`, the group-reported job).
#[derive(Clone, Debug, Serialize)]
pub struct FioRun {
    /// Bytes per second.
    pub bw_bytes: u64,
    /// Reads per second.
    pub iops: f64,
    /// Bytes read.
    pub io_bytes: u64,
    /// Run time, milliseconds.
    pub runtime: u64,
    /// Completion latency, nanoseconds, as fio wrote it (`min`, `max`, `mean`, `stddev`,
    /// `N`, `percentile`).
    pub clat_ns: serde_json::Value,
    /// fio's `disk_util` (the block devices under the files, as the kernel counted them).
    pub disk_util: serde_json::Value,
    /// fio's error, 0 when none.
    pub error: i64,
}

impl FioRun {
    /// A percentile of `clat_ns` ("99.000000"), nanoseconds, where fio gave it.
    pub fn clat_percentile(&self, key: &str) -> Option<u64> {
        self.clat_ns["percentile"][key].as_u64()
    }
}

/// Reads fio's JSON output (text before the first `{`, such as fio's warnings, is skipped).
pub fn parse_fio_json(text: &str) -> Result<FioRun, PeerError> {
    let start = text
        .find('{')
        .ok_or_else(|| PeerError::Output("no JSON object in fio's output".into()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text[start..]).map_err(|e| PeerError::Output(e.to_string()))?;
    let job = &v["jobs"][0];
    let read = &job["read"];
    let bw_bytes = read["bw_bytes"]
        .as_u64()
        .ok_or_else(|| PeerError::Output("jobs[0].read.bw_bytes missing".into()))?;
    Ok(FioRun {
        bw_bytes,
        iops: read["iops"].as_f64().unwrap_or(0.0),
        io_bytes: read["io_bytes"].as_u64().unwrap_or(0),
        runtime: read["runtime"].as_u64().unwrap_or(0),
        clat_ns: read["clat_ns"].clone(),
        disk_util: v["disk_util"].clone(),
        error: job["error"].as_i64().unwrap_or(0),
    })
}

/// Runs fio once with `plan`.
pub fn run_fio(fio: &Fio, plan: &FioJobPlan) -> Result<FioRun, PeerError> {
    let args = plan.args();
    let out = Command::new(&fio.program)
        .args(&args)
        .output()
        .map_err(|e| PeerError::Missing(format!("cannot run {}: {e}", fio.program.display())))?;
    let command = command_line(fio, plan);
    if !out.status.success() {
        return Err(PeerError::Failed {
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            command,
        });
    }
    let run = parse_fio_json(&String::from_utf8_lossy(&out.stdout))?;
    if run.error != 0 {
        return Err(PeerError::Failed {
            status: format!("job error {}", run.error),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            command,
        });
    }
    Ok(run)
}

/// The command line fio ran, quoted for a shell.
pub fn command_line(fio: &Fio, plan: &FioJobPlan) -> String {
    std::iter::once(fio.program.display().to_string())
        .chain(plan.args())
        .map(|a| {
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_=./:,+".contains(c))
            {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `peer` section of `bench --json`: fio's runs beside supercell's, and their ratio.
#[derive(Clone, Debug, Serialize)]
pub struct PeerReport {
    /// `fio`.
    pub tool: String,
    /// fio's version.
    pub version: String,
    /// The exact command line fio ran (both times).
    pub command: String,
    /// The same job as a job file.
    pub job_file: String,
    /// How the job was matched to the run.
    pub notes: Vec<String>,
    /// fio before supercell's run.
    pub before: FioRun,
    /// fio after it.
    pub after: FioRun,
    /// supercell's bytes per second (the median run, over its wall time).
    pub supercell_bw_bytes: f64,
    /// supercell / the mean of fio's two runs.
    pub ratio: f64,
    /// How far apart fio's two runs are: |before − after| / their mean.
    pub fio_spread: f64,
}

/// Runs fio once with `plan`, dropping the page cache first when the run is `cold` (as
/// supercell's run does).
pub fn run_fio_as(fio: &Fio, plan: &FioJobPlan, cold: bool) -> Result<FioRun, PeerError> {
    if cold {
        // Where it cannot be dropped (not root), supercell's run says so in its notes.
        let _ = super::drop_page_cache();
    }
    run_fio(fio, plan)
}

/// Where fio's job and supercell's run differ in a way that matters to the comparison.
fn mismatches(plan: &FioJobPlan, r: &BenchResult, cfg: &BenchConfig) -> Vec<String> {
    let mut notes = Vec::new();
    let opt = |k: &str| {
        plan.options
            .iter()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let ran = super::fio_ioengine(&r.mode);
    if opt("ioengine") != ran {
        notes.push(format!(
            "fio ran ioengine={} but supercell's engine ran {} ({}): the read mechanisms differ",
            opt("ioengine"),
            ran,
            r.mode
        ));
    }
    let sc_direct = r.mode.contains("O_DIRECT") && !r.mode.contains("partly O_DIRECT");
    if plan.direct() != sc_direct {
        notes.push(format!(
            "fio direct={} but supercell's reads were {}",
            u8::from(plan.direct()),
            if sc_direct {
                "O_DIRECT"
            } else {
                "(partly) through the page cache"
            }
        ));
    }
    if cfg.duration.is_none() || cfg.frames.is_some() {
        notes.push(format!(
            "supercell ran by frames ({:.2} s), fio by time ({})",
            r.total_time_s,
            opt("runtime")
        ));
    }
    if r.engine == "gds" || r.engine == "staged" {
        notes.push(format!(
            "supercell's {} engine reads into GPU memory; fio reads into host memory",
            r.engine
        ));
    }
    notes
}

impl PeerReport {
    /// Puts supercell's run (`r`, made with `cfg`) beside fio's two.
    pub fn new(
        fio: &Fio,
        plan: &FioJobPlan,
        before: FioRun,
        after: FioRun,
        r: &BenchResult,
        cfg: &BenchConfig,
    ) -> PeerReport {
        let supercell_bw_bytes = if r.total_time_s > 0.0 {
            r.summary.bytes as f64 / r.total_time_s
        } else {
            0.0
        };
        let notes = mismatches(plan, r, cfg);
        let mean = (before.bw_bytes as f64 + after.bw_bytes as f64) / 2.0;
        let ratio = if mean > 0.0 {
            supercell_bw_bytes / mean
        } else {
            0.0
        };
        let fio_spread = if mean > 0.0 {
            (before.bw_bytes as f64 - after.bw_bytes as f64).abs() / mean
        } else {
            0.0
        };
        let mut all = plan.notes.clone();
        all.extend(notes);
        PeerReport {
            tool: "fio".into(),
            version: fio.version.clone(),
            command: command_line(fio, plan),
            job_file: plan.job_file(),
            notes: all,
            before,
            after,
            supercell_bw_bytes,
            ratio,
            fio_spread,
        }
    }

    /// The lines for people: fio before, supercell, fio after, the ratio.
    pub fn text(&self) -> String {
        let line = |what: &str, r: &FioRun| {
            format!(
                "{what}: {:.3} GB/s, {:.0} IOPS, clat mean {:.1} µs, p99 {:.1} µs ({:.1} s)",
                r.bw_bytes as f64 / 1e9,
                r.iops,
                r.clat_ns["mean"].as_f64().unwrap_or(0.0) / 1e3,
                r.clat_percentile("99.000000").unwrap_or(0) as f64 / 1e3,
                r.runtime as f64 / 1e3
            )
        };
        let mut s = format!("peer: {} ({})\n", self.version, self.command);
        s.push_str(&line("fio before", &self.before));
        s.push('\n');
        s.push_str(&format!(
            "supercell:  {:.3} GB/s\n",
            self.supercell_bw_bytes / 1e9
        ));
        s.push_str(&line("fio after ", &self.after));
        s.push('\n');
        s.push_str(&format!(
            "ratio supercell/fio: {:.3} (fio's two runs {:.1} % apart)\n",
            self.ratio,
            self.fio_spread * 100.0
        ));
        for n in &self.notes {
            s.push_str(&format!("peer note: {n}\n"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_names_fio_or_a_path() {
        assert!(parse_peer("fio").unwrap().is_none());
        assert_eq!(
            parse_peer("fio=/opt/fio").unwrap(),
            Some(PathBuf::from("/opt/fio"))
        );
        for bad in ["gdsio", "fio=", "elbencho=/x"] {
            assert!(parse_peer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn extra_options_override_or_add_but_never_change_the_files() {
        let mut o = vec![
            ("filename".to_string(), Some("a".to_string())),
            ("bs".to_string(), Some("4096".to_string())),
        ];
        apply_extra(
            &mut o,
            &[
                "bs=8192".into(),
                "iomem=mmaphuge:/h/f".into(),
                "hipri".into(),
            ],
        )
        .unwrap();
        assert_eq!(o[1].1.as_deref(), Some("8192"));
        assert!(o.contains(&("iomem".into(), Some("mmaphuge:/h/f".into()))));
        assert!(o.contains(&("hipri".into(), None)));
        for bad in [
            "filename=/etc/passwd",
            "rw=write",
            "readonly=0",
            "=x",
            "a b=1",
        ] {
            assert!(apply_extra(&mut o, &[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_missing_fio_is_refused_by_name() {
        let e = find_fio(None, Some(std::ffi::OsStr::new("/nonexistent-dir"))).unwrap_err();
        assert!(e.to_string().contains("not on PATH"), "{e}");
        let e = find_fio(Some(Path::new("/nonexistent/fio")), None).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/fio"), "{e}");
    }

    #[test]
    fn fio_json_is_read_past_warnings() {
        let text = r#"fio: note: something
{"fio version":"fio-3.33","jobs":[{"error":0,"read":{"bw_bytes":1000,"iops":2.5,"io_bytes":5000,"runtime":5000,"clat_ns":{"mean":1500.0,"percentile":{"99.000000":3000}}}}],"disk_util":[]}"#;
        let r = parse_fio_json(text).unwrap();
        assert_eq!((r.bw_bytes, r.io_bytes, r.runtime), (1000, 5000, 5000));
        assert_eq!(r.clat_percentile("99.000000"), Some(3000));
        assert!(parse_fio_json("{\"jobs\":[]}").is_err());
    }
}
