//! What the old program hands the new one in an in-place upgrade, and its versioned form: JSON
//! with `"format": 1` first. Pure: encoding, decoding, the format check and the clock's
//! translation; the shell reads the live state into it and writes it to an inherited fd.
//!
//! Kept: the lifecycle (every process's state, deadlines, restart policy and count, start
//! time, the rolling restart and the recycle under way), each child's pid, generation, fds
//! (its channel, its stdout and stderr) and what was read from them and not yet used (a partial
//! channel line, a partial output line: raw bytes, hex, since a line may end mid-character),
//! what was queued to it and not yet written, the shell's flags about the master, and the
//! master's mailbox (held counts and history), the memory recycle's clocks, the front door's
//! cooldowns and the idle client connections (each fd and the bytes read ahead of its next
//! request).
//!
//! Where each part is defined: the envelope, the cooldowns and the client connections here,
//! each child in `state/child.rs` with its conversions both ways; each other part beside the
//! code that captures and resumes it, which owns its private state: `lifecycle` (`supervisor::lifecycle::handover`), `shell` and its
//! `recycle` (`supervisor::shell::handover`, `supervisor::recycle_watch`), `keeper`
//! (`status::keeper::handover`), `guardian` (`tree::guardian`), `counters`
//! (`proxy::carried_counters`), the messages (`ipc::message`, with the IPC protocol's own
//! versioning). This module imports them; none of them imports it.
//!
//! Versioning: [`FORMAT`] is what this program writes, [`READS`] what it can take over. A
//! change that an older reader would misread gets a new number; the new program keeps reading
//! the older numbers it can. `fhircluster --upgrade-formats` prints [`READS`], so the old
//! program can refuse a binary that doesn't read its format (a downgrade across a change).
//!
//! One compatibility rule, for every type of the state (this file's, `LifecycleState` and its
//! nested states, `KeeperState`, `GuardianState`, the counters, the history):
//! * **Unknown fields are ignored**, everywhere (no `deny_unknown_fields`): a later program's
//!   state of the same number reads in an earlier one (a downgrade within a format) as long as
//!   what the earlier one skips may be skipped.
//! * **A field added within a format is optional**: `#[serde(default)]`, its absence meaning
//!   what an earlier program's state meant (none, not known, zero). The fields a format began
//!   with stay required (but an `Option`, which serde reads as none): a state without them is
//!   refused, not guessed at.
//! * **A new number** for anything an earlier reader would misread: a field it would skip that
//!   must not be skipped, a field renamed, retyped or given another meaning, a new variant of an
//!   enum (an unknown `is` is refused, never defaulted).
//!
//! Each number has a frozen fixture (`tests/fixtures/handover-format-N.json`, captured from a
//! real upgrade and never edited) every later program must read, and the writer's output for a
//! fixed state is a golden file (`fixture_tests`); `compat_tests` hold the rule itself.

use serde::{Deserialize, Serialize};

use crate::ipc::message::ToChild;
use crate::status::keeper::KeeperState;
use crate::supervisor::lifecycle::LifecycleState;
use crate::supervisor::ShellState;

mod child;
use crate::tree::guardian::GuardianState;
pub(crate) use child::ChildState;

/// The format this program writes.
pub(crate) const FORMAT: u32 = 1;
/// The formats this program takes over.
pub(crate) const READS: &[u32] = &[1];

/// Everything handed over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Handover {
    pub format: u32,
    /// `CLOCK_MONOTONIC` when the state was read, in ms: the new program finds that instant on
    /// its own clock (`capture_instant`), and every time in the state is relative to it.
    pub captured_monotonic_ms: u64,
    pub lifecycle: LifecycleState,
    pub children: Vec<ChildState>,
    pub shell: ShellState,
    /// The master's mailbox: what waits for the master, oldest first.
    pub mailbox: Vec<ToChild>,
    pub keeper: KeeperState,
    /// The client listening socket's fd, and the launcher's own endpoint's.
    pub client_fd: i32,
    pub admin_fd: Option<i32>,
    /// The control socket's listening fd (its file stays where it is).
    #[serde(default)]
    pub control_fd: Option<i32>,
    /// The control socket's file, its device and inode: the new program sets its group and
    /// mode again on that file only, never on what a link there points to (DEC-71).
    #[serde(default)]
    pub control_file: Option<(u64, u64)>,
    /// HAProxy's agent's listening fd (`agentAddress`, DEC-89).
    pub agent_fd: Option<i32>,
    /// The run's mark (every child's `FHIRCLUSTER_TREE` begins with it) and the guardian.
    pub mark: String,
    pub guardian: Option<GuardianState>,
    /// The front door's cooldowns running (a process that answered `503` is steered around
    /// for `cooldownSeconds`), each with what is left of it.
    #[serde(default)]
    pub cooldowns: Vec<CooldownState>,
    /// A `SIGHUP` came during the upgrade: the new program reloads once it serves.
    #[serde(default)]
    pub reload_pending: bool,
    /// What `/metrics`' counters and histograms had reached, each series by its name and labels
    /// (`proxy::carried_counters`): the new program's go on from them.
    #[serde(default)]
    pub counters: crate::proxy::carried_counters::Carried,
    /// The last reload: whether it was refused, and when the last good one was (Unix ms, 0:
    /// none since the start).
    #[serde(default)]
    pub last_reload: Option<(bool, u64)>,
    /// The idle client connections, kept open (`proxy::conn::handed`).
    #[serde(default)]
    pub client_conns: Vec<ClientConnState>,
    /// Listening sockets the old program bound for the new settings (a changed `server.port`,
    /// `listenAddress` or `adminAddress`, `upgrade::listeners`): the new program takes each by
    /// its address. Only to a program whose `--upgrade-formats` says [`TAKES_LISTENERS`].
    #[serde(default)]
    pub prebound: Vec<i32>,
}

/// An idle client connection handed over: its fd and the bytes read from it ahead of its next
/// request (a head begun, or more), which are served first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClientConnState {
    pub fd: i32,
    #[serde(with = "hex")]
    pub unread: Vec<u8>,
    /// How long it had been idle at the capture, in ms (its header timeout goes on counting).
    #[serde(default)]
    pub idle_ms: u64,
}

/// A cooldown running at the capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CooldownState {
    pub id: u16,
    /// How long it had still to run, in ms.
    pub left_ms: u64,
}

/// Why a handed-over state can't be taken.
#[derive(Debug)]
pub(crate) enum StateError {
    /// Not JSON, or not what the format says.
    Unreadable(String),
    /// No `format` number.
    NoFormat,
    /// A format this program doesn't read.
    UnknownFormat(u64),
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Unreadable(e) => write!(f, "the handed-over state is unreadable: {e}"),
            StateError::NoFormat => f.write_str("the handed-over state has no format number"),
            StateError::UnknownFormat(n) => write!(
                f,
                "the handed-over state is in format {n}; this fhircluster reads {}",
                formats_line()
            ),
        }
    }
}

/// Named after the formats in `--upgrade-formats` by a program that takes idle client
/// connections over (`clientConns`). An older program's line has numbers only: handed them, it
/// would leave them open and unserved (their fds inherited by every child it starts), so the
/// upgrade to it closes them in the drain as before. Older readers skip the word (`reads`).
pub(crate) const TAKES_CLIENT_CONNS: &str = "clientConns";

/// The word `--upgrade-formats` prints when the program takes the listeners bound for it
/// (`prebound`) by their address. An older program would leave them open and bind the same
/// addresses itself, so they are bound only for a program that says it.
pub(crate) const TAKES_LISTENERS: &str = "listeners";

/// Whether a binary whose `--upgrade-formats` printed `line` takes the listeners bound for it.
pub(crate) fn takes_listeners(line: &str) -> bool {
    line.split_whitespace().any(|w| w == TAKES_LISTENERS)
}

/// What `--upgrade-formats` prints: the formats read, space-separated, then what else this
/// program takes over (`1 clientConns`).
pub(crate) fn formats_line() -> String {
    READS
        .iter()
        .map(u32::to_string)
        .chain([TAKES_CLIENT_CONNS.to_string(), TAKES_LISTENERS.to_string()])
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a binary whose `--upgrade-formats` printed `line` takes client connections over.
pub(crate) fn takes_client_conns(line: &str) -> bool {
    line.split_whitespace().any(|w| w == TAKES_CLIENT_CONNS)
}

/// Whether a binary whose `--upgrade-formats` printed `line` reads `format`.
pub(crate) fn reads(line: &str, format: u32) -> bool {
    line.split_whitespace()
        .any(|w| w.parse::<u32>().is_ok_and(|n| n == format))
}

pub(crate) fn encode(h: &Handover) -> Vec<u8> {
    // Plain data with string keys: serialising it cannot fail.
    serde_json::to_vec(h).unwrap_or_default()
}

/// The state, once its format is one this program reads.
pub(crate) fn decode(bytes: &[u8]) -> Result<Handover, StateError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| StateError::Unreadable(e.to_string()))?;
    let format = value
        .get("format")
        .and_then(serde_json::Value::as_u64)
        .ok_or(StateError::NoFormat)?;
    if !READS.iter().any(|&r| u64::from(r) == format) {
        return Err(StateError::UnknownFormat(format));
    }
    serde_json::from_value(value).map_err(|e| StateError::Unreadable(e.to_string()))
}

/// The capture's instant on this program's clock: `now` read at `now_monotonic_ms`, the state
/// read at `captured_monotonic_ms` (the same clock: `CLOCK_MONOTONIC` goes on across `execve`).
pub(crate) fn capture_instant(
    captured_monotonic_ms: u64,
    now_monotonic_ms: u64,
    now: std::time::Instant,
) -> std::time::Instant {
    let ago =
        std::time::Duration::from_millis(now_monotonic_ms.saturating_sub(captured_monotonic_ms));
    now.checked_sub(ago).unwrap_or(now)
}

/// Raw bytes as a lowercase hex string.
mod hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&text)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        if text.len() % 2 != 0 {
            return Err(serde::de::Error::custom("odd-length hex"));
        }
        (0..text.len())
            .step_by(2)
            .map(|i| {
                text.get(i..i + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                    .ok_or_else(|| serde::de::Error::custom("not hex"))
            })
            .collect()
    }
}

#[cfg(test)]
mod compat_tests;
#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod tests;
