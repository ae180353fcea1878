//! A place's second process in the status (DEC-92): while a replacement runs beside the old
//! one (a rolling restart's or a memory recycle's), the place has a second row, right after its
//! own, with the place's code.

use std::time::Instant;

use serde_json::{json, Value};

use super::{ms, ProcMemory, ProcessInput};

/// A place's second process while a replacement runs beside the old one (DEC-78, DEC-92): the
/// replacement starting, or the old one draining and stopping after the switch. It has a row
/// of its own, right after its place's, with the place's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Beside {
    pub state: BesideState,
    pub pid: Option<u32>,
    pub started_at: Option<Instant>,
    /// It is the replacement (else the old process the replacement took over from).
    pub replacement: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BesideState {
    Starting,
    Draining,
    Stopping,
}

impl BesideState {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            BesideState::Starting => "starting",
            BesideState::Draining => "draining",
            BesideState::Stopping => "stopping",
        }
    }
}

/// The row of a place's second process (DEC-92): its own pid, state, uptime and memory; the
/// place's counts (restarts, the front door's figures) are on the place's row only, so no
/// total counts a place twice. Its own figures are not taken while it is the second.
pub(super) fn beside_row(
    p: &ProcessInput,
    b: &Beside,
    memory: Option<ProcMemory>,
    now: Instant,
) -> Value {
    json!({
        "code": p.code,
        "role": p.role.as_str(),
        "pid": b.pid,
        "status": b.state.as_str(),
        "uptimeMs": b.started_at.map(|s| ms(now.saturating_duration_since(s))),
        "restarts": null,
        "restartsBy": null,
        "lastRestart": null,
        "requests": null,
        "rssAnon": memory.map(|m| m.rss_anon),
        "rssFile": memory.map(|m| m.rss_file),
        "heapUsed": null,
        "heapLimit": null,
        "clientCaches": null,
        "clientConcepts": null,
        "inFlight": null,
        "eventLoopDelayMs": null,
        "figuresAgeMs": null,
        "noChannel": false,
        "cpuSeconds": null,
        "cpuPercent": null,
        "beside": true,
        "replacement": b.replacement,
        "inputsWaiting": false,
    })
}

#[cfg(test)]
mod tests;
