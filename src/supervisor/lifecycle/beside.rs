//! The replacement before the retirement (DEC-78): in a rolling restart, a tx-worker's
//! replacement is started beside it when there is room for one more process (the shell answers
//! `Action::AskRoom` with `room`), on a port of its own, while the old one serves on. Once the
//! replacement is ready it takes the place (`Action::Switch`: same code, same place, new
//! requests to its port) and the old one drains and stops as the place's second process; the
//! next step waits until it has gone, so at most one process more runs than wanted. The ready
//! tx places never drop below the wanted count.
//!
//! A replacement that exits, or is not ready within its start limit (`start_limit`), stops the
//! rolling restart there (DEC-79): the old process was never touched and serves on, the
//! processes after it are not reached, the master is not restarted.
//!
//! Without room (memory, or no spare port), the step is the recycle path as before: out of
//! rotation, drained, stopped, started again.
//!
//! The second process holds the port of a place beyond the worker count (the replacement
//! before the switch, the old process after it, the two places' ports swapped): a place wanted
//! meanwhile (a reload raising the count) would start on that port and fail to listen, so no
//! place starts anew until the second process has gone (`start_next_worker`), then at once.

use std::time::{Duration, Instant};

use super::{Action, Exit, Lifecycle, Phase, Slot, State};
use crate::deadline::Later;
use crate::process::ProcessId;
use crate::status::restarts::RestartReason;

/// The least time a replacement is given to be ready, whatever its place's last start took.
pub(crate) const START_LIMIT_FLOOR: Duration = Duration::from_secs(10);
/// A replacement is given this many times its place's last start.
const START_LIMIT_TIMES: u32 = 3;

/// A replacement's start limit (DEC-81): `START_LIMIT_TIMES` what its place's last process took
/// to be ready, and at least `START_LIMIT_FLOOR` (a server that loads for minutes gets minutes).
pub(crate) fn start_limit(last_start: Option<Duration>) -> Duration {
    last_start
        .map_or(START_LIMIT_FLOOR, |d| d.saturating_mul(START_LIMIT_TIMES))
        .max(START_LIMIT_FLOOR)
}

/// A place's second process, beside the one routed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Second {
    /// The replacement, started beside the ready process, not ready yet; given up at `limit`.
    /// `drain`: how long the old one may finish its requests once the replacement took over.
    Starting {
        since: Instant,
        limit: Instant,
        drain: Duration,
    },
    /// The process the replacement took over from: no new requests, those it has finish (up
    /// to `until`, `drainSeconds`).
    Draining { until: Instant },
    /// SIGTERM sent; SIGKILL at `kill_at` unless it exits first. `old`: the process the
    /// replacement took over from (else a replacement that did not come, or a stop's).
    Stopping {
        kill_at: Instant,
        killed: bool,
        old: bool,
    },
}

/// A place's second process as the status shows it (DEC-92): its own row beside the place's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SecondView {
    pub(crate) state: SecondState,
    /// The replacement, not ready yet; else the old process the replacement took over from.
    pub(crate) replacement: bool,
    /// When it was started.
    pub(crate) started: Option<Instant>,
}

/// Where a place's second process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SecondState {
    Starting,
    Draining,
    Stopping,
}

impl Second {
    pub(super) fn deadline(self) -> Option<Instant> {
        match self {
            Second::Starting { limit, .. } => Some(limit),
            Second::Draining { until } => Some(until),
            Second::Stopping {
                kill_at,
                killed: false,
                ..
            } => Some(kill_at),
            Second::Stopping { killed: true, .. } => None,
        }
    }
}

/// How a replacement ended without being ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// It exited (or could not be started).
    Exited(Exit),
    /// It was not ready within its start limit, and was killed.
    NotReady(Duration),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Exited(how) => write!(f, "exited before it was ready ({how})"),
            Failed::NotReady(limit) => write!(
                f,
                "was not ready within its start limit of {} s (killed)",
                limit.as_secs_f64()
            ),
        }
    }
}

impl Slot {
    /// Its replacement starts beside its process, given its start limit (DEC-81).
    fn start_beside(&mut self, drain: Duration, now: Instant) {
        let limit = now.later(start_limit(self.took));
        self.second = Some(Second::Starting {
            since: now,
            limit,
            drain,
        });
        self.second_started = Some(now);
    }
}

impl Lifecycle {
    /// The shell's answer to `AskRoom`: with room (`true`) the replacement starts beside the
    /// process; without, the process is drained and replaced in place, as a recycle is.
    pub(crate) fn room(&mut self, id: ProcessId, room: bool, now: Instant) {
        let Some(r) = self.rolling.as_mut() else {
            return;
        };
        if r.current != Some(id) || !std::mem::take(&mut r.asking) {
            return;
        }
        let drain = r.drain;
        let Some(slot) = self.slots.get_mut(id.index()) else {
            return;
        };
        if !matches!(slot.state, State::Ready { .. }) {
            r.current = None;
            self.advance_rolling(now);
            return;
        }
        if room {
            slot.start_beside(drain, now);
            self.actions.push_back(Action::SpawnBeside(id));
        } else {
            slot.state = State::Draining {
                until: now.later(drain),
                restart: true,
            };
            self.actions.push_back(Action::Drain(id));
        }
    }

    /// A memory recycle with room for one more process (memory read now, a spare port: the
    /// shell's answer): the replacement starts beside the process, which serves on until it
    /// is ready (DEC-94); then as in a rolling restart's step. False when it can't be
    /// recycled now (as `recycle`).
    pub(crate) fn recycle_beside(&mut self, id: ProcessId, drain: Duration, now: Instant) -> bool {
        if id.is_master() || self.phase != Phase::Running || self.restart_under_way() {
            return false;
        }
        let Some(slot) = self.slots.get_mut(id.index()) else {
            return false;
        };
        if !matches!(slot.state, State::Ready { .. }) || slot.second.is_some() {
            return false;
        }
        slot.start_beside(drain, now);
        self.recycling = Some(id);
        self.actions.push_back(Action::SpawnBeside(id));
        true
    }

    /// The replacement started beside the process is ready: it takes the place, and the old
    /// one drains (`Action::Switch`). A place whose process ended meanwhile takes it too.
    pub(crate) fn second_ready(&mut self, id: ProcessId, now: Instant) {
        let recycle = self.recycling == Some(id);
        let Some(slot) = self.slots.get_mut(id.index()) else {
            return;
        };
        let Some(Second::Starting { since, drain, .. }) = slot.second else {
            return;
        };
        let old_runs = matches!(slot.state, State::Ready { .. });
        slot.second = old_runs.then_some(Second::Draining {
            until: now.later(drain),
        });
        slot.second_started = if old_runs { slot.started } else { None };
        slot.took = Some(now.saturating_duration_since(since));
        slot.state = State::Ready { since: now };
        slot.started = Some(since);
        slot.policy.ready();
        slot.restarted(if recycle {
            RestartReason::Recycle
        } else {
            RestartReason::Rolling
        });
        let announce = !slot.up;
        slot.up = true;
        self.actions.push_back(Action::Switch { id, old_runs });
        if announce {
            self.actions.push_back(Action::Up(id));
        }
        // A recycle is under way until the old process has gone (one at a time, DEC-6).
        if recycle && !old_runs {
            self.recycling = None;
        }
        // No old process to wait for: the port it held is free for a place wanted meanwhile.
        if !old_runs && self.phase == Phase::Running {
            self.start_next_worker(now);
        }
        self.advance_rolling(now);
    }

    /// The place's second process exited: the replacement before it was ready (the rolling
    /// restart stops: DEC-79), or the old one the replacement took over from.
    pub(crate) fn second_exited(&mut self, id: ProcessId, how: Exit, now: Instant) {
        let Some(slot) = self.slots.get_mut(id.index()) else {
            return;
        };
        let Some(second) = slot.second.take() else {
            return;
        };
        match second {
            Second::Starting { drain, .. } if !self.is_stopping() => {
                self.replacement_failed(id, Failed::Exited(how));
                self.recycle_in_place(id, drain, now);
            }
            // The recycle's old process has gone: the recycle is over.
            Second::Draining { .. } | Second::Stopping { old: true, .. }
                if self.recycling == Some(id) =>
            {
                self.recycling = None
            }
            _ => {}
        }
        // The port it held is free: a place wanted meanwhile starts now.
        if self.phase == Phase::Running {
            self.start_next_worker(now);
        }
        self.advance_stop(now);
        self.advance_rolling(now);
    }

    /// The process the replacement took over from has nothing left at work: stop it now.
    pub(crate) fn second_drained(&mut self, id: ProcessId, now: Instant) {
        let kill_at = now.later(self.kill_after);
        if let Some(slot) = self.slots.get_mut(id.index()) {
            if let Some(Second::Draining { .. }) = slot.second {
                slot.second = Some(Second::Stopping {
                    kill_at,
                    killed: false,
                    old: true,
                });
                self.actions.push_back(Action::TerminateSecond(id));
            }
        }
    }

    /// Whether the place's second process is the old one, draining.
    pub(crate) fn is_second_draining(&self, id: ProcessId) -> bool {
        matches!(
            self.slots.get(id.index()).and_then(|s| s.second),
            Some(Second::Draining { .. })
        )
    }

    /// The place's second process, for its row in the status (DEC-92): the replacement
    /// starting beside the place's process, or the old one draining and stopping.
    pub(crate) fn second_view(&self, id: ProcessId) -> Option<SecondView> {
        let slot = self.slots.get(id.index())?;
        let (state, replacement) = match slot.second? {
            Second::Starting { .. } => (SecondState::Starting, true),
            Second::Draining { .. } => (SecondState::Draining, false),
            Second::Stopping { old, .. } => (SecondState::Stopping, !old),
        };
        Some(SecondView {
            state,
            replacement,
            started: slot.second_started,
        })
    }

    /// Whether any place has a second process: a spare place's port is taken meanwhile.
    pub(crate) fn any_second(&self) -> bool {
        self.slots.iter().any(|s| s.second.is_some())
    }

    /// Whether the place has a second process (a replacement starting, or the old one leaving).
    pub(crate) fn has_second(&self, id: ProcessId) -> bool {
        self.slots
            .get(id.index())
            .is_some_and(|s| s.second.is_some())
    }

    /// The replacement `id`'s rolling restart was waiting for ended without being ready: the
    /// sequence stops, the processes after it untouched (DEC-79).
    pub(super) fn replacement_failed(&mut self, id: ProcessId, how: Failed) {
        let current = self.rolling.as_ref().and_then(|r| r.current);
        if current == Some(id) {
            self.rolling = None;
            self.actions.push_back(Action::RollingAborted { id, how });
        }
    }

    /// A recycle's replacement beside the process did not come: the process is recycled as
    /// without room, in place (out of rotation, drained, started again).
    fn recycle_in_place(&mut self, id: ProcessId, drain: Duration, now: Instant) {
        if self.recycling != Some(id) {
            return;
        }
        let Some(slot) = self.slots.get_mut(id.index()) else {
            return;
        };
        if !matches!(slot.state, State::Ready { .. }) {
            self.recycling = None;
            return;
        }
        slot.state = State::Draining {
            until: now.later(drain),
            restart: true,
        };
        self.actions.push_back(Action::Drain(id));
    }

    /// The second processes' deadlines: a replacement's start limit, the old one's drain, its
    /// SIGKILL.
    pub(super) fn second_timeouts(&mut self, now: Instant) {
        for i in 0..self.slots.len() {
            let id = ProcessId(i as u16);
            let Some(second) = self.slots[i].second else {
                continue;
            };
            if second.deadline().is_none_or(|d| d > now) {
                continue;
            }
            match second {
                Second::Starting {
                    since,
                    limit,
                    drain,
                } => {
                    self.slots[i].second = Some(Second::Stopping {
                        kill_at: now,
                        killed: true,
                        old: false,
                    });
                    self.actions.push_back(Action::KillSecond(id));
                    let waited = limit.saturating_duration_since(since);
                    self.replacement_failed(id, Failed::NotReady(waited));
                    self.recycle_in_place(id, drain, now);
                }
                Second::Draining { .. } => self.second_drained(id, now),
                Second::Stopping { old, .. } => {
                    self.slots[i].second = Some(Second::Stopping {
                        kill_at: now,
                        killed: true,
                        old,
                    });
                    self.actions.push_back(Action::KillSecond(id));
                }
            }
        }
    }

    /// The place leaves (a lower worker count): a replacement starting beside its process is
    /// stopped, so it never takes back a place on its way out.
    pub(super) fn stop_replacement(&mut self, id: ProcessId, now: Instant) {
        let kill_at = now.later(self.kill_after);
        if let Some(slot) = self.slots.get_mut(id.index()) {
            if let Some(Second::Starting { .. }) = slot.second {
                slot.second = Some(Second::Stopping {
                    kill_at,
                    killed: false,
                    old: false,
                });
                self.actions.push_back(Action::TerminateSecond(id));
            }
        }
    }

    /// The launcher stops: a replacement starting or an old process draining is stopped too.
    pub(super) fn stop_seconds(&mut self, now: Instant) {
        let kill_at = now.later(self.kill_after);
        for i in 0..self.slots.len() {
            if let Some(second @ (Second::Starting { .. } | Second::Draining { .. })) =
                self.slots[i].second
            {
                self.slots[i].second = Some(Second::Stopping {
                    kill_at,
                    killed: false,
                    old: matches!(second, Second::Draining { .. }),
                });
                self.actions
                    .push_back(Action::TerminateSecond(ProcessId(i as u16)));
            }
        }
    }
}

#[cfg(test)]
mod tests;
