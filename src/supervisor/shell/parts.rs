//! The shell's state besides the lifecycle, in parts: the places' processes and how they were
//! started, a rolling restart's replacements beside them, the master's channel, what the status
//! keeper is told, and the watches on the workers (hang, memory recycle).

use tokio::sync::mpsc;

use super::super::api::SupervisorSetup;
use super::super::child::{ChildHandle, Tagged};
use super::super::mailbox::MasterMailbox;
use super::super::readings::SystemReadings;
use super::super::recycle_watch::RecycleWatch;
use crate::process::ProcessSpec;
use crate::status::keeper::Keeper;

/// Each place's process (by place index) and what it was started with.
pub(super) struct Places {
    pub(super) children: Vec<Option<ChildHandle>>,
    /// Whether each process has sent anything valid on its channel in this run: if so, only its
    /// `ready` makes it ready, never its socket (LAUNCH-3, DEC-27).
    pub(super) spoke: Vec<bool>,
    /// The digest of what each running process was started with (`ProcessSpec::inputs`): a
    /// reload restarts in turn those whose place's inputs are no longer these.
    pub(super) started_with: Vec<Option<u64>>,
    /// What each running process was started with.
    pub(super) started_spec: Vec<Option<ProcessSpec>>,
    /// What each place's last process to be ready was started with: every start but a rolling
    /// restart's replacement takes these, so a place keeps its last good inputs until its own
    /// replacement has been ready once (DEC-79). None: none ready yet, or it was failing when
    /// the inputs changed: the place's own.
    pub(super) last_good: Vec<Option<ProcessSpec>>,
    /// The port each place's process listens on (swapped at a replacement's switch).
    pub(super) ports: super::super::ports::Ports,
    /// The last generation given to a child: an event of an older one is stale.
    pub(super) generation: u64,
    /// Where every child's events go.
    pub(super) events_tx: mpsc::UnboundedSender<Tagged>,
}

impl Places {
    pub(super) fn new(setup: &SupervisorSetup, events_tx: mpsc::UnboundedSender<Tagged>) -> Places {
        let n = setup.processes.len();
        Places {
            children: (0..n).map(|_| None).collect(),
            spoke: vec![false; n],
            started_with: vec![None; n],
            started_spec: vec![None; n],
            last_good: vec![None; n],
            ports: super::super::ports::Ports::new(&setup.processes),
            generation: 0,
            events_tx,
        }
    }
}

/// A rolling restart's state: each place's second process (a replacement started beside its
/// process, or the old one it took over from, leaving: DEC-78, `shell/beside.rs`), and who waits
/// for the roll to end.
pub(super) struct Roll {
    pub(super) second: Vec<Option<ChildHandle>>,
    /// Whether each second process has spoken on its channel (as `Places::spoke`).
    pub(super) second_spoke: Vec<bool>,
    /// What each second process was started with.
    pub(super) second_spec: Vec<Option<ProcessSpec>>,
    /// The place whose port a replacement starting beside a place's process borrowed.
    pub(super) borrowed: Vec<Option<usize>>,
    /// The next start of the place is a rolling restart's replacement in place: with the
    /// place's inputs now, not its last good ones.
    pub(super) renew: Vec<bool>,
    /// `fhircluster restart`s and reloads waiting for the rolling restart under way to end.
    pub(super) waiters: Vec<tokio::sync::oneshot::Sender<Result<(), String>>>,
}

impl Roll {
    pub(super) fn new(n: usize) -> Roll {
        Roll {
            second: (0..n).map(|_| None).collect(),
            second_spoke: vec![false; n],
            second_spec: vec![None; n],
            borrowed: vec![None; n],
            renew: vec![false; n],
            waiters: Vec::new(),
        }
    }
}

/// The master's channel: what waits for it and how it takes it.
#[derive(Default)]
pub(super) struct MasterLink {
    pub(super) mailbox: MasterMailbox,
    /// The master acknowledges the events it takes (`eventsReceived`, protocol 1.1 on); if not,
    /// its channel write counts as delivery.
    pub(super) acks: bool,
    /// The master's queue was found full: what is for it waits until it reads again.
    pub(super) stalled: bool,
    /// The master's channel was asked to flush (the stop's counts): waiting for `Flushed`.
    pub(super) flushing: bool,
}

/// The status keeper and what it is told besides the lifecycle's states.
pub(super) struct Keeping {
    pub(super) keeper: Keeper,
    pub(super) readings: SystemReadings,
    /// How the master's last run ended ("exit code 3"): the give-up error names it.
    pub(super) master_end: Option<String>,
    /// The cgroup's `oom_kill` count at the last exit (or the start): a `SIGKILL` while it rose
    /// was most likely the OOM killer's (DEC-73).
    pub(super) oom_kills: Option<u64>,
}

impl Keeping {
    pub(super) fn new(keeper: Keeper) -> Keeping {
        Keeping {
            keeper,
            readings: SystemReadings::new(),
            master_end: None,
            oom_kills: crate::system::oom_kills::read_oom_kills(std::path::Path::new("/")),
        }
    }
}

/// The watches on the processes that end one on purpose.
pub(super) struct Watches {
    /// Each process's last sign of life, for the hang watchdog (DEC-82).
    pub(super) hang: super::super::hang::Watch,
    /// The memory recycle's decision (`../recycle_watch.rs`).
    pub(super) recycle: RecycleWatch,
}
