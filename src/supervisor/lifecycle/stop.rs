//! The lifecycle's orderly stop: every worker (and second process) gets SIGTERM (STOP-5,
//! STOP-6); once all have exited the shell gets `FlushMaster` to pass their last counts on (up
//! to `COUNTS_WAIT`, STOP-7); then the master gets SIGTERM. A second stop request changes
//! nothing.

use std::time::Instant;

use super::{Action, Lifecycle, Phase, State, COUNTS_WAIT};
use crate::deadline::Later;
use crate::process::ProcessId;

impl Lifecycle {
    /// Begin the orderly stop (after the proxy has drained). Idempotent.
    pub(crate) fn stop(&mut self, now: Instant) {
        if self.is_stopping() {
            return;
        }
        self.phase = Phase::StoppingWorkers;
        self.rolling = None;
        self.recycling = None;
        // A master waiting out a backoff is not started again, and has nothing to flush to.
        // One draining for a rolling restart is stopped last like any master (STOP-7): its
        // drain's deadline must not stop it before the workers and their last counts.
        match self.slots[0].state {
            State::Idle | State::Waiting { .. } => self.slots[0].state = State::Stopped,
            State::Draining { .. } => self.slots[0].state = State::Ready { since: now },
            _ => {}
        }
        self.stop_seconds(now);
        for i in 1..self.slots.len() {
            self.terminate_or_forget(ProcessId(i as u16), now);
        }
        self.advance_stop(now);
    }

    /// The shell has passed the workers' last counts to the master.
    pub(crate) fn master_flushed(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Flushing { .. }) {
            self.stop_master(now);
        }
    }

    pub(super) fn terminate_or_forget(&mut self, id: ProcessId, now: Instant) {
        let slot = &mut self.slots[id.index()];
        match slot.state {
            State::Starting { .. } | State::Ready { .. } | State::Draining { .. } => {
                slot.state = State::Stopping {
                    kill_at: now.later(self.kill_after),
                    killed: false,
                    restart: false,
                };
                self.down(id);
                self.actions.push_back(Action::Terminate(id));
            }
            State::Idle | State::Waiting { .. } => slot.state = State::Stopped,
            State::Stopping { .. } | State::Stopped => {}
        }
    }

    pub(super) fn advance_stop(&mut self, now: Instant) {
        if self.phase == Phase::StoppingWorkers {
            let workers_left = self.slots[1..]
                .iter()
                .any(|s| matches!(s.state, State::Stopping { .. }) || s.second.is_some());
            if !workers_left {
                if self.slots[0].state == State::Stopped || self.gave_up.is_some() {
                    self.stop_master(now);
                } else {
                    self.phase = Phase::Flushing {
                        until: now + COUNTS_WAIT,
                    };
                    self.actions.push_back(Action::FlushMaster);
                }
            }
        } else if self.phase == Phase::StoppingMaster && self.slots[0].state == State::Stopped {
            self.phase = Phase::Done;
            self.actions.push_back(Action::Finished);
        }
    }

    pub(super) fn stop_master(&mut self, now: Instant) {
        self.phase = Phase::StoppingMaster;
        self.terminate_or_forget(ProcessId::MASTER, now);
        self.advance_stop(now);
    }
}
