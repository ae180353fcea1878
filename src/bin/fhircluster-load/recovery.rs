//! When the probe came back: the first time after the surge after which every probe was fast.
//!
//! The spec's figure for `queueSeconds` is "under 10 ms after 2 s": after the heavy load stops,
//! the line it left has to drain before a cheap request is quick again. A probe counts as fast
//! when it was answered 2xx in under the threshold; a timeout, an error, a refusal or a probe the
//! client could not send counts as slow.

use std::time::Duration;

/// One probe as the recovery figure sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbePoint {
    /// When it was due, from the start of the run.
    pub offset: Duration,
    /// Answered 2xx in under the threshold.
    pub fast: bool,
}

/// How long after `surge_end` the probe was back under the threshold for good: the offset of
/// the first fast probe after the last slow one due at or after `surge_end`, less `surge_end`.
/// `Some(0)` when every probe from `surge_end` on was fast; `None` when no probe was due after
/// the surge, or the last one was still slow (not back within the run).
pub fn back_under(points: &[ProbePoint], surge_end: Duration) -> Option<Duration> {
    let after = || points.iter().filter(|p| p.offset >= surge_end);
    after().next()?;
    let last_slow = after().filter(|p| !p.fast).map(|p| p.offset).max();
    let Some(last_slow) = last_slow else {
        return Some(Duration::ZERO);
    };
    after()
        .filter(|p| p.fast && p.offset > last_slow)
        .map(|p| p.offset)
        .min()
        .map(|first_fast| first_fast - surge_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(points: &[(u64, bool)]) -> Vec<ProbePoint> {
        points
            .iter()
            .map(|&(ms, fast)| ProbePoint {
                offset: Duration::from_millis(ms),
                fast,
            })
            .collect()
    }

    #[test]
    fn back_after_the_last_slow_probe_following_the_surge() {
        // Surge ends at 1000 ms; slow until 1900, one fast blip at 1400 that does not count.
        let s = series(&[
            (800, false),
            (900, false),
            (1000, false),
            (1400, true),
            (1500, false),
            (1900, false),
            (2000, true),
            (2100, true),
            (2200, true),
        ]);
        assert_eq!(
            back_under(&s, Duration::from_millis(1000)),
            Some(Duration::from_millis(1000))
        );
    }

    #[test]
    fn fast_right_after_the_surge_is_zero_whatever_came_before() {
        let s = series(&[(500, false), (999, false), (1000, true), (1100, true)]);
        assert_eq!(
            back_under(&s, Duration::from_millis(1000)),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn still_slow_at_the_end_or_no_probe_after_is_not_back() {
        let slow_last = series(&[(1000, true), (1100, false)]);
        assert_eq!(back_under(&slow_last, Duration::from_millis(1000)), None);
        let none_after = series(&[(100, true), (900, true)]);
        assert_eq!(back_under(&none_after, Duration::from_millis(1000)), None);
    }

    #[test]
    fn order_of_the_points_does_not_matter() {
        let s = series(&[(2200, true), (1500, false), (2000, true), (1000, false)]);
        assert_eq!(
            back_under(&s, Duration::from_millis(1000)),
            Some(Duration::from_millis(1000))
        );
    }
}
