//! What the lifecycle tells the rest of the launcher: where each process is (`status`, the
//! state without its deadlines, which the status keeper takes at each use), whether the proxy
//! routes to it, the counts, and the phase. Queries only: nothing here changes the machine.

use std::time::Instant;

use super::{Lifecycle, Phase, State, Status};
use crate::process::ProcessId;
use crate::status::restarts::{RestartCounts, RestartReason};

impl Lifecycle {
    /// Restarts decided since the launcher started, per process, recycles and rolling restarts
    /// included (STATUS-17, DEC-25); counted when the exit is seen, as the status shows it.
    #[cfg(test)]
    pub(crate) fn restarts(&self, id: ProcessId) -> u32 {
        self.slots.get(id.index()).map_or(0, |s| s.restarts)
    }

    /// The same restarts, by reason.
    pub(crate) fn restarts_by(&self, id: ProcessId) -> RestartCounts {
        self.slots
            .get(id.index())
            .map_or_else(RestartCounts::default, |s| s.restarts_by)
    }

    /// Why the process was last started again (the reason its last exit's restart counts
    /// under), if it ever was.
    pub(crate) fn last_restart_reason(&self, id: ProcessId) -> Option<RestartReason> {
        self.slots.get(id.index()).and_then(|s| s.last_why)
    }

    /// When the process's current (or last) run was started.
    pub(crate) fn started(&self, id: ProcessId) -> Option<Instant> {
        self.slots.get(id.index()).and_then(|s| s.started)
    }

    /// Where the process is, for the rest of the launcher (the status, the logs): the state
    /// without its deadlines.
    pub(crate) fn status(&self, id: ProcessId) -> Status {
        let Some(slot) = self.slots.get(id.index()) else {
            return Status::NotStarted;
        };
        match slot.state {
            State::Idle => Status::NotStarted,
            State::Starting { .. } => Status::Starting {
                again: slot.restarts > 0,
            },
            State::Ready { since } => Status::Ready { since },
            State::Draining { .. } | State::Stopping { .. } if self.is_stopping() => {
                Status::Stopping
            }
            State::Draining { restart: true, .. } | State::Stopping { restart: true, .. } => {
                Status::Replacing
            }
            State::Draining { restart: false, .. } | State::Stopping { restart: false, .. } => {
                Status::Leaving
            }
            State::Waiting { .. } => Status::Restarting,
            State::Stopped => Status::Gone,
        }
    }

    /// The cluster runs (started and sized, not stopping): the worker count may move.
    pub(crate) fn is_serving(&self) -> bool {
        self.phase == Phase::Running
    }

    /// Whether the proxy routes to the process: `Up` was said and `Down` not yet.
    pub(crate) fn is_up(&self, id: ProcessId) -> bool {
        self.slots.get(id.index()).is_some_and(|s| s.up)
    }

    /// A memory recycle (until its replacement is ready) or a rolling restart is under way: no
    /// other recycle begins (one at a time, DEC-6).
    pub(crate) fn restart_under_way(&self) -> bool {
        self.recycling.is_some() || self.rolling.is_some()
    }

    /// The process is being recycled for its memory (until its replacement is ready, or its
    /// old process has gone after a replacement beside it: DEC-94).
    pub(crate) fn is_recycling(&self, id: ProcessId) -> bool {
        self.recycling == Some(id)
    }

    pub(crate) fn is_ready(&self, id: ProcessId) -> bool {
        matches!(
            self.slots.get(id.index()).map(|s| &s.state),
            Some(State::Ready { .. })
        )
    }

    /// Whether the process should have a live child (starting, ready or stopping).
    pub(crate) fn is_running(&self, id: ProcessId) -> bool {
        matches!(
            self.slots.get(id.index()).map(|s| &s.state),
            Some(
                State::Starting { .. }
                    | State::Ready { .. }
                    | State::Draining { .. }
                    | State::Stopping { .. }
            )
        )
    }

    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// The master's failures in a row, if it was given up (RESTART-7).
    pub(crate) fn gave_up(&self) -> Option<u32> {
        self.gave_up
    }

    /// Waiting for the master to take its last messages before it is stopped (STOP-7).
    pub(crate) fn is_flushing(&self) -> bool {
        matches!(self.phase, Phase::Flushing { .. })
    }

    pub(crate) fn is_stopping(&self) -> bool {
        matches!(
            self.phase,
            Phase::StoppingWorkers | Phase::Flushing { .. } | Phase::StoppingMaster | Phase::Done
        )
    }

    /// Whether the process is draining (recycle, rolling restart or retirement): the shell calls
    /// `drained` once nothing is at work on it.
    pub(crate) fn is_draining(&self, id: ProcessId) -> bool {
        matches!(
            self.slots.get(id.index()).map(|s| &s.state),
            Some(State::Draining { .. })
        )
    }

    /// How many process slots the lifecycle has (the master and every worker it has known).
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }
}
