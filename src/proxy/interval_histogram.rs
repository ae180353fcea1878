//! A latency histogram per process, for the median and p99 of the last status interval: many
//! threads record into it without a lock, and the status tick takes what it holds and empties
//! it (`take`), so each interval's figures are its own. Bounded: a fixed array of buckets, four
//! to each doubling of microseconds (a bucket is at most a quarter wider than its start, so a
//! quantile read at a bucket's middle is within about 12% of the true one), up to about 17
//! minutes; anything longer counts in the last bucket. Recording is one `leading_zeros` and one
//! atomic add: no float, no allocation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use crate::status::front::Latency;

/// Doublings of microseconds the buckets cover (2^30 µs ≈ 17.9 minutes).
const OCTAVES: usize = 30;
/// Buckets in all: four per doubling.
pub const BUCKETS: usize = OCTAVES * 4;

/// The bucket of a duration of `micros` microseconds.
pub fn bucket_of(micros: u64) -> usize {
    let u = micros.max(1);
    let log = 63 - u.leading_zeros() as usize;
    let sub = if log >= 2 {
        ((u >> (log - 2)) & 3) as usize
    } else {
        // 1, 2, 3 µs: the first buckets hold them exactly enough.
        (u as usize) & 3
    };
    (log * 4 + sub).min(BUCKETS - 1)
}

/// The middle of bucket `i`, in microseconds: where a quantile falling in it is read.
pub fn bucket_middle_micros(i: usize) -> f64 {
    let (log, sub) = (i / 4, (i % 4) as u64);
    if log < 2 {
        return i.max(1) as f64;
    }
    let lower = (4 + sub) << (log - 2);
    let upper = (5 + sub) << (log - 2);
    (lower + upper) as f64 / 2.0
}

/// The durations of one interval, by bucket.
#[derive(Debug)]
pub struct IntervalHistogram {
    buckets: [AtomicU64; BUCKETS],
}

impl Default for IntervalHistogram {
    fn default() -> Self {
        IntervalHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl IntervalHistogram {
    pub fn record(&self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(micros)].fetch_add(1, Ordering::Relaxed);
    }

    /// What the interval holds, the histogram emptied for the next one. A duration recorded
    /// while it is taken lands in this interval or the next, never in both.
    pub fn take(&self) -> [u64; BUCKETS] {
        std::array::from_fn(|i| self.buckets[i].swap(0, Ordering::Relaxed))
    }
}

/// The `q` quantile (0 < q ≤ 1) of the durations `counts` holds, in milliseconds: the middle of
/// the bucket holding the ⌈q·n⌉-th smallest. None without any.
pub fn quantile_ms(counts: &[u64], q: f64) -> Option<f64> {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(bucket_middle_micros(i) / 1000.0);
        }
    }
    None
}

/// The interval's figures from what `take` gave.
pub fn latency(counts: &[u64]) -> Latency {
    Latency {
        count: counts.iter().sum(),
        median_ms: quantile_ms(counts, 0.5),
        p99_ms: quantile_ms(counts, 0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_duration_reads_back_within_an_eighth_of_itself() {
        for micros in [5u64, 90, 1_000, 2_500, 12_345, 999_999, 60_000_000] {
            let got = bucket_middle_micros(bucket_of(micros));
            let err = (got - micros as f64).abs() / micros as f64;
            assert!(err <= 0.125, "{micros} µs read as {got}");
        }
        assert_eq!(bucket_of(0), bucket_of(1), "nothing below a microsecond");
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1, "beyond the last: in it");
    }

    #[test]
    fn the_median_and_p99_of_an_interval_and_take_empties_it() {
        let h = IntervalHistogram::default();
        for _ in 0..98 {
            h.record(Duration::from_millis(2));
        }
        h.record(Duration::from_millis(100));
        h.record(Duration::from_millis(100));
        let l = latency(&h.take());
        assert_eq!(l.count, 100);
        let near =
            |got: Option<f64>, want: f64| got.is_some_and(|g| (g - want).abs() / want < 0.13);
        assert!(near(l.median_ms, 2.0), "{l:?}");
        // The 99th of 100 is one of the two slow ones.
        assert!(near(l.p99_ms, 100.0), "{l:?}");
        let next = latency(&h.take());
        assert_eq!(next, Latency::default(), "the next interval starts empty");
    }

    #[test]
    fn one_duration_is_its_own_median_and_p99() {
        let h = IntervalHistogram::default();
        h.record(Duration::from_micros(700));
        let l = latency(&h.take());
        assert_eq!(l.count, 1);
        assert_eq!(l.median_ms, l.p99_ms);
        assert_eq!(quantile_ms(&[0; BUCKETS], 0.5), None);
    }
}
