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
//! (up to `normalMinSlots`) only when a sample shows idle time while heavy requests waited for
//! the process: the one it had waited on something other than the CPU (I/O, another thread),
//! and another would have used the time. Only a sample read while the loop was asleep counts
//! for that: read while it runs or waits for a core, the wait in progress is not counted yet
//! (see `LOW_SAMPLES_TO_LEAVE`), and the sample reads low for a loop with no idle time at all.
//! It shrinks by one after a second busy all the time, to find out whether fewer would do now.
//! So in a surge a light request waits behind one heavy turn of the event loop instead of
//! several (cluster.md has the surge's figures).
//!
//! Pure: the shell reads the main thread's cumulative run + wait nanoseconds and whether it is
//! asleep (`system::schedstat`), the clock and whether heavy requests wait, and passes them in.

use std::time::{Duration, Instant};

pub use crate::system::schedstat::Reading;

/// How far below `saturatedPercent` the loop must fall before the hold ends, so a loop near the
/// threshold doesn't flip on every sample.
pub const HYSTERESIS_POINTS: u32 = 20;

/// Samples in a row below the exit threshold that end the hold. One is not enough: the kernel
/// adds a wait for a core to `schedstat` only when the wait ends, so on a busy machine a
/// sample taken while the loop waits misses most of that wait, and the next one gets it
/// (with 3 other busy processes on 2 cores, a loop busy all the time read 63 % and then 104 %).
/// A single low sample ended the hold for one interval, and every heavy request waiting was
/// let in then. The cost: the hold ends one interval later when the work really stops.
/// While heavy requests wait, only samples read while the loop was asleep count: those are
/// whole, and a loop with idle time is asleep at some of them.
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

/// The part of an interval the loop wanted the CPU, compared in whole numbers (a share read
/// as a float put 58 ms of 100 below 58 %).
#[derive(Copy, Clone, Debug)]
struct Share {
    busy_ns: u64,
    wall_ns: u128,
}

impl Share {
    fn at_least(self, percent: u32) -> bool {
        u128::from(self.busy_ns) * 100 >= self.wall_ns * u128::from(percent)
    }
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

    /// Takes a sample: the main thread's cumulative run + wait time at `now`, and whether it
    /// was asleep. Returns the new state when it changed (`held` says the hold's limit).
    /// `percent` 0: never saturated.
    pub fn sample(
        &mut self,
        now: Instant,
        reading: Reading,
        percent: u32,
        demand: Demand,
    ) -> Option<bool> {
        let busy_ns = reading.busy_ns;
        let was = self.saturated;
        match self.last {
            Some((then, before)) if busy_ns >= before => {
                let wall = now.saturating_duration_since(then);
                if wall < MIN_INTERVAL {
                    return None;
                }
                let share = Share {
                    busy_ns: busy_ns - before,
                    wall_ns: wall.as_nanos(),
                };
                self.last = Some((now, busy_ns));
                self.judge(share, reading.asleep, percent, demand);
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

    /// One sample's `share` (percent of the interval the loop wanted the CPU); `asleep`: the
    /// share is whole (read while the loop slept).
    fn judge(&mut self, share: Share, asleep: bool, percent: u32, demand: Demand) {
        let enter = percent;
        let leave = percent.saturating_sub(HYSTERESIS_POINTS);
        let ceiling = demand.ceiling.max(1);
        if percent == 0 || (!self.saturated && !share.at_least(enter)) {
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
        if share.at_least(enter) {
            self.low = 0;
            self.busy += 1;
            if self.busy >= BUSY_SAMPLES_TO_SHRINK {
                self.busy = 0;
                self.limit = (self.limit - 1).max(1);
            }
            return;
        }
        self.busy = 0;
        self.low = match !share.at_least(leave) {
            false => 0,
            // While heavy requests wait, ending the hold lets them all in at once, to stay for
            // seconds if the loop was busy after all: only a sample read asleep (whole) counts.
            true if demand.waiting && !asleep => self.low,
            true => self.low + 1,
        };
        if asleep && demand.waiting && self.limit < ceiling {
            // Idle time while heavy requests waited: one more would have used it.
            self.limit += 1;
            self.low = 0;
        } else if self.low >= LOW_SAMPLES_TO_LEAVE {
            *self = LoopMeter {
                last: self.last,
                ..LoopMeter::default()
            };
        }
    }
}

#[cfg(test)]
#[path = "saturation_tests.rs"]
mod tests;
