//! Latency percentiles: exact, by nearest rank over the sorted samples.
//!
//! A run holds at most the tool's request cap (1,000,000) samples, so keeping every one (8 bytes
//! each) costs a few MB and gives exact figures, which a bucketed histogram would only approximate.

use std::time::Duration;

use serde::Serialize;

/// The nearest-rank `p`th percentile (0 < p ≤ 100) of `sorted` (ascending): the smallest sample
/// with at least `p`% of the samples at or below it. `None` when there are no samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() || !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let n = sorted.len();
    // The rank is ceil(p/100 * n); the small epsilon keeps 50% of 100 at rank 50, not 51.
    let rank = ((p / 100.0) * n as f64 - 1e-9).ceil().max(1.0) as usize;
    sorted.get(rank.min(n) - 1).copied()
}

/// The figures a report gives for a set of latencies, in milliseconds (`None` with no samples).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: usize,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

impl LatencySummary {
    pub fn of(samples: impl IntoIterator<Item = Duration>) -> Self {
        let mut sorted: Vec<Duration> = samples.into_iter().collect();
        sorted.sort_unstable();
        let ms = |d: Option<Duration>| d.map(millis);
        LatencySummary {
            count: sorted.len(),
            p50_ms: ms(percentile(&sorted, 50.0)),
            p90_ms: ms(percentile(&sorted, 90.0)),
            p99_ms: ms(percentile(&sorted, 99.0)),
            max_ms: ms(sorted.last().copied()),
        }
    }
}

/// Milliseconds with microsecond precision, as the reports print them.
pub fn millis(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn percentiles_of_one_to_a_hundred_are_their_ranks() {
        let data: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&data, 50.0), Some(ms(50)));
        assert_eq!(percentile(&data, 90.0), Some(ms(90)));
        assert_eq!(percentile(&data, 99.0), Some(ms(99)));
        assert_eq!(percentile(&data, 100.0), Some(ms(100)));
        assert_eq!(percentile(&data, 0.5), Some(ms(1)));
    }

    #[test]
    fn percentiles_of_small_sets_take_the_nearest_rank_above() {
        let data = [ms(10), ms(20), ms(30)];
        assert_eq!(percentile(&data, 50.0), Some(ms(20)));
        assert_eq!(percentile(&data, 90.0), Some(ms(30)));
        assert_eq!(percentile(&[ms(7)], 99.0), Some(ms(7)));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&data, 0.0), None);
        assert_eq!(percentile(&data, f64::NAN), None);
    }

    #[test]
    fn summary_sorts_its_input_and_reports_milliseconds() {
        let s = LatencySummary::of(
            [ms(5), ms(1), ms(3), ms(2), ms(4)]
                .into_iter()
                .chain((0..5).map(|_| Duration::from_micros(1500))),
        );
        assert_eq!(s.count, 10);
        assert_eq!(s.p50_ms, Some(1.5));
        assert_eq!(s.p90_ms, Some(4.0));
        assert_eq!(s.p99_ms, Some(5.0));
        assert_eq!(s.max_ms, Some(5.0));
        let empty = LatencySummary::of(std::iter::empty());
        assert_eq!((empty.count, empty.p50_ms, empty.max_ms), (0, None, None));
    }
}
