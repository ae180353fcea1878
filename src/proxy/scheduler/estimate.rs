//! How long a process takes to free a slot, per lane (the route class of a tx request): the
//! median of the last [`KEPT`] service times it was seen to take, from dispatch to the end of
//! its response (when the slot frees). `predictiveAdmission` (DEC-50) reads it to say when a
//! slot is expected; nothing else does.
//!
//! Why a median of the last few: a surge changes how long a request takes (a process's event
//! loop shares its turns among what it runs), so the estimate must follow the last few
//! seconds, not a run's whole history; and a lane mixes requests of very different costs, so a
//! few slow ones must not make it look slow for all. A moving average did both badly: four
//! 3 s answers among 100 ms ones made it 2 s, and eight quick requests that would all have
//! been served in time were refused at once. The median of 9 is moved by at most 4 outliers in
//! a row no further than the usual answers' range, and follows a real change within 5 answers.
//! Biased low, if at all (the lower middle of an even count): a forecast too short lets a
//! request wait (the spec's rule), one too long refuses what would have been served. The first
//! sample is taken whole. A process that goes down starts again with none (a new process, cold
//! caches): until it has answered, nothing is predicted for it.

use std::time::Duration;

/// The samples kept: the median is the 5th.
pub(crate) const KEPT: usize = 9;

/// The longest sample taken: a year (a longer one is a stuck request, and would only make the
/// arithmetic overflow).
const LONGEST: f64 = 31_536_000.0;

/// One process's service time in one lane.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(crate) struct ServiceTime {
    /// The last samples, seconds, oldest overwritten first.
    recent: [f64; KEPT],
    /// How many of `recent` are samples (up to `KEPT`).
    len: usize,
    /// Where the next sample goes.
    next: usize,
    /// Their median, seconds; `None` until the first sample.
    median: Option<f64>,
}

impl ServiceTime {
    /// A request of this lane took `took` from dispatch to its slot freeing.
    pub fn observe(&mut self, took: Duration) {
        self.recent[self.next] = took.as_secs_f64().min(LONGEST);
        self.next = (self.next + 1) % KEPT;
        self.len = (self.len + 1).min(KEPT);
        let mut sorted = self.recent;
        let samples = &mut sorted[..self.len];
        samples.sort_unstable_by(f64::total_cmp);
        self.median = Some(samples[(self.len - 1) / 2]);
    }

    /// The estimate; `None` with no sample yet.
    pub fn get(&self) -> Option<Duration> {
        self.median.map(Duration::from_secs_f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn a_steady_load_is_estimated_exactly_and_a_change_is_followed_within_five_answers() {
        // spec: DEC-50
        let mut s = ServiceTime::default();
        for _ in 0..50 {
            s.observe(MS(300));
        }
        assert_eq!(s.get(), Some(MS(300)));
        for _ in 0..4 {
            s.observe(MS(100));
        }
        assert_eq!(s.get(), Some(MS(300)), "four answers: not yet a change");
        s.observe(MS(100));
        assert_eq!(s.get(), Some(MS(100)));
    }

    #[test]
    fn four_slow_answers_among_quick_ones_leave_it_quick() {
        // spec: DEC-50 (the moving average made this 2 s)
        let mut s = ServiceTime::default();
        for _ in 0..10 {
            s.observe(MS(100));
        }
        for _ in 0..4 {
            s.observe(MS(3000));
        }
        assert_eq!(s.get(), Some(MS(100)));
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

    proptest! {
        #[test]
        fn up_to_four_outliers_after_five_usual_answers_keep_it_within_their_range(
            before in proptest::collection::vec(0u64..100_000, 0..20),
            usual in proptest::collection::vec(100u64..200, 5..12),
            outliers in proptest::collection::vec(0u64..10_000_000, 0..5),
        ) {
            // spec: DEC-50 (what a few outliers can do to the estimate is bounded)
            let mut s = ServiceTime::default();
            for ms in before.iter().chain(&usual).chain(&outliers) {
                s.observe(MS(*ms));
            }
            let lo = usual.iter().min().copied().unwrap_or_default();
            let hi = usual.iter().max().copied().unwrap_or_default();
            let got = s.get().unwrap_or_default();
            prop_assert!(got >= MS(lo) && got <= MS(hi), "{:?} not in {}..={} ms", got, lo, hi);
        }

        #[test]
        fn it_is_always_one_of_the_last_samples(
            samples in proptest::collection::vec(0u64..10_000_000, 1..40),
        ) {
            let mut s = ServiceTime::default();
            for ms in &samples {
                s.observe(MS(*ms));
            }
            let got = s.get().unwrap_or_default();
            let last = &samples[samples.len().saturating_sub(KEPT)..];
            prop_assert!(last.iter().any(|ms| MS(*ms) == got), "{:?} of {:?}", got, last);
        }
    }
}
