//! Whether a process's event loop is saturated: its main thread wanted the CPU (running, or
//! runnable and waiting for a core) for at least `saturatedPercent` of the last interval.
//!
//! Why: a FHIRsmith process is one event loop. Once that loop wants the CPU all the time, more
//! heavy requests at once are answered no sooner (the same CPU is split more ways), but each
//! one adds a turn that every cheap request waits behind. So while a process is saturated the
//! scheduler holds its other requests to `normalMinSlots` (`scheduler/slots.rs`), and the
//! surplus waits in the launcher, where the fast lane can pass it. Counting the time spent
//! waiting for a core, not only running, matters on a machine with fewer cores than busy
//! processes: a loop that gets 60 % of a core and waits the rest is saturated too.
//!
//! Pure: the shell reads the main thread's cumulative run + wait nanoseconds
//! (`system::schedstat`) and the clock, and passes both in.

use std::time::{Duration, Instant};

/// How far below `saturatedPercent` the loop must fall before the hold ends, so a loop near the
/// threshold doesn't flip on every sample.
pub const HYSTERESIS_POINTS: u32 = 20;

/// Samples in a row below the exit threshold that end the hold. One is not enough: the kernel
/// adds a wait for a core to `schedstat` only when the wait ends, so on a busy machine a
/// sample taken while the loop waits misses most of that wait, and the next one gets it
/// (with 3 other busy processes on 2 cores, a loop busy all the time read 63 % and then 104 %).
/// A single low sample ended the hold for one interval, and every heavy request waiting was
/// let in then. The cost: the hold ends one interval later when the work really stops.
const LOW_SAMPLES_TO_LEAVE: u8 = 2;

/// Samples closer together than this are skipped: too short to say anything.
const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// One process's meter. Reset it when the process is replaced.
#[derive(Debug, Default, Clone)]
pub struct LoopMeter {
    last: Option<(Instant, u64)>,
    saturated: bool,
    /// Samples in a row below the exit threshold while saturated.
    low: u8,
}

impl LoopMeter {
    pub fn saturated(&self) -> bool {
        self.saturated
    }

    /// Forgets the history (a new process, or none): not saturated.
    pub fn reset(&mut self) {
        *self = LoopMeter::default();
    }

    /// Takes a sample: `busy_ns`, the main thread's cumulative run + wait time at `now`.
    /// Returns the new state when it changed. `percent` 0: never saturated.
    pub fn sample(&mut self, now: Instant, busy_ns: u64, percent: u32) -> Option<bool> {
        let was = self.saturated;
        match self.last {
            Some((then, before)) if busy_ns >= before => {
                let wall = now.saturating_duration_since(then);
                if wall < MIN_INTERVAL {
                    return None;
                }
                let share = (busy_ns - before) as f64 / wall.as_nanos() as f64 * 100.0;
                let enter = f64::from(percent);
                let leave = f64::from(percent.saturating_sub(HYSTERESIS_POINTS));
                self.low = if was && share < leave {
                    self.low + 1
                } else {
                    0
                };
                self.saturated = percent > 0
                    && if was {
                        self.low < LOW_SAMPLES_TO_LEAVE
                    } else {
                        share >= enter
                    };
                if !self.saturated {
                    self.low = 0;
                }
                self.last = Some((now, busy_ns));
            }
            // First sample, or the counter went back (another thread or process now): start over.
            _ => {
                self.last = Some((now, busy_ns));
                self.saturated = false;
                self.low = 0;
            }
        }
        (self.saturated != was).then_some(self.saturated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Feeds one sample per `step_ms`, each with `busy` of it busy; returns the changes.
    fn run(
        m: &mut LoopMeter,
        t0: Instant,
        busy: &[u64],
        step_ms: u64,
        percent: u32,
    ) -> Vec<Option<bool>> {
        let mut ns = 0;
        let mut out = vec![m.sample(t0, ns, percent)];
        for (k, b) in busy.iter().enumerate() {
            ns += b * MS;
            let at = t0 + Duration::from_millis(step_ms * (k as u64 + 1));
            out.push(m.sample(at, ns, percent));
        }
        out
    }

    #[test]
    fn a_loop_busy_all_the_time_is_saturated_and_an_idle_one_is_not() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        let changes = run(&mut m, t0, &[100, 100], 100, 90);
        assert_eq!(changes, vec![None, Some(true), None]);
        assert!(m.saturated());
        let mut idle = LoopMeter::default();
        assert_eq!(run(&mut idle, t0, &[0, 30, 89], 100, 90), vec![None; 4]);
    }

    #[test]
    fn it_ends_only_well_below_the_threshold() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        // 95 % enters; 80 % and 70 % stay (not below 90 - 20); 60 % twice leaves; 85 % does
        // not re-enter
        let changes = run(&mut m, t0, &[95, 80, 70, 60, 60, 85], 100, 90);
        assert_eq!(
            changes,
            vec![None, Some(true), None, None, None, Some(false), None]
        );
    }

    #[test]
    fn one_low_sample_is_a_wait_not_yet_counted_and_does_not_end_it() {
        // As read with 3 other busy processes on 2 cores: the wait missed by one sample is in
        // the next. Each low sample alone, however low, keeps the hold; the first of two ends
        // it only with the second.
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        let changes = run(&mut m, t0, &[100, 63, 142, 10, 190, 69, 100, 0, 0], 100, 90);
        assert_eq!(
            changes,
            vec![
                None,
                Some(true),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                Some(false)
            ]
        );
        // and a sample back above the exit threshold starts the count again
        let mut m = LoopMeter::default();
        let changes = run(&mut m, t0, &[100, 50, 80, 50, 50], 100, 90);
        assert_eq!(
            changes,
            vec![None, Some(true), None, None, None, Some(false)]
        );
    }

    #[test]
    fn zero_percent_means_never() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        assert_eq!(run(&mut m, t0, &[100, 100], 100, 0), vec![None; 3]);
    }

    #[test]
    fn samples_too_close_together_are_skipped_not_misread() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        assert_eq!(m.sample(t0, 0, 90), None);
        // 5 ms later, 5 ms busy: ignored, and the next sample measures from t0
        assert_eq!(m.sample(t0 + Duration::from_millis(5), 5 * MS, 90), None);
        assert_eq!(
            m.sample(t0 + Duration::from_millis(100), 99 * MS, 90),
            Some(true)
        );
        // the clock standing still says nothing either
        assert_eq!(
            m.sample(t0 + Duration::from_millis(100), 200 * MS, 90),
            None
        );
    }

    #[test]
    fn a_counter_that_goes_back_is_a_new_process_and_starts_over() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        run(&mut m, t0, &[100], 100, 90);
        assert!(m.saturated());
        assert_eq!(
            m.sample(t0 + Duration::from_millis(200), 1, 90),
            Some(false)
        );
        assert_eq!(
            m.sample(t0 + Duration::from_millis(300), 1 + 100 * MS, 90),
            Some(true)
        );
        m.reset();
        assert!(!m.saturated());
    }

    #[test]
    fn waiting_for_a_core_counts_as_busy() {
        // the shell passes run + wait; 50 ms running and 45 ms waiting in 100 ms is saturated
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        assert_eq!(run(&mut m, t0, &[50 + 45], 100, 90), vec![None, Some(true)]);
    }
}
