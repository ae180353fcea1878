//! One running child as the state has it (`children`), and its conversions: from what the
//! supervisor handed over (live fds, the bytes read and queued) to raw fds and hex, and back in
//! the new program with its fds adopted. The one place the two forms meet.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use serde::{Deserialize, Serialize};

use super::hex;
use crate::ipc::message::ToChild;
use crate::process::ProcessId;
use crate::supervisor::child::Carried;
use crate::supervisor::HandedChild;

/// One running child, handed over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChildState {
    /// Its place (0 the master).
    pub id: u16,
    pub pid: u32,
    pub generation: u64,
    /// The fds, inherited (close-on-exec cleared).
    pub channel_fd: i32,
    pub stdout_fd: Option<i32>,
    pub stderr_fd: Option<i32>,
    /// Read from the channel and not yet parsed.
    #[serde(with = "hex")]
    pub unread: Vec<u8>,
    /// An output line begun and not yet ended.
    #[serde(with = "hex")]
    pub stdout_partial: Vec<u8>,
    #[serde(with = "hex")]
    pub stderr_partial: Vec<u8>,
    /// Queued for it and not yet written, in order.
    pub queued: Vec<ToChild>,
    /// It has said something valid on its channel (only its `ready` makes it ready).
    pub spoke: bool,
    /// The digest of what it was started with (`ProcessSpec::inputs`), 16 hex digits: the new
    /// program restarts it in turn on a reload if its own inputs for the place differ. Missing
    /// (a program before it): taken as the new program's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
    /// The port it listens on, when not its place's own: a replacement started beside its
    /// place's process took the other port (DEC-78). Missing: its place's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// A process's inputs digest as the state writes it.
pub(crate) fn write_inputs(d: u64) -> String {
    format!("{d:016x}")
}

/// And as it reads it: `None` (not known) for anything but 16 hex digits.
pub(crate) fn read_inputs(text: &str) -> Option<u64> {
    (text.len() == 16)
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
}

impl ChildState {
    /// A child the supervisor handed over; every fd it names is added to `keep` (the fds the
    /// `execve` keeps open).
    pub(crate) fn capture(c: &HandedChild, keep: &mut Vec<RawFd>) -> ChildState {
        let k = &c.carried;
        let raw = |p: &Option<(OwnedFd, Vec<u8>)>| p.as_ref().map(|(fd, _)| fd.as_raw_fd());
        let partial =
            |p: &Option<(OwnedFd, Vec<u8>)>| p.as_ref().map(|(_, b)| b.clone()).unwrap_or_default();
        keep.push(k.channel.as_raw_fd());
        keep.extend(raw(&k.stdout));
        keep.extend(raw(&k.stderr));
        ChildState {
            id: c.id.0,
            pid: k.pid,
            generation: k.generation,
            channel_fd: k.channel.as_raw_fd(),
            stdout_fd: raw(&k.stdout),
            stderr_fd: raw(&k.stderr),
            unread: k.unread.clone(),
            stdout_partial: partial(&k.stdout),
            stderr_partial: partial(&k.stderr),
            queued: k.queued.clone(),
            spoke: c.spoke,
            inputs: c.inputs.map(write_inputs),
            port: c.port,
        }
    }

    /// The child taken over, each fd adopted by `adopt` (`None`: not open); a child whose
    /// channel can't be adopted is left out (`None`).
    pub(crate) fn resume(&self, adopt: impl Fn(RawFd) -> Option<OwnedFd>) -> Option<HandedChild> {
        let piped = |fd: Option<i32>, partial: &[u8]| Some((adopt(fd?)?, partial.to_vec()));
        let channel = adopt(self.channel_fd)?;
        Some(HandedChild {
            id: ProcessId(self.id),
            carried: Carried {
                pid: self.pid,
                generation: self.generation,
                channel,
                unread: self.unread.clone(),
                stdout: piped(self.stdout_fd, &self.stdout_partial),
                stderr: piped(self.stderr_fd, &self.stderr_partial),
                queued: self.queued.clone(),
                exit_seen: false,
            },
            spoke: self.spoke,
            inputs: self.inputs.as_deref().and_then(read_inputs),
            port: self.port,
        })
    }
}
