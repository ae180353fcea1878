//! The cluster status snapshot (spec "Status", STATUS-1..24): what each process says about
//! itself, what the launcher reads (each process's `RssAnon`/`RssFile`, the cgroup, the host),
//! merged into the `/dashboard/status.json` object (`scope: "cluster"`) the master serves.
//!
//! Theory of operation: the shell gathers a [`SnapshotInput`] every `statusSeconds` and calls
//! [`snapshot`]; the result goes to the master as `ToChild::Snapshot { status }` (STATUS-5).
//! Pure: the readings and the time come in.
//!
//! * Bytes and milliseconds; `null` where a figure doesn't apply or isn't known, never a guess
//!   (STATUS-13). What couldn't be read is in `missing`, grouped by why (STATUS-15, 23, 24).
//! * A process whose own figures are older than 3 × `statusSeconds` is `stale` and left out of
//!   the totals (STATUS-21). One that has sent none since it started serves without a channel:
//!   `ready` with `noChannel: true`, its own figures `null`, not stale. Its `RssAnon` is the launcher's fresh reading, not a figure it sent,
//!   so it stays in `memory.processAnon`: the memory is there whether or not the process talks.
//! * A process restarting has no figures; its replacement has only those it has sent since it
//!   started (STATUS-22): a `Status` that arrived before the current start is ignored.
//! * `requests` is the master's own statistics (the master fills it in): null here. The
//!   launcher's sums for the page's one line are under `totals` (STATUS-16, 17, 19, DEC-16/17).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::process::Role;
use crate::settings::Settings;

use super::front::{Cpu, FrontFigures, Latency};
pub use super::readings::Reading;
use super::restarts::RestartCounts;
use beside::beside_row;
pub use beside::{Beside, BesideState};
use caches::caches_section;
use memory::memory_section;
use missing::Missing;

/// Where a process is in its life, as the supervisor sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessState {
    Starting,
    Ready,
    Restarting,
    Stopping,
}

/// A process as the supervisor's lifecycle has it now (its projection, `Lifecycle::status`,
/// with the shell's pid): the status takes it at each use and keeps no copy of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Life {
    pub state: ProcessState,
    pub pid: Option<u32>,
    /// When the current process was started (spawned).
    pub started_at: Option<Instant>,
    /// When the current process became ready.
    pub ready_at: Option<Instant>,
    /// Restarts since the launcher started that it did not plan: crashes and hang kills
    /// (STATUS-17, DEC-84; every restart by its reason in `restarts_by`, DEC-25).
    pub restarts: u32,
    /// The same, by reason.
    pub restarts_by: RestartCounts,
    /// The place's second process, while a replacement runs beside the old one (DEC-92).
    pub beside: Option<Beside>,
    /// The place keeps its last good inputs while new ones wait (DEC-93).
    pub inputs_waiting: bool,
}

impl Life {
    /// A process not started yet.
    pub const NOT_STARTED: Life = Life {
        state: ProcessState::Starting,
        pid: None,
        started_at: None,
        ready_at: None,
        restarts: 0,
        restarts_by: RestartCounts([0; 5]),
        beside: None,
        inputs_waiting: false,
    };

    /// Whether it has a live process whose memory can be read.
    pub fn running_pid(&self) -> Option<u32> {
        match self.state {
            ProcessState::Ready | ProcessState::Starting => self.pid,
            ProcessState::Restarting | ProcessState::Stopping => None,
        }
    }
}

/// The figures of one `status` message: the message's own type.
pub(crate) use crate::ipc::message::Status as StatusFigures;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcMemory {
    pub rss_anon: u64,
    pub rss_file: u64,
}

/// One process of the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessInput {
    pub code: String,
    pub role: Role,
    pub pid: Option<u32>,
    pub state: ProcessState,
    /// When the current process was started (spawned).
    pub started_at: Option<Instant>,
    /// When the current process became ready.
    pub ready_at: Option<Instant>,
    /// Restarts since the launcher started that it did not plan: crashes and hang kills
    /// (STATUS-17, DEC-84; every restart by its reason in `restarts_by`, DEC-25).
    pub restarts: u32,
    /// The same, by reason.
    pub restarts_by: RestartCounts,
    /// Why it was last restarted (an exit, or a recycle's reason), if it was (DEC-25).
    pub last_restart: Option<String>,
    /// Its last `Status` and when it arrived.
    pub status: Option<(StatusFigures, Instant)>,
    /// Its memory as the launcher read it.
    pub memory: Reading<ProcMemory>,
    /// The limit its memory guard reported (`ready`'s `memoryLimit`).
    pub guard_limit: Option<u64>,
    /// What the front door knows of it without its help, if the front door was asked.
    pub front: Option<FrontFigures>,
    /// Its latency at the front door and its CPU over the last status interval.
    pub latency: Option<Latency>,
    pub cpu: Option<Cpu>,
    /// The place's second process and its memory as the launcher read it (DEC-92).
    pub beside: Option<(Beside, Reading<ProcMemory>)>,
    /// The place keeps its last good inputs while new ones wait (DEC-93).
    pub inputs_waiting: bool,
}

/// The limit on the launcher's cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CgroupLimit {
    /// A limit of the service's own cgroup (`MemoryMax`, a container limit): MEM-4.
    Own(u64),
    /// A limit only on an enclosing cgroup (a slice): not the service's own (MEM-5).
    Enclosing(u64),
    None,
}

/// The cgroup's memory, as read by the system module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupReading {
    /// `memory.stat` `anon` (cgroup v1 `total_rss`).
    pub anon: u64,
    /// `memory.stat` `file`.
    pub file: u64,
    pub limit: CgroupLimit,
    /// The cgroup's path, e.g. `/system.slice/fhir.service`.
    pub group: String,
}

/// `/proc/meminfo`: `MemTotal` and `MemAvailable`, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostMemory {
    pub total: u64,
    pub available: u64,
}

/// The launcher's own row.
#[derive(Clone, Debug, PartialEq)]
pub struct LauncherFigures {
    pub pid: u32,
    pub memory: Reading<ProcMemory>,
    pub uptime: Duration,
    /// Requests the launcher has at work on the processes, if the proxy counts them.
    pub in_flight: Option<u64>,
}

/// The settings the snapshot reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapshotSettings {
    pub status_interval: Duration,
    pub reject_fraction: f64,
    pub abort_fraction: f64,
    pub shared_cache: bool,
}

impl SnapshotSettings {
    pub fn from_settings(s: &Settings) -> SnapshotSettings {
        SnapshotSettings {
            status_interval: s.cluster.status_interval,
            reject_fraction: s.memory.reject_fraction,
            abort_fraction: s.memory.abort_fraction,
            shared_cache: s.cluster.shared_cache,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotInput<'a> {
    /// Master first, then tx1, tx2 ...
    pub processes: &'a [ProcessInput],
    pub cgroup: Reading<CgroupReading>,
    pub host: Reading<HostMemory>,
    pub launcher: LauncherFigures,
    pub settings: SnapshotSettings,
}

/// The figures the current process has sent: none while restarting, and none sent before its
/// current start (a predecessor's), STATUS-22.
fn own_figures(p: &ProcessInput) -> Option<(&StatusFigures, Instant)> {
    let (figures, at) = p.status.as_ref()?;
    if p.state == ProcessState::Restarting || p.started_at.is_some_and(|s| *at < s) {
        return None;
    }
    Some((figures, *at))
}

/// Figures older than 3 intervals. A process that has sent none since its start has no old
/// figures: it serves without a channel (`no_channel`), and is not stale.
fn is_stale(p: &ProcessInput, stale_after: Duration, now: Instant) -> bool {
    p.state == ProcessState::Ready
        && own_figures(p).is_some_and(|(_, at)| now.saturating_duration_since(at) > stale_after)
}

/// Ready for over an interval, and no figures of its own since it started: a server without the
/// IPC channel (its heap, caches and in-flight are unknown).
fn no_channel(p: &ProcessInput, interval: Duration, now: Instant) -> bool {
    p.state == ProcessState::Ready
        && own_figures(p).is_none()
        && p.ready_at
            .is_some_and(|at| now.saturating_duration_since(at) > interval)
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Builds the `/dashboard/status.json` object. `now_ms` is the wall clock (ms since the epoch)
/// at `now`.
pub fn snapshot(input: &SnapshotInput, now: Instant, now_ms: u64) -> Value {
    let st = &input.settings;
    let stale_after = st.status_interval.saturating_mul(3);
    let mut missing = Missing::default();

    let mut rows = Vec::new();
    let mut counted: Vec<(&ProcessInput, &StatusFigures)> = Vec::new();
    let mut process_anon: Option<u64> = None;
    for p in input.processes {
        let restarting = p.state == ProcessState::Restarting;
        let stale = is_stale(p, stale_after, now);
        let figures = own_figures(p);
        let memory = if restarting {
            None
        } else {
            match &p.memory {
                Ok(m) => Some(*m),
                Err(why) => {
                    missing.add(&why.to_string(), &p.code);
                    None
                }
            }
        };
        if let Some(m) = memory {
            process_anon = Some(process_anon.unwrap_or(0) + m.rss_anon);
        }
        if let (Some((f, _)), false) = (figures, stale) {
            counted.push((p, f));
        }
        let status = match p.state {
            ProcessState::Starting => "starting",
            ProcessState::Restarting => "restarting",
            ProcessState::Stopping => "stopping",
            ProcessState::Ready if stale => "stale",
            ProcessState::Ready => "ready",
        };
        let f = figures.map(|(f, _)| f);
        rows.push(json!({
            "code": p.code,
            "role": p.role.as_str(),
            "pid": if restarting { None } else { p.pid },
            "status": status,
            "uptimeMs": if restarting { None } else { p.started_at.map(|s| ms(now.saturating_duration_since(s))) },
            "restarts": p.restarts,
            "restartsBy": p.restarts_by.to_json(),
            "lastRestart": p.last_restart,
            "requests": f.map(|f| f.requests),
            "rssAnon": memory.map(|m| m.rss_anon),
            "rssFile": memory.map(|m| m.rss_file),
            "heapUsed": f.and_then(|f| f.heap_used),
            "heapLimit": f.and_then(|f| f.heap_limit),
            "clientCaches": f.and_then(|f| f.client_caches),
            "clientConcepts": f.and_then(|f| f.client_concepts),
            "inFlight": f.map(|f| f.in_flight),
            "eventLoopDelayMs": f.and_then(|f| f.event_loop_delay_ms),
            "figuresAgeMs": figures.map(|(_, at)| ms(now.saturating_duration_since(at))),
            "noChannel": no_channel(p, st.status_interval, now),
        }));
        if let (Some(row), Some(front)) = (rows.last_mut(), &p.front) {
            merge(row, front.row_fields(p.latency.as_ref()));
        }
        if let Some(row) = rows.last_mut() {
            let cpu = if restarting { None } else { p.cpu };
            row["cpuSeconds"] = json!(cpu.map(|c| c.seconds));
            row["cpuPercent"] = json!(cpu.and_then(|c| c.percent));
            row["beside"] = json!(false);
            // After the switch the place's process is the replacement, the old one beside it.
            row["replacement"] = json!(p.beside.as_ref().is_some_and(|(b, _)| !b.replacement));
            row["inputsWaiting"] = json!(p.inputs_waiting);
        }
        if let Some((b, memory)) = &p.beside {
            let memory = match memory {
                Ok(m) => Some(*m),
                Err(why) => {
                    missing.add(&why.to_string(), &p.code);
                    None
                }
            };
            if let Some(m) = memory {
                process_anon = Some(process_anon.unwrap_or(0) + m.rss_anon);
            }
            rows.push(beside_row(p, b, memory, now));
        }
    }
    let front_requests = input
        .processes
        .iter()
        .filter_map(|p| p.front.map(|f| f.requests()))
        .fold(None, |acc, n| Some(acc.unwrap_or(0) + n));

    let launcher_memory = match &input.launcher.memory {
        Ok(m) => Some(*m),
        Err(why) => {
            missing.add(&why.to_string(), "launcher");
            None
        }
    };
    let launcher = json!({
        "code": "launcher",
        "role": "launcher",
        "pid": input.launcher.pid,
        "status": "ready",
        "uptimeMs": ms(input.launcher.uptime),
        "restarts": Value::Null,
        "requests": Value::Null,
        "rssAnon": launcher_memory.map(|m| m.rss_anon),
        "rssFile": launcher_memory.map(|m| m.rss_file),
        "heapUsed": Value::Null,
        "heapLimit": Value::Null,
        "clientCaches": Value::Null,
        "clientConcepts": Value::Null,
        "inFlight": input.launcher.in_flight,
        "eventLoopDelayMs": Value::Null,
        "figuresAgeMs": 0,
    });

    let memory = memory_section(input, process_anon, &mut missing);
    let caches = caches_section(st.shared_cache, &counted);
    let sum = |get: &dyn Fn(&StatusFigures) -> Option<u64>| -> Option<u64> {
        counted
            .iter()
            .filter_map(|(_, f)| get(f))
            .fold(None, |acc, v| Some(acc.unwrap_or(0) + v))
    };
    let heaps: Vec<u64> = counted.iter().filter_map(|(_, f)| f.heap_used).collect();
    let host = match &input.host {
        Ok(h) => json!({"total": h.total, "available": h.available}),
        Err(why) => {
            missing.add_what("host memory", &why.to_string());
            json!({"total": null, "available": null})
        }
    };
    let master_uptime = input
        .processes
        .iter()
        .find(|p| p.role == Role::Master && p.state != ProcessState::Restarting)
        .and_then(|p| p.started_at)
        .map(|s| ms(now.saturating_duration_since(s)));
    json!({
        "scope": "cluster",
        "sampledAt": now_ms,
        "intervalMs": ms(st.status_interval),
        "memory": memory,
        "caches": caches,
        "inFlight": counted.iter().map(|(_, f)| u64::from(f.in_flight)).sum::<u64>(),
        "refusing": counted.iter().filter(|(_, f)| f.refusing).map(|(p, _)| p.code.clone()).collect::<Vec<_>>(),
        "processes": rows,
        "launcher": launcher,
        "missing": missing.into_json(),
        "requests": Value::Null,
        "host": host,
        "totals": {
            "requests": sum(&|f| Some(f.requests)),
            // The front door's count of every process's answers: beside the processes' own
            // counts above, never added to them.
            "frontRequests": front_requests,
            "heapUsed": (!heaps.is_empty()).then(|| heaps.iter().sum::<u64>()),
            "heapCount": heaps.len(),
            "restarts": input.processes.iter().map(|p| u64::from(p.restarts)).sum::<u64>(),
            "uptimeMs": master_uptime,
        },
    })
}

/// `fields`' keys set on `row`.
fn merge(row: &mut Value, fields: Value) {
    if let (Some(row), Value::Object(fields)) = (row.as_object_mut(), fields) {
        row.extend(fields);
    }
}

mod beside;
mod caches;
mod memory;
mod missing;

#[cfg(test)]
mod tests;
