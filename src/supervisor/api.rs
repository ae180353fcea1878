//! The supervisor's interface with the rest of the launcher: what it is given to start
//! (`SupervisorSetup`), what it is told while running (`Control`, `Reload`), what it reports
//! back (`Hooks`) and how it ends (`Ended`). Kept apart from the shell so the callers' contract
//! reads on its own.

use std::time::Duration;

pub use super::hang::Owed;
use super::recycle::RecyclePolicy;
use crate::ipc::message::FromChild;
use crate::process::{Ending, ProcessId, ProcessSpec};
use crate::settings::Settings;
use crate::status::keeper::Tally;
use crate::status::snapshot::SnapshotSettings;

/// What the rest of the launcher hears from the supervisor.
pub trait Hooks: Send + Sync + 'static {
    /// The process is ready: route to it.
    fn up(&self, id: ProcessId, pid: u32);
    /// The process is gone or stopping: route nothing more to it.
    fn down(&self, id: ProcessId);
    /// The process is being recycled: no new requests; its cache-ids are lost (DEC-15).
    fn draining(&self, id: ProcessId);
    /// Requests at work on the process now.
    fn in_flight(&self, id: ProcessId) -> u32;
    /// A replacement started beside the place's process is ready and takes its place: new
    /// requests go to `addr` (its own port), with this pid; the old one keeps those it has.
    fn moved(&self, _id: ProcessId, _addr: std::net::SocketAddr, _pid: u32) {}
    /// The place's process is started on `addr`, not on its place's own port (a replacement's
    /// switch swapped the two places' ports, DEC-78): the place's requests go there once it is
    /// up, not to the process now on its own port.
    fn listens_at(&self, _id: ProcessId, _addr: std::net::SocketAddr) {}
    /// Requests still at work on the process a replacement took over from (`moved`).
    fn outgoing_in_flight(&self, _id: ProcessId) -> u32 {
        0
    }
    /// What the front door counted since the launcher started.
    fn tally(&self) -> Tally;
    /// What the front door knows of the process without its help (`status::front`).
    fn front(&self, _id: ProcessId) -> Option<crate::status::front::FrontFigures> {
        None
    }
    /// The process's latency over the interval since the last call (the status tick's), the
    /// front door's histogram emptied for the next.
    fn take_latency(&self, _id: ProcessId) -> Option<crate::status::front::Latency> {
        None
    }
    /// Woken as a draining process's last request ends: the shell stops it then, not at its
    /// next upkeep tick. None: only the tick looks.
    fn drained_news(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        None
    }
    /// What the hang watchdog reads of the process (DEC-82): how many reads from its
    /// connections brought bytes so far, and the oldest request it owes an answer to. None: the
    /// front door does not know it.
    fn liveness(&self, _id: ProcessId) -> Option<(u64, Option<Owed>)> {
        None
    }
    /// A status, sample or count message from a process.
    fn message(&self, _id: ProcessId, _msg: &FromChild) {}
    /// The process joins the cluster (the worker count grew); it is not ready yet.
    fn added(&self, _id: ProcessId) {}
    /// The process has left the cluster for good (the worker count shrank).
    fn retired(&self, _id: ProcessId) {}
    /// The process was started, with this pid (not ready yet).
    fn started(&self, _id: ProcessId, _pid: u32) {}
    /// The process exited, so (DEC-73: whether a request in flight may have ended it).
    fn exited(&self, _id: ProcessId, _how: Ending) {}
    /// A reload (`Control::Reload`) is over: its rolling restart done or stopped by a failure,
    /// or none begun (the cluster was starting or stopping).
    fn reload_finished(&self) {}
}

/// Logged once every worker is ready: what they all use idle (MEM-12, MEM-13).
pub type IdleReport = Box<dyn FnMut(&[u32]) + Send>;

/// Decides the worker count once the master is loaded (the memory fit), given the master's pid.
pub type Sizer = Box<dyn FnMut(u32) -> usize + Send>;

/// Memory as the fit reads it now, given the master's pid: None with no limit to fit under.
pub type MemoryProbe = Box<dyn FnMut(u32) -> Option<super::scale::MemoryRoom> + Send>;

/// What a run-time change of the worker count is checked against (`scale.rs`).
pub struct ScaleLimits {
    /// Why this run has no room for more workers than `processes.len() - 1`: the port range's
    /// own line (DEC-21), or the room the run made at start.
    pub room_why: String,
    pub memory: MemoryProbe,
}

pub struct SupervisorSetup {
    /// Every process the launcher could run, master first, then tx1, tx2 ... (index =
    /// `ProcessId`): the plan's, and more the worker count may grow into on reload.
    pub processes: Vec<ProcessSpec>,
    /// How many workers the plan runs at start (at most `processes.len() - 1`).
    pub workers: usize,
    pub max_start_failures: u32,
    pub kill_after: Duration,
    /// What a reload may change (`Reload`).
    pub settings: SupervisorSettings,
    pub idle_report: IdleReport,
    pub scale: ScaleLimits,
}

/// What the supervisor takes of the settings: at start, and again on every reload from the
/// settings then in force (`reload::Live` carries it), so none it takes is left as it was.
#[derive(Clone, Debug, PartialEq)]
pub struct SupervisorSettings {
    /// `drainSeconds`, for a recycle and each step of a rolling restart.
    pub drain: Duration,
    /// `statusSeconds`: the status ticks, and the period the processes are told in `hello`.
    pub status_seconds: f64,
    /// The sample period the processes are told in `hello` (`stats.sampleSeconds`, or a minute
    /// or `stats.intervalMinutes` if shorter).
    pub sample_seconds: f64,
    /// `recycleSeconds` and `rejectFraction`, for the recycle decision.
    pub recycle: RecyclePolicy,
    /// `hangTimeoutSeconds`, for the hang watchdog (DEC-82); zero: never.
    pub hang_timeout: Duration,
    /// The settings `/status` reports and counts staleness by.
    pub snapshot: SnapshotSettings,
}

impl From<&Settings> for SupervisorSettings {
    fn from(s: &Settings) -> Self {
        SupervisorSettings {
            drain: s.cluster.drain,
            status_seconds: s.cluster.status_interval.as_secs_f64(),
            sample_seconds: s.stats.sample_period().as_secs_f64(),
            recycle: RecyclePolicy {
                reject_fraction: s.memory.reject_fraction,
                recycle_after: s.cluster.recycle,
            },
            hang_timeout: s.cluster.hang_timeout,
            snapshot: SnapshotSettings::from_settings(s),
        }
    }
}

#[derive(Debug)]
pub enum Control {
    /// The orderly stop: workers, their last counts, then the master.
    Stop,
    /// The launcher's own view of the cluster now, for `/status` and `/metrics`.
    Report(tokio::sync::oneshot::Sender<crate::status::keeper::Report>),
    /// The settings were reloaded (SIGHUP): take them, then restart in turn the processes
    /// whose inputs changed.
    Reload(Reload),
    /// `fhircluster restart`: every process in turn, the master last, as a reload's rolling
    /// restart; answered once it is over (`Err`: why it stopped, or could not begin).
    Restart(tokio::sync::oneshot::Sender<Result<(), String>>),
    /// An in-place upgrade: hand every process and the state over (`reply`), or say why not
    /// now (the supervisor then runs on as before). Once handed over, the supervisor waits for
    /// `back`: the program is replaced (nothing comes), or the `execve` failed and it takes
    /// everything back and runs on; `back` dropped, it ends (`Ended::HandedOver`).
    HandOver {
        reply: tokio::sync::oneshot::Sender<Result<Box<super::shell::ShellHandover>, String>>,
        back: tokio::sync::oneshot::Receiver<Box<super::shell::ShellHandover>>,
    },
    /// One worker more or fewer, or a count, at run time (`SIGTTIN`, `SIGTTOU`, `scale N`).
    Scale(Scale),
    /// A reload was refused (a bad config.json, which the servers read themselves): the
    /// rolling restart under way restarts no other process (`why`: the refusal).
    HaltRolling(String),
}

/// A run-time change of the worker count, and where its answer goes.
#[derive(Debug)]
pub struct Scale {
    pub ask: super::scale::Ask,
    /// Who asked, for the log, the status and the events (`SIGTTIN`, `the control socket`).
    pub by: String,
    /// The change made (from, to), or the refusal's line.
    pub reply: Option<tokio::sync::oneshot::Sender<Result<(usize, usize), String>>>,
}

/// What a reload changes in the supervisor.
pub struct Reload {
    pub workers: WorkerCount,
    pub settings: SupervisorSettings,
    /// Each place's process as the settings in force say to start it (its command, flags,
    /// environment and what it reads of config.json): every start from now on takes these;
    /// `None`: as they are.
    pub processes: Option<Vec<ProcessSpec>>,
    /// Which processes are restarted in turn, one at a time, the master last.
    pub rolling: Rolling,
    /// The count config.json asks for, taken when `workers` is `Keep` but the count now was set
    /// at run time (`Control::Scale`): a reload goes back to config.json (DEC-48).
    pub configured: WorkerCount,
}

/// Which processes a reload restarts in turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rolling {
    /// None (the worker count and settings only).
    None,
    /// Those whose inputs (`ProcessSpec::inputs`) are no longer their place's.
    Changed,
}

impl std::fmt::Debug for Reload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reload")
            .field("settings", &self.settings)
            .field("rolling", &self.rolling)
            .finish_non_exhaustive()
    }
}

/// The worker count a reload asks for.
pub enum WorkerCount {
    /// As it is.
    Keep,
    /// This many.
    Exactly(usize),
    /// Sized again, by the memory fit on the running master (`server.cluster.workers` removed).
    Size(Sizer),
}

#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    Stopped,
    /// Its processes and state were handed over (`Control::HandOver`): they run on.
    HandedOver,
    /// The master could not be started `maxStartFailures` times in a row.
    GaveUp,
}
