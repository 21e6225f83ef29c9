//! What this process uses and what the machine has left, as the kernel reports it (resident
//! set, open file descriptors, threads, CPU time, available memory), and the one percentile
//! definition behind every latency figure the program prints or writes.
//!
//! Every reading is best effort: a probe that cannot read its `/proc` or `/sys` file gives 0
//! or `None`, never an error, because a missing figure must not stop a run.

/// Resident set size of this process, bytes.
pub fn rss_bytes() -> u64 {
    let page = crate::ingest::page_size() as u64;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |p| p * page)
}

/// Open file descriptors of this process.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// Threads of this process.
pub fn thread_count() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// User and system CPU seconds of this process so far (getrusage).
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A `kB` field of a `/proc` file in bytes.
fn proc_kib_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The kernel's estimate of memory available for new allocations (`MemAvailable` in
/// `/proc/meminfo`), bytes.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    proc_kib_field(&text, "MemAvailable:")
}

/// `memory.max - memory.current` of this process's cgroup (v2), where it has a limit.
pub fn cgroup_memory_headroom() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // cgroup v2: the single line "0::/path".
    let rel = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?; // "max" (no limit) fails here
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

/// Virtual size of this process (`VmSize` in `/proc/self/status`), bytes.
pub fn virtual_size() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    proc_kib_field(&status, "VmSize:")
}

/// The `p`-th quantile (0..1) of an ascending `sorted` sample.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_counts_are_read() {
        // Other tests of this binary open and close files and threads concurrently: compare
        // with margins far larger than anything they hold.
        let fds = open_fds();
        assert!(fds >= 3, "{fds}");
        let files: Vec<std::fs::File> = (0..64)
            .map(|_| std::fs::File::open("/proc/self/status").unwrap())
            .collect();
        let with = open_fds();
        assert!(with >= fds + 32, "{fds} → {with} with 64 more files open");
        drop(files);
        assert!(open_fds() + 32 <= with);
        let gate = std::sync::Arc::new(std::sync::Barrier::new(33));
        let waiting: Vec<_> = (0..32)
            .map(|_| {
                let g = gate.clone();
                std::thread::spawn(move || {
                    g.wait();
                })
            })
            .collect();
        let many = thread_count();
        gate.wait();
        for h in waiting {
            h.join().unwrap();
        }
        assert!(many >= 33, "{many} threads with 32 waiting");
    }
}
