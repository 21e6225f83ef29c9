//! What this process uses and what the machine has left, as the kernel reports it (resident
//! set, open file descriptors, threads, CPU time, available memory), and the one percentile
//! definition behind every latency figure the program prints or writes.
//!
//! Every reading is best effort: a probe that cannot read its `/proc` or `/sys` file gives 0
//! or `None`, never an error, because a missing figure must not stop a run.

/// Resident set size of this process (`VmRSS` in `/proc/self/status`: the resident pages
/// `/proc/self/statm` counts, in bytes), or 0 where it cannot be read.
pub fn rss_bytes() -> u64 {
    proc_self_status_kib("VmRSS:").unwrap_or(0)
}

/// Open file descriptors of this process.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// CPUs this process may run on (`available_parallelism`: its affinity mask and cgroup
/// quota), 1 where the kernel does not say.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Most compute threads worth starting: one per CPU this process may use. More only
/// contend for the same CPUs (and thousands exhaust the process's thread limit).
pub fn max_compute_threads() -> usize {
    usable_cpus()
}

/// Most I/O threads worth starting: an I/O thread mostly waits on its device, so several per
/// CPU keep more reads in flight, but past 16 per CPU (at least 32) they only add
/// scheduling and memory (a stack and a queue each).
pub fn max_io_threads() -> usize {
    (16 * usable_cpus()).max(32)
}

/// `requested` threads, or `max` where more were asked for: the count to use, and a note
/// naming `flag` where it was capped.
pub fn cap_threads(flag: &str, requested: usize, max: usize) -> (usize, Option<String>) {
    if requested <= max {
        return (requested, None);
    }
    let note = format!(
        "{flag} {requested}: using {max}, the most this machine ({} CPUs usable) can run \
         usefully",
        usable_cpus()
    );
    (max, Some(note))
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
    let (user, system) = cpu_times();
    user + system
}

/// User and system CPU seconds of this process so far, apart (getrusage); zeros where
/// the kernel refuses.
pub fn cpu_times() -> (f64, f64) {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
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
    proc_self_status_kib("VmSize:")
}

/// A `kB` field of `/proc/self/status` in bytes.
fn proc_self_status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    proc_kib_field(&status, key)
}

/// The `p` quantile (`p` in 0..1) of an ascending `sorted` sample: the element at rank
/// `round((n − 1) · p)` (nearest rank over the sample's span; ties round away from zero, so
/// the median of an even sample is its upper middle element); zero (`T::default()`) for an
/// empty sample.
///
/// Every reported percentile uses this: bench latencies, the player's and a headless run's
/// latencies, scrub times, render timings and image differences.
pub fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let last = sorted.len() - 1;
    // `as usize` saturates: a negative p gives rank 0.
    let rank = (last as f64 * p).round() as usize;
    sorted[rank.min(last)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_the_nearest_rank_over_the_span() {
        let sample: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&sample, 0.0), 1.0);
        assert_eq!(percentile(&sample, 0.5), 51.0); // rank round(49.5) = 50
        assert_eq!(percentile(&sample, 0.9), 90.0); // rank round(89.1) = 89
        assert_eq!(percentile(&sample, 0.99), 99.0); // rank round(98.01) = 98
        assert_eq!(percentile(&sample, 1.0), 100.0);
        assert_eq!(percentile(&sample, 1.5), 100.0);
        assert_eq!(percentile(&sample, -0.5), 1.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), 3.0);
        assert_eq!(percentile(&[7.5f32], 0.99), 7.5);
        assert_eq!(percentile::<f64>(&[], 0.5), 0.0);
    }

    #[test]
    fn memory_figures_are_read() {
        let rss = rss_bytes();
        assert!(rss > 1 << 20, "{rss}");
        assert!(virtual_size().is_some_and(|v| v >= rss));
        assert!(mem_available().is_some_and(|m| m > 0));
        assert!(cpu_seconds() > 0.0);
    }

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
