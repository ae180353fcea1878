//! The one rule for log lines that could flood: the first of a kind at once, then at most one
//! line per period, carrying how many were not logged since. Pure: the caller reads the clock
//! and passes `now`. Used for the front door's refusals and write-timeout closes
//! (`proxy::refusal_log`), failing accepts (`proxy::listener`), a child's bad channel lines
//! (`supervisor::child`) and the log queue's dropped lines (`logs::log_queue`).

use std::time::{Duration, Instant};

/// One kind of line's throttle. Fed either one event at a time ([`LogThrottle::event`]) or a
/// counter's running total read now and then ([`LogThrottle::total`]).
#[derive(Debug, Clone)]
pub(crate) struct LogThrottle {
    every: Duration,
    /// When the last line was logged.
    last: Option<Instant>,
    /// The running total seen last (for `total`).
    seen: u64,
    /// Counted, not logged yet.
    unlogged: u64,
}

impl LogThrottle {
    pub(crate) const fn new(every: Duration) -> LogThrottle {
        LogThrottle {
            every,
            last: None,
            seen: 0,
            unlogged: 0,
        }
    }

    /// One event at `now`: `Some(n)` to log it, `n` being how many before it were not logged;
    /// `None` to count it silently.
    pub(crate) fn event(&mut self, now: Instant) -> Option<u64> {
        self.add(1, now, false).map(|n| n - 1)
    }

    /// A counter's running `total` at `now`: `Some(n)` when a line is due for the `n` counted
    /// since the last line.
    pub(crate) fn total(&mut self, total: u64, now: Instant) -> Option<u64> {
        let new = self.grew(total);
        self.add(new, now, false)
    }

    /// As [`LogThrottle::total`], but the line is due now whatever the period (what was counted
    /// is over, say: the log queue has caught up).
    pub(crate) fn total_now(&mut self, total: u64, now: Instant) -> Option<u64> {
        let new = self.grew(total);
        self.add(new, now, true)
    }

    fn grew(&mut self, total: u64) -> u64 {
        let new = total.saturating_sub(self.seen);
        self.seen = self.seen.max(total);
        new
    }

    fn add(&mut self, n: u64, now: Instant, now_anyway: bool) -> Option<u64> {
        self.unlogged += n;
        let due = now_anyway
            || self
                .last
                .is_none_or(|t| now.saturating_duration_since(t) >= self.every);
        if self.unlogged > 0 && due {
            self.last = Some(now);
            Some(std::mem::take(&mut self.unlogged))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn events_the_first_at_once_then_one_a_period_with_the_count_not_logged() {
        let t0 = Instant::now();
        let mut l = LogThrottle::new(10 * SEC);
        assert_eq!(l.event(t0), Some(0));
        let mut logged = 0;
        for i in 1..10_000u64 {
            if l.event(t0 + Duration::from_micros(i * 100)).is_some() {
                logged += 1;
            }
        }
        assert_eq!(logged, 0, "within the period nothing more is logged");
        assert_eq!(l.event(t0 + 10 * SEC), Some(9_999));
        assert_eq!(l.event(t0 + 11 * SEC), None);
        assert_eq!(l.event(t0 + 21 * SEC), Some(1));
    }

    #[test]
    fn a_total_the_first_at_once_then_one_a_period_with_the_growth() {
        // spec: QUEUE-17, STREAM-7
        let t0 = Instant::now();
        let mut t = LogThrottle::new(60 * SEC);
        assert_eq!(t.total(0, t0), None, "nothing happened");
        assert_eq!(t.total(3, t0), Some(3));
        assert_eq!(t.total(10, t0 + SEC), None);
        assert_eq!(t.total(12, t0 + 59 * SEC), None);
        assert_eq!(t.total(12, t0 + 60 * SEC), Some(9));
        assert_eq!(t.total(12, t0 + 200 * SEC), None, "no news");
        assert_eq!(t.total(13, t0 + 201 * SEC), Some(1));
        assert_eq!(t.total(5, t0 + 400 * SEC), None, "a total never goes back");
    }

    #[test]
    fn a_total_now_is_due_whatever_the_period_but_only_with_news() {
        let t0 = Instant::now();
        let mut t = LogThrottle::new(10 * SEC);
        assert_eq!(t.total(5, t0), Some(5));
        assert_eq!(t.total(7, t0 + SEC), None);
        assert_eq!(t.total_now(8, t0 + 2 * SEC), Some(3));
        assert_eq!(t.total_now(8, t0 + 3 * SEC), None);
        assert_eq!(t.total(9, t0 + 4 * SEC), None, "the period starts again");
        assert_eq!(t.total(9, t0 + 12 * SEC), Some(1));
    }
}
