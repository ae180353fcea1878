//! A histogram of durations that many threads record into without a lock: how long tx requests
//! waited in the launcher before being sent (`/metrics` shows it as
//! `fhircluster_queue_wait_seconds`), and how long requests took by class
//! (`fhircluster_request_duration_seconds`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds.
pub const WAIT_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; WAIT_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn record(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = WAIT_BUCKETS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }

    /// Each bucket's upper bound (seconds) and how many fell at or below it (cumulative, as
    /// Prometheus counts them); the durations beyond the last bound are in `count` only.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        WAIT_BUCKETS
            .iter()
            .zip(&self.buckets)
            .scan(0, |sum, (&b, c)| {
                *sum += c.load(Ordering::Relaxed);
                Some((b, *sum))
            })
    }

    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Their sum, in seconds.
    pub fn sum_secs(&self) -> f64 {
        self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_a_long_wait_is_in_the_count_only() {
        let h = Histogram::default();
        h.record(Duration::from_micros(500));
        h.record(Duration::from_millis(3));
        h.record(Duration::from_secs(100));
        let b: Vec<(f64, u64)> = h.cumulative().collect();
        assert_eq!(b[0], (0.001, 1));
        assert_eq!(b[1], (0.005, 2));
        assert_eq!(b[12], (30.0, 2));
        assert_eq!(b[13], (60.0, 2));
        assert_eq!(h.count(), 3);
        assert!((h.sum_secs() - 100.0035).abs() < 1e-9);
    }
}
