//! What the status reads of the machine, as an interface: each process's memory, the cgroup's,
//! the host's. The supervisor gives the real readers (`supervisor/readings.rs`: `/proc` and the
//! cgroup), the tests fixed ones, so nothing in `status/` reads the machine itself. A figure that
//! could not be read keeps why, typed, to the snapshot's `missing` list (STATUS-15, 23, 24).

use std::fmt;

use super::snapshot::{CgroupReading, HostMemory, ProcMemory};
use crate::system::unreadable::Unreadable;

/// A reading the launcher took itself, or why it couldn't.
pub type Reading<T> = Result<T, NotRead>;

/// Why a figure is not there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotRead {
    /// The process is not running (not started yet, restarting, gone): nothing to read.
    NotRunning,
    /// The machine did not give it.
    Unreadable(Unreadable),
}

impl fmt::Display for NotRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotRead::NotRunning => f.write_str("not running"),
            NotRead::Unreadable(u) => u.fmt(f),
        }
    }
}

impl std::error::Error for NotRead {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NotRead::NotRunning => None,
            NotRead::Unreadable(u) => Some(u),
        }
    }
}

impl From<Unreadable> for NotRead {
    fn from(u: Unreadable) -> NotRead {
        NotRead::Unreadable(u)
    }
}

/// The machine as the status reads it.
pub trait Readings {
    /// A process's private and mapped memory (`RssAnon`, `RssFile`).
    fn process(&self, pid: u32) -> Reading<ProcMemory>;
    /// The launcher's cgroup: its memory and its limit.
    fn cgroup(&self) -> Reading<CgroupReading>;
    /// The host's memory.
    fn host(&self) -> Reading<HostMemory>;
    /// The CPU seconds (user and system) a process has used so far (`/proc/<pid>/stat`); None
    /// where it can't be read.
    fn cpu_seconds(&self, _pid: u32) -> Option<f64> {
        None
    }
}
