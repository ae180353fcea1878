//! The scheduler's timers: each waiting request's end of wait, and each cooldown's end, taken
//! earliest first (ties: waits before cooldowns, then by sequence number), as one heap of them
//! all would give them.
//!
//! Why not one heap: under load nearly every request waits, and as it is dispatched its wait's
//! timer goes dead at the top and is dropped, a heap pop (a sift through log n levels) per queued
//! request. But the waits of one kind all have one length (`queueSeconds`, or `ownerQueueSeconds`
//! for the others), so they end in the order they began: each kind's ends are a deque, pushed at
//! the back and taken from the front. A wait is placed by its end only when it ends before the last
//! one pushed (a `now` read before another's, or a reload that shortened the wait): found by a
//! binary search, so nothing here scans. Cooldowns (rare) keep a heap.
//!
//! Dead timers (a wait that ended otherwise, a cooldown superseded) stay until they come to the
//! front; the caller says which are live (`Scheduler::settle`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use super::types::RequestId;

/// One timer, as the scheduler reads it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    Queue { seq: u64, id: RequestId },
    Cool { process: usize, generation: u64 },
}

/// Which kind of wait a queue timer is for: waits of one kind have one length.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum WaitKind {
    /// `queueSeconds`.
    Queue,
    /// `ownerQueueSeconds`.
    Owner,
}

/// Where the earliest timer is.
#[derive(Copy, Clone, Debug)]
enum Source {
    Wait(usize),
    Cool,
}

fn cool_timer((at, process, generation): (Instant, usize, u64)) -> (Source, Instant, Timer) {
    (
        Source::Cool,
        at,
        Timer::Cool {
            process,
            generation,
        },
    )
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Timers {
    /// By `WaitKind`: (end, seq, id), in order.
    waits: [VecDeque<(Instant, u64, RequestId)>; 2],
    cools: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    /// The earliest of them all, kept as they change: asked several times a call (`advance`,
    /// `settle`, `poll_timeout`), where finding it among the three each time would be done
    /// several times for every queued request.
    head: Option<(Source, Instant, Timer)>,
}

impl Timers {
    /// A request starts waiting until `until`; its `seq` is above every other's.
    pub fn push_wait(&mut self, kind: WaitKind, until: Instant, seq: u64, id: RequestId) {
        let q = &mut self.waits[kind as usize];
        let entry = (until, seq, id);
        if q.back().is_none_or(|&last| last <= entry) {
            q.push_back(entry);
        } else {
            let at = q.partition_point(|&e| e <= entry);
            q.insert(at, entry);
        }
        self.offer((Source::Wait(kind as usize), until, Timer::Queue { seq, id }));
    }

    /// A new timer is the earliest if it comes before the earliest (then it is at the front of
    /// its own kind too).
    fn offer(&mut self, new: (Source, Instant, Timer)) {
        if self.head.is_none_or(|(_, at, t)| (new.1, new.2) < (at, t)) {
            self.head = Some(new);
        }
    }

    /// A cooldown of `process` (its `generation`) ends at `until`.
    pub fn push_cool(&mut self, until: Instant, process: usize, generation: u64) {
        self.cools.push(Reverse((until, process, generation)));
        self.offer(cool_timer((until, process, generation)));
    }

    /// The earliest of the three fronts (written out: it is asked for on every turn of the
    /// scheduler, and an iterator's `min_by` over them took more).
    fn first(&self) -> Option<(Source, Instant, Timer)> {
        // Between waits, the earlier end, then the lower `seq` (unique across both kinds).
        let wait = match (self.waits[0].front(), self.waits[1].front()) {
            (Some(&a), Some(&b)) if b < a => Some((1, b)),
            (Some(&a), _) => Some((0, a)),
            (None, Some(&b)) => Some((1, b)),
            (None, None) => None,
        };
        let cool = self.cools.peek().map(|r| r.0);
        match (wait, cool) {
            // At the same instant a wait comes before a cooldown.
            (Some((_, w)), Some(c)) if c.0 < w.0 => Some(cool_timer(c)),
            (Some((k, (at, seq, id))), _) => Some((Source::Wait(k), at, Timer::Queue { seq, id })),
            (None, Some(c)) => Some(cool_timer(c)),
            (None, None) => None,
        }
    }

    /// The earliest timer, live or dead.
    pub fn peek(&self) -> Option<(Instant, Timer)> {
        self.head.map(|(_, at, t)| (at, t))
    }

    /// Drops the earliest timer (the one `peek` gives).
    pub fn pop(&mut self) {
        match self.head {
            Some((Source::Wait(k), ..)) => {
                self.waits[k].pop_front();
            }
            Some((Source::Cool, ..)) => {
                self.cools.pop();
            }
            None => return,
        }
        self.head = self.first();
    }
}

#[cfg(test)]
#[path = "timers_tests.rs"]
mod tests;
