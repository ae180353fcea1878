//! How long a process takes to free a slot, per lane (the route class of a tx request): an
//! exponentially weighted moving average of the service times it was seen to take, from
//! dispatch to the end of its response (when the slot frees). `predictiveAdmission` (DEC-50)
//! reads it to say when a slot is expected; nothing else does.
//!
//! Why an EWMA: a surge changes how long a request takes (a process's event loop shares its
//! turns among what it runs), so the estimate must follow the last few seconds, not a run's
//! whole history; a weight of 1/4 a sample forgets a change in about ten answers. The first
//! sample is taken whole, so a load whose requests all take the same time is estimated exactly
//! from its first answer on. A process that goes down starts again with none (a new process,
//! cold caches): until it has answered, nothing is predicted for it.

use std::time::Duration;

/// Each new sample's weight.
const WEIGHT: f64 = 0.25;

/// The longest sample taken: a year (a longer one is a stuck request, and would only make the
/// arithmetic overflow).
const LONGEST: f64 = 31_536_000.0;

/// One process's service time in one lane.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(crate) struct ServiceTime {
    /// Seconds; `None` until the first sample.
    mean: Option<f64>,
}

impl ServiceTime {
    /// A request of this lane took `took` from dispatch to its slot freeing.
    pub fn observe(&mut self, took: Duration) {
        let x = took.as_secs_f64().min(LONGEST);
        self.mean = Some(match self.mean {
            None => x,
            Some(m) => m + WEIGHT * (x - m),
        });
    }

    /// The estimate; `None` with no sample yet.
    pub fn get(&self) -> Option<Duration> {
        self.mean.map(Duration::from_secs_f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn no_sample_no_estimate_and_the_first_sample_is_taken_whole() {
        // spec: DEC-50 (cold start: nothing predicted)
        let mut s = ServiceTime::default();
        assert_eq!(s.get(), None);
        s.observe(MS(200));
        assert_eq!(s.get(), Some(MS(200)));
    }

    #[test]
    fn a_steady_load_is_estimated_exactly_and_a_change_is_followed_within_about_ten_answers() {
        // spec: DEC-50
        let mut s = ServiceTime::default();
        for _ in 0..50 {
            s.observe(MS(300));
        }
        let near = |a: Option<Duration>, b: Duration| {
            a.is_some_and(|a| a.abs_diff(b) < Duration::from_micros(10))
        };
        assert!(near(s.get(), MS(300)), "{:?}", s.get());
        for _ in 0..10 {
            s.observe(MS(100));
        }
        let got = s.get().unwrap_or_default();
        assert!(got > MS(100) && got < MS(115), "{got:?}");
    }

    #[test]
    fn a_sample_of_any_length_is_taken_without_overflow() {
        let mut s = ServiceTime::default();
        s.observe(Duration::MAX);
        s.observe(Duration::ZERO);
        assert!(s
            .get()
            .is_some_and(|d| d <= Duration::from_secs(31_536_000)));
    }
}
