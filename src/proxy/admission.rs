//! Admission: the shell around the pure scheduler (in the manner of quinn's connection driver).
//! The scheduler sits behind one short lock with a waiter per request for its decision; every
//! call feeds it and then carries its actions out (`pump`); a timer task wakes it at its next
//! deadline (queue waits, cooldowns).
//!
//! A request's life here: `admit` submits it and, if the scheduler does not decide at once,
//! registers its waiter; whoever holds the lock when the decision is made (another request
//! finishing, the timer) leaves it there and wakes the request's task, which takes it out; a
//! decision made at once is handed back as it is ([`Verdict`]: no waiter); a
//! [`Ticket`] guarantees the scheduler hears how the request ended exactly once, and a client
//! that goes away while it waits cancels it (dropped from the queue, never sent).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::route::TxDemand;
use super::scheduler::{
    Action, Finish, IdHasher, Load, ProcessState, RequestId, Scheduler, SchedulerConfig,
};
use super::verdict::{Decision, Verdict};
use crate::process::ProcessId;

struct Inner {
    sched: Scheduler,
    /// Keyed by the scheduler's fast hasher (ids are sequential, none chosen by a client):
    /// SipHash is made to resist chosen keys, a cost for nothing here, two look-ups per queued
    /// request.
    waiters: HashMap<RequestId, Waiter, BuildHasherDefault<IdHasher>>,
    /// Waiters still undecided (what `Admission::waiting` says).
    undecided: usize,
    /// The next waiter's serial.
    next_serial: u64,
    /// The deadline the timer task sleeps until (`None`: until it is woken), so it is woken
    /// only when an earlier one comes, not on every decision.
    timer_at: Option<std::time::Instant>,
    /// Cooldowns handed over by an in-place upgrade, each taken up as its process becomes
    /// ready in this program (before, the process is down here, and a process that comes back
    /// from down has no history).
    resumed_cooldowns: Vec<(ProcessId, std::time::Instant)>,
    /// The processes draining now (almost always none): as each one's last request ends, the
    /// supervisor is told at once (`drained`), not at its next upkeep tick.
    draining: Vec<ProcessId>,
}

/// One request's decision to come: its task's waker until it is made, then the decision until
/// the task takes it (`Verdict`).
struct Waiter {
    /// Which registration it is (a retry registers the request anew).
    serial: u64,
    slot: Slot,
}

enum Slot {
    Undecided(Option<Waker>),
    Decided(Decision),
}

impl Inner {
    /// Removes the waiter for `id` (of `serial`, when given), keeping the count of undecided.
    fn remove_waiter(&mut self, id: RequestId, serial: Option<u64>) {
        if let Some(w) = self.waiters.get(&id) {
            if serial.is_some_and(|s| s != w.serial) {
                return;
            }
            if matches!(w.slot, Slot::Undecided(_)) {
                self.undecided = self.undecided.saturating_sub(1);
            }
            self.waiters.remove(&id);
        }
    }

    /// Whether a draining process has nothing in flight any more.
    fn any_drained(&self) -> bool {
        self.draining
            .iter()
            .any(|&p| self.sched.load(p).in_flight == 0)
    }
}

/// The scheduler and the requests waiting for its decisions.
pub struct Admission {
    inner: Mutex<Inner>,
    /// Wakes the timer task when the next deadline may have moved.
    timer: Notify,
    next_id: AtomicU64,
    stopping: AtomicBool,
    /// The saturation watch sleeps (nothing was in flight) until the next dispatch wakes it.
    watch_idle: AtomicBool,
    watch_wake: Notify,
    /// How many requests wait for a decision, as of the last change: read without the lock by
    /// each client connection as its response ends (`conn::hyper_phase`).
    waiting: AtomicUsize,
    /// Woken when a draining process's last request has ended (the supervisor's shell waits on
    /// it, so a rolling restart's next step is not paced by a tick).
    drained: Arc<Notify>,
}

impl Admission {
    pub fn new(sched: Scheduler) -> Arc<Admission> {
        Arc::new(Admission {
            inner: Mutex::new(Inner {
                sched,
                waiters: HashMap::default(),
                undecided: 0,
                next_serial: 0,
                timer_at: None,
                resumed_cooldowns: Vec::new(),
                draining: Vec::new(),
            }),
            timer: Notify::new(),
            next_id: AtomicU64::new(1),
            stopping: AtomicBool::new(false),
            watch_idle: AtomicBool::new(false),
            watch_wake: Notify::new(),
            waiting: AtomicUsize::new(0),
            drained: Arc::new(Notify::new()),
        })
    }

    /// Woken as a draining process's last request ends (or as one drains with none at work).
    pub fn drained_news(&self) -> Arc<Notify> {
        self.drained.clone()
    }

    /// After a request ended (its slot freed): the supervisor is woken if that drained a
    /// process. Nothing drains nearly always: one look at an empty list.
    fn wake_if_drained(&self, inner: &Inner) {
        if !inner.draining.is_empty() && inner.any_drained() {
            self.drained.notify_one();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock would be a bug in the pure core; the state is still the
        // best there is, so carry on with it rather than take the whole front door down.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Feeds the scheduler one event at the shell's `now`, then carries its actions out.
    fn with_sched(&self, event: impl FnOnce(&mut Scheduler, std::time::Instant)) {
        let mut inner = self.lock();
        event(&mut inner.sched, crate::clock::now_std());
        self.pump(&mut inner, None);
    }

    /// Submits a tx request: its decision, made now or to come.
    pub fn admit(self: &Arc<Self>, demand: &TxDemand) -> (Ticket, Verdict) {
        let id = RequestId(self.next_id.fetch_add(1, Ordering::Relaxed));
        // One clock read for both: each read is a call, on every request.
        let now = crate::clock::now();
        let verdict = {
            let mut inner = self.lock();
            inner.sched.submit(id, demand, now.into_std());
            let made = self.pump(&mut inner, Some(id));
            self.verdict(&mut inner, id, made)
        };
        let ticket = Ticket {
            admission: self.clone(),
            id,
            ended: false,
            admitted: now,
            waited: None,
        };
        (ticket, verdict)
    }

    /// `made` as it is, or a waiter registered for the decision to come.
    fn verdict(
        self: &Arc<Self>,
        inner: &mut Inner,
        id: RequestId,
        made: Option<Decision>,
    ) -> Verdict {
        if made.is_some() {
            return Verdict::made(made);
        }
        let serial = inner.next_serial;
        inner.next_serial += 1;
        let new = Waiter {
            serial,
            slot: Slot::Undecided(None),
        };
        // One look-up; one it replaces (an older registration's, never left in practice) is
        // no longer undecided.
        if let Some(Waiter {
            slot: Slot::Undecided(_),
            ..
        }) = inner.waiters.insert(id, new)
        {
            inner.undecided = inner.undecided.saturating_sub(1);
        }
        inner.undecided += 1;
        self.waiting.store(inner.undecided, Ordering::Relaxed);
        Verdict::coming(self.clone(), id, serial)
    }

    /// A waiting verdict's look at its waiter: the decision, taken out, once it is made (and
    /// `None` if the waiter is gone: let go undecided); else `waker` is left to be woken by it.
    pub(super) fn take_decision(
        &self,
        id: RequestId,
        serial: u64,
        waker: Option<&Waker>,
    ) -> Poll<Option<Decision>> {
        let mut inner = self.lock();
        let Some(w) = inner.waiters.get_mut(&id).filter(|w| w.serial == serial) else {
            return Poll::Ready(None);
        };
        match &mut w.slot {
            Slot::Decided(d) => {
                let d = *d;
                inner.waiters.remove(&id);
                Poll::Ready(Some(d))
            }
            Slot::Undecided(left) => {
                if let Some(waker) = waker {
                    if !left.as_ref().is_some_and(|l| l.will_wake(waker)) {
                        *left = Some(waker.clone());
                    }
                }
                Poll::Pending
            }
        }
    }

    /// A verdict given up before it took its decision: its waiter goes.
    pub(super) fn forget_waiter(&self, id: RequestId, serial: u64) {
        let mut inner = self.lock();
        inner.remove_waiter(id, Some(serial));
        self.waiting.store(inner.undecided, Ordering::Relaxed);
    }

    /// Carries the scheduler's actions out: each decision to its waiter, except the first one
    /// for `mine` (the request being admitted or retried, which has no waiter yet): returned.
    fn pump(&self, inner: &mut Inner, mine: Option<RequestId>) -> Option<Decision> {
        let mut made = None;
        while let Some(action) = inner.sched.poll_action() {
            let (id, decision) = match action {
                Action::Dispatch { id, process } => {
                    if self.watch_idle.load(Ordering::Relaxed)
                        && self.watch_idle.swap(false, Ordering::AcqRel)
                    {
                        self.watch_wake.notify_one();
                    }
                    (id, Decision::Go(process))
                }
                Action::Refuse { id, reason } => (id, Decision::Refused(reason)),
                Action::Fail { id, process } => (id, Decision::Fail(process)),
            };
            if mine == Some(id) {
                made.get_or_insert(decision);
            } else if let Some(w) = inner.waiters.get_mut(&id) {
                // (No waiter: its verdict was given up, the client gone; its ticket cancels.)
                if let Slot::Undecided(waker) = &mut w.slot {
                    let waker = waker.take();
                    w.slot = Slot::Decided(decision);
                    inner.undecided = inner.undecided.saturating_sub(1);
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                }
            }
        }
        self.waiting.store(inner.undecided, Ordering::Relaxed);
        let next = inner.sched.poll_timeout();
        if next.is_some_and(|n| inner.timer_at.is_none_or(|at| n < at)) {
            inner.timer_at = next;
            self.timer.notify_one();
        }
        made
    }

    /// The timer task: wakes the scheduler at each deadline (queue waits, cooldowns).
    pub async fn run_timer(self: Arc<Self>) {
        loop {
            let next = {
                let mut inner = self.lock();
                inner.timer_at = inner.sched.poll_timeout();
                inner.timer_at
            };
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(Instant::from_std(at)) => {
                            self.with_sched(|s, now| s.handle_timeout(now));
                        }
                        _ = self.timer.notified() => {}
                    }
                }
                None => self.timer.notified().await,
            }
        }
    }

    /// Reload: the scheduler's settings, for the next decisions.
    pub fn reconfigure(&self, cfg: SchedulerConfig) {
        self.with_sched(|s, now| s.set_config(cfg, now));
    }

    /// A process joins the cluster (the worker count grew); down until it is ready.
    pub fn add_process(&self, id: ProcessId, serves_tx: bool) {
        self.with_sched(|s, _| s.add_process(id, serves_tx));
    }

    /// A process leaves the cluster (the worker count shrank and it has stopped).
    pub fn remove_process(&self, id: ProcessId) {
        self.with_sched(|s, now| s.remove_process(id, now));
    }

    /// What the supervisor says about a process.
    pub fn set_state(&self, id: ProcessId, state: ProcessState) {
        let mut inner = self.lock();
        let now = crate::clock::now_std();
        inner.sched.set_process(id, state, now);
        inner.draining.retain(|&p| p != id);
        if state == ProcessState::Draining {
            inner.draining.push(id);
            self.wake_if_drained(&inner);
        }
        if state == ProcessState::Ready {
            let Inner {
                sched,
                resumed_cooldowns,
                ..
            } = &mut *inner;
            resumed_cooldowns.retain(|&(p, until)| {
                if p == id {
                    sched.resume_cooldown(p, until, now);
                }
                p != id
            });
        }
        self.pump(&mut inner, None);
    }

    /// The saturation watch's verdict about a process (`proxy::saturation`): `None`, not
    /// saturated; else the normal requests it is held to.
    pub fn set_saturated(&self, id: ProcessId, held: Option<u32>) {
        self.with_sched(|s, now| s.set_saturated(id, held, now));
    }

    /// Whether normal requests wait that the process could take.
    pub fn normal_waiting(&self, id: ProcessId) -> bool {
        self.lock().sched.normal_waiting(id)
    }

    /// Every cooldown running, with its end (for an in-place upgrade's handover).
    pub fn cooldowns(&self) -> Vec<(ProcessId, std::time::Instant)> {
        self.lock().sched.cooldowns()
    }

    /// The cooldowns the program before an in-place upgrade had running go on to their ends,
    /// each from when its process is ready in this program.
    pub fn resume_cooldowns(&self, cooldowns: &[(ProcessId, std::time::Instant)]) {
        self.lock().resumed_cooldowns.extend_from_slice(cooldowns);
    }

    /// The launcher is stopping: nothing waits any more (QUEUE-15).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.with_sched(|s, now| s.stop(now));
    }

    /// `queueSeconds` now: how long a request may wait for a process.
    pub fn queue_wait(&self) -> std::time::Duration {
        self.lock().sched.config().queue
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// `saturatedPercent` and the most a hold allows (`normalMinSlots`, at most
    /// `maxOutstanding` unless that is 0) now, and whether any tx request is in flight anywhere.
    pub fn saturation_watch_state(&self) -> (u32, u32, bool) {
        let inner = self.lock();
        let cfg = inner.sched.config();
        let ceiling = match cfg.max_outstanding {
            0 => cfg.normal_min_slots,
            max => cfg.normal_min_slots.min(max),
        };
        (cfg.saturated_percent, ceiling, inner.sched.busy())
    }

    /// Waits until the next dispatch, unless one is in flight already when asked.
    pub async fn until_busy(&self) {
        let wake = self.watch_wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        self.watch_idle.store(true, Ordering::Release);
        if self.saturation_watch_state().2 {
            self.watch_idle.store(false, Ordering::Release);
            return;
        }
        wake.await;
    }

    /// Whether some request waits for a decision now (without the lock: as of the last
    /// decision, admission or cancel).
    pub fn has_waiters(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }

    /// Total requests waiting in the launcher.
    pub fn queued(&self) -> usize {
        self.lock().sched.queued()
    }

    pub fn load(&self, id: ProcessId) -> Load {
        self.lock().sched.load(id)
    }
}

/// A tx request admitted before hyper read it (in the connection's lobby, `conn::lobby`), for
/// its service to take up.
pub struct Early {
    pub demand: TxDemand,
    pub ticket: Ticket,
    /// Already decided (the value is there to be received), or left to come if the scheduler
    /// had not decided yet when hyper was given the connection.
    pub decision: Verdict,
}

/// One admitted request's hold on the scheduler: reports its end exactly once, and cancels it
/// if dropped first (the client went away while it waited or while it was served).
pub struct Ticket {
    admission: Arc<Admission>,
    id: RequestId,
    ended: bool,
    admitted: Instant,
    /// How long it waited in the queue, once dispatched.
    waited: Option<Duration>,
}

impl Ticket {
    /// The request is about to be sent: how long it waited in the queue, and whether this is
    /// its first dispatch (a retry elsewhere is the same wait, counted once).
    #[cfg(test)]
    pub fn dispatched(&mut self) -> (Duration, bool) {
        self.dispatched_at(crate::clock::now())
    }

    /// As [`Ticket::dispatched`], at `now` (the caller's one clock read).
    pub fn dispatched_at(&mut self, now: Instant) -> (Duration, bool) {
        match self.waited {
            Some(waited) => (waited, false),
            None => {
                let waited = now.saturating_duration_since(self.admitted);
                self.waited = Some(waited);
                (waited, true)
            }
        }
    }

    /// The request ended with this outcome; its slot is freed.
    pub fn finish(self, how: Finish) {
        self.finish_at(how, crate::clock::now());
    }

    /// As [`Ticket::finish`], at `now` (the caller's one clock read).
    pub fn finish_at(mut self, how: Finish, now: Instant) {
        self.ended = true;
        let mut inner = self.admission.lock();
        inner.sched.finish(self.id, how, now.into_std());
        self.admission.pump(&mut inner, None);
        self.admission.wake_if_drained(&inner);
    }

    /// Nothing was sent to the process: offer the request to another (the scheduler decides).
    pub fn retry(&mut self) -> Verdict {
        let mut inner = self.admission.lock();
        inner
            .sched
            .finish(self.id, Finish::NotSent, crate::clock::now_std());
        let made = self.admission.pump(&mut inner, Some(self.id));
        self.admission.wake_if_drained(&inner);
        self.admission.verdict(&mut inner, self.id, made)
    }

    /// The scheduler already ended it (refused or failed): nothing to report.
    pub fn settled(mut self) {
        self.ended = true;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.ended {
            let mut inner = self.admission.lock();
            inner.remove_waiter(self.id, None);
            inner.sched.cancel(self.id, crate::clock::now_std());
            self.admission.pump(&mut inner, None);
            self.admission.wake_if_drained(&inner);
        }
    }
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
