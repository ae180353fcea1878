//! The launcher's record of the cluster, kept by the supervisor's shell: what each process is
//! doing and has sent, read together with what the launcher reads itself (`/proc`, the cgroup)
//! into the snapshot, the graph history and the cluster events the master shows and reports, and
//! the memory recycle decision. It joins the pure parts (`snapshot`, `history`, `events`,
//! `supervisor::recycle`) to the machine readers and the outbox.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::warn;

use super::events::{Event, EventLog};
use super::history::{memory_total, History};
use super::outbox::Outbox;
use super::snapshot::{
    snapshot, CgroupLimit, CgroupReading, HostMemory, LauncherFigures, ProcMemory, ProcessInput,
    ProcessState, SnapshotInput, SnapshotSettings, StatusFigures,
};
pub use super::tally::Tally;
use crate::ipc::message::{FromChild, ToChild};
use crate::process::{ProcessId, ProcessSpec};
use crate::settings::Settings;
use crate::supervisor::lifecycle::Exit;
use crate::supervisor::recycle::{
    decide, Measure, RecycleChoice, RecycleClocks, RecyclePolicy, WorkerView,
};
use crate::system;

/// Events in one `events` message at most, and about this many bytes of them (a line on the
/// channel is at most 1 MiB).
const EVENTS_PER_MESSAGE: usize = 500;
const EVENT_BYTES_PER_MESSAGE: usize = 256 * 1024;

/// The launcher's view for its own endpoints.
#[derive(Clone, Debug)]
pub struct Report {
    /// The status snapshot, as the master gets it.
    pub snapshot: Value,
    /// Memory recycles per process code.
    pub recycles: Vec<(String, u64)>,
}

pub struct Keeper {
    processes: Vec<ProcessInput>,
    recycles: Vec<u64>,
    /// Why each worker is being recycled, until the exit that ends it (DEC-25).
    recycle_reason: Vec<Option<String>>,
    rss_at_ready: Vec<Option<u64>>,
    settings: SnapshotSettings,
    recycle: RecyclePolicy,
    clocks: RecycleClocks,
    history: History,
    events: EventLog,
    outbox: Outbox,
    last_tally: Tally,
    /// History changes not yet passed to the master.
    history_updates: Vec<Value>,
    started: Instant,
    pid: u32,
}

impl Keeper {
    /// Opens the outbox under the data directory and records the launcher's start (EVENT-1).
    pub fn new(settings: &Settings, specs: &[ProcessSpec], now: Instant) -> Keeper {
        let ms = crate::clock::unix_ms();
        let outbox = Outbox::open(&settings.data_dir);
        let sample = settings.stats.sample_period();
        let history = outbox
            .saved_history()
            .and_then(|h| History::restore(h, settings.cluster.shared_cache, ms))
            .unwrap_or_else(|| History::new(sample, settings.cluster.shared_cache));
        let processes = specs.iter().map(row).collect();
        let mut k = Keeper {
            recycles: vec![0; specs.len()],
            recycle_reason: vec![None; specs.len()],
            rss_at_ready: vec![None; specs.len()],
            processes,
            settings: SnapshotSettings::from_settings(settings),
            recycle: RecyclePolicy {
                reject_fraction: settings.memory.reject_fraction,
                recycle_after: settings.cluster.recycle,
            },
            clocks: RecycleClocks::default(),
            history,
            events: EventLog::new(outbox.last_id(), ms),
            outbox,
            last_tally: Tally::default(),
            history_updates: Vec::new(),
            started: now,
            pid: std::process::id(),
        };
        let ev = k.events.launcher_started(k.pid, ms);
        k.outbox.hold(ev);
        k
    }

    /// The rows follow the processes in the cluster (the worker count moved on reload): rows
    /// beyond `specs` go, new ones start as not started yet; the others keep their record.
    pub fn resize_rows(&mut self, specs: &[ProcessSpec]) {
        let n = specs.len();
        self.processes.truncate(n);
        self.processes
            .extend(specs[self.processes.len()..].iter().map(row));
        self.recycles.resize(n, 0);
        self.rss_at_ready.resize(n, None);
    }

    /// `recycleSeconds` changed on reload.
    pub fn set_recycle_after(&mut self, after: Duration) {
        self.recycle.recycle_after = after;
    }

    fn role(&self, id: ProcessId) -> &'static str {
        self.processes
            .get(id.index())
            .map_or("tx-worker", |p| p.role.as_str())
    }

    fn hold(&mut self, ev: Option<Event>) {
        if let Some(ev) = ev {
            self.outbox.hold(ev);
        }
    }

    pub fn spawned(&mut self, id: ProcessId, pid: u32, now: Instant) {
        let ms = crate::clock::unix_ms();
        let role = self.role(id);
        if let Some(p) = self.processes.get_mut(id.index()) {
            p.pid = Some(pid);
            p.state = if p.restarts > 0 || p.ready_at.is_some() {
                ProcessState::Restarting
            } else {
                ProcessState::Starting
            };
            p.started_at = Some(now);
            p.ready_at = None;
            p.status = None;
            let code = p.code.clone();
            let u = self.history.process_starting(&code, role, ms);
            self.history_updates.push(u);
        }
    }

    pub fn ready(&mut self, id: ProcessId, memory_limit: Option<u64>, now: Instant) {
        let ms = crate::clock::unix_ms();
        let role = self.role(id);
        let Some(p) = self.processes.get_mut(id.index()) else {
            return;
        };
        p.state = ProcessState::Ready;
        p.ready_at = Some(now);
        p.guard_limit = memory_limit;
        let code = p.code.clone();
        let rss = p
            .pid
            .and_then(|pid| system::read_process_memory(Path::new("/"), pid).ok())
            .map(|m| m.rss_anon);
        self.rss_at_ready[id.index()] = rss;
        self.clocks.forget(id);
        let u = self.history.process_ready(&code, role, ms);
        self.history_updates.push(u);
        let ev = self.events.ready(&code, ms);
        self.hold(ev);
    }

    /// The limit a process's memory guard measures against, when it says so after it was
    /// already found ready by its socket.
    pub fn guard_limit(&mut self, id: ProcessId, limit: Option<u64>) {
        if let Some(p) = self.processes.get_mut(id.index()) {
            p.guard_limit = limit;
        }
    }

    /// A process exited; `stopping` when the launcher is stopping (it is not started again).
    pub fn exited(&mut self, id: ProcessId, exit: Exit, stopping: bool) {
        let ms = crate::clock::unix_ms();
        let role = self.role(id);
        let Some(p) = self.processes.get_mut(id.index()) else {
            return;
        };
        let code = p.code.clone();
        let pid = p.pid;
        p.state = if stopping {
            ProcessState::Stopping
        } else {
            ProcessState::Restarting
        };
        p.status = None;
        let recycled = self
            .recycle_reason
            .get_mut(id.index())
            .and_then(Option::take);
        if !stopping {
            p.restarts += 1;
            // DEC-25: the exit that ends a recycle keeps the recycle's reason.
            p.last_restart = Some(match recycled {
                Some(reason) => format!("recycled: {reason}"),
                None => crate::supervisor::child::describe_exit(exit),
            });
        }
        // GRAPH-10: stopped with the launcher, it is not coming back: unavailable.
        let u = if stopping {
            self.history.process_unavailable(&code, role, ms)
        } else {
            self.history.process_restarting(&code, role, ms)
        };
        self.history_updates.push(u);
        if !stopping {
            let ev = self.events.exited(&code, role, pid, exit, ms);
            self.hold(ev);
        }
    }

    /// The recycle of a worker begins (EVENT-3, DEC-25).
    pub fn recycling(&mut self, id: ProcessId, reason: &str) {
        let ms = crate::clock::unix_ms();
        if let Some(n) = self.recycles.get_mut(id.index()) {
            *n += 1;
        }
        if let Some(slot) = self.recycle_reason.get_mut(id.index()) {
            *slot = Some(reason.to_string());
        }
        if let Some(p) = self.processes.get_mut(id.index()) {
            p.last_restart = Some(format!("recycled: {reason}"));
            let code = p.code.clone();
            let ev = self.events.recycling(&code, reason, ms);
            self.outbox.hold(ev);
        }
    }

    /// A status or sample message from a process.
    pub fn message(&mut self, id: ProcessId, msg: &FromChild, now: Instant) {
        if let Some(figures) = StatusFigures::from_message(msg) {
            if let Some(p) = self.processes.get_mut(id.index()) {
                p.status = Some((figures, now));
            }
            return;
        }
        if let FromChild::Sample(sample) = msg {
            let ms = crate::clock::unix_ms();
            let role = self.role(id);
            let Some(p) = self.processes.get(id.index()) else {
                return;
            };
            let code = p.code.clone();
            let rss = p
                .pid
                .and_then(|pid| system::read_process_memory(Path::new("/"), pid).ok())
                .map(|m| m.rss_anon);
            let u = self.history.record_sample(&code, role, sample, rss, ms);
            self.history_updates.push(u);
            // GRAPH-9: the memory Total, read as the master's sample arrives.
            if id.is_master() {
                let total = self.memory_total();
                let u = self.history.record_memory_total(sample.at, total, ms);
                self.history_updates.push(u);
            }
        }
    }

    fn memory_total(&self) -> Option<u64> {
        let own = match read_cgroup() {
            Ok(c) if matches!(c.limit, CgroupLimit::Own(_)) => Some(c.anon),
            _ => None,
        };
        let rss: Vec<Option<u64>> = self
            .processes
            .iter()
            .map(|p| {
                p.pid
                    .and_then(|pid| system::read_process_memory(Path::new("/"), pid).ok())
                    .map(|m| m.rss_anon)
            })
            .collect();
        memory_total(own, &rss)
    }

    /// The cluster snapshot for the master (STATUS-5), reading `/proc` and the cgroup now.
    pub fn snapshot(&mut self, now: Instant) -> Value {
        for p in &mut self.processes {
            p.memory = match (p.state, p.pid) {
                (ProcessState::Ready | ProcessState::Starting, Some(pid)) => read_proc_memory(pid),
                _ => Err("not running".to_string()),
            };
        }
        let input = SnapshotInput {
            processes: &self.processes,
            cgroup: read_cgroup(),
            host: system::read_host_memory(Path::new("/"))
                .map(|h| HostMemory {
                    total: h.total,
                    available: h.available,
                })
                .map_err(|e| e.to_string()),
            launcher: LauncherFigures {
                pid: self.pid,
                memory: read_proc_memory(self.pid),
                uptime: now.saturating_duration_since(self.started),
                in_flight: None,
            },
            settings: self.settings,
        };
        snapshot(&input, now, crate::clock::unix_ms())
    }

    /// EVENT-6..12, EVENT-14: what the front door counted since the last minute, as one event.
    pub fn minute(&mut self, tally: Tally) {
        let ms = crate::clock::unix_ms();
        let last = std::mem::replace(&mut self.last_tally, tally);
        let codes: Vec<String> = self.processes.iter().map(|p| p.code.clone()).collect();
        let ev = self.last_tally.since(&last, &codes, &mut self.events, ms);
        self.hold(ev);
        self.outbox.save_history(&self.history.to_json(ms));
    }

    /// The worker to recycle now, if any (RECYCLE-1, 6..12); WARNING lines are logged here.
    /// `in_flight` gives each process's requests at work; `in_progress` is true while a recycle
    /// is under way (one at a time, DEC-6).
    pub fn recycle_due(
        &mut self,
        in_flight: &dyn Fn(ProcessId) -> u32,
        in_progress: bool,
        now: Instant,
    ) -> Option<RecycleChoice> {
        if self.recycle.recycle_after.is_zero() {
            return None;
        }
        let measure = match read_cgroup() {
            Ok(CgroupReading {
                anon,
                limit: CgroupLimit::Own(limit),
                ..
            }) => Measure::Cgroup { anon, limit },
            _ => Measure::PerProcess,
        };
        let workers: Vec<WorkerView> = self
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| WorkerView {
                id: ProcessId(i as u16),
                code: p.code.clone(),
                rss_anon: p
                    .pid
                    .and_then(|pid| read_proc_memory(pid).ok())
                    .map(|m| m.rss_anon),
                rss_anon_at_ready: self.rss_at_ready[i],
                in_flight: in_flight(ProcessId(i as u16)),
                ready: p.state == ProcessState::Ready,
                guard_limit: p.guard_limit,
            })
            .collect();
        let d = decide(
            &self.recycle,
            measure,
            &workers,
            in_progress,
            &self.clocks,
            now,
        );
        for (_, line) in &d.warn {
            warn!("{line}");
        }
        self.clocks = d.clocks;
        d.recycle
    }

    /// The graph history's changes for the master, now that it is up.
    pub fn history_for_master(&mut self) -> Vec<ToChild> {
        self.history_updates
            .drain(..)
            .map(|history| ToChild::History { history })
            .collect()
    }

    /// The next `events` message for the master and the last id in it, if any event waits
    /// unsent. Hand it to the channel, then say [`Keeper::events_sent`]; the events stay in the
    /// outbox until [`Keeper::events_delivered`].
    pub fn events_to_send(&self) -> Option<(ToChild, u64)> {
        let mut events = Vec::new();
        let mut bytes = 0;
        let mut last = None;
        for ev in self.outbox.to_send(EVENTS_PER_MESSAGE) {
            let v = ev.to_json();
            bytes += v.to_string().len();
            if bytes > EVENT_BYTES_PER_MESSAGE && !events.is_empty() {
                break;
            }
            last = Some(ev.id);
            events.push(v);
        }
        last.map(|last| (ToChild::Events { events }, last))
    }

    /// The events up to `id` were handed to the master's channel (not delivered yet).
    pub fn events_sent(&mut self, id: u64) {
        self.outbox.sent(id);
    }

    /// The master has the events up to `id`: its acknowledgement, or, from a master that
    /// doesn't acknowledge, its channel write.
    pub fn events_delivered(&mut self, id: u64) {
        self.outbox.delivered(id);
    }

    /// Whether events were handed to the master's channel and not yet confirmed.
    pub fn events_on_their_way(&self) -> bool {
        self.outbox.on_their_way()
    }

    /// The master has just become ready: the whole history once (DEC-17); every event it
    /// hasn't confirmed goes (again) to it.
    pub fn master_ready(&mut self) -> Vec<ToChild> {
        self.history_updates.clear();
        self.outbox.resend();
        vec![ToChild::History {
            history: self.history.to_json(crate::clock::unix_ms()),
        }]
    }

    /// While the master is down: history changes are not queued (it gets the whole history when
    /// it is back); events wait in the outbox.
    pub fn master_down(&mut self) {
        self.history_updates.clear();
        self.outbox.resend();
    }

    pub fn report(&mut self, now: Instant) -> Report {
        Report {
            snapshot: self.snapshot(now),
            recycles: self
                .processes
                .iter()
                .zip(&self.recycles)
                .map(|(p, n)| (p.code.clone(), *n))
                .collect(),
        }
    }
}

/// A process's row before it has started.
fn row(p: &ProcessSpec) -> ProcessInput {
    ProcessInput {
        code: p.code.clone(),
        role: p.role,
        pid: None,
        state: ProcessState::Starting,
        started_at: None,
        ready_at: None,
        restarts: 0,
        last_restart: None,
        status: None,
        memory: Err("not started yet".to_string()),
        guard_limit: None,
    }
}

fn read_proc_memory(pid: u32) -> Result<ProcMemory, String> {
    system::read_process_memory(Path::new("/"), pid)
        .map(|m| ProcMemory {
            rss_anon: m.rss_anon,
            rss_file: m.rss_file,
        })
        .map_err(|e| e.to_string())
}

fn read_cgroup() -> Result<CgroupReading, String> {
    let c = system::read_cgroup_memory(Path::new("/")).map_err(|e| e.to_string())?;
    let limit = match (c.own_limit, &c.enclosing_limit) {
        (Some(l), _) => CgroupLimit::Own(l),
        (None, Some(e)) => CgroupLimit::Enclosing(e.bytes),
        (None, None) => CgroupLimit::None,
    };
    Ok(CgroupReading {
        anon: c.anon,
        file: c.file,
        limit,
        group: c.group.display().to_string(),
    })
}

#[cfg(test)]
mod tests;
