//! Whether a process's event loop is saturated: its main thread wanted the CPU (running, or
//! runnable and waiting for a core) for at least `saturatedPercent` of the last interval; and
//! while it is, how many heavy (normal-lane) requests it is held to.
//!
//! Why: a FHIRsmith process is one event loop. Once that loop wants the CPU all the time, more
//! heavy requests at once are answered no sooner (the same CPU is split more ways), but each
//! one adds a turn that every cheap request waits behind. So while a process is saturated the
//! scheduler holds its other requests to a few (`scheduler/slots.rs`), and the surplus waits in
//! the launcher, where the fast lane can pass it. Counting the time spent waiting for a core,
//! not only running, matters on a machine with fewer cores than busy processes: a loop that
//! gets 60 % of a core and waits the rest is saturated too.
//!
//! How few: the least that keeps the loop busy, found by measuring. A hold starts at 1; the
//! loop busy all the time with one heavy request is as busy as with more. It grows by one
//! (up to `normalMinSlots`) only when the loop was *not* busy for two samples in a row while
//! heavy requests waited for it: the one it had waited on something other than the CPU (I/O,
//! another thread), and another would have used the time. It shrinks by one after a second
//! busy all the time, to find out whether fewer would do now. In a 3x surge on 2 cores the
//! `$lookup` probe waits behind one 25 ms turn instead of four: median 110 → 33 ms.
//!
//! Pure: the shell reads the main thread's cumulative run + wait nanoseconds
//! (`system::schedstat`), the clock and whether heavy requests wait, and passes them in.

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
/// The same holds for growing the hold: one quiet sample is no proof of idle time.
const LOW_SAMPLES_TO_LEAVE: u8 = 2;

/// Samples in a row busy all the time after which the hold is one lower: about a second.
/// Rarely enough that a hold the loop needs (it grows back after two quiet samples) costs
/// little, often enough that a surge's hold comes back down once the reason to grow is gone.
const BUSY_SAMPLES_TO_SHRINK: u8 = 10;

/// Samples closer together than this are skipped: too short to say anything.
const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// What the scheduler says with each sample.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Demand {
    /// Heavy requests wait that this process could take (the hold is what keeps them out).
    pub waiting: bool,
    /// The most a hold may grow to: `normalMinSlots` (taken as at least 1).
    pub ceiling: u32,
}

/// One process's meter. Reset it when the process is replaced.
#[derive(Debug, Default, Clone)]
pub struct LoopMeter {
    last: Option<(Instant, u64)>,
    saturated: bool,
    /// While saturated: the heavy requests it is held to (1 ..= the ceiling).
    limit: u32,
    /// Samples in a row below the exit threshold while saturated.
    low: u8,
    /// Samples in a row below the entry threshold while saturated.
    quiet: u8,
    /// Samples in a row at or above the entry threshold while saturated.
    busy: u8,
}

impl LoopMeter {
    pub fn saturated(&self) -> bool {
        self.saturated
    }

    /// `None`: not saturated; else how many heavy requests the process is held to.
    pub fn held(&self) -> Option<u32> {
        self.saturated.then_some(self.limit)
    }

    /// Forgets the history (a new process, or none): not saturated.
    pub fn reset(&mut self) {
        *self = LoopMeter::default();
    }

    /// Takes a sample: `busy_ns`, the main thread's cumulative run + wait time at `now`.
    /// Returns the new state when it changed (`held` says the hold's limit). `percent` 0:
    /// never saturated.
    pub fn sample(
        &mut self,
        now: Instant,
        busy_ns: u64,
        percent: u32,
        demand: Demand,
    ) -> Option<bool> {
        let was = self.saturated;
        match self.last {
            Some((then, before)) if busy_ns >= before => {
                let wall = now.saturating_duration_since(then);
                if wall < MIN_INTERVAL {
                    return None;
                }
                let share = (busy_ns - before) as f64 / wall.as_nanos() as f64 * 100.0;
                self.last = Some((now, busy_ns));
                self.judge(share, percent, demand);
            }
            // First sample, or the counter went back (another thread or process now): start over.
            _ => {
                *self = LoopMeter {
                    last: Some((now, busy_ns)),
                    ..LoopMeter::default()
                };
            }
        }
        (self.saturated != was).then_some(self.saturated)
    }

    /// One sample's `share` (percent of the interval the loop wanted the CPU).
    fn judge(&mut self, share: f64, percent: u32, demand: Demand) {
        let enter = f64::from(percent);
        let leave = f64::from(percent.saturating_sub(HYSTERESIS_POINTS));
        let ceiling = demand.ceiling.max(1);
        if percent == 0 || (!self.saturated && share < enter) {
            *self = LoopMeter {
                last: self.last,
                ..LoopMeter::default()
            };
            return;
        }
        if !self.saturated {
            *self = LoopMeter {
                last: self.last,
                saturated: true,
                limit: 1,
                ..LoopMeter::default()
            };
            return;
        }
        self.limit = self.limit.clamp(1, ceiling);
        if share >= enter {
            (self.low, self.quiet) = (0, 0);
            self.busy += 1;
            if self.busy >= BUSY_SAMPLES_TO_SHRINK {
                self.busy = 0;
                self.limit = (self.limit - 1).max(1);
            }
            return;
        }
        self.busy = 0;
        self.quiet += 1;
        self.low = if share < leave { self.low + 1 } else { 0 };
        if self.quiet >= LOW_SAMPLES_TO_LEAVE && demand.waiting && self.limit < ceiling {
            // Idle time while heavy requests waited: one more would have used it.
            self.limit += 1;
            (self.low, self.quiet) = (0, 0);
        } else if self.low >= LOW_SAMPLES_TO_LEAVE {
            *self = LoopMeter {
                last: self.last,
                ..LoopMeter::default()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Nothing waits: the hold never grows.
    const NONE: Demand = Demand {
        waiting: false,
        ceiling: 4,
    };

    /// Feeds one sample per `step_ms`, each with `busy` of it busy; returns the changes.
    fn run(
        m: &mut LoopMeter,
        t0: Instant,
        busy: &[u64],
        step_ms: u64,
        percent: u32,
    ) -> Vec<Option<bool>> {
        let mut ns = 0;
        let mut out = vec![m.sample(t0, ns, percent, NONE)];
        for (k, b) in busy.iter().enumerate() {
            ns += b * MS;
            let at = t0 + Duration::from_millis(step_ms * (k as u64 + 1));
            out.push(m.sample(at, ns, percent, NONE));
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
        assert_eq!(m.sample(t0, 0, 90, NONE), None);
        // 5 ms later, 5 ms busy: ignored, and the next sample measures from t0
        assert_eq!(
            m.sample(t0 + Duration::from_millis(5), 5 * MS, 90, NONE),
            None
        );
        assert_eq!(
            m.sample(t0 + Duration::from_millis(100), 99 * MS, 90, NONE),
            Some(true)
        );
        // the clock standing still says nothing either
        assert_eq!(
            m.sample(t0 + Duration::from_millis(100), 200 * MS, 90, NONE),
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
            m.sample(t0 + Duration::from_millis(200), 1, 90, NONE),
            Some(false)
        );
        assert_eq!(
            m.sample(t0 + Duration::from_millis(300), 1 + 100 * MS, 90, NONE),
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

    /// Feeds one 100 ms sample per `(busy_ms, waiting)`; returns `held` after each.
    fn held_after(m: &mut LoopMeter, t0: Instant, steps: &[(u64, bool)]) -> Vec<Option<u32>> {
        let mut ns = 0;
        m.sample(t0, ns, 90, NONE);
        let mut out = Vec::new();
        for (k, &(busy, waiting)) in steps.iter().enumerate() {
            ns += busy * MS;
            let at = t0 + Duration::from_millis(100 * (k as u64 + 1));
            m.sample(
                at,
                ns,
                90,
                Demand {
                    waiting,
                    ceiling: 4,
                },
            );
            out.push(m.held());
        }
        out
    }

    #[test]
    fn a_hold_starts_at_one_and_a_loop_busy_all_the_time_stays_there() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        // heavy requests wait all along, but the loop never has a moment for another
        let held = held_after(&mut m, t0, &[(100, true); 30]);
        assert!(held.iter().all(|&h| h == Some(1)), "{held:?}");
    }

    #[test]
    fn it_grows_by_one_after_two_quiet_samples_while_heavy_requests_wait() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        let steps = [
            (100, true), // saturated: 1
            (80, true),  // one quiet sample is no proof
            (80, true),  // two: 2
            (75, true),
            (75, true), // 3
            (40, true),
            (40, true), // 4
            (40, true),
            (40, true), // the ceiling: no more, and well below the threshold twice: it ends
        ];
        assert_eq!(
            held_after(&mut m, t0, &steps),
            vec![
                Some(1),
                Some(1),
                Some(2),
                Some(2),
                Some(3),
                Some(3),
                Some(4),
                Some(4),
                None
            ]
        );
    }

    #[test]
    fn a_quiet_sample_made_up_by_the_next_or_one_with_nothing_waiting_grows_nothing() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        // the wait missed by one sample is in the next: quiet, busy, quiet, busy ...
        let mut steps = vec![(100, true)];
        steps.extend([(63, true), (137, true)].repeat(8));
        // and quiet while nothing waits: the hold isn't what keeps the loop idle
        steps.extend([(80, false); 6]);
        let held = held_after(&mut m, t0, &steps);
        assert!(held.iter().all(|&h| h == Some(1)), "{held:?}");
    }

    #[test]
    fn a_second_busy_all_the_time_takes_it_one_lower_but_never_below_one() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        let mut steps = vec![(100, true), (80, true), (80, true), (80, true), (80, true)];
        steps.extend([(100, true); 40]);
        let held = held_after(&mut m, t0, &steps);
        assert_eq!(held[4], Some(3));
        // 9 busy samples: still 3; the 10th: 2; 10 more: 1; and there it stays
        assert_eq!(held[13], Some(3));
        assert_eq!(held[14], Some(2));
        assert_eq!(held[23], Some(2));
        assert_eq!(held[24], Some(1));
        assert!(held[24..].iter().all(|&h| h == Some(1)), "{held:?}");
    }

    #[test]
    fn the_hold_stays_within_the_ceiling_even_when_it_is_lowered() {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        let demand = |ceiling| Demand {
            waiting: true,
            ceiling,
        };
        let mut ns = 0;
        m.sample(t0, ns, 90, demand(0));
        let mut held = Vec::new();
        for (k, (busy, ceiling)) in [(100, 0), (80, 0), (80, 0), (100, 3), (80, 3), (80, 3)]
            .into_iter()
            .enumerate()
        {
            ns += busy * MS;
            let at = t0 + Duration::from_millis(100 * (k as u64 + 1));
            m.sample(at, ns, 90, demand(ceiling));
            held.push(m.held());
        }
        // ceiling 0 is taken as 1 (normalMinSlots 0: the scheduler ignores the hold anyway)
        assert_eq!(
            held,
            vec![Some(1), Some(1), Some(1), Some(1), Some(1), Some(2)]
        );
        // a reload to a lower normalMinSlots: the next sample takes the hold down to it
        ns += 100 * MS;
        m.sample(t0 + Duration::from_millis(700), ns, 90, demand(1));
        assert_eq!(m.held(), Some(1));
    }

    proptest::proptest! {
        /// Any run of samples: a hold is within 1 ..= the ceiling, moves by at most one a
        /// sample, grows only after two samples in a row below the threshold with heavy
        /// requests waiting, starts at 1, and only a busy sample starts one.
        #[test]
        fn the_hold_moves_only_as_measured(
            percent in 0u32..=100,
            steps in proptest::collection::vec((0u64..200, proptest::bool::ANY, 0u32..6), 1..80),
        ) {
            let t0 = Instant::now();
            let mut m = LoopMeter::default();
            let mut ns = 0;
            m.sample(t0, ns, percent, NONE);
            let mut before: Option<u32> = None;
            let mut shares: Vec<u64> = Vec::new();
            for (k, &(busy, waiting, ceiling)) in steps.iter().enumerate() {
                ns += busy * MS;
                let at = t0 + Duration::from_millis(100 * (k as u64 + 1));
                m.sample(at, ns, percent, Demand { waiting, ceiling });
                shares.push(busy);
                let now = m.held();
                proptest::prop_assert_eq!(now.is_some(), m.saturated());
                if let Some(n) = now {
                    proptest::prop_assert!(percent > 0);
                    proptest::prop_assert!((1..=ceiling.max(1)).contains(&n), "{} > {}", n, ceiling);
                }
                match (before, now) {
                    (None, Some(n)) => {
                        proptest::prop_assert_eq!(n, 1);
                        proptest::prop_assert!(busy >= u64::from(percent));
                    }
                    (Some(a), Some(b)) if b > a => {
                        proptest::prop_assert_eq!(b, a + 1);
                        proptest::prop_assert!(waiting);
                        let quiet = shares.iter().rev().take(2).all(|&s| s < u64::from(percent));
                        proptest::prop_assert!(quiet && shares.len() >= 2, "{:?}", shares);
                    }
                    (Some(a), Some(b)) if b < a => {
                        // one lower after busy samples, or cut to a lowered ceiling
                        proptest::prop_assert!(b == a - 1 || b == ceiling.max(1), "{} -> {}", a, b);
                    }
                    _ => {}
                }
                before = now;
            }
        }
    }
}
