//! The lifecycle's vocabulary with the shell: the actions it asks for and the exits it is told
//! of (`Exit`, defined in `process.rs` as the status reports it too). Apart from the state machine so the contract between the pure core and the shell reads on
//! its own.

use std::time::{Duration, Instant};

pub(crate) use crate::process::Exit;
use crate::process::ProcessId;

/// What the shell must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start the process (a fresh one, same role, code and port: RESTART-6).
    Spawn(ProcessId),
    /// Send SIGTERM.
    Terminate(ProcessId),
    /// Send SIGKILL.
    Kill(ProcessId),
    /// Send SIGKILL to a hung process (the hang watchdog's, DEC-82; the shell logged why):
    /// its exit is then a crash's, counted `hung`.
    KillHung(ProcessId),
    /// The process is ready: it may be sent requests.
    Up(ProcessId),
    /// The process is gone (exited, or stopping): send it nothing more.
    Down(ProcessId),
    /// The process is being recycled: send it no new requests, let those it has finish, and
    /// call `drained` when none is left (RECYCLE-2, RECYCLE-3).
    Drain(ProcessId),
    /// The master is loaded for the first time: decide the worker count and call `set_workers`.
    SizeWorkers,
    /// Every worker has stopped: pass their last counts to the master, then call
    /// `master_flushed` (the machine also moves on by itself after `COUNTS_WAIT`).
    FlushMaster,
    /// The master could not be started: log an ERROR and exit 1 once `Finished` comes.
    GiveUp { failures: u32 },
    /// A restart was scheduled, for the log: how the process ended and when it starts again.
    RestartScheduled {
        id: ProcessId,
        after: Duration,
        failing: bool,
    },
    /// Nothing is running any more and nothing will start: the launcher may exit.
    Finished,
    /// A worker beyond the (lowered) worker count has stopped and will not start again: forget
    /// it in the proxy and the status.
    Retired(ProcessId),
    /// The rolling restart takes this process out of rotation now (`step` of `of`), for the log.
    RollingStep {
        id: ProcessId,
        step: usize,
        of: usize,
    },
    /// The rolling restart is over: every process in it was started again.
    RollingDone,
    /// The rolling restart was halted (`halt_rolling`): the process at hand is done, the rest
    /// were left as they were.
    RollingHalted,
    /// The rolling restart stopped because the replacement it started exited, or was not ready
    /// within its start limit; the processes after it keep running as they are (DEC-79).
    RollingAborted { id: ProcessId, how: super::Failed },
    /// The rolling restart's worker `step` of `of`: is there room for one more process beside
    /// it (memory now, a spare port)? Answer with `room` (DEC-78).
    AskRoom {
        id: ProcessId,
        step: usize,
        of: usize,
    },
    /// Start the place's replacement beside its process, on a port of its own; tell
    /// `second_ready` or `second_exited` of it.
    SpawnBeside(ProcessId),
    /// The replacement started beside the place's process is ready: it is the place's process
    /// now (new requests to its port); the old one, if it still runs (`old_runs`), is the
    /// second, draining: call `second_drained` once it has nothing at work.
    Switch { id: ProcessId, old_runs: bool },
    /// Send SIGTERM to the place's second process.
    TerminateSecond(ProcessId),
    /// Send SIGKILL to the place's second process.
    KillSecond(ProcessId),
    /// Every wanted process is ready, the first time since the count was known: the shell logs
    /// what they use idle (MEM-12, MEM-13). Said once.
    AllReady,
}

/// Where a process is, as the rest of the launcher sees it (`Lifecycle::status`): the
/// lifecycle's state without its deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Not started: its turn in the start order has not come, or it is beyond the worker count.
    NotStarted,
    /// Started, not ready yet; `again` for a replacement (it was restarted before).
    Starting {
        again: bool,
    },
    Ready {
        since: Instant,
    },
    /// Out of rotation to be started again (a recycle, a rolling restart): draining or stopping.
    Replacing,
    /// Out of rotation on its way out for good (the worker count was lowered).
    Leaving,
    /// Being stopped with the launcher.
    Stopping,
    /// Exited; starts again once its backoff is over.
    Restarting,
    /// Exited for good: stopped with the launcher, retired, or given up.
    Gone,
}

/// What an exit meant, as the lifecycle decided it (`Lifecycle::exited`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aftermath {
    /// It starts again: after a backoff (it ended on its own), or at once (`asked`: a recycle
    /// or a rolling restart stopped it).
    Restart { asked: bool },
    /// Gone for good: stopped with the launcher or retired by a lower worker count (`asked`),
    /// or the master given up (it ended on its own).
    Gone { asked: bool },
    /// Nothing was running there: nothing changed.
    NotRunning,
}
