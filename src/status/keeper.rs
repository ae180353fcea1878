//! The launcher's record of the cluster, kept for the supervisor's shell: what each process has
//! sent and what happened to it, turned into the snapshot, the graph history and the cluster
//! events the master shows and reports. Status only: each process's state comes from the
//! supervisor's lifecycle at each use (`Life`, never copied here), what an exit meant is the
//! lifecycle's decision (`ExitFate`), and the machine is read through `Readings`. It joins the
//! pure parts (`snapshot`, `history`, `events`) to the outbox.

use std::time::Instant;

use serde_json::Value;

use super::events::{Event, EventLog};
use super::front::FrontFigures;
use super::history::{memory_total, History};
use super::outbox::Outbox;
use super::readings::{NotRead, Readings};
use super::restarts::RestartReason;
use super::snapshot::{
    snapshot, CgroupLimit, LauncherFigures, Life, ProcessInput, SnapshotInput, SnapshotSettings,
    StatusFigures,
};
pub use super::tally::Tally;
use crate::ipc::message::{FromChild, ToChild};
use crate::process::{Exit, ProcessId, ProcessSpec, Role};
use crate::settings::Settings;

/// Events in one `events` message at most, and about this many bytes of them (a line on the
/// channel is at most 1 MiB).
const EVENTS_PER_MESSAGE: usize = 500;
const EVENT_BYTES_PER_MESSAGE: usize = 256 * 1024;
/// History changes held for the master at most before the whole history replaces them
/// (DEC-32; the mailbox has the same bound for what the master's channel has not taken).
const MAX_UPDATES: usize = 1000;

/// The launcher's view for its own endpoints.
#[derive(Clone, Debug)]
pub struct Report {
    /// The status snapshot, as the master gets it.
    pub snapshot: Value,
    /// Memory recycles per process code.
    pub recycles: Vec<(String, u64)>,
    /// The graph history as the master gets it (`History::to_json`), for the admin page.
    pub history: History,
}

/// What an exit meant, as the supervisor's lifecycle decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitFate {
    /// It starts again, after a backoff or at once (a recycle, a rolling restart): a gap and
    /// `restarting` in the graphs (GRAPH-4), and an exit event (EVENT-2; a recycle's exit is
    /// part of the recycle).
    Restarting,
    /// The launcher stopped it for good, with itself or retired by a lower worker count:
    /// `unavailable` in the graphs (GRAPH-10), and no exit event: it did not end on its own.
    Stopped,
    /// It ended on its own and is not started again (the master given up): an exit event,
    /// and `unavailable`.
    Died,
}

/// What the status keeps of one process: what it has sent and what was said of it. Never its
/// state: that is the lifecycle's.
#[derive(Clone, Debug)]
struct Row {
    code: String,
    role: Role,
    /// Why it was last restarted (an exit, or a recycle's reason), if it was (DEC-25).
    last_restart: Option<String>,
    /// Its last `Status` and when it arrived.
    status: Option<(StatusFigures, Instant)>,
    /// The limit its memory guard reported (`ready`'s `memoryLimit`).
    guard_limit: Option<u64>,
    /// Memory recycles since the launcher started.
    recycles: u64,
    /// Why it is being recycled, until the exit that ends the recycle (DEC-25).
    recycle_reason: Option<String>,
    /// What the hang watchdog saw when it killed it, until the exit that follows (DEC-82).
    hang: Option<String>,
    /// What the launcher measured of it over the last status interval (`keeper/front.rs`).
    interval: front::IntervalFigures,
}

impl Row {
    fn new(p: &ProcessSpec) -> Row {
        Row {
            code: p.code.clone(),
            role: p.role,
            last_restart: None,
            status: None,
            guard_limit: None,
            recycles: 0,
            recycle_reason: None,
            hang: None,
            interval: front::IntervalFigures::default(),
        }
    }
}

pub struct Keeper {
    rows: Vec<Row>,
    /// Every process's code by index, kept when its row goes (a worker retired by a reload):
    /// what the front door counted against it since the last minute still reaches the report.
    codes: Vec<String>,
    settings: SnapshotSettings,
    history: History,
    events: EventLog,
    outbox: Outbox,
    last_tally: Tally,
    /// History changes not yet passed to the master (at most [`MAX_UPDATES`]; past it they
    /// give way to the whole history, `whole_due`).
    history_updates: Vec<Value>,
    /// The master is to get the whole history instead of the changes dropped (DEC-32).
    whole_due: bool,
    started: Instant,
    pid: u32,
    /// The worker count wanted, and whether it was set at run time (`keeper/workers.rs`).
    wanted: workers::Wanted,
    /// Why the last rolling restart stopped before its end, until the next reload or restart
    /// (DEC-79).
    rolling_stopped: Option<String>,
}

impl Keeper {
    /// Opens the outbox under the data directory and records the launcher's start (EVENT-1).
    pub fn new(settings: &Settings, specs: &[ProcessSpec], now: Instant) -> Keeper {
        let mut k = Keeper::open(settings, specs, now);
        let ev = k.events.launcher_started(k.pid, crate::clock::unix_ms());
        k.outbox.hold(ev);
        k
    }

    /// The keeper over the outbox, with no event of its own yet.
    fn open(settings: &Settings, specs: &[ProcessSpec], now: Instant) -> Keeper {
        let ms = crate::clock::unix_ms();
        let mut outbox = Outbox::open(&settings.data_dir);
        let sample = settings.stats.sample_period();
        let history = outbox
            .take_saved_history()
            .and_then(|h| History::restore_json(&h, settings.cluster.shared_cache, ms))
            .unwrap_or_else(|| History::new(sample, settings.cluster.shared_cache));
        Keeper {
            rows: specs.iter().map(Row::new).collect(),
            codes: specs.iter().map(|s| s.code.clone()).collect(),
            settings: SnapshotSettings::from_settings(settings),
            history,
            events: EventLog::new(outbox.last_id(), ms),
            outbox,
            last_tally: Tally::default(),
            history_updates: Vec::new(),
            whole_due: false,
            started: now,
            pid: std::process::id(),
            wanted: workers::Wanted {
                workers: specs.len().saturating_sub(1),
                ..Default::default()
            },
            rolling_stopped: None,
        }
    }

    /// The last rolling restart stopped (`Some`: why), or a new one began (`None`).
    pub fn rolling_stopped(&mut self, why: Option<String>) {
        self.rolling_stopped = why;
    }

    /// The rows follow the processes in the cluster (the worker count moved on reload): rows
    /// beyond `specs` go, new ones start afresh; the others keep their record.
    pub fn resize_rows(&mut self, specs: &[ProcessSpec]) {
        for (i, spec) in specs.iter().enumerate() {
            match self.codes.get_mut(i) {
                Some(code) => code.clone_from(&spec.code),
                None => self.codes.push(spec.code.clone()),
            }
        }
        self.rows.truncate(specs.len());
        let have = self.rows.len();
        self.rows.extend(specs[have..].iter().map(Row::new));
    }

    /// The settings in force after a reload: what the snapshot reports (its staleness counts in
    /// `statusSeconds`).
    pub fn reconfigure(&mut self, settings: SnapshotSettings) {
        self.settings = settings;
    }

    /// How many processes the status shows: give as many `Life`s.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    fn hold(&mut self, ev: Option<Event>) {
        if let Some(ev) = ev {
            self.outbox.hold(ev);
        }
    }

    /// The history's change for a process's new legend state, queued for the master.
    fn legend(&mut self, id: ProcessId, change: fn(&mut History, &str, &str, u64) -> Value) {
        let Some(row) = self.rows.get(id.index()) else {
            return;
        };
        let (code, role) = (row.code.clone(), row.role.as_str());
        let u = change(&mut self.history, &code, role, crate::clock::unix_ms());
        self.queue_update(u);
    }

    /// A process was started: nothing it said before counts any more (STATUS-22).
    pub fn started(&mut self, id: ProcessId) {
        if let Some(row) = self.rows.get_mut(id.index()) {
            row.status = None;
            row.guard_limit = None;
            row.interval.started();
        }
        self.legend(id, History::process_starting);
    }

    /// A process is ready (the lifecycle's `Up`): live in the graphs, and if it had been down,
    /// how long (EVENT-4, EVENT-5).
    pub fn ready(&mut self, id: ProcessId) {
        self.legend(id, History::process_ready);
        if let Some(row) = self.rows.get(id.index()) {
            let code = row.code.clone();
            let ev = self.events.ready(&code, crate::clock::unix_ms());
            self.hold(ev);
        }
    }

    /// The limit a process's memory guard measures against, from its `ready` message.
    pub fn guard_limit(&mut self, id: ProcessId, limit: Option<u64>) {
        if let Some(row) = self.rows.get_mut(id.index()) {
            row.guard_limit = limit;
        }
    }

    /// The limit the process's memory guard reported, if it did.
    pub fn reported_limit(&self, id: ProcessId) -> Option<u64> {
        self.rows.get(id.index()).and_then(|r| r.guard_limit)
    }

    /// The hang watchdog is killing the process (DEC-82): `detail` says what it saw.
    pub fn hung(&mut self, id: ProcessId, detail: String) {
        if let Some(row) = self.rows.get_mut(id.index()) {
            row.hang = Some(detail);
        }
    }

    /// A process exited (`pid` was its pid), and what that meant (`fate`, the lifecycle's;
    /// `why`: the reason it starts again, when it does).
    pub fn exited(
        &mut self,
        id: ProcessId,
        exit: Exit,
        pid: Option<u32>,
        fate: ExitFate,
        why: Option<RestartReason>,
    ) {
        let ms = crate::clock::unix_ms();
        let Some(row) = self.rows.get_mut(id.index()) else {
            return;
        };
        row.status = None;
        let recycled = row.recycle_reason.take();
        let hang = row.hang.take();
        let (code, role) = (row.code.clone(), row.role.as_str());
        if fate == ExitFate::Restarting {
            // DEC-25: the exit that ends a recycle keeps the recycle's reason.
            row.last_restart = Some(match (recycled, &hang) {
                (Some(reason), _) => format!("recycled: {reason}"),
                (None, Some(hang)) => format!("hung: {hang}"),
                (None, None) => exit.to_string(),
            });
        }
        // GRAPH-10: not coming back (stopped, retired, given up): unavailable.
        let u = match fate {
            ExitFate::Restarting => self.history.process_restarting(&code, role, ms),
            ExitFate::Stopped | ExitFate::Died => self.history.process_unavailable(&code, role, ms),
        };
        self.queue_update(u);
        if fate != ExitFate::Stopped {
            let ev = self.events.exited(&code, role, pid, exit, ms);
            let ev = ev.map(|e| e.with_reason(why.map(RestartReason::label), hang));
            self.hold(ev);
        }
    }

    /// The recycle of a worker begins (EVENT-3, DEC-25).
    pub fn recycling(&mut self, id: ProcessId, reason: &str) {
        let ms = crate::clock::unix_ms();
        let Some(row) = self.rows.get_mut(id.index()) else {
            return;
        };
        row.recycles += 1;
        row.recycle_reason = Some(reason.to_string());
        row.last_restart = Some(format!("recycled: {reason}"));
        let code = row.code.clone();
        let ev = self.events.recycling(&code, reason, ms);
        self.outbox.hold(ev);
    }

    /// A status or sample message from a process. A sample is recorded with the process's
    /// `RssAnon` read now, and the master's with the memory Total (GRAPH-9).
    pub fn message(
        &mut self,
        id: ProcessId,
        msg: &FromChild,
        lives: &[Life],
        readings: &dyn Readings,
        now: Instant,
    ) {
        if let Some(figures) = StatusFigures::from_message(msg) {
            if let Some(row) = self.rows.get_mut(id.index()) {
                row.status = Some((figures, now));
            }
            return;
        }
        let FromChild::Sample(sample) = msg else {
            return;
        };
        let ms = crate::clock::unix_ms();
        let Some(row) = self.rows.get_mut(id.index()) else {
            return;
        };
        // It samples itself: the launcher takes no samples for it (`keeper/front.rs`).
        row.interval.own_samples = true;
        let row = &*row;
        let (code, role) = (row.code.clone(), row.role.as_str());
        let rss_of = |life: &Life| {
            life.running_pid()
                .and_then(|pid| readings.process(pid).ok())
                .map(|m| m.rss_anon)
        };
        let rss = lives.get(id.index()).and_then(rss_of);
        // Its in flight from its last `status`, if that came from the current process.
        let started = lives.get(id.index()).and_then(|l| l.started_at);
        let in_flight = row
            .status
            .as_ref()
            .filter(|(_, at)| started.is_none_or(|s| *at >= s))
            .map(|(f, _)| u64::from(f.in_flight));
        let u = self
            .history
            .record_sample_with(&code, role, sample, rss, in_flight, ms);
        self.queue_update(u);
        if id.is_master() {
            let own = match readings.cgroup() {
                Ok(c) if matches!(c.limit, CgroupLimit::Own(_)) => Some(c.anon),
                _ => None,
            };
            let every: Vec<Option<u64>> = lives.iter().map(rss_of).collect();
            let total = memory_total(own, &every);
            let u = self.history.record_memory_total(sample.at, total, ms);
            self.queue_update(u);
        }
    }

    /// The cluster snapshot for the master (STATUS-5): `lives` (one per row, master first) as
    /// the lifecycle has them, the machine read now.
    /// `fronts`: what the front door knows of each row's process (one per row, or none).
    pub fn snapshot(
        &self,
        lives: &[Life],
        fronts: &[Option<FrontFigures>],
        readings: &dyn Readings,
        now: Instant,
    ) -> Value {
        let processes: Vec<ProcessInput> = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let life = lives.get(i).copied().unwrap_or(Life::NOT_STARTED);
                ProcessInput {
                    code: row.code.clone(),
                    role: row.role,
                    pid: life.pid,
                    state: life.state,
                    started_at: life.started_at,
                    ready_at: life.ready_at,
                    restarts: life.restarts,
                    restarts_by: life.restarts_by,
                    last_restart: row.last_restart.clone(),
                    status: row.status.clone(),
                    memory: life
                        .running_pid()
                        .ok_or(NotRead::NotRunning)
                        .and_then(|pid| readings.process(pid)),
                    guard_limit: row.guard_limit,
                    front: fronts.get(i).copied().flatten(),
                    latency: row.interval.latency,
                    cpu: life
                        .running_pid()
                        .and_then(|pid| row.interval.cpu_now(pid, readings)),
                    beside: life.beside.map(|b| {
                        let memory = b
                            .pid
                            .ok_or(NotRead::NotRunning)
                            .and_then(|pid| readings.process(pid));
                        (b, memory)
                    }),
                    inputs_waiting: life.inputs_waiting,
                }
            })
            .collect();
        let input = SnapshotInput {
            processes: &processes,
            cgroup: readings.cgroup(),
            host: readings.host(),
            launcher: LauncherFigures {
                pid: self.pid,
                memory: readings.process(self.pid),
                uptime: now.saturating_duration_since(self.started),
                in_flight: None,
            },
            settings: self.settings,
        };
        let mut v = snapshot(&input, now, crate::clock::unix_ms());
        v["workers"] = self.workers_json(lives);
        v["rollingRestart"] = match &self.rolling_stopped {
            Some(why) => serde_json::json!({"state": "rolling restart stopped", "why": why}),
            None => Value::Null,
        };
        v
    }

    /// EVENT-6..12, EVENT-14: what the front door counted since the last minute, as one event.
    pub fn minute(&mut self, tally: Tally) {
        let ms = crate::clock::unix_ms();
        let last = std::mem::replace(&mut self.last_tally, tally);
        // Every code ever had, not only the rows': a worker retired since the last minute
        // still has its 502s, 504s and lost cache-ids counted (EVENT-6..8).
        let ev = self
            .last_tally
            .since(&last, &self.codes, &mut self.events, ms);
        self.hold(ev);
        self.outbox.save_history(&self.history, ms);
        // DEC-32, EVENT-16: what a cap dropped this minute, in one line.
        self.outbox.log_drops();
    }

    /// A history change for the master. Past [`MAX_UPDATES`] waiting (the master down, or
    /// not taking them) they are dropped and the whole history goes instead (DEC-32): it holds
    /// every point they carried.
    fn queue_update(&mut self, u: Value) {
        if self.history_updates.len() >= MAX_UPDATES {
            self.history_updates.clear();
            self.whole_due = true;
        }
        self.history_updates.push(u);
    }

    /// The graph history's changes for the master, now that it is up (or the whole history,
    /// when too many piled up).
    pub fn history_for_master(&mut self) -> Vec<ToChild> {
        if std::mem::take(&mut self.whole_due) {
            return vec![self.whole_history_for_master()];
        }
        self.history_updates
            .drain(..)
            .map(|history| ToChild::History { history })
            .collect()
    }

    /// The whole graph history for the master, in place of the changes it has not taken
    /// (DEC-32: a master not reading gets one whole history, not hours of changes).
    pub fn whole_history_for_master(&mut self) -> ToChild {
        self.history_updates.clear();
        self.whole_due = false;
        ToChild::History {
            history: self.history.to_json(crate::clock::unix_ms()),
        }
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
        self.whole_due = false;
        self.outbox.resend();
        vec![ToChild::History {
            history: self.history.to_json(crate::clock::unix_ms()),
        }]
    }

    /// While the master is down: history changes are not queued (it gets the whole history when
    /// it is back); events wait in the outbox.
    pub fn master_down(&mut self) {
        self.history_updates.clear();
        self.whole_due = false;
        self.outbox.resend();
    }

    /// The launcher's view for its own endpoints (`/status`, `/metrics`).
    pub fn report(
        &self,
        lives: &[Life],
        fronts: &[Option<FrontFigures>],
        readings: &dyn Readings,
        now: Instant,
    ) -> Report {
        Report {
            snapshot: self.snapshot(lives, fronts, readings, now),
            recycles: self
                .rows
                .iter()
                .map(|r| (r.code.clone(), r.recycles))
                .collect(),
            history: self.history.clone(),
        }
    }
}

mod front;
mod handover;
mod workers;
pub(crate) use handover::KeeperState;

#[cfg(test)]
mod tests;
