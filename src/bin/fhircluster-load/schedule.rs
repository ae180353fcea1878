//! The open-loop arrival schedule, computed before a run starts.
//!
//! Arrivals are evenly spaced at the chosen rate and each is sent at its own time whether or not
//! earlier ones were answered, so a slow server cannot slow the load down and hide its own
//! slowness (coordinated omission). Which request each arrival carries follows the mix's weights
//! by smooth weighted round-robin, so any stretch of the run has the mix, not just the whole.

use std::time::Duration;

/// How many arrivals at `rate` per second fall in `[0, span)`: one at every `k / rate`.
pub fn arrival_count(rate: f64, span: Duration) -> u64 {
    if !(rate.is_finite() && rate > 0.0) {
        return 0;
    }
    let secs = span.as_secs_f64();
    let mut n = (rate * secs).ceil().max(0.0) as u64;
    // Rounding can put the last arrival exactly on the end of the span, which is outside it.
    while n > 0 && (n - 1) as f64 / rate >= secs {
        n -= 1;
    }
    n
}

/// The offsets from the start of the run at which arrivals at `rate` per second are due in
/// `[0, span)`.
pub fn arrivals(rate: f64, span: Duration) -> Vec<Duration> {
    (0..arrival_count(rate, span))
        .map(|k| Duration::from_secs_f64(k as f64 / rate))
        .collect()
}

/// `n` picks among `weights.len()` kinds, each kind `i` taking `weights[i]` of every
/// `weights.iter().sum()` consecutive picks, spread out (nginx's smooth weighted round-robin).
/// With no positive weight there is nothing to pick: empty.
pub fn weighted_sequence(weights: &[u32], n: usize) -> Vec<usize> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut current = vec![0i64; weights.len()];
    let mut picks = Vec::with_capacity(n);
    for _ in 0..n {
        let mut best = 0;
        for (i, &w) in weights.iter().enumerate() {
            current[i] += i64::from(w);
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        picks.push(best);
    }
    picks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_arrivals_at_five_per_second_land_every_200_ms() {
        let a = arrivals(5.0, Duration::from_secs(2));
        assert_eq!(a.len(), 10);
        for (k, at) in a.iter().enumerate() {
            let expected = Duration::from_millis(200 * k as u64);
            let diff = at.abs_diff(expected);
            assert!(diff < Duration::from_micros(1), "arrival {k} at {at:?}");
        }
    }

    #[test]
    fn a_fractional_count_keeps_the_arrival_inside_the_span() {
        // 2.5/s for 3 s: at 0, 0.4, ..., 2.8: eight arrivals.
        assert_eq!(arrival_count(2.5, Duration::from_secs(3)), 8);
        // 1200/s for 30 s: exactly 36,000, none at 30 s.
        assert_eq!(arrival_count(1200.0, Duration::from_secs(30)), 36_000);
        assert_eq!(arrival_count(0.5, Duration::from_secs(1)), 1);
        assert_eq!(arrival_count(0.0, Duration::from_secs(5)), 0);
        assert_eq!(arrival_count(f64::INFINITY, Duration::from_secs(5)), 0);
        assert_eq!(arrival_count(10.0, Duration::ZERO), 0);
    }

    #[test]
    fn arrivals_rise_strictly_and_stay_in_the_span() {
        let span = Duration::from_millis(1_700);
        let a = arrivals(333.3, span);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(a.last().is_some_and(|&l| l < span));
        assert_eq!(a.first(), Some(&Duration::ZERO));
    }

    #[test]
    fn the_mix_holds_in_every_cycle_and_is_spread_out() {
        let picks = weighted_sequence(&[1, 2, 1], 400);
        for cycle in picks.chunks(4) {
            let count = |k| cycle.iter().filter(|&&p| p == k).count();
            assert_eq!((count(0), count(1), count(2)), (1, 2, 1), "{cycle:?}");
        }
        // Spread: within a cycle the heavier kind's two picks are not side by side.
        for cycle in picks.chunks(4) {
            assert!(
                cycle.windows(2).all(|w| !(w[0] == 1 && w[1] == 1)),
                "{cycle:?}"
            );
        }
    }

    #[test]
    fn a_zero_weight_is_never_picked_and_no_weights_pick_nothing() {
        let picks = weighted_sequence(&[0, 3, 1], 40);
        assert!(!picks.contains(&0));
        assert_eq!(picks.iter().filter(|&&p| p == 2).count(), 10);
        assert!(weighted_sequence(&[0, 0], 5).is_empty());
    }
}
