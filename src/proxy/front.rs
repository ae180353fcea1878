//! The front door's shared state, one of each: admission (the scheduler and the requests waiting
//! for it, `admission`), the roster (which processes are present and ready, `roster`), the route
//! table, one upstream pool per process, the counters and the budget for held bodies. The
//! supervisor's news (`supervisor::Hooks`) arrives here and is passed to the roster, admission
//! and the pools.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::admission::{Admission, Ticket};
use super::budget::Budget;
pub use super::counters::Counters;
use super::forward::{ClientBody, Upstream};
use super::roster::Roster;
use super::route::{BadTarget, RequestHead, Route, RouteTable, Target, TxDemand};
use super::scheduler::{ProcessState, Scheduler, SchedulerConfig};
use super::verdict::Verdict;
use crate::process::{ProcessId, ProcessSpec};
use crate::status::events::LostKind;
use crate::status::front::{FrontFigures, Latency};
use crate::status::keeper::Tally;
use crate::supervisor::Hooks;

/// The front door's state. Its per-process tables (the roster's, `upstreams`, the counters, the
/// route table's codes) are made once, for every process the launcher could run, so a request
/// indexes them without a lock.
pub struct Front {
    pub admission: Arc<Admission>,
    pub roster: Roster,
    pub routes: RouteTable,
    pub upstreams: Vec<Upstream<ClientBody>>,
    pub counters: Counters,
    /// The bytes held for clients (`bufferMaxMB`): read-ahead responses and request bodies.
    pub budget: Arc<Budget>,
    /// `upstreamTimeoutSeconds` in nanoseconds, changeable on reload.
    upstream_timeout: AtomicU64,
    /// Requests on the master's own paths forwarded and not yet answered whole (they take no
    /// slot), so the master's drain waits for them before its SIGTERM.
    pub master_paths_in_flight: AtomicU32,
    /// The master is draining (a rolling restart's step): the end of its last request on its
    /// own paths wakes the supervisor (`Admission::drained_news`).
    master_draining: std::sync::atomic::AtomicBool,
    /// What `/metrics`' counters had reached in the program before an in-place upgrade.
    pub carried: std::sync::OnceLock<crate::proxy::carried_counters::Carried>,
    /// The access log in force (`accessLog`), put in by the launcher and replaced on reload.
    pub access_log: crate::logs::access_log::InForce,
    /// Each `502`'s WARNING, throttled per process and reason.
    pub bad_gateway_log: super::bad_gateway_log::BadGatewayLog,
    /// A stop's lame duck (`lameDuckSeconds`, DEC-88): serving on, but no longer ready, so the
    /// balancers in front leave before the port closes.
    lame_duck: AtomicBool,
    /// Per place, the connections still open to the process a replacement took over from
    /// (`Upstream::move_to`): its drain's count.
    outgoing: Vec<std::sync::Mutex<Option<Arc<crate::proxy::forward::live::Count>>>>,
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
        let counters = Counters::new(processes.len());
        let upstreams = processes
            .iter()
            .map(|p| {
                let retries = Arc::clone(&counters.observed.retries);
                Upstream::for_process(
                    p.connect_addr,
                    &p.also_at,
                    slots_per_process.max(4),
                    &p.code,
                    retries,
                )
            })
            .collect();
        let bad_gateway_log = super::bad_gateway_log::BadGatewayLog::new(processes.len());
        let outgoing = processes.iter().map(|_| Default::default()).collect();
        let roster = Roster::new(processes, |id| sched.has_process(id));
        Arc::new(Front {
            admission: Admission::new(sched),
            roster,
            routes,
            upstreams,
            counters,
            budget: Arc::default(),
            upstream_timeout: AtomicU64::new(nanos(upstream_timeout)),
            master_paths_in_flight: AtomicU32::new(0),
            master_draining: Default::default(),
            carried: std::sync::OnceLock::new(),
            access_log: Default::default(),
            bad_gateway_log,
            lame_duck: AtomicBool::new(false),
            outgoing,
        })
    }

    /// The lame duck has begun: `/readyz` and the agent say so from now on.
    pub fn begin_lame_duck(&self) {
        self.lame_duck.store(true, Ordering::Release);
    }

    pub fn is_lame_duck(&self) -> bool {
        self.lame_duck.load(Ordering::Acquire)
    }

    /// `upstreamTimeoutSeconds` now.
    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_nanos(self.upstream_timeout.load(Ordering::Relaxed))
    }

    /// Reload: the scheduler's settings and the upstream timeout, for the next decisions.
    pub fn reconfigure(&self, cfg: SchedulerConfig, upstream_timeout: Duration) {
        self.upstream_timeout
            .store(nanos(upstream_timeout), Ordering::Relaxed);
        self.admission.reconfigure(cfg);
    }

    /// Routes a request by the table; a cache-id naming a process not in the cluster now (a
    /// worker beyond the count) is an unknown prefix, as if the table had never had it
    /// (ROUTE-3c).
    pub fn route(&self, head: &RequestHead<'_>) -> Result<Route, BadTarget> {
        let mut route = self.routes.route(head)?;
        if let Route::Tx(d) = &mut route {
            match d.target {
                Target::Owner(p) if !self.roster.is_present(p) => d.target = Target::UnknownPrefix,
                Target::Affinity(p) if !self.roster.is_present(p) => d.target = Target::LeastLoaded,
                _ => {}
            }
        }
        Ok(route)
    }

    /// A request on the master's own paths ended: if it was the last of a draining master's,
    /// the supervisor is woken.
    pub fn master_path_ended(&self) {
        let was = self.master_paths_in_flight.fetch_sub(1, Ordering::AcqRel);
        if was == 1 && self.master_draining.load(Ordering::Acquire) {
            self.admission.drained_news().notify_one();
        }
    }

    fn master_draining(&self, id: ProcessId, draining: bool) {
        if id.is_master() {
            self.master_draining.store(draining, Ordering::Release);
        }
    }

    /// Submits a tx request, counted by its lane: its decision, made now or to come.
    pub fn admit(&self, demand: &TxDemand) -> (Ticket, Verdict) {
        self.counters.lanes[demand.lane].fetch_add(1, Ordering::Relaxed);
        self.admission.admit(demand)
    }
}

impl Hooks for Front {
    fn up(&self, id: ProcessId, pid: u32) {
        self.master_draining(id, false);
        self.roster.up(id, pid);
        if let Some(u) = self.upstreams.get(id.index()) {
            u.clear();
        }
        self.admission.set_state(id, ProcessState::Ready);
    }

    fn down(&self, id: ProcessId) {
        self.master_draining(id, false);
        self.admission.set_state(id, ProcessState::Down);
        if let Some(u) = self.upstreams.get(id.index()) {
            u.clear();
        }
        self.roster.down(id);
    }

    fn draining(&self, id: ProcessId) {
        self.roster.draining(id);
        self.master_draining(id, true);
        self.admission.set_state(id, ProcessState::Draining);
    }

    fn drained_news(&self) -> Option<Arc<tokio::sync::Notify>> {
        Some(self.admission.drained_news())
    }

    fn moved(&self, id: ProcessId, addr: std::net::SocketAddr, pid: u32) {
        if let (Some(u), Some(out)) = (
            self.upstreams.get(id.index()),
            self.outgoing.get(id.index()),
        ) {
            let old = u.move_to(addr);
            // The old process's drain ends as its last connection closes: the supervisor is
            // woken then, as for a draining process's last request (DEC-83).
            old.wake_at_zero(self.admission.drained_news());
            *out.lock().unwrap_or_else(|p| p.into_inner()) = Some(old);
        }
        self.roster.up(id, pid);
    }

    fn listens_at(&self, id: ProcessId, addr: std::net::SocketAddr) {
        // Not running before: no connection of its is open to count.
        if let Some(u) = self.upstreams.get(id.index()) {
            drop(u.move_to(addr));
        }
    }

    fn outgoing_in_flight(&self, id: ProcessId) -> u32 {
        self.outgoing.get(id.index()).map_or(0, |out| {
            let open = out.lock().unwrap_or_else(|p| p.into_inner());
            open.as_ref()
                .map_or(0, |n| u32::try_from(n.open()).unwrap_or(u32::MAX))
        })
    }

    fn in_flight(&self, id: ProcessId) -> u32 {
        let own_paths = if id.is_master() {
            self.master_paths_in_flight.load(Ordering::Acquire)
        } else {
            0
        };
        self.admission.load(id).in_flight + own_paths
    }

    fn liveness(&self, id: ProcessId) -> Option<(u64, Option<super::forward::liveness::Owed>)> {
        let l = self.upstreams.get(id.index())?.liveness();
        Some((l.heard_count(), l.owed()))
    }

    fn tally(&self) -> Tally {
        self.counters.tally()
    }

    fn front(&self, id: ProcessId) -> Option<FrontFigures> {
        let c = self.counters.processes.get(id.index())?;
        let lost = self.counters.lost.get(id.index())?;
        let load = self.admission.load(id);
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        Some(FrontFigures {
            answered: c.answers(),
            refused: get(&c.refused),
            bad_gateway: get(&lost[LostKind::BadGateway502]),
            gateway_timeout: get(&lost[LostKind::Timeout504]),
            in_flight: u64::from(self.in_flight(id)),
            queued: load.queued as u64,
            bytes_in: get(&c.bytes_in),
            bytes_out: get(&c.bytes_out),
        })
    }

    fn take_latency(&self, id: ProcessId) -> Option<Latency> {
        let c = self.counters.processes.get(id.index())?;
        Some(super::interval_histogram::latency(&c.latency.take()))
    }

    fn added(&self, id: ProcessId) {
        let Some(spec) = self.roster.spec(id) else {
            return;
        };
        self.roster.set_present(id, true);
        self.admission.add_process(id, spec.serves_tx);
    }

    fn retired(&self, id: ProcessId) {
        self.down(id);
        self.roster.set_present(id, false);
        self.admission.remove_process(id);
    }

    fn started(&self, id: ProcessId, _pid: u32) {
        self.roster.running(id, true);
    }

    fn exited(&self, id: ProcessId, how: crate::process::Ending) {
        self.roster.ended(id, how);
        self.roster.running(id, false);
    }

    fn reload_finished(&self) {
        self.roster.reload_finished();
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
            also_at: Vec::new(),
            argv: Vec::new(),
            env: Vec::new(),
            serves_tx: true,
            config: 0,
        })
        .collect();
    let tx: Vec<(ProcessId, bool)> = processes.iter().map(|p| (p.id, true)).collect();
    let sched = Scheduler::new(SchedulerConfig::default(), &tx);
    let routes = RouteTable::from_specs(&Settings::default(), &processes);
    Front::new(sched, routes, processes, 4, Duration::from_secs(60))
}
