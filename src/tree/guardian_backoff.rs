//! When the launcher starts its next guardian (`guardian_watch`): at once, as a rule, because
//! while there is none a launcher killed with `SIGKILL` leaves every server running; but a
//! guardian that keeps ending as soon as it starts, or a start that keeps failing (no memory,
//! no pids left, the binary gone), must not become a busy loop of forks and log lines. So: a
//! guardian that ran for [`STEADY`] or more is replaced at once; each further end within
//! [`STEADY`] of its start, and each failed start, doubles the wait from [`FIRST_WAIT`] up to
//! [`MOST_WAIT`], and the launcher keeps trying at that rate for as long as it runs, never
//! giving up. Pure: the shell hands it how long the guardian lived.

use std::time::Duration;

/// A guardian that lived this long ended for a reason of its own: replace it at once.
pub(crate) const STEADY: Duration = Duration::from_secs(1);
/// The first wait once guardians end quickly or cannot be started.
pub(crate) const FIRST_WAIT: Duration = Duration::from_millis(100);
/// The longest wait: at worst one start (and one line) every this long.
pub(crate) const MOST_WAIT: Duration = Duration::from_secs(10);

/// The run of quick ends and failed starts so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// Quick ends and failed starts since the last guardian that stayed [`STEADY`].
    misses: u32,
}

impl Backoff {
    /// A guardian ended after running for `lived`: how long to wait before starting the next.
    pub(crate) fn ended(&mut self, lived: Duration) -> Duration {
        if lived >= STEADY {
            self.misses = 0;
            return Duration::ZERO;
        }
        self.miss()
    }

    /// A start failed: how long to wait before the next try.
    pub(crate) fn failed(&mut self) -> Duration {
        self.miss()
    }

    /// The first quick end or failure is retried at once (one may be bad luck); each after it
    /// waits twice as long as the one before, up to [`MOST_WAIT`].
    fn miss(&mut self) -> Duration {
        self.misses = self.misses.saturating_add(1);
        match self.misses {
            1 => Duration::ZERO,
            n => FIRST_WAIT
                .saturating_mul(1u32 << (n - 2).min(16))
                .min(MOST_WAIT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guardian_that_ran_steadily_is_replaced_at_once_every_time() {
        let mut b = Backoff::default();
        for _ in 0..100 {
            assert_eq!(b.ended(STEADY), Duration::ZERO);
        }
    }

    #[test]
    fn quick_ends_and_failed_starts_back_off_to_a_bounded_rate_and_never_stop() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..8)
            .map(|i| {
                if i % 2 == 0 {
                    b.ended(Duration::from_millis(5))
                } else {
                    b.failed()
                }
                .as_millis() as u64
            })
            .collect();
        assert_eq!(waits, [0, 100, 200, 400, 800, 1600, 3200, 6400]);
        // However long it goes on: the same bounded wait, never a stop.
        for _ in 0..10_000 {
            assert_eq!(b.failed(), MOST_WAIT);
        }
        // One guardian that stays steady ends the run.
        assert_eq!(b.ended(Duration::from_secs(3)), Duration::ZERO);
        assert_eq!(b.ended(Duration::from_millis(1)), Duration::ZERO);
        assert_eq!(b.failed(), FIRST_WAIT);
    }
}
