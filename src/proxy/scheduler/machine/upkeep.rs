//! The scheduler's upkeep: timers firing, processes going away, the count of processes open to
//! steered requests, and settling (pumping what changed) before each public call returns.

use std::time::Instant;

use super::*;

impl Scheduler {
    /// Process `i` (= `p`) went down or started draining: its own waiters for a cache-id are
    /// lost (DEC-15); those there by affinity go by rule 4 (ROUTE-3d), keeping their place.
    pub(super) fn release_owned(&mut self, i: usize, p: ProcessId) {
        for lane in LANES {
            let drained: Vec<_> = self.procs[i].owned[ix(lane)].drain().collect();
            for (seq, id) in drained {
                match self.requests.get_mut(&id) {
                    Some(Req::Waiting {
                        seq: s, at, wait, ..
                    }) if *s == seq => {
                        if *wait == Wait::Affinity {
                            *at = Place::Shared;
                            self.shared[ix(lane)].insert_by_seq(seq, id);
                            self.dirty_all = true;
                        } else {
                            self.requests.remove(&id);
                            self.refuse(id, Refusal::OwnerGone(p));
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Refuses every request in the shared queues.
    pub(super) fn refuse_shared(&mut self, reason: Refusal) {
        for lane in LANES {
            let drained: Vec<_> = self.shared[ix(lane)].drain().collect();
            for (seq, id) in drained {
                if is_waiting(&self.requests, seq, id) {
                    self.requests.remove(&id);
                    self.refuse(id, reason);
                }
            }
        }
    }

    /// Ready tx processes, cooling or not.
    pub(super) fn open_or_cooling(&self) -> usize {
        (0..self.procs.len())
            .filter(|&i| self.is_ready(i) && self.procs[i].serves_tx)
            .count()
    }

    pub(super) fn recount_open(&mut self) {
        let before = self.open;
        self.open = (0..self.procs.len())
            .filter(|&i| {
                self.is_ready(i) && self.procs[i].serves_tx && !self.procs[i].cool.cooling()
            })
            .count();
        if before > 0 && self.open == 0 {
            // Every process is cooling: cooldowns no longer hold anything back.
            self.dirty_all = true;
        }
    }

    /// Fires every timer due by `now`.
    pub(super) fn advance(&mut self, now: Instant) {
        self.clock = Some(self.clock.map_or(now, |c| c.max(now)));
        while let Some((at, timer)) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            match timer {
                Timer::Queue { seq, id } => {
                    if !is_waiting(&self.requests, seq, id) {
                        continue; // dispatched, refused or cancelled meanwhile
                    }
                    if let Some(Req::Waiting { lane, at, wait, .. }) = self.requests.remove(&id) {
                        self.forget(at, lane);
                        let waited = self.wait_length(wait);
                        let reason = self.queue_refusal(lane, wait, waited, now);
                        self.refuse(id, reason);
                    }
                }
                Timer::Cool {
                    process,
                    generation,
                } => {
                    if self.procs[process].cool.expire(generation, now) {
                        self.recount_open();
                        self.dirty.push(process);
                    }
                }
            }
        }
    }

    /// Pumps what changed, then drops dead timers from the front so `poll_timeout` is
    /// exact.
    pub(super) fn settle(&mut self) {
        loop {
            if self.dirty_all {
                self.dirty_all = false;
                self.dirty.clear();
                for i in 0..self.procs.len() {
                    self.pump(i);
                }
            } else if let Some(i) = self.dirty.pop() {
                self.pump(i);
            } else {
                break;
            }
        }
        while let Some((_, timer)) = self.timers.peek() {
            let live = match timer {
                Timer::Queue { seq, id } => is_waiting(&self.requests, seq, id),
                Timer::Cool {
                    process,
                    generation,
                } => {
                    let c = &self.procs[process].cool;
                    c.cooling() && c.generation() == generation
                }
            };
            if live {
                break;
            }
            self.timers.pop();
        }
    }
}
