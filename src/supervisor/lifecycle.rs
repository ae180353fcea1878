//! The process table's lifecycle as a pure state machine: start order, restarts with backoff,
//! giving up on a master that never gets ready, and the orderly stop. Events and `now` in,
//! actions and the next deadline out; the shell (`supervisor::shell`) spawns, signals and reads.
//!
//! Theory of operation:
//! * Start: the master first. Once it is ready the shell is asked how many workers to run
//!   (`Action::SizeWorkers`: the memory fit needs the loaded master) and answers with
//!   `set_workers`; then the workers start one after another, each once the one before is ready
//!   (LAUNCH-2, LAUNCH-7). A worker that exits before it is ready does not hold the rest back:
//!   the next one starts and the failed one waits out its backoff.
//! * Running: any process that exits is started again after the policy's wait (`restart.rs`);
//!   the master's `maxStartFailures` rule ends the run with `Action::GiveUp`.
//! * Stop: every worker gets SIGTERM (STOP-5, STOP-6); once all have exited the shell gets
//!   `FlushMaster` to pass their last counts on (up to 5 s, STOP-7); then the master gets SIGTERM.
//!   A process still running `kill_after` after its SIGTERM gets SIGKILL (STOP-8). A second stop
//!   request changes nothing: the order is kept (`lifecycle/stop.rs`).
//! * Reload (`lifecycle/rolling.rs`): the worker count moves up or down while running
//!   (`resize`), and a rolling restart replaces every process one at a time, the master last
//!   (`rolling_restart`).
//! * What the rest of the launcher sees: `status(id)`, the state without its deadlines (the
//!   status keeper takes it at each use, it keeps no copy), and what each exit meant
//!   (`exited` returns an `Aftermath`: started again or gone, asked for or not). The proxy hears
//!   `Up` and `Down` in pairs; `AllReady` comes once. One restart at a time (DEC-6): no recycle
//!   begins while another, or a rolling restart, is under way (`restart_under_way`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::restart::{RestartPolicy, Verdict};
use crate::deadline::Later;
use crate::process::ProcessId;
use crate::status::restarts::{RestartCounts, RestartReason};

pub(crate) use actions::{Action, Aftermath, Exit, Status};
pub(crate) use beside::{Failed, SecondState};
pub(crate) use handover::LifecycleState;

/// How long the workers' last request counts may take to reach the master (STOP-7). Public for
/// `tests/ops_systemd.rs`, which checks README's `TimeoutStopSec` against the longest stop.
pub const COUNTS_WAIT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, PartialEq)]
enum State {
    /// Not started yet (waiting for its turn in the start order), or not wanted (beyond the
    /// worker count).
    Idle,
    Starting {
        since: Instant,
    },
    Ready {
        since: Instant,
    },
    /// Waiting out a restart backoff.
    Waiting {
        until: Instant,
    },
    /// Being recycled (`restart`) or retired (the worker count shrank): no new requests;
    /// SIGTERM once drained, or at `until` (`drainSeconds`).
    Draining {
        until: Instant,
        restart: bool,
    },
    /// SIGTERM sent; SIGKILL at `kill_at` unless it exits first. `restart`: a recycle, started
    /// again at once when it has exited (RECYCLE-4, RECYCLE-5).
    Stopping {
        kill_at: Instant,
        killed: bool,
        restart: bool,
    },
    /// Exited and will not be started again.
    Stopped,
}

#[derive(Clone, Debug)]
struct Slot {
    state: State,
    policy: RestartPolicy,
    /// Restarts decided since the launcher started, recycles and rolling restarts included.
    restarts: u32,
    /// The same, by reason.
    restarts_by: RestartCounts,
    /// When its current (or last) process was started.
    started: Option<Instant>,
    /// The shell was told `Up` and not yet `Down`: the proxy routes to it.
    up: bool,
    /// The hang watchdog killed its current process (`hung.rs`): its exit is counted `hung`.
    hung: bool,
    /// Why it was last started again.
    last_why: Option<RestartReason>,
    /// A second process in the place: a replacement started beside the one routed to, or the
    /// old one it took over from, leaving (`beside.rs`).
    second: Option<beside::Second>,
    /// When the second process was started (its row's uptime).
    second_started: Option<Instant>,
    /// How long its last process took to be ready (a replacement's start limit follows it).
    took: Option<Duration>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: State::Idle,
            policy: RestartPolicy::new(),
            restarts: 0,
            restarts_by: RestartCounts::default(),
            started: None,
            up: false,
            hung: false,
            last_why: None,
            second: None,
            second_started: None,
            took: None,
        }
    }

    fn restarted(&mut self, why: RestartReason) {
        self.restarts += 1;
        self.restarts_by.add(why);
        self.last_why = Some(why);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the master's first ready.
    StartingMaster,
    /// Waiting for the shell's `set_workers`.
    Sizing,
    Running,
    StoppingWorkers,
    Flushing {
        until: Instant,
    },
    StoppingMaster,
    Done,
}

/// The supervisor's decisions for one cluster.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    slots: Vec<Slot>,
    /// How many workers are wanted (slots 1..=workers).
    workers: usize,
    phase: Phase,
    max_start_failures: u32,
    kill_after: Duration,
    /// The master's failures in a row when it was given up.
    gave_up: Option<u32>,
    actions: VecDeque<Action>,
    /// The rolling restart under way, if any.
    rolling: Option<rolling::Rolling>,
    /// The memory recycle under way, until its replacement is ready (one at a time, DEC-6).
    recycling: Option<ProcessId>,
    /// `AllReady` has been said (it is said once).
    all_ready_said: bool,
    /// A rolling restart's worker steps ask the shell for room to start the replacement beside
    /// the old process (`Action::AskRoom`, DEC-78); off, each is replaced in place.
    beside_first: bool,
}

impl Lifecycle {
    /// `planned_workers` slots are made; `set_workers` may lower the count later.
    pub(crate) fn new(
        planned_workers: usize,
        max_start_failures: u32,
        kill_after: Duration,
    ) -> Lifecycle {
        Lifecycle {
            slots: vec![Slot::new(); planned_workers + 1],
            workers: planned_workers,
            phase: Phase::StartingMaster,
            max_start_failures,
            kill_after,
            gave_up: None,
            actions: VecDeque::new(),
            rolling: None,
            recycling: None,
            all_ready_said: false,
            beside_first: false,
        }
    }

    /// From now on a rolling restart's worker steps start the replacement beside the old
    /// process where the shell says there is room (DEC-78).
    pub(crate) fn replace_beside_first(&mut self) {
        self.beside_first = true;
    }

    /// Begins: the master is started first (LAUNCH-2).
    pub(crate) fn start(&mut self, now: Instant) {
        self.spawn(ProcessId::MASTER, now);
    }

    /// The next thing the shell must do; call until None after every event.
    #[must_use]
    pub(crate) fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next time `handle_timeout` has something to do. It changes only with an event (an
    /// exit, a ready, a stop, a reload, a recycle, `drained`) or `handle_timeout` itself.
    #[must_use]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let slots = self.slots.iter().filter_map(|s| match s.state {
            State::Waiting { until } => Some(until),
            State::Stopping {
                kill_at,
                killed: false,
                ..
            } => Some(kill_at),
            State::Draining { until, .. } => Some(until),
            _ => None,
        });
        let seconds = self
            .slots
            .iter()
            .filter_map(|s| s.second.and_then(beside::Second::deadline));
        let phase = match self.phase {
            Phase::Flushing { until } => Some(until),
            _ => None,
        };
        slots.chain(seconds).chain(phase).min()
    }

    /// The process said on its channel that it is ready (LAUNCH-3).
    pub(crate) fn ready(&mut self, id: ProcessId, now: Instant) {
        let Some(slot) = self.slots.get_mut(id.index()) else {
            return;
        };
        if !matches!(slot.state, State::Starting { .. }) {
            return;
        }
        slot.state = State::Ready { since: now };
        slot.took = slot.started.map(|s| now.saturating_duration_since(s));
        slot.policy.ready();
        slot.up = true;
        self.actions.push_back(Action::Up(id));
        if self.recycling == Some(id) {
            self.recycling = None;
        }
        if id.is_master() && self.phase == Phase::StartingMaster {
            self.phase = Phase::Sizing;
            self.actions.push_back(Action::SizeWorkers);
        } else if !id.is_master() && self.phase == Phase::Running {
            self.start_next_worker(now);
        }
        self.advance_rolling(now);
        self.all_ready_once();
    }

    /// `AllReady`, the first time every wanted process is ready once the count is known.
    fn all_ready_once(&mut self) {
        if self.all_ready_said || self.phase != Phase::Running {
            return;
        }
        if (0..=self.workers).all(|i| matches!(self.slots[i].state, State::Ready { .. })) {
            self.all_ready_said = true;
            self.actions.push_back(Action::AllReady);
        }
    }

    /// The shell's answer to `SizeWorkers`: run this many workers (at most the planned number).
    pub(crate) fn set_workers(&mut self, n: usize, now: Instant) {
        self.workers = n.min(self.slots.len() - 1);
        if self.phase == Phase::Sizing {
            self.phase = Phase::Running;
            self.start_next_worker(now);
            self.all_ready_once();
        }
    }

    /// The process exited (or could not be spawned). Returns what that meant: started again,
    /// gone for good, and whether the launcher had asked for it.
    pub(crate) fn exited(&mut self, id: ProcessId, how: Exit, now: Instant) -> Aftermath {
        let stopping = self.is_stopping();
        let Some(slot) = self.slots.get(id.index()) else {
            return Aftermath::NotRunning;
        };
        let ready_at = match slot.state {
            State::Starting { .. } => None,
            State::Ready { since } => Some(since),
            // A recycled worker (or a rolling restart's process): started again at once, no
            // backoff (RECYCLE-5). One that exited while draining was going anyway.
            State::Stopping { restart: true, .. } | State::Draining { restart: true, .. }
                if !stopping =>
            {
                self.down(id);
                let why = if self.recycling == Some(id) {
                    RestartReason::Recycle
                } else {
                    RestartReason::Rolling
                };
                self.slots[id.index()].restarted(why);
                self.spawn(id, now);
                return Aftermath::Restart { asked: true };
            }
            // A worker beyond a lowered count: gone for good, unless a later reload wants it
            // again: then it starts afresh, in the start order.
            State::Stopping { restart: false, .. } | State::Draining { restart: false, .. }
                if !stopping =>
            {
                self.down(id);
                if id.index() <= self.workers {
                    self.slots[id.index()].state = State::Idle;
                    self.slots[id.index()].restarted(RestartReason::Scale);
                    self.start_next_worker(now);
                    self.advance_rolling(now);
                    return Aftermath::Restart { asked: true };
                }
                self.retire(id);
                self.advance_rolling(now);
                return Aftermath::Gone { asked: true };
            }
            State::Stopping { .. } | State::Draining { .. } => {
                self.slots[id.index()].state = State::Stopped;
                self.down(id);
                self.advance_stop(now);
                return Aftermath::Gone { asked: true };
            }
            State::Idle | State::Waiting { .. } | State::Stopped => return Aftermath::NotRunning,
        };
        let was_ready = ready_at.is_some();
        self.down(id);
        if stopping {
            // The launcher is stopping: its end is part of the stop.
            self.slots[id.index()].state = State::Stopped;
            self.advance_stop(now);
            return Aftermath::Gone { asked: true };
        }
        let give_up_after = id.is_master().then_some(self.max_start_failures);
        let slot = &mut self.slots[id.index()];
        match slot.policy.exited(ready_at, now, give_up_after) {
            Verdict::Restart { after, failing } => {
                slot.state = State::Waiting { until: now + after };
                let why = if std::mem::take(&mut slot.hung) {
                    RestartReason::Hung
                } else {
                    RestartReason::Crash
                };
                slot.restarted(why);
                if !was_ready {
                    self.replacement_failed(id, beside::Failed::Exited(how));
                }
                self.actions
                    .push_back(Action::RestartScheduled { id, after, failing });
                // A worker that failed to start does not hold the next one back.
                if !id.is_master() && !was_ready && self.phase == Phase::Running {
                    self.start_next_worker(now);
                }
                Aftermath::Restart { asked: false }
            }
            Verdict::GiveUp { failures } => {
                slot.state = State::Stopped;
                self.gave_up = Some(failures);
                self.actions.push_back(Action::GiveUp { failures });
                self.stop(now);
                Aftermath::Gone { asked: false }
            }
        }
    }

    /// The process is no longer routed to: `Down`, once, if it was `Up`.
    fn down(&mut self, id: ProcessId) {
        let slot = &mut self.slots[id.index()];
        if std::mem::replace(&mut slot.up, false) {
            self.actions.push_back(Action::Down(id));
        }
    }

    /// A worker beyond the (lowered) count is gone for good.
    fn retire(&mut self, id: ProcessId) {
        self.slots[id.index()].state = State::Stopped;
        self.actions.push_back(Action::Retired(id));
        if self.recycling == Some(id) {
            self.recycling = None;
        }
    }

    /// Recycle a ready tx-worker (never the master: RECYCLE-6): no new requests, those it has
    /// may finish for up to `drain` (RECYCLE-2, RECYCLE-3), then it is stopped as on shutdown and
    /// started again at once (RECYCLE-4, RECYCLE-5). False when it can't be recycled now.
    pub(crate) fn recycle(&mut self, id: ProcessId, drain: Duration, now: Instant) -> bool {
        if id.is_master() || self.phase != Phase::Running || self.restart_under_way() {
            return false;
        }
        let Some(slot) = self.slots.get_mut(id.index()) else {
            return false;
        };
        if !matches!(slot.state, State::Ready { .. }) {
            return false;
        }
        slot.state = State::Draining {
            until: now.later(drain),
            restart: true,
        };
        self.recycling = Some(id);
        self.actions.push_back(Action::Drain(id));
        true
    }

    /// A draining worker has nothing left at work: stop it now.
    pub(crate) fn drained(&mut self, id: ProcessId, now: Instant) {
        if let Some(slot) = self.slots.get_mut(id.index()) {
            if let State::Draining { restart, .. } = slot.state {
                slot.state = State::Stopping {
                    kill_at: now.later(self.kill_after),
                    killed: false,
                    restart,
                };
                self.actions.push_back(Action::Terminate(id));
            }
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.slots.len() {
            let id = ProcessId(i as u16);
            // A replacement starting beside it takes the place if it gets ready.
            let beside = matches!(self.slots[i].second, Some(beside::Second::Starting { .. }));
            match self.slots[i].state {
                State::Waiting { until } if until <= now && !beside => self.spawn(id, now),
                State::Stopping {
                    kill_at,
                    killed: false,
                    restart,
                } if kill_at <= now => {
                    self.slots[i].state = State::Stopping {
                        kill_at,
                        killed: true,
                        restart,
                    };
                    self.actions.push_back(Action::Kill(id));
                }
                State::Draining { until, .. } if until <= now => self.drained(id, now),
                _ => {}
            }
        }
        self.second_timeouts(now);
        self.advance_rolling(now);
        if let Phase::Flushing { until } = self.phase {
            if until <= now {
                self.stop_master(now);
            }
        }
    }

    fn spawn(&mut self, id: ProcessId, now: Instant) {
        self.slots[id.index()].hung = false;
        self.slots[id.index()].state = State::Starting { since: now };
        self.slots[id.index()].started = Some(now);
        self.actions.push_back(Action::Spawn(id));
    }

    /// Starts the first wanted worker that has never been started, if the one before it is
    /// settled (ready, or failed and waiting) and no place has a second process.
    fn start_next_worker(&mut self, now: Instant) {
        // A second process holds the port of a place beyond the count (DEC-78, DEC-94): a
        // place wanted anew would start on it, so it waits until the second one has gone.
        if self.any_second() {
            return;
        }
        for i in 1..=self.workers {
            match self.slots[i].state {
                State::Idle => {
                    self.spawn(ProcessId(i as u16), now);
                    return;
                }
                State::Starting { .. } => return,
                _ => {}
            }
        }
    }
}

mod actions;
mod beside;
mod handover;
mod hung;
mod rolling;
mod status;
mod stop;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
