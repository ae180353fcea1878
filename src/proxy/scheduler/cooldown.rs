//! A process's cooldown (COOL-1..6): after a `503`, or after three upstream timeouts in a row,
//! it takes no new requests that could go elsewhere for `cooldownSeconds`. A response in time
//! breaks a run of timeouts. Cooldowns never restart anything; they only steer.

use std::time::{Duration, Instant};

use crate::deadline::Later;

/// Timeouts in a row that start a cooldown (COOL-4).
pub(crate) const TIMEOUTS_IN_A_ROW: u8 = 3;

#[derive(Clone, Debug, Default)]
pub(crate) struct Cooldown {
    /// When the current cooldown ends.
    until: Option<Instant>,
    /// Bumped at each new cooldown, so a stale timer for an earlier one is ignored.
    generation: u64,
    timeouts: u8,
}

impl Cooldown {
    pub fn cooling(&self) -> bool {
        self.until.is_some()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// A response began in time. Returns the end of a cooldown it starts.
    pub fn on_response(&mut self, status: u16, now: Instant, length: Duration) -> Option<Instant> {
        self.timeouts = 0;
        if status == 503 {
            self.start(now, length)
        } else {
            None
        }
    }

    /// No response began in time. Returns the end of a cooldown it starts.
    pub fn on_timeout(&mut self, now: Instant, length: Duration) -> Option<Instant> {
        self.timeouts = self.timeouts.saturating_add(1);
        if self.timeouts >= TIMEOUTS_IN_A_ROW {
            self.timeouts = 0;
            self.start(now, length)
        } else {
            None
        }
    }

    /// The timer for `generation` fired at `now`: true when this ended the cooldown.
    pub fn expire(&mut self, generation: u64, now: Instant) -> bool {
        match self.until {
            Some(until) if generation == self.generation && until <= now => {
                self.until = None;
                true
            }
            _ => false,
        }
    }

    /// When the current cooldown ends, if one is running.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// A cooldown handed over by the program before an in-place upgrade goes on to its end.
    /// Returns its generation, for its timer.
    pub fn resume(&mut self, until: Instant) -> u64 {
        self.generation += 1;
        self.until = Some(until);
        self.generation
    }

    /// A process that went down comes back with no history.
    pub fn reset(&mut self) {
        self.until = None;
        self.timeouts = 0;
        self.generation += 1;
    }

    fn start(&mut self, now: Instant, length: Duration) -> Option<Instant> {
        if length.is_zero() {
            return None;
        }
        let until = now.later(length);
        self.generation += 1;
        self.until = Some(until);
        Some(until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: Duration = Duration::from_secs(2);

    #[test]
    fn a_503_starts_a_cooldown_that_ends_after_its_length() {
        // spec: COOL-1, CONF-15
        let t = Instant::now();
        let mut c = Cooldown::default();
        assert_eq!(c.on_response(200, t, TWO), None);
        let until = c.on_response(503, t, TWO);
        assert_eq!(until, Some(t + TWO));
        assert!(c.cooling());
        assert!(!c.expire(c.generation(), t + Duration::from_secs(1)));
        assert!(c.expire(c.generation(), t + TWO));
        assert!(!c.cooling());
        assert_eq!(c.on_response(503, t, Duration::ZERO), None);
        assert!(!c.cooling());
    }

    #[test]
    fn three_timeouts_in_a_row_start_one_and_a_response_breaks_the_run() {
        // spec: COOL-4, COOL-5
        let t = Instant::now();
        let mut c = Cooldown::default();
        assert_eq!(c.on_timeout(t, TWO), None);
        assert_eq!(c.on_timeout(t, TWO), None);
        assert_eq!(c.on_response(200, t, TWO), None);
        assert_eq!(c.on_timeout(t, TWO), None);
        assert_eq!(c.on_timeout(t, TWO), None);
        assert!(!c.cooling());
        assert_eq!(c.on_timeout(t, TWO), Some(t + TWO));
        assert!(c.cooling());
    }

    #[test]
    fn a_stale_timer_does_not_end_a_newer_cooldown() {
        let t = Instant::now();
        let mut c = Cooldown::default();
        c.on_response(503, t, TWO);
        let old = c.generation();
        c.on_response(503, t + TWO, TWO);
        assert!(!c.expire(old, t + TWO));
        assert!(c.cooling());
    }
}
