//! The scheduler: which process takes each tx request, and when.
//!
//! Theory of operation. A request either goes at once to a process with a free slot for its
//! lane (the least loaded of those that may take it; ties go round-robin), or waits: in its
//! process's own queue when only that process may take it (cache-id issuer, affinity), else in
//! the shared queue of its lane. Each wait has a deadline among the timers (`timers.rs`). Whenever a slot
//! frees or a process becomes able to take more (ready, out of cooldown, a reservation lifted),
//! that process is *pumped*: the oldest fast request waiting for it takes the slot if the lane
//! rule lets it, else the oldest normal one. Between public calls the invariant holds that no
//! waiting request could be admitted anywhere, so a newcomer that finds no room never jumps a
//! waiting one of its class. Every decision is O(1) or O(processes); nothing scans a queue,
//! except when a process goes away and its own waiters must be answered or moved.
//!
//! Every request ends exactly once: `Refuse`, `Fail`, or `Dispatch` followed by `finish` or
//! `cancel` (a `finish(NotSent)` may be answered by one more `Dispatch`).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

use super::config::SchedulerConfig;
use super::cooldown::Cooldown;
use super::estimate::ServiceTime;
use super::queue::WaitQueue;
use super::slots::{Limits, Slots};
use super::timers::{Timer, Timers, WaitKind};
use super::types::{Action, Finish, Load, ProcessState, Refusal, RequestId};
use crate::process::ProcessId;
use crate::proxy::lane::Lane;
use crate::proxy::route::{Target, TxDemand};

mod pick;
mod predict;
mod upkeep;

use predict::Running;

/// The tx scheduler. See the module docs.
#[derive(Clone, Debug)]
pub struct Scheduler {
    cfg: SchedulerConfig,
    limits: Limits,
    procs: Vec<Proc>,
    /// Requests any eligible process may take, by lane.
    shared: [WaitQueue; 2],
    requests: HashMap<RequestId, Req, BuildHasherDefault<IdHasher>>,
    timers: Timers,
    actions: VecDeque<Action>,
    next_seq: u64,
    /// Where the next least-loaded scan starts, so ties rotate.
    cursor: usize,
    /// Ready tx processes not in cooldown; 0 means cooldowns are ignored (COOL-3).
    open: usize,
    stopping: bool,
    /// Processes to pump before returning, and whether all must be.
    dirty: Vec<usize>,
    dirty_all: bool,
    /// The latest `now` the shell gave (what a dispatch is timed from).
    clock: Option<Instant>,
}

#[derive(Clone, Debug, Default)]
struct Proc {
    present: bool,
    serves_tx: bool,
    state: Option<ProcessState>,
    slots: Slots,
    /// Its event loop is saturated: normal requests held to this many (`slots.rs`).
    held: Option<u32>,
    cool: Cooldown,
    /// Requests only this process may take, by lane.
    owned: [WaitQueue; 2],
    /// Its counted requests in flight, with when each was sent (`predictiveAdmission`'s
    /// forecast reads how long each has run).
    running: Vec<Running>,
    /// How long it takes to free a slot, by lane (DEC-50).
    service: [ServiceTime; 2],
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Place {
    Shared,
    Owned(usize),
}

/// Why a request waits, which sets how long and what happens if its process goes away.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Wait {
    /// Rule 4: `queueSeconds`.
    Any,
    /// Rule 3 with an unknown prefix: any process, `ownerQueueSeconds`.
    Unknown,
    /// Its issuer only: `ownerQueueSeconds`; refused as lost if the issuer goes.
    Owner,
    /// Its issuer while up: `ownerQueueSeconds`; moved to the shared queue if the issuer goes.
    Affinity,
}

#[derive(Copy, Clone, Debug)]
enum Req {
    Waiting {
        seq: u64,
        lane: Lane,
        at: Place,
        wait: Wait,
        /// When its wait ends (the forecast reads it: one that will be refused first takes no
        /// slot from those behind it).
        until: Instant,
        /// It was sent once and came back unsent (DEC-33): its next dispatch is its last.
        retried: bool,
    },
    InFlight {
        process: usize,
        lane: Lane,
        counted: bool,
        /// Another process may take it (for the one retry after `NotSent`).
        flexible: bool,
        retried: bool,
    },
}

/// The result of looking for a process for a flexible request.
enum Pick {
    Got(usize),
    /// Some process could take it later.
    Full,
    /// No ready process at all.
    NoneReady,
}

const LANES: [Lane; 2] = [Lane::Fast, Lane::Normal];

fn ix(lane: Lane) -> usize {
    match lane {
        Lane::Fast => 0,
        Lane::Normal => 1,
    }
}

fn is_waiting(
    requests: &HashMap<RequestId, Req, BuildHasherDefault<IdHasher>>,
    s: u64,
    id: RequestId,
) -> bool {
    matches!(requests.get(&id), Some(Req::Waiting { seq, .. }) if *seq == s)
}

impl Scheduler {
    /// `processes`: each process's id and whether it serves ordinary tx requests; all start
    /// `Down` until `set_process(.., Ready, ..)`.
    pub fn new(cfg: SchedulerConfig, processes: &[(ProcessId, bool)]) -> Scheduler {
        let mut s = Scheduler {
            limits: Limits::new(&cfg),
            cfg,
            procs: Vec::new(),
            shared: Default::default(),
            requests: HashMap::default(),
            timers: Timers::default(),
            actions: VecDeque::new(),
            next_seq: 0,
            cursor: 0,
            open: 0,
            stopping: false,
            dirty: Vec::new(),
            dirty_all: false,
            clock: None,
        };
        for &(p, serves_tx) in processes {
            s.add_process(p, serves_tx);
        }
        s
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }

    /// Live reload. Waiting requests keep their deadlines and cooldowns their ends; new limits
    /// apply to the next decisions (a lower limit lets the excess in flight finish).
    pub fn set_config(&mut self, cfg: SchedulerConfig, now: Instant) {
        self.advance(now);
        self.limits = Limits::new(&cfg);
        self.cfg = cfg;
        self.dirty_all = true;
        self.settle();
    }

    /// A new process (the worker count grew), `Down` until it is ready. Re-adding a removed one
    /// keeps the count of what it still has in flight.
    pub fn add_process(&mut self, p: ProcessId, serves_tx: bool) {
        let i = p.index();
        if self.procs.len() <= i {
            self.procs.resize_with(i + 1, Proc::default);
        }
        let proc = &mut self.procs[i];
        if !proc.present {
            proc.state = Some(ProcessState::Down);
        }
        proc.present = true;
        proc.serves_tx = serves_tx;
        self.recount_open();
        self.dirty_all = true;
        self.settle();
    }

    /// A process leaves the cluster (the worker count shrank): as `Down`, then forgotten.
    pub fn remove_process(&mut self, p: ProcessId, now: Instant) {
        self.set_process(p, ProcessState::Down, now);
        if let Some(proc) = self.procs.get_mut(p.index()) {
            proc.present = false;
            proc.state = None;
        }
        self.recount_open();
        self.settle();
    }

    /// Whether the process is in the cluster (added and not removed).
    pub fn has_process(&self, p: ProcessId) -> bool {
        self.procs.get(p.index()).is_some_and(|q| q.present)
    }

    /// The supervisor's news about a process.
    pub fn set_process(&mut self, p: ProcessId, state: ProcessState, now: Instant) {
        self.advance(now);
        let i = p.index();
        let Some(proc) = self.procs.get_mut(i).filter(|q| q.present) else {
            return;
        };
        let old = proc.state;
        proc.state = Some(state);
        if state != ProcessState::Ready {
            proc.held = None;
        }
        if state != ProcessState::Ready {
            self.release_owned(i, p);
        }
        if old == Some(ProcessState::Down) || state == ProcessState::Down {
            // A process that went down comes back with no history.
            self.procs[i].cool.reset();
            self.procs[i].service = Default::default();
        }
        self.recount_open();
        if self.open_or_cooling() == 0 {
            self.refuse_shared(Refusal::NoProcessReady);
        }
        if state == ProcessState::Ready {
            self.dirty.push(i);
        }
        self.settle();
    }

    /// Whether the process's event loop is saturated, and if so how many normal requests it is
    /// held to (the shell measures it, `proxy::saturation`). Ending it, or a higher limit, may
    /// let waiting requests in.
    pub fn set_saturated(&mut self, p: ProcessId, held: Option<u32>, now: Instant) {
        self.advance(now);
        let i = p.index();
        let Some(proc) = self.procs.get_mut(i).filter(|q| q.present) else {
            return;
        };
        let before = proc.held;
        proc.held = held.filter(|_| proc.state == Some(ProcessState::Ready));
        let loosened = match (before, proc.held) {
            (Some(_), None) => true,
            (Some(a), Some(b)) => b > a,
            _ => false,
        };
        if loosened {
            self.dirty.push(i);
        }
        self.settle();
    }

    /// A tx request arrives. What to do comes out of `poll_action`.
    pub fn submit(&mut self, id: RequestId, demand: &TxDemand, now: Instant) {
        self.advance(now);
        if self.requests.contains_key(&id) {
            // The shell reused a live id: a bug there; keep the first request's state sound.
            return;
        }
        let lane = self.limits.effective(demand.lane);
        let counted = demand.counted;
        match demand.target {
            Target::Owner(p) => {
                let i = p.index();
                if !self.is_ready(i) {
                    self.refuse(id, Refusal::OwnerGone(p));
                } else if !counted || self.admits(i, lane) {
                    self.dispatch(id, i, lane, counted, false, false);
                } else {
                    self.wait(id, lane, Place::Owned(i), Wait::Owner, now);
                }
            }
            Target::Affinity(p) if self.is_ready(p.index()) && self.steerable(p.index()) => {
                let i = p.index();
                if !counted || self.admits(i, lane) {
                    self.dispatch(id, i, lane, counted, true, false);
                } else {
                    self.wait(id, lane, Place::Owned(i), Wait::Affinity, now);
                }
            }
            Target::Affinity(_) | Target::LeastLoaded => {
                self.any(id, lane, counted, Wait::Any, now)
            }
            Target::UnknownPrefix => self.any(id, lane, counted, Wait::Unknown, now),
        }
        self.settle();
    }

    /// The client went away: a waiting request is dropped (never sent), a dispatched one frees
    /// its slot. No action follows.
    pub fn cancel(&mut self, id: RequestId, now: Instant) {
        self.advance(now);
        match self.requests.remove(&id) {
            Some(Req::Waiting { lane, at, .. }) => self.forget(at, lane),
            Some(Req::InFlight {
                process,
                lane,
                counted,
                ..
            }) => {
                self.free(process, id, lane, counted);
            }
            None => {}
        }
        self.settle();
    }

    /// A dispatched request ended (see `Finish`).
    pub fn finish(&mut self, id: RequestId, outcome: Finish, now: Instant) {
        self.advance(now);
        // One look-up: taken out, and put back only if it was not in flight (rare).
        let (process, lane, counted, flexible, retried) = match self.requests.remove(&id) {
            Some(Req::InFlight {
                process,
                lane,
                counted,
                flexible,
                retried,
            }) => (process, lane, counted, flexible, retried),
            other => {
                if let Some(waiting) = other {
                    self.requests.insert(id, waiting);
                }
                // Finishing a waiting request is a cancel; an unknown one is ignored.
                self.cancel(id, now);
                return;
            }
        };
        let since = self.free(process, id, lane, counted);
        if let (Finish::Responded { .. }, Some(since)) = (outcome, since) {
            // Only a response says how long the work took (a timeout, a failure or a client
            // gone says nothing of it).
            self.procs[process].service[ix(lane)].observe(now.saturating_duration_since(since));
        }
        let length = self.cfg.cooldown;
        let cool = &mut self.procs[process].cool;
        let started = match outcome {
            Finish::Responded { status } => cool.on_response(status, now, length),
            Finish::TimedOut => cool.on_timeout(now, length),
            Finish::NotSent | Finish::Failed => None,
        };
        if let Some(until) = started {
            let generation = self.procs[process].cool.generation();
            self.timers.push_cool(until, process, generation);
            self.recount_open();
        }
        if outcome == Finish::NotSent {
            let again = if flexible && !retried {
                self.pick(lane, Some(process), counted)
            } else {
                Pick::NoneReady
            };
            match again {
                Pick::Got(q) => self.dispatch(id, q, lane, counted, flexible, true),
                // Every other process busy: it waits for a slot as a new request does, its
                // `queueSeconds` counted from now (DEC-33).
                Pick::Full => self.wait_retried(id, lane, now),
                Pick::NoneReady => self.actions.push_back(Action::Fail {
                    id,
                    process: ProcessId(process as u16),
                }),
            }
        }
        self.settle();
    }

    /// The launcher is stopping: every waiting request is refused, and from now on nothing
    /// waits (QUEUE-15). Requests with room are still dispatched.
    pub fn stop(&mut self, now: Instant) {
        self.advance(now);
        self.stopping = true;
        self.refuse_shared(Refusal::Stopping);
        for i in 0..self.procs.len() {
            for lane in LANES {
                let drained: Vec<_> = self.procs[i].owned[ix(lane)].drain().collect();
                for (seq, id) in drained {
                    if is_waiting(&self.requests, seq, id) {
                        self.requests.remove(&id);
                        self.refuse(id, Refusal::Stopping);
                    }
                }
            }
        }
        self.settle();
    }

    /// The next thing the shell must do; call until `None` after every other call.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Every cooldown running, with its end (handed over by an in-place upgrade).
    pub fn cooldowns(&self) -> Vec<(ProcessId, Instant)> {
        self.procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.present)
            .filter_map(|(i, p)| Some((ProcessId(i as u16), p.cool.until()?)))
            .collect()
    }

    /// A cooldown the program before an in-place upgrade had running goes on to its end.
    pub fn resume_cooldown(&mut self, p: ProcessId, until: Instant, now: Instant) {
        let i = p.index();
        let Some(proc) = self.procs.get_mut(i).filter(|q| q.present) else {
            return;
        };
        if until <= now {
            return;
        }
        let generation = proc.cool.resume(until);
        self.timers.push_cool(until, i, generation);
        self.recount_open();
        self.settle();
    }

    /// When `handle_timeout` must next be called (a wait's end, a cooldown's end).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.peek().map(|(at, _)| at)
    }

    /// Time has come to `now`: waits that ended are refused, cooldowns that ended lifted.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        self.settle();
    }

    /// One process's load; zero for an unknown one.
    pub fn load(&self, p: ProcessId) -> Load {
        let Some(proc) = self.procs.get(p.index()) else {
            return Load::default();
        };
        Load {
            in_flight: proc.slots.in_flight,
            slots: self.limits.slots(),
            normal_running: proc.slots.normal_running,
            queued: proc.owned.iter().map(WaitQueue::live).sum(),
            cooling: proc.cool.cooling(),
            saturated: proc.held.is_some(),
            held: proc.held,
        }
    }

    /// Whether any request is in flight on any process.
    pub fn busy(&self) -> bool {
        self.procs.iter().any(|p| p.slots.in_flight > 0)
    }

    /// Whether normal requests wait that the process could take (what a hold keeps waiting).
    pub fn normal_waiting(&self, p: ProcessId) -> bool {
        let i = p.index();
        i < self.procs.len() && self.normal_waiting_for(i)
    }

    /// Requests waiting in the launcher.
    pub fn queued(&self) -> usize {
        let own: usize = self
            .procs
            .iter()
            .flat_map(|p| p.owned.iter())
            .map(WaitQueue::live)
            .sum();
        own + self.shared.iter().map(WaitQueue::live).sum::<usize>()
    }
}

/// A fast hasher for the shell's request ids (sequential numbers; no attacker chooses them).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }
}
