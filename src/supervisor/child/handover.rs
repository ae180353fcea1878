//! A child's part of an in-place upgrade: its fds taken back from its tasks with what was under
//! way on them ([`Carried`]), to be handed over through the `execve` or given back to new tasks
//! should the upgrade not happen; and a child whose fds could not be taken back ([`Lost`]),
//! which can only be ended.

use std::io;
use std::os::fd::OwnedFd;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::net::unix::pipe;

use super::ChildHandle;
use crate::ipc::channel;
use crate::ipc::message::ToChild;
use crate::tree::exit_watch;

/// A running child's fds and what was under way on them: a fresh child's, or one taken back
/// from its tasks for an in-place upgrade (then with what was read and not used, and queued
/// and not written).
#[derive(Debug)]
pub(crate) struct Carried {
    pub pid: u32,
    pub generation: u64,
    pub channel: OwnedFd,
    /// Read from the channel, not yet parsed.
    pub unread: Vec<u8>,
    /// Its stdout and stderr pipes, each with a line begun and not yet ended.
    pub stdout: Option<(OwnedFd, Vec<u8>)>,
    pub stderr: Option<(OwnedFd, Vec<u8>)>,
    /// To be written to it first, in order.
    pub queued: Vec<ToChild>,
    /// Its exit was already seen (and reaped) by the task watching it, which reports it: it
    /// can't be handed over, only given back.
    pub exit_seen: bool,
}

impl Carried {
    /// Whether the child has ended: its exit seen by its task, or waiting to be reaped.
    pub(crate) fn has_ended(&self) -> bool {
        self.exit_seen || exit_watch::has_ended(self.pid)
    }

    /// Its fds given up (closed), `why`: the child can only be ended (a test hook's failure).
    pub(crate) fn lost(self, why: String) -> Lost {
        Lost {
            pid: self.pid,
            generation: self.generation,
            why,
            exit_seen: self.exit_seen,
        }
    }
}

/// A child whose fds could not be taken back from its tasks (one ended unexpectedly): it can
/// be neither handed over nor given back as it was, so it is ended ([`Lost::stand_in`]).
#[derive(Debug)]
pub(crate) struct Lost {
    pub pid: u32,
    pub generation: u64,
    pub why: String,
    exit_seen: bool,
}

impl Lost {
    /// Kills the child's process group and gives a stand-in for its fds: a channel already at
    /// its end, no output. Taken back like any child, its exit is then seen and reported (and
    /// the supervisor restarts it as after any crash).
    pub(crate) fn stand_in(self) -> io::Result<Carried> {
        if let Ok(pid) = i32::try_from(self.pid) {
            let _ = kill(Pid::from_raw(-pid), Signal::SIGKILL);
        }
        let (ours, theirs) = channel::socketpair()?;
        drop(theirs);
        Ok(Carried {
            pid: self.pid,
            generation: self.generation,
            channel: ours,
            unread: Vec::new(),
            stdout: None,
            stderr: None,
            queued: Vec::new(),
            exit_seen: self.exit_seen,
        })
    }
}

impl ChildHandle {
    /// Stops the child's tasks between reads and writes and takes its fds back, with what was
    /// read and not used and what was queued and not written (an in-place upgrade). The child
    /// itself is not touched. Its exit, if it came first, is found again by the program that
    /// takes it over, or, given back, by this one. `Err` only when a task ended and took an fd
    /// with it: the child can then only be ended ([`Lost`]).
    pub(crate) async fn hand_over(self) -> Result<Carried, Lost> {
        let _ = self.handover.send(true);
        // A task that ended without a word had seen the exit, or panicked: either way not a
        // pid to watch again.
        let exit_seen = self.returns.exit.await.unwrap_or(true);
        let lost = |what: String| Lost {
            pid: self.pid,
            generation: self.generation,
            why: format!("{}: {what}", self.code),
            exit_seen,
        };
        let writer = self.returns.writer.await;
        let reader = self.returns.reader.await;
        let ((sender, queued), receiver) = match (writer, reader) {
            (Ok(w), Ok(r)) => (w, r),
            (Err(_), _) => return Err(lost("its writer task has ended".into())),
            (_, Err(_)) => return Err(lost("its reader task has ended".into())),
        };
        let (channel, unread) = channel::launcher_handed_over(receiver, sender)
            .map_err(|e| lost(format!("its channel: {e}")))?;
        let pipe_back = |(pipe, partial): (pipe::Receiver, Vec<u8>)| {
            pipe.into_nonblocking_fd().ok().map(|fd| (fd, partial))
        };
        let mut out = [None, None];
        for (slot, rx) in out
            .iter_mut()
            .zip([self.returns.stdout, self.returns.stderr])
        {
            if let Some(rx) = rx {
                *slot = rx.await.ok().flatten().and_then(pipe_back);
            }
        }
        let [stdout, stderr] = out;
        Ok(Carried {
            pid: self.pid,
            generation: self.generation,
            channel,
            unread,
            stdout,
            stderr,
            queued,
            exit_seen,
        })
    }
}
