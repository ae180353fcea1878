//! The restart policy: what to do when a process exits. Pure: the times come in as arguments.
//!
//! A process that exits before it is ready, or within a minute of being ready, counts as failing,
//! and each failure in a row doubles the wait before the next start: 1 s, 2 s, 4 s ... up to a
//! minute (RESTART-2..4). One that ran longer is started again after 1 s and its run of failures
//! ends (RESTART-5). The master alone may make the launcher give up: `maxStartFailures` exits in a
//! row without ever having been ready (RESTART-7); once it has been ready it is always started
//! again, as a worker always is (RESTART-9, RESTART-10).

use std::time::{Duration, Instant};

/// How long a process must have been ready for its exit not to count as a failure.
pub const STABLE_AFTER: Duration = Duration::from_secs(60);
/// The first wait, and the wait after a stable run.
pub const FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest wait between starts.
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// What the supervisor does about an exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Start it again after this long. `failing` says whether the exit counted as a failure.
    Restart { after: Duration, failing: bool },
    /// The master could not be started `maxStartFailures` times in a row: log an ERROR, exit 1.
    GiveUp { failures: u32 },
}

/// One process's restart history. Lives as long as the process's place in the cluster.
#[derive(Clone, Debug, Default)]
pub struct RestartPolicy {
    /// Failing exits in a row.
    failures: u32,
    /// Whether this place has ever had a ready process (for the master's give-up rule).
    ever_ready: bool,
}

impl RestartPolicy {
    pub fn new() -> RestartPolicy {
        RestartPolicy::default()
    }

    /// The process said it is ready.
    pub fn ready(&mut self) {
        self.ever_ready = true;
    }

    /// Failing exits in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether this place has ever had a ready process.
    pub fn ever_ready(&self) -> bool {
        self.ever_ready
    }

    /// The policy as it was (an in-place upgrade hands it over).
    pub fn resume(failures: u32, ever_ready: bool) -> RestartPolicy {
        RestartPolicy {
            failures,
            ever_ready,
        }
    }

    /// A process exited on its own (not stopped by the launcher). `ready_at` is when it became
    /// ready, if it did. `give_up_after` is the master's `maxStartFailures` (0 = never), None for
    /// a worker.
    pub fn exited(
        &mut self,
        ready_at: Option<Instant>,
        now: Instant,
        give_up_after: Option<u32>,
    ) -> Verdict {
        let stable = ready_at.is_some_and(|r| now.saturating_duration_since(r) > STABLE_AFTER);
        if stable {
            self.failures = 0;
            return Verdict::Restart {
                after: FIRST_DELAY,
                failing: false,
            };
        }
        self.failures = self.failures.saturating_add(1);
        if let Some(max) = give_up_after {
            if max > 0 && !self.ever_ready && self.failures >= max {
                return Verdict::GiveUp {
                    failures: self.failures,
                };
            }
        }
        Verdict::Restart {
            after: backoff(self.failures),
            failing: true,
        }
    }
}

/// The wait before the start that follows the `n`th failure in a row (n ≥ 1).
pub fn backoff(n: u32) -> Duration {
    let exp = n.saturating_sub(1).min(6);
    FIRST_DELAY.saturating_mul(1 << exp).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn failing_waits_double_up_to_a_minute() {
        // spec: RESTART-2
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff(u32::MAX), MAX_DELAY);
    }

    #[test]
    fn exit_before_ready_counts_as_failing() {
        // spec: RESTART-3
        let t0 = Instant::now();
        let mut p = RestartPolicy::new();
        assert_eq!(
            p.exited(None, t0, None),
            Verdict::Restart {
                after: secs(1),
                failing: true
            }
        );
        assert_eq!(
            p.exited(None, t0, None),
            Verdict::Restart {
                after: secs(2),
                failing: true
            }
        );
    }

    #[test]
    fn exit_within_a_minute_of_ready_counts_as_failing() {
        // spec: RESTART-4
        let t0 = Instant::now();
        let mut p = RestartPolicy::new();
        p.ready();
        p.exited(Some(t0), t0 + secs(59), None);
        assert_eq!(
            p.exited(Some(t0), t0 + secs(60), None),
            Verdict::Restart {
                after: secs(2),
                failing: true
            }
        );
    }

    #[test]
    fn a_stable_run_restarts_after_one_second_and_ends_the_run_of_failures() {
        // spec: RESTART-5
        let t0 = Instant::now();
        let mut p = RestartPolicy::new();
        for _ in 0..4 {
            p.exited(None, t0, None);
        }
        p.ready();
        assert_eq!(
            p.exited(Some(t0), t0 + secs(61), None),
            Verdict::Restart {
                after: secs(1),
                failing: false
            }
        );
        assert_eq!(p.failures(), 0);
        assert_eq!(
            p.exited(None, t0 + secs(62), None),
            Verdict::Restart {
                after: secs(1),
                failing: true
            }
        );
    }

    #[test]
    fn the_master_gives_up_after_max_start_failures_with_the_sixth_start_31s_in() {
        // spec: RESTART-7, RESTART-8
        let t0 = Instant::now();
        let mut p = RestartPolicy::new();
        let mut waited = Duration::ZERO;
        for _ in 0..5 {
            match p.exited(None, t0, Some(6)) {
                Verdict::Restart { after, failing } => {
                    assert!(failing);
                    waited += after;
                }
                v => panic!("gave up too early: {v:?}"),
            }
        }
        assert_eq!(
            waited,
            secs(31),
            "the sixth start comes 31 s after the first failure"
        );
        assert_eq!(p.exited(None, t0, Some(6)), Verdict::GiveUp { failures: 6 });
    }

    #[test]
    fn zero_max_start_failures_never_gives_up() {
        // spec: CONF-18
        let t0 = Instant::now();
        let mut p = RestartPolicy::new();
        for _ in 0..100 {
            assert!(matches!(
                p.exited(None, t0, Some(0)),
                Verdict::Restart { .. }
            ));
        }
    }

    #[test]
    fn a_master_that_has_been_ready_is_always_restarted() {
        // spec: RESTART-9
        let t0 = Instant::now();
        let mut p = RestartPolicy::new();
        p.ready();
        for _ in 0..20 {
            assert!(matches!(
                p.exited(Some(t0), t0, Some(6)),
                Verdict::Restart { failing: true, .. }
            ));
        }
    }

    #[test]
    fn a_worker_is_always_restarted() {
        // spec: RESTART-10
        let t0 = Instant::now();
        let mut p = RestartPolicy::new();
        for _ in 0..20 {
            assert!(matches!(p.exited(None, t0, None), Verdict::Restart { .. }));
        }
    }
}
