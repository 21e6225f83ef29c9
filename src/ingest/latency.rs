//! Read latencies as a log-linear histogram, recorded by every I/O thread without locks,
//! for fio-style percentiles (`lat_ns` of `bench --json`).
//!
//! Each power of two is split into 16 buckets (as fio's own `io_u_plat` groups are split
//! into 64), so a percentile is exact to within 1/16 of its value; values under 16 ns have
//! a bucket each. Min and max are kept exactly.

use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two, as a shift.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets: 16 exact ones, then 16 per power of two from 2^4 to 2^63.
const BUCKETS: usize = ((64 - SUB_BITS) as usize + 1) * SUB as usize;

/// A concurrent latency histogram in nanoseconds.
#[derive(Debug)]
pub struct LatencyHistogram {
    counts: [AtomicU64; BUCKETS],
    min: AtomicU64,
    max: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: [const { AtomicU64::new(0) }; BUCKETS],
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
        }
    }
}

fn bucket_of(ns: u64) -> usize {
    if ns < SUB {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros(); // >= SUB_BITS
    let sub = (ns >> (exp - SUB_BITS)) & (SUB - 1);
    ((exp - SUB_BITS + 1) as usize) * SUB as usize + sub as usize
}

/// The smallest value of a bucket and the smallest of the next one.
fn bucket_bounds(i: usize) -> (u64, u64) {
    if i < SUB as usize {
        return (i as u64, i as u64 + 1);
    }
    let exp = (i / SUB as usize) as u32 + SUB_BITS - 1;
    let sub = (i % SUB as usize) as u64;
    let width = 1u64 << (exp - SUB_BITS);
    let lo = (SUB + sub) << (exp - SUB_BITS);
    (lo, lo.saturating_add(width))
}

impl LatencyHistogram {
    /// Records one latency.
    pub fn record(&self, ns: u64) {
        self.counts[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.min.fetch_min(ns, Ordering::Relaxed);
        self.max.fetch_max(ns, Ordering::Relaxed);
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Smallest and largest latency, `None` before the first.
    pub fn min_max(&self) -> Option<(u64, u64)> {
        (self.count() > 0).then(|| {
            (
                self.min.load(Ordering::Relaxed),
                self.max.load(Ordering::Relaxed),
            )
        })
    }

    /// The buckets that hold latencies, rising: each bucket's representative value (its
    /// middle, nanoseconds; distinct per bucket) and how many latencies fell in it. fio's
    /// `json+` output lists its own buckets the same way (`bins`).
    pub fn bins(&self) -> Vec<(u64, u64)> {
        self.counts
            .iter()
            .enumerate()
            .map(|(i, c)| (i, c.load(Ordering::Relaxed)))
            .filter(|&(_, n)| n > 0)
            .map(|(i, n)| {
                let (lo, hi) = bucket_bounds(i);
                (lo + (hi - lo) / 2, n)
            })
            .collect()
    }

    /// The latency below which `pct` percent of the reads completed (nearest rank, the
    /// bucket's middle, kept within the exact min and max); 0 before the first.
    pub fn percentile(&self, pct: f64) -> u64 {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let Some((min, max)) = self.min_max() else {
            return 0;
        };
        let rank = ((pct.clamp(0.0, 100.0) / 100.0 * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_bounds(i);
                return (lo + (hi - lo) / 2).clamp(min, max);
            }
        }
        max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..5000u64).chain([1 << 40, u64::MAX - 1, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b < BUCKETS && b >= last, "{v}");
            let (lo, hi) = bucket_bounds(b);
            assert!(lo <= v && (v < hi || hi == u64::MAX), "{v}: {lo}..{hi}");
            last = b;
        }
    }

    #[test]
    fn percentiles_are_close_and_ordered() {
        let h = LatencyHistogram::default();
        assert_eq!(h.percentile(50.0), 0);
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.min_max(), Some((1000, 1_000_000)));
        let p50 = h.percentile(50.0) as f64;
        let p99 = h.percentile(99.0) as f64;
        assert!((p50 / 500_000.0 - 1.0).abs() < 1.0 / 16.0, "{p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 1.0 / 16.0, "{p99}");
        assert!(h.percentile(100.0) <= 1_000_000 && h.percentile(0.0) >= 1000);
        let bins = h.bins();
        assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), 1000);
        assert!(bins.windows(2).all(|w| w[0].0 < w[1].0), "{bins:?}");
    }
}
