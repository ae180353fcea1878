//! A deadline `d` after an instant that never overflows: `now.later(d)` instead of `now + d`.
//!
//! Every duration a setting gives is bounded (a year, `settings::bounds`), so `now + d` cannot
//! overflow today; but `Instant + Duration` panics when it would, and a panic in the front door
//! or the supervisor takes the launcher down, so deadlines from settings (and from anything
//! computed) saturate instead: past `FAR` a wait is as good as never, and is cut to `FAR`.

use std::time::Duration;

/// Thirty years: a deadline this far off is never reached while the launcher runs (tokio's own
/// "far future" is the same).
pub const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// An instant `d` later, saturating at `FAR` ahead.
pub trait Later: Copy {
    fn later(self, d: Duration) -> Self;
}

impl Later for std::time::Instant {
    fn later(self, d: Duration) -> Self {
        self.checked_add(d.min(FAR)).unwrap_or(self)
    }
}

impl Later for tokio::time::Instant {
    fn later(self, d: Duration) -> Self {
        self.checked_add(d.min(FAR)).unwrap_or(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_duration_makes_a_deadline_without_panicking(secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
            let d = Duration::new(secs, nanos);
            let now = std::time::Instant::now();
            let at = now.later(d);
            prop_assert!(at >= now);
            prop_assert_eq!(at - now, d.min(FAR));
            let tnow = tokio::time::Instant::from_std(now);
            prop_assert_eq!(tnow.later(d) - tnow, d.min(FAR));
        }
    }

    #[test]
    fn the_largest_duration_is_cut_to_far_and_a_small_one_is_exact() {
        let now = std::time::Instant::now();
        assert_eq!(now.later(Duration::MAX) - now, FAR);
        assert_eq!(
            now.later(Duration::from_millis(1500)) - now,
            Duration::from_millis(1500)
        );
    }
}
