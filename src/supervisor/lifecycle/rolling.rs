//! The lifecycle on reload (SIGHUP): the worker count moved while running, and the rolling
//! restart. Pure, as the rest of the lifecycle: events and `now` in, actions out.
//!
//! * `resize`: more workers get new slots (or retired ones back) and start one after another as
//!   at launch; fewer: the workers above the count are drained (up to `drainSeconds`), stopped,
//!   and not started again (`Action::Retired` once each is gone), a replacement starting beside
//!   one of them stopped too (DEC-78). One wanted again before it has
//!   gone starts afresh once it has.
//! * `rolling_restart`: every running worker, then the master, one at a time, each through the
//!   recycle path: out of rotation and drained (DEC-15), SIGTERM, started again at once, and the
//!   next one only once it is ready, so with a worker or more something serves tx at every
//!   moment and the master's own paths are refused only while the master itself restarts.
//!   Processes not running when their turn comes (starting, waiting out a backoff) are skipped:
//!   they start with the new code anyway. A memory recycle under way is waited for (one at a
//!   time, DEC-6). A process that exits before it is ready again stops the sequence
//!   (`RollingAborted`): new code that doesn't start must not take the others down with it.
//! * A second rolling restart while one is under way lets the process at hand finish, then
//!   begins the whole sequence again, so every process ends up started after the last request.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Action, Lifecycle, Phase, Slot, State};
use crate::deadline::Later;
use crate::process::ProcessId;

/// A rolling restart under way.
#[derive(Clone, Debug)]
pub(super) struct Rolling {
    /// Still to do, in order (the master last).
    pub(super) queue: VecDeque<ProcessId>,
    /// The process being replaced now.
    pub(super) current: Option<ProcessId>,
    pub(super) drain: Duration,
    /// Steps taken and the sequence's length, for the log.
    pub(super) step: usize,
    pub(super) of: usize,
    /// `AskRoom` said for `current`, not answered yet.
    pub(super) asking: bool,
    /// Halted (`halt_rolling`): the process at hand finishes, no other is reached.
    pub(super) halted: bool,
}

impl Lifecycle {
    /// Runs `n` workers from now on (a reload). False while the cluster is starting or stopping
    /// (nothing changes then).
    pub fn resize(&mut self, n: usize, drain: Duration, now: Instant) -> bool {
        if self.phase != Phase::Running {
            return false;
        }
        while self.slots.len() <= n {
            self.slots.push(Slot::new());
        }
        for i in 1..self.slots.len() {
            let keep = i <= n;
            let slot = &mut self.slots[i];
            match (&mut slot.state, keep) {
                // Wanted again: a retired slot starts afresh in the start order, a new worker.
                (State::Stopped, true) => *slot = Slot::new(),
                // Wanted again while being retired: it starts afresh once it has stopped
                // (`exited`), in the start order, not as a restart (it was not out for one).
                (_, true) => {}
                (State::Ready { .. }, false) => {
                    slot.state = State::Draining {
                        until: now.later(drain),
                        restart: false,
                    };
                    self.actions.push_back(Action::Drain(ProcessId(i as u16)));
                }
                (State::Draining { restart, .. } | State::Stopping { restart, .. }, false) => {
                    *restart = false
                }
                (State::Starting { .. }, false) => {
                    slot.state = State::Stopping {
                        kill_at: now.later(self.kill_after),
                        killed: false,
                        restart: false,
                    };
                    self.actions
                        .push_back(Action::Terminate(ProcessId(i as u16)));
                }
                (State::Idle | State::Waiting { .. }, false) => self.retire(ProcessId(i as u16)),
                (State::Stopped, false) => {}
            }
            if !keep {
                self.stop_replacement(ProcessId(i as u16), now);
            }
        }
        self.workers = n;
        self.start_next_worker(now);
        self.advance_rolling(now);
        true
    }

    /// Begins a rolling restart: every running worker, then the master, one at a time. False
    /// while the cluster is starting or stopping. A second call while one is under way begins
    /// the sequence again once the process at hand is ready.
    pub fn rolling_restart(&mut self, drain: Duration, now: Instant) -> bool {
        self.rolling_restart_of(&|_| true, drain, now)
    }

    /// A rolling restart of the processes `which` picks (in the same order: the workers, then
    /// the master): a reload's, of those whose inputs changed. With none picked nothing begins
    /// (and nothing is said to be done): true, as there is nothing to wait for.
    pub fn rolling_restart_of(
        &mut self,
        which: &dyn Fn(ProcessId) -> bool,
        drain: Duration,
        now: Instant,
    ) -> bool {
        if self.phase != Phase::Running {
            return false;
        }
        // Those still waiting their turn in a rolling restart under way keep it.
        let waiting = |id: ProcessId| self.rolling.as_ref().is_some_and(|r| r.queue.contains(&id));
        let picked = |id: ProcessId| which(id) || waiting(id);
        let mut queue: VecDeque<ProcessId> = (1..=self.workers)
            .filter(|&i| !matches!(self.slots[i].state, State::Idle | State::Stopped))
            .map(|i| ProcessId(i as u16))
            .filter(|&id| picked(id))
            .collect();
        if picked(ProcessId::MASTER) {
            queue.push_back(ProcessId::MASTER);
        }
        if queue.is_empty() {
            // Nothing to restart; one under way (its current process only) goes on as it is.
            return true;
        }
        let current = self.rolling.as_ref().and_then(|r| r.current);
        self.rolling = Some(Rolling {
            of: queue.len(),
            queue,
            current,
            drain,
            step: 0,
            asking: false,
            halted: false,
        });
        self.advance_rolling(now);
        true
    }

    /// Halts the rolling restart under way (a reload was refused: the servers read config.json
    /// themselves, so no other process is restarted on a broken file): the process at hand
    /// finishes, the rest are left as they are, and `RollingHalted` ends it. The processes not
    /// reached are picked by the next reload, whose inputs still differ. Returns the codes'
    /// places left untouched; None with no rolling restart under way.
    pub fn halt_rolling(&mut self, now: Instant) -> Option<Vec<ProcessId>> {
        let r = self.rolling.as_mut()?;
        r.halted = true;
        let left: Vec<ProcessId> = r.queue.drain(..).collect();
        self.advance_rolling(now);
        Some(left)
    }

    /// Whether a rolling restart is under way.
    pub fn is_rolling(&self) -> bool {
        self.rolling.is_some()
    }

    /// Takes the next process of the rolling restart out of rotation once the one before it is
    /// ready again (and no memory recycle is under way).
    pub(super) fn advance_rolling(&mut self, now: Instant) {
        let Some(r) = self.rolling.as_mut() else {
            return;
        };
        if let Some(cur) = r.current {
            let busy = matches!(
                self.slots.get(cur.index()).map(|s| &s.state),
                Some(State::Draining { .. } | State::Stopping { .. } | State::Starting { .. })
            );
            if busy || r.asking {
                return;
            }
            r.current = None;
        }
        // Another recycle (the memory guard's) goes first: one at a time (DEC-6).
        let recycling = self.slots.iter().any(|s| {
            matches!(
                s.state,
                State::Draining { restart: true, .. } | State::Stopping { restart: true, .. }
            )
        });
        // One process more than wanted at most: the last replacement's old process has gone.
        let second = self.slots.iter().any(|s| s.second.is_some());
        if recycling || second {
            return;
        }
        while let Some(next) = r.queue.pop_front() {
            r.step += 1;
            let Some(slot) = self.slots.get_mut(next.index()) else {
                continue;
            };
            // Wanted and ready; anything else is starting anew anyway, or gone.
            let wanted = next.is_master() || next.index() <= self.workers;
            if !wanted || !matches!(slot.state, State::Ready { .. }) {
                continue;
            }
            r.current = Some(next);
            if self.beside_first && !next.is_master() {
                r.asking = true;
                self.actions.push_back(Action::AskRoom {
                    id: next,
                    step: r.step,
                    of: r.of,
                });
                return;
            }
            let slot = &mut self.slots[next.index()];
            slot.state = State::Draining {
                until: now.later(r.drain),
                restart: true,
            };
            self.actions.push_back(Action::RollingStep {
                id: next,
                step: r.step,
                of: r.of,
            });
            self.actions.push_back(Action::Drain(next));
            return;
        }
        let halted = r.halted;
        self.rolling = None;
        self.actions.push_back(if halted {
            Action::RollingHalted
        } else {
            Action::RollingDone
        });
    }
}

#[cfg(test)]
mod tests;
