//! The front door's shared state: the scheduler behind one short lock, a waiter per request for
//! the scheduler's decision about it, one upstream pool per process, and the timer task that
//! wakes the scheduler at its next deadline. The supervisor tells it which processes are up
//! (`supervisor::Hooks`).
//!
//! A request's life here: `admit` registers its waiter and submits it; whoever holds the lock
//! when the decision is made (this request, another one finishing, the timer) sends it; a
//! `Ticket` guarantees the scheduler hears how the request ended exactly once, and a client that
//! goes away while it waits cancels it (dropped from the queue, never sent).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use super::budget::Budget;
pub use super::counters::Counters;
use super::forward::{ClientBody, Upstream};
use super::route::{BadTarget, RequestHead, Route, RouteTable, Target, TxDemand};
use super::scheduler::{
    Action, Finish, ProcessState, Refusal, RequestId, Scheduler, SchedulerConfig,
};
use crate::process::{ProcessId, ProcessSpec};
use crate::status::keeper::Tally;
use crate::supervisor::Hooks;

/// The scheduler's decision about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Go(ProcessId),
    Refused(Refusal),
    /// Not sent to this process and nowhere else could take it: `502`.
    Fail(ProcessId),
}

struct Inner {
    sched: Scheduler,
    waiters: HashMap<RequestId, oneshot::Sender<Decision>>,
    /// The deadline the timer task sleeps until (`None`: until it is woken), so it is woken
    /// only when an earlier one comes, not on every decision.
    timer_at: Option<std::time::Instant>,
}

/// The front door's state. Its per-process tables (`processes`, `upstreams`, the counters, the
/// route table's codes) are made once, for every process the launcher could run (the worker
/// count may move on reload within that capacity), so a request indexes them without a lock;
/// `present` says which of them are in the cluster now.
pub struct Front {
    inner: Mutex<Inner>,
    /// Wakes the timer task when the next deadline may have moved.
    timer: Notify,
    pub routes: RouteTable,
    pub processes: Vec<ProcessSpec>,
    pub upstreams: Vec<Upstream<ClientBody>>,
    /// The bytes held for clients (`bufferMaxMB`): read-ahead responses and request bodies.
    pub budget: Arc<Budget>,
    master_ready: AtomicBool,
    /// Which processes are ready (index = `ProcessId`), for `/readyz`.
    ready: Vec<AtomicBool>,
    /// Which processes are in the cluster now (the rest of the capacity is unused).
    present: Vec<AtomicBool>,
    stopping: AtomicBool,
    next_id: AtomicU64,
    /// `upstreamTimeoutSeconds` in nanoseconds, changeable on reload.
    upstream_timeout: AtomicU64,
    pub counters: Counters,
    /// How many times each process has gone down, and a wake-up when one does: a request that
    /// failed on a process can tell whether the process died under it.
    downs: Vec<AtomicU64>,
    went_down: Notify,
    /// Each ready process's pid (0: none), for the saturation watch.
    pids: Vec<AtomicU32>,
    /// The saturation watch sleeps (nothing was in flight) until the next dispatch wakes it.
    watch_idle: AtomicBool,
    watch_wake: Notify,
}

impl Front {
    /// `processes`: every process the launcher could run; those the scheduler was given are
    /// the ones present at first.
    pub fn new(
        sched: Scheduler,
        routes: RouteTable,
        processes: Vec<ProcessSpec>,
        slots_per_process: usize,
        upstream_timeout: Duration,
    ) -> Arc<Front> {
        let n = processes.len();
        let present = processes
            .iter()
            .map(|p| AtomicBool::new(sched.has_process(p.id)))
            .collect();
        let upstreams = processes
            .iter()
            .map(|p| Upstream::new(p.connect_addr, slots_per_process.max(4)))
            .collect();
        Arc::new(Front {
            inner: Mutex::new(Inner {
                sched,
                waiters: HashMap::new(),
                timer_at: None,
            }),
            timer: Notify::new(),
            routes,
            processes,
            upstreams,
            budget: Arc::default(),
            master_ready: AtomicBool::new(false),
            ready: (0..n).map(|_| AtomicBool::new(false)).collect(),
            present,
            stopping: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            upstream_timeout: AtomicU64::new(nanos(upstream_timeout)),
            counters: Counters::new(n),
            downs: (0..n).map(|_| AtomicU64::new(0)).collect(),
            went_down: Notify::new(),
            pids: (0..n).map(|_| AtomicU32::new(0)).collect(),
            watch_idle: AtomicBool::new(false),
            watch_wake: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock would be a bug in the pure core; the state is still the
        // best there is, so carry on with it rather than take the whole front door down.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `upstreamTimeoutSeconds` now.
    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_nanos(self.upstream_timeout.load(Ordering::Relaxed))
    }

    /// Reload: the scheduler's settings and the upstream timeout, for the next decisions.
    pub fn reconfigure(&self, cfg: SchedulerConfig, upstream_timeout: Duration) {
        self.upstream_timeout
            .store(nanos(upstream_timeout), Ordering::Relaxed);
        let mut inner = self.lock();
        inner.sched.set_config(cfg, crate::clock::now_std());
        self.pump(&mut inner);
    }

    /// A process joins the cluster (the worker count grew); down until it is ready.
    pub fn add_process(&self, id: ProcessId) {
        let Some(spec) = self.processes.get(id.index()) else {
            return;
        };
        if let Some(p) = self.present.get(id.index()) {
            p.store(true, Ordering::Release);
        }
        let mut inner = self.lock();
        inner.sched.add_process(id, spec.serves_tx);
        self.pump(&mut inner);
    }

    /// A process leaves the cluster (the worker count shrank and it has stopped).
    pub fn remove_process(&self, id: ProcessId) {
        if let Some(p) = self.present.get(id.index()) {
            p.store(false, Ordering::Release);
        }
        let mut inner = self.lock();
        inner.sched.remove_process(id, crate::clock::now_std());
        self.pump(&mut inner);
    }

    /// Whether the process is in the cluster now.
    pub fn is_present(&self, id: ProcessId) -> bool {
        self.present
            .get(id.index())
            .is_some_and(|p| p.load(Ordering::Acquire))
    }

    /// Routes a request by the table; a cache-id naming a process not in the cluster now (a
    /// worker beyond the count) is an unknown prefix, as if the table had never had it
    /// (ROUTE-3c).
    pub fn route(&self, head: &RequestHead<'_>) -> Result<Route, BadTarget> {
        let mut route = self.routes.route(head)?;
        if let Route::Tx(d) = &mut route {
            match d.target {
                Target::Owner(p) if !self.is_present(p) => d.target = Target::UnknownPrefix,
                Target::Affinity(p) if !self.is_present(p) => d.target = Target::LeastLoaded,
                _ => {}
            }
        }
        Ok(route)
    }

    /// The processes in the cluster now, in order.
    pub fn present(&self) -> impl Iterator<Item = &ProcessSpec> {
        self.processes
            .iter()
            .zip(&self.present)
            .filter(|(_, p)| p.load(Ordering::Acquire))
            .map(|(s, _)| s)
    }

    pub fn master_ready(&self) -> bool {
        self.master_ready.load(Ordering::Acquire)
    }

    /// Whether the process is ready and taking requests.
    pub fn is_ready(&self, id: ProcessId) -> bool {
        self.ready
            .get(id.index())
            .is_some_and(|r| r.load(Ordering::Acquire))
    }

    /// Whether any process that takes ordinary tx requests is ready.
    pub fn any_tx_ready(&self) -> bool {
        self.processes
            .iter()
            .zip(&self.ready)
            .any(|(p, r)| p.serves_tx && r.load(Ordering::Acquire))
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    pub fn code(&self, id: ProcessId) -> &str {
        self.processes
            .get(id.index())
            .map_or("?", |p| p.code.as_str())
    }

    /// Submits a tx request; the decision arrives on the returned receiver.
    pub fn admit(self: &Arc<Self>, demand: &TxDemand) -> (Ticket, oneshot::Receiver<Decision>) {
        let id = RequestId(self.next_id.fetch_add(1, Ordering::Relaxed));
        self.counters.lanes[demand.lane].fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut inner = self.lock();
            inner.waiters.insert(id, tx);
            inner.sched.submit(id, demand, crate::clock::now_std());
            self.pump(&mut inner);
        }
        let ticket = Ticket {
            front: self.clone(),
            id,
            ended: false,
            admitted: Instant::now(),
            waited: false,
        };
        (ticket, rx)
    }

    /// Carries the scheduler's actions out: each decision to its waiter.
    fn pump(&self, inner: &mut Inner) {
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
            if let Some(w) = inner.waiters.remove(&id) {
                // The receiver may be gone (the client left): its ticket cancels the request.
                let _ = w.send(decision);
            }
        }
        let next = inner.sched.poll_timeout();
        if next.is_some_and(|n| inner.timer_at.is_none_or(|at| n < at)) {
            inner.timer_at = next;
            self.timer.notify_one();
        }
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
                            let mut inner = self.lock();
                            inner.sched.handle_timeout(crate::clock::now_std());
                            self.pump(&mut inner);
                        }
                        _ = self.timer.notified() => {}
                    }
                }
                None => self.timer.notified().await,
            }
        }
    }

    fn set_state(&self, id: ProcessId, state: ProcessState) {
        let mut inner = self.lock();
        inner.sched.set_process(id, state, crate::clock::now_std());
        self.pump(&mut inner);
    }

    /// The launcher is stopping: nothing waits any more (QUEUE-15).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        let mut inner = self.lock();
        inner.sched.stop(crate::clock::now_std());
        self.pump(&mut inner);
    }

    /// How many times `id` has gone down so far (for [`Front::went_down_since`]).
    pub fn downs(&self, id: ProcessId) -> u64 {
        self.downs
            .get(id.index())
            .map_or(0, |d| d.load(Ordering::Acquire))
    }

    /// Whether `id` goes down (or has gone down) after `downs` was read, waiting up to `within`
    /// for the supervisor to hear of an exit that is under way.
    pub async fn went_down_since(&self, id: ProcessId, downs: u64, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let notified = self.went_down.notified();
            if self.downs(id) > downs {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.downs(id) > downs;
            }
        }
    }

    /// The pid of a ready process.
    pub fn pid(&self, id: ProcessId) -> Option<u32> {
        let pid = self.pids.get(id.index())?.load(Ordering::Acquire);
        (pid != 0).then_some(pid)
    }

    /// The saturation watch's verdict about a process (`proxy::saturation`).
    pub fn set_saturated(&self, id: ProcessId, saturated: bool) {
        let mut inner = self.lock();
        inner
            .sched
            .set_saturated(id, saturated, crate::clock::now_std());
        self.pump(&mut inner);
    }

    /// `saturatedPercent` now, and whether any tx request is in flight anywhere.
    pub fn saturation_watch_state(&self) -> (u32, bool) {
        let inner = self.lock();
        let busy = self
            .processes
            .iter()
            .any(|p| inner.sched.load(p.id).in_flight > 0);
        (inner.sched.config().saturated_percent, busy)
    }

    /// Waits until the next dispatch, unless one is in flight already when asked.
    pub async fn until_busy(&self) {
        let wake = self.watch_wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        self.watch_idle.store(true, Ordering::Release);
        if self.saturation_watch_state().1 {
            self.watch_idle.store(false, Ordering::Release);
            return;
        }
        wake.await;
    }

    /// Total requests waiting in the launcher.
    pub fn queued(&self) -> usize {
        self.lock().sched.queued()
    }

    pub fn load(&self, id: ProcessId) -> super::scheduler::Load {
        self.lock().sched.load(id)
    }
}

impl Hooks for Front {
    fn up(&self, id: ProcessId, pid: u32) {
        if let Some(p) = self.pids.get(id.index()) {
            p.store(pid, Ordering::Release);
        }
        if let Some(u) = self.upstreams.get(id.index()) {
            u.clear();
        }
        if id.is_master() {
            self.master_ready.store(true, Ordering::Release);
        }
        if let Some(r) = self.ready.get(id.index()) {
            r.store(true, Ordering::Release);
        }
        self.set_state(id, ProcessState::Ready);
    }

    fn down(&self, id: ProcessId) {
        if let Some(p) = self.pids.get(id.index()) {
            p.store(0, Ordering::Release);
        }
        if id.is_master() {
            self.master_ready.store(false, Ordering::Release);
        }
        if let Some(r) = self.ready.get(id.index()) {
            r.store(false, Ordering::Release);
        }
        self.set_state(id, ProcessState::Down);
        if let Some(u) = self.upstreams.get(id.index()) {
            u.clear();
        }
        if let Some(d) = self.downs.get(id.index()) {
            d.fetch_add(1, Ordering::AcqRel);
        }
        self.went_down.notify_waiters();
    }

    fn draining(&self, id: ProcessId) {
        if let Some(r) = self.ready.get(id.index()) {
            r.store(false, Ordering::Release);
        }
        self.set_state(id, ProcessState::Draining);
    }

    fn in_flight(&self, id: ProcessId) -> u32 {
        self.load(id).in_flight
    }

    fn tally(&self) -> Tally {
        self.counters.tally()
    }

    fn added(&self, id: ProcessId) {
        self.add_process(id);
    }

    fn retired(&self, id: ProcessId) {
        self.down(id);
        self.remove_process(id);
    }
}

/// A tx request admitted before hyper read it (in the connection's lobby, `conn::lobby`), for
/// its service to take up.
pub struct Early {
    pub demand: TxDemand,
    pub ticket: Ticket,
    /// Already decided (the value is there to be received), or left to come if the scheduler
    /// had not decided yet when hyper was given the connection.
    pub decision: oneshot::Receiver<Decision>,
}

/// One admitted request's hold on the scheduler: reports its end exactly once, and cancels it
/// if dropped first (the client went away while it waited or while it was served).
pub struct Ticket {
    front: Arc<Front>,
    id: RequestId,
    ended: bool,
    admitted: Instant,
    waited: bool,
}

impl Ticket {
    /// The request is about to be sent: how long it waited goes into the histogram (once).
    pub fn dispatched(&mut self) {
        if !self.waited {
            self.waited = true;
            self.front
                .counters
                .queue_wait
                .record(self.admitted.elapsed());
        }
    }

    /// The request ended with this outcome; its slot is freed.
    pub fn finish(mut self, how: Finish) {
        self.ended = true;
        let mut inner = self.front.lock();
        inner.sched.finish(self.id, how, crate::clock::now_std());
        self.front.pump(&mut inner);
    }

    /// Nothing was sent to the process: offer the request to another (the scheduler decides).
    pub fn retry(&mut self) -> oneshot::Receiver<Decision> {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.front.lock();
        inner.waiters.insert(self.id, tx);
        inner
            .sched
            .finish(self.id, Finish::NotSent, crate::clock::now_std());
        self.front.pump(&mut inner);
        rx
    }

    /// The scheduler already ended it (refused or failed): nothing to report.
    pub fn settled(mut self) {
        self.ended = true;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.ended {
            let mut inner = self.front.lock();
            inner.waiters.remove(&self.id);
            inner.sched.cancel(self.id, crate::clock::now_std());
            self.front.pump(&mut inner);
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A front door for unit tests: the master (`m0`) and `workers` tx workers (`tx1` ...) on
/// ports nothing listens on, the spec's default settings, none ready yet.
#[cfg(test)]
pub(crate) fn test_front(workers: u16) -> Arc<Front> {
    use crate::process::Role;
    use crate::settings::Settings;
    let processes: Vec<ProcessSpec> = (0..=workers)
        .map(|i| ProcessSpec {
            id: ProcessId(i),
            role: if i == 0 { Role::Master } else { Role::TxWorker },
            code: if i == 0 {
                "m0".into()
            } else {
                format!("tx{i}")
            },
            bind_address: "127.0.0.1".into(),
            port: 9,
            connect_addr: ([127, 0, 0, 1], 9).into(),
            argv: Vec::new(),
            env: Vec::new(),
            serves_tx: true,
        })
        .collect();
    let tx: Vec<(ProcessId, bool)> = processes.iter().map(|p| (p.id, true)).collect();
    let sched = Scheduler::new(SchedulerConfig::default(), &tx);
    let routes = RouteTable::from_specs(&Settings::default(), &processes);
    Front::new(sched, routes, processes, 4, Duration::from_secs(60))
}
