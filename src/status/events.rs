//! Cluster events for the master's daily report (spec "The daily report", EVENT-1..18): what
//! only the launcher saw (its start, each process's exits and recycles, how long each was
//! unavailable, the requests lost to it) and what it answered itself (its own 503s, the
//! connections it closed for a write timeout).
//!
//! Theory of operation: [`EventLog`] turns what the shell tells it into [`Event`]s, each with a
//! unique, increasing id (so the master can drop a repeat), and counts the lost and refused
//! requests until [`EventLog::minute`] turns them into one `counts` event (EVENT-14). What the
//! master hasn't received waits in `pending.rs`. Pure: wall-clock ms come in.
//!
//! * The time a process was unavailable, from its exit or the start of its recycle until it is
//!   ready again, is reported when it is ready again (EVENT-4, EVENT-5); a process still down at
//!   midnight lands in the next day's report.
//! * The exit of a worker being recycled is part of the recycle, not an exit of its own.
//! * Ids are `max(last + 1, now_ms × 1000)`: increasing within a run and, with a clock that
//!   doesn't go back, across launcher restarts, so the master never takes a new event for a
//!   repeat of an old one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::per_kind::Kind;
use crate::process::Exit;

/// One cluster event, as it goes to the master (`ToChild::Events`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: u64,
    /// When it happened (for `counts`: when the minute was closed), ms since the epoch.
    pub at: u64,
    #[serde(flatten)]
    pub body: EventBody,
}

impl Event {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    pub fn is_counts(&self) -> bool {
        matches!(self.body, EventBody::Counts(_))
    }

    /// An exit event's reason for the restart, and the hang's detail (DEC-82, DEC-84).
    pub fn with_reason(mut self, why: Option<&str>, what: Option<String>) -> Event {
        if let EventBody::Exit { reason, detail, .. } = &mut self.body {
            *reason = why.map(str::to_string);
            *detail = what;
        }
        self
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum EventBody {
    /// EVENT-1: the launcher started (and so every process with it).
    LauncherStarted { pid: u32 },
    /// EVENT-2: a process exited, with its exit code or signal.
    #[serde(rename_all = "camelCase")]
    Exit {
        code: String,
        role: String,
        pid: Option<u32>,
        exit_code: Option<i32>,
        /// The signal's name (`SIGKILL`), or its number when it has none.
        signal: Option<String>,
        /// The same, in words, for the report.
        how: String,
        /// Why it is started again, when it is (`RestartReason`'s label: `crash`, `hung`, or a
        /// planned `rolling`, `recycle`, `scale`; DEC-84); absent when it is not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// For a hang kill (DEC-82), what the watchdog saw: how long it was silent and the
        /// oldest request it owed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// EVENT-3: a worker was recycled, and why.
    Recycle { code: String, reason: String },
    /// EVENT-4, EVENT-5: a process is ready again after `ms` unavailable.
    Unavailable {
        code: String,
        /// `exit` or `recycle`: what began it.
        cause: String,
        from: u64,
        until: u64,
        ms: u64,
    },
    /// EVENT-6..12: what was counted in `[from, to)`.
    Counts(Counts),
    /// The worker count changed while running (fhircluster's own, DEC-48): `by` a reload,
    /// `SIGTTIN`, `SIGTTOU` or the control socket's `scale`.
    Workers { from: usize, to: usize, by: String },
}

/// Requests lost to one process (EVENT-6..8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lost {
    /// 504: no response within `upstreamTimeoutSeconds`.
    pub timeout504: u64,
    /// 502: it didn't answer.
    pub bad_gateway502: u64,
    /// A request with one of its cache-ids came while it was restarting.
    pub cache_id_while_restarting: u64,
}

/// The launcher's own 503s (EVENT-9..11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    pub queue_wait: u64,
    pub no_process_ready: u64,
    pub stopping: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub from: u64,
    pub to: u64,
    /// Per instance code.
    pub lost: BTreeMap<String, Lost>,
    pub refused: Refused,
    /// EVENT-12: connections closed because the client took none of a response in time.
    pub write_timeout_closes: u64,
}

impl Counts {
    fn is_empty(&self) -> bool {
        self.lost.values().all(|l| *l == Lost::default())
            && self.refused == Refused::default()
            && self.write_timeout_closes == 0
    }

    /// Adds `other` in, covering both intervals (DEC-18).
    pub fn merge(&mut self, other: &Counts) {
        self.from = self.from.min(other.from);
        self.to = self.to.max(other.to);
        for (code, l) in &other.lost {
            let mine = self.lost.entry(code.clone()).or_default();
            mine.timeout504 += l.timeout504;
            mine.bad_gateway502 += l.bad_gateway502;
            mine.cache_id_while_restarting += l.cache_id_while_restarting;
        }
        self.refused.queue_wait += other.refused.queue_wait;
        self.refused.no_process_ready += other.refused.no_process_ready;
        self.refused.stopping += other.refused.stopping;
        self.write_timeout_closes += other.write_timeout_closes;
    }
}

/// Why a request was lost to a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostKind {
    Timeout504,
    BadGateway502,
    CacheIdWhileRestarting,
}

/// Why the launcher refused a request itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    QueueWait,
    NoProcessReady,
    Stopping,
}

impl Kind for LostKind {
    const ALL: &'static [LostKind] = &[
        LostKind::Timeout504,
        LostKind::BadGateway502,
        LostKind::CacheIdWhileRestarting,
    ];
    fn index(self) -> usize {
        self as usize
    }
}

impl Kind for RefusalKind {
    const ALL: &'static [RefusalKind] = &[
        RefusalKind::QueueWait,
        RefusalKind::NoProcessReady,
        RefusalKind::Stopping,
    ];
    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Down {
    since: u64,
    cause: &'static str,
}

/// Turns what happens to the cluster into events.
#[derive(Clone, Debug)]
pub struct EventLog {
    last_id: u64,
    down: BTreeMap<String, Down>,
    counts: Counts,
}

impl EventLog {
    /// `last_id`: the highest id already used (the outbox's, after a launcher restart), or 0.
    /// `now_ms` starts the first minute's counts.
    pub fn new(last_id: u64, now_ms: u64) -> EventLog {
        EventLog {
            last_id,
            down: BTreeMap::new(),
            counts: Counts {
                from: now_ms,
                ..Counts::default()
            },
        }
    }

    fn event(&mut self, at: u64, body: EventBody) -> Event {
        self.last_id = (self.last_id + 1).max(at.saturating_mul(1000));
        Event {
            id: self.last_id,
            at,
            body,
        }
    }

    /// EVENT-1.
    pub fn launcher_started(&mut self, pid: u32, now_ms: u64) -> Event {
        self.event(now_ms, EventBody::LauncherStarted { pid })
    }

    /// EVENT-2: a process exited (not as the launcher stops). None when the exit is part of
    /// the worker's recycle, already reported as such.
    pub fn exited(
        &mut self,
        code: &str,
        role: &str,
        pid: Option<u32>,
        exit: Exit,
        now_ms: u64,
    ) -> Option<Event> {
        if let Some(d) = self.down.get(code) {
            if d.cause == "recycle" {
                return None;
            }
        }
        self.down.entry(code.to_string()).or_insert(Down {
            since: now_ms,
            cause: "exit",
        });
        Some(self.event(
            now_ms,
            EventBody::Exit {
                code: code.to_string(),
                role: role.to_string(),
                pid,
                exit_code: exit.code(),
                signal: exit.signal_name(),
                how: exit.to_string(),
                reason: None,
                detail: None,
            },
        ))
    }

    /// EVENT-3: the recycle of a worker begins (DEC-25).
    pub fn recycling(&mut self, code: &str, reason: &str, now_ms: u64) -> Event {
        self.down.insert(
            code.to_string(),
            Down {
                since: now_ms,
                cause: "recycle",
            },
        );
        self.event(
            now_ms,
            EventBody::Recycle {
                code: code.to_string(),
                reason: reason.to_string(),
            },
        )
    }

    /// EVENT-4, EVENT-5: a process is ready; if it had been down, how long.
    pub fn ready(&mut self, code: &str, now_ms: u64) -> Option<Event> {
        let d = self.down.remove(code)?;
        Some(self.event(
            now_ms,
            EventBody::Unavailable {
                code: code.to_string(),
                cause: d.cause.to_string(),
                from: d.since,
                until: now_ms,
                ms: now_ms.saturating_sub(d.since),
            },
        ))
    }

    /// The worker count changed while running (DEC-48).
    pub fn workers(&mut self, from: usize, to: usize, by: &str, now_ms: u64) -> Event {
        self.event(
            now_ms,
            EventBody::Workers {
                from,
                to,
                by: by.to_string(),
            },
        )
    }

    /// EVENT-6..8.
    pub fn count_lost(&mut self, code: &str, kind: LostKind) {
        let l = self.counts.lost.entry(code.to_string()).or_default();
        match kind {
            LostKind::Timeout504 => l.timeout504 += 1,
            LostKind::BadGateway502 => l.bad_gateway502 += 1,
            LostKind::CacheIdWhileRestarting => l.cache_id_while_restarting += 1,
        }
    }

    /// EVENT-9..11.
    pub fn count_refused(&mut self, kind: RefusalKind) {
        let r = &mut self.counts.refused;
        match kind {
            RefusalKind::QueueWait => r.queue_wait += 1,
            RefusalKind::NoProcessReady => r.no_process_ready += 1,
            RefusalKind::Stopping => r.stopping += 1,
        }
    }

    /// EVENT-12.
    pub fn count_write_timeout(&mut self) {
        self.counts.write_timeout_closes += 1;
    }

    /// EVENT-14: every minute (and once more as the launcher stops), what was counted since the
    /// last, as one event; None when nothing was.
    pub fn minute(&mut self, now_ms: u64) -> Option<Event> {
        let mut counts = std::mem::replace(
            &mut self.counts,
            Counts {
                from: now_ms,
                ..Counts::default()
            },
        );
        if counts.is_empty() {
            return None;
        }
        counts.to = now_ms;
        Some(self.event(now_ms, EventBody::Counts(counts)))
    }
}

#[cfg(test)]
mod tests;
