//! When to send systemd `EXTEND_TIMEOUT_USEC=`: while the master loads (its process running) and
//! while a reload's rolling restart runs, so a terminology load of many minutes is not killed by
//! `TimeoutStartSec`. Pure: the shell asks every tick with `now` and whether an extension is
//! wanted at that moment.
//!
//! Each message gives systemd `EXTEND_BY` more from its arrival; one goes every `EXTEND_EVERY`,
//! a third of that, so two can be late (a loaded machine) before the extension lapses. systemd
//! only lets an extension run past the unit's own timeout (`TimeoutStartSec`), never shorten it:
//! within that timeout nothing changes; past it, the start is given up on `EXTEND_BY` after the
//! last message, i.e. once the master has not been running for that long (a master in a restart
//! backoff). A master that keeps crashing is given up on by `maxStartFailures` anyway.

use std::time::{Duration, Instant};

/// How much longer each message gives systemd.
pub const EXTEND_BY: Duration = Duration::from_secs(30);
/// How often a message goes while one is wanted.
pub const EXTEND_EVERY: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct Extender {
    by: Duration,
    every: Duration,
    /// When the last message went, while wanted; `None` once not wanted.
    last: Option<Instant>,
}

impl Default for Extender {
    fn default() -> Self {
        Extender::new(EXTEND_BY, EXTEND_EVERY)
    }
}

impl Extender {
    pub fn new(by: Duration, every: Duration) -> Extender {
        Extender {
            by,
            every,
            last: None,
        }
    }

    /// Begins anew: the next wanted `poll` sends at once (the state systemd times changed, so
    /// its timeout counts from now).
    pub fn reset(&mut self) {
        self.last = None;
    }

    /// The extension to send now, if one is due: at once when it becomes wanted, then every
    /// `every` while it stays wanted.
    pub fn poll(&mut self, now: Instant, wanted: bool) -> Option<Duration> {
        if !wanted {
            self.last = None;
            return None;
        }
        let due = self
            .last
            .is_none_or(|l| now.saturating_duration_since(l) >= self.every);
        if due {
            self.last = Some(now);
            Some(self.by)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn at_once_then_every_period_while_wanted() {
        let t0 = Instant::now();
        let mut e = Extender::default();
        assert_eq!(e.poll(t0, true), Some(EXTEND_BY));
        assert_eq!(e.poll(t0 + s(1), true), None);
        assert_eq!(e.poll(t0 + s(9), true), None);
        assert_eq!(e.poll(t0 + s(10), true), Some(EXTEND_BY));
        assert_eq!(e.poll(t0 + s(15), true), None);
        assert_eq!(e.poll(t0 + s(21), true), Some(EXTEND_BY));
    }

    #[test]
    fn nothing_while_not_wanted_and_at_once_when_wanted_again() {
        let t0 = Instant::now();
        let mut e = Extender::default();
        assert_eq!(e.poll(t0, false), None);
        assert_eq!(e.poll(t0 + s(1), true), Some(EXTEND_BY));
        // The master exits: nothing, however long.
        for n in 2..100 {
            assert_eq!(e.poll(t0 + s(n), false), None);
        }
        // Started again: at once.
        assert_eq!(e.poll(t0 + s(100), true), Some(EXTEND_BY));
        assert_eq!(e.poll(t0 + s(101), true), None);
    }

    #[test]
    fn a_reset_sends_at_once_however_recent_the_last() {
        let t0 = Instant::now();
        let mut e = Extender::default();
        assert_eq!(e.poll(t0, true), Some(EXTEND_BY));
        e.reset();
        assert_eq!(e.poll(t0 + s(1), true), Some(EXTEND_BY));
        assert_eq!(e.poll(t0 + s(2), true), None);
    }

    #[test]
    fn the_period_leaves_room_for_two_late_messages() {
        assert!(EXTEND_EVERY * 3 <= EXTEND_BY);
    }
}
