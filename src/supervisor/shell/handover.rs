//! The shell's part of an in-place upgrade: handing every child and the state over
//! (`Control::HandOver`), and taking them over in the new program (`resume`), so the processes
//! run on untouched: same pid, same channel, nothing read or queued lost.
//!
//! Only a steady cluster is handed over: every wanted process ready, none starting, waiting out
//! a backoff, draining or stopping, no rolling restart or recycle under way, and not stopping.
//! Anything else is refused with the reason, and the supervisor runs on as before.

use std::time::Instant;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use tracing::{error, info};

use super::Shell;
use crate::ipc::message::ToChild;
use crate::process::Exit;
use crate::process::ProcessId;
use crate::status::keeper::KeeperState;
use crate::supervisor::child::{self, Carried};
use crate::supervisor::lifecycle::{LifecycleState, Status};
use crate::supervisor::mailbox::MasterMailbox;
use crate::supervisor::recycle_watch::RecycleState;
use crate::test_hooks;

/// The supervisor shell's own flags, as an in-place upgrade hands them over (`upgrade::state`'s
/// `shell`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ShellState {
    /// The last generation given to a child.
    pub generation: u64,
    pub master_acks: bool,
    pub master_stalled: bool,
    pub flushing: bool,
    #[serde(default)]
    pub recycle: RecycleState,
}

/// Everything the shell hands over, with the children's fds (still open: the caller keeps
/// them across `execve`, or gives them back to `resume` should it fail).
#[derive(Debug)]
pub(crate) struct ShellHandover {
    /// The instant every time in the state is relative to.
    pub at: Instant,
    pub lifecycle: LifecycleState,
    pub children: Vec<HandedChild>,
    pub shell: ShellState,
    pub mailbox: Vec<ToChild>,
    pub keeper: KeeperState,
}

#[derive(Debug)]
pub(crate) struct HandedChild {
    pub id: ProcessId,
    pub carried: Carried,
    pub spoke: bool,
    /// The digest of what it was started with (`ProcessSpec::inputs`); `None`: not known (a
    /// program before the digests handed it over).
    pub inputs: Option<u64>,
    /// The port it listens on, when not its place's own (DEC-78).
    pub port: Option<u16>,
}

impl Shell {
    /// Why the cluster can't be handed over now, if it can't.
    fn not_steady(&self) -> Option<String> {
        if self.life.is_stopping() {
            return Some("the launcher is stopping".into());
        }
        if let Some(i) =
            (0..self.life.slot_count()).find(|&i| self.life.has_second(ProcessId(i as u16)))
        {
            return Some(format!(
                "{} has a second process (a replacement, or the process it replaced) until it has gone",
                self.code(ProcessId(i as u16))
            ));
        }
        if self.life.restart_under_way() {
            return Some("a rolling restart or a memory recycle is under way".into());
        }
        for i in 0..self.life.slot_count() {
            let id = ProcessId(i as u16);
            let wanted = i <= self.life.workers();
            match self.life.status(id) {
                Status::Ready { .. } => {}
                Status::NotStarted | Status::Gone if !wanted => {}
                other => {
                    return Some(format!(
                        "{} is not ready ({other:?}); try again once every process is",
                        self.code(id)
                    ))
                }
            }
        }
        if self.master.flushing {
            return Some("the master's channel is being flushed".into());
        }
        None
    }

    /// Hands everything over (`Ok`), or says why not (`Err`). A failure at any step gives
    /// back whatever was taken ([`Shell::give_back`]): the cluster runs on as before, and a
    /// process that ended meanwhile is then seen to have ended, as after any crash.
    ///
    /// Only the children are taken (their tasks stopped, their fds in `h`); everything else is
    /// read into `h` and left as it is, so giving back is putting the children back.
    pub(super) async fn hand_over(&mut self) -> Result<Box<ShellHandover>, String> {
        if let Some(why) = self.not_steady() {
            return Err(why);
        }
        let at = crate::clock::now_std();
        let lifecycle = self.life.capture(at).map_err(|e| e.to_string())?;
        // Its minute is closed (the counts become an event, as each minute's do); its rows are
        // only read.
        let keeper = self.keeping.keeper.hand_over(self.hooks.tally(), at);
        let mut h = ShellHandover {
            at,
            lifecycle,
            children: Vec::new(),
            shell: ShellState {
                generation: self.places.generation,
                master_acks: self.master.acks,
                master_stalled: self.master.stalled,
                flushing: self.master.flushing,
                recycle: self.watch.recycle.capture(at),
            },
            mailbox: self.master.mailbox.copied(),
            keeper,
        };
        match self.take_children(&mut h).await {
            Ok(()) => Ok(Box::new(h)),
            Err(why) => {
                self.give_back(h);
                Err(why)
            }
        }
    }

    /// Takes each child from its tasks into `h`, then makes sure none has ended meanwhile.
    /// `Err`: `h` holds every child taken so far (the caller gives them back).
    async fn take_children(&mut self, h: &mut ShellHandover) -> Result<(), String> {
        for i in 0..self.places.children.len() {
            let code = self.setup.processes[i].code.clone();
            if self.places.children[i].is_none() {
                continue;
            }
            let hook = test_hooks::step(&format!("child-{code}")).await;
            let Some(handle) = self.places.children[i].take() else {
                continue;
            };
            let id = ProcessId(i as u16);
            let taken = match (handle.hand_over().await, hook) {
                (Ok(carried), Ok(())) => Ok(carried),
                (Ok(carried), Err(why)) => Err(carried.lost(why)),
                (Err(lost), _) => Err(lost),
            };
            let lost = match taken {
                Ok(carried) => {
                    h.children.push(HandedChild {
                        id,
                        carried,
                        spoke: self.places.spoke[i],
                        inputs: self.places.started_with[i],
                        port: self.moved_port(id),
                    });
                    continue;
                }
                Err(lost) => lost,
            };
            // Its fds are gone: it is ended, and its exit seen once given back.
            let why = format!("handing over {code}: {}", lost.why);
            let pid = lost.pid;
            match lost.stand_in() {
                Ok(carried) => h.children.push(HandedChild {
                    id,
                    carried,
                    spoke: self.places.spoke[i],
                    inputs: self.places.started_with[i],
                    port: self.moved_port(id),
                }),
                Err(e) => self.end_unheld(
                    id,
                    pid,
                    &format!("its channel is lost and no stand-in could be made ({e})"),
                ),
            }
            return Err(why);
        }
        test_hooks::step("handed").await?;
        match h.children.iter().find(|c| c.carried.has_ended()) {
            Some(c) => Err(format!(
                "{} (pid {}) ended during the handover",
                self.code(c.id),
                c.carried.pid
            )),
            None => Ok(()),
        }
    }

    /// Puts back what [`Shell::hand_over`] took: each child's handle, its tasks started again
    /// on its fds with what was read and queued (the `execve` failed, or a step before it).
    /// Nothing is started or signalled; a child that ended meanwhile is seen to have.
    pub(super) fn give_back(&mut self, h: ShellHandover) {
        for c in h.children {
            let i = c.id.index();
            let spec = self.setup.processes[i].on_port(self.places.ports.of(i));
            let pid = c.carried.pid;
            match child::attach_to(
                &spec,
                c.carried,
                false,
                self.places.events_tx.clone(),
                &self.output,
                self.setup.kill_after,
            ) {
                Ok(handle) => self.places.children[i] = Some(handle),
                // Not seen in practice (the fds were just taken from the same tasks).
                Err(e) => self.end_unheld(c.id, pid, &format!("cannot be taken back ({e})")),
            }
        }
    }

    /// Takes over what the program before handed (`h`): the lifecycle, each child (its tasks
    /// started on its fds, the front door told it is up), the mailbox and the flags.
    /// Nothing is started or signalled.
    pub(super) fn resume(&mut self, h: ShellHandover) -> Result<(), String> {
        self.life = crate::supervisor::lifecycle::Lifecycle::resume(&h.lifecycle, h.at)
            .map_err(|e| e.to_string())?;
        self.life
            .set_limits(self.setup.max_start_failures, self.setup.kill_after);
        self.places.generation = h.shell.generation;
        self.master.acks = h.shell.master_acks;
        self.master.stalled = h.shell.master_stalled;
        self.master.flushing = h.shell.flushing;
        self.watch.recycle.resume(&h.shell.recycle, h.at);
        self.master.mailbox = MasterMailbox::resumed(h.mailbox);
        let n = self.setup.processes.len();
        // The master last: its `up` lets the launcher serve, and by then every worker must be
        // up in the front door (or a cache-id of theirs would read as lost).
        let mut children = h.children;
        children.sort_by_key(|c| std::cmp::Reverse(c.id.index()));
        // Every child is held or ended: none is left running with nothing watching it.
        let mut mismatch = None;
        for c in children {
            let i = c.id.index();
            let pid = c.carried.pid;
            if i >= n {
                let why = format!("process {i} was handed over; this configuration has {n} places");
                error!("{why}; ending it (pid {pid}, SIGKILL)");
                kill_group(pid);
                crate::tree::subreaper::forget(pid);
                mismatch.get_or_insert(why);
                continue;
            }
            if let Some(port) = c.port {
                self.places.ports.take_over(i, port);
            }
            let spec = self.setup.processes[i].on_port(self.places.ports.of(i));
            let handle = match child::attach_to(
                &spec,
                c.carried,
                false,
                self.places.events_tx.clone(),
                &self.output,
                self.setup.kill_after,
            ) {
                Ok(handle) => handle,
                Err(e) => {
                    self.end_unheld(c.id, pid, &format!("cannot be taken over ({e})"));
                    continue;
                }
            };
            self.places.spoke[i] = c.spoke;
            // Not known (handed over by a program without the digests): taken to be what this
            // program would start it with, so an upgrade alone restarts nothing.
            self.places.started_with[i] =
                Some(c.inputs.unwrap_or_else(|| self.spec(c.id).inputs()));
            self.places.children[i] = Some(handle);
            // Taken to run this program's inputs for the place (as its digest is, when not
            // known): its last good ones once ready (DEC-79).
            self.places.started_spec[i] = Some(self.setup.processes[i].clone());
            if self.life.is_ready(c.id) {
                self.places.last_good[i] = self.places.started_spec[i].clone();
            }
            self.hooks.started(c.id, pid);
            if self.life.is_up(c.id) {
                if spec.port != self.spec(c.id).port {
                    self.hooks.moved(c.id, spec.connect_addr, pid);
                }
                self.hooks.up(c.id, pid);
                self.watch
                    .recycle
                    .ready(c.id, Some(pid), &self.keeping.readings);
            }
            info!("{}: taken over (pid {pid})", spec.code);
        }
        for i in self.life.workers() + 1..n {
            self.hooks.retired(ProcessId(i as u16));
        }
        self.keeping.keeper.align_workers(self.life.workers());
        self.fit_rows();
        mismatch.map_or(Ok(()), Err)
    }

    /// Ends a process the supervisor cannot hold (its fds lost, or not taken back): `SIGKILL`
    /// to its group, and its exit counted at once, so it is restarted as after any crash and
    /// nothing waits for an exit no task would report (the subreaper reaps it).
    fn end_unheld(&mut self, id: ProcessId, pid: u32, why: &str) {
        error!("{}: {why}; ending it (SIGKILL)", self.code(id));
        kill_group(pid);
        crate::tree::subreaper::forget(pid);
        let exit = Exit::Signal(libc::SIGKILL);
        let ending = self.ending(id, exit);
        self.hooks.exited(id, ending);
        self.exited(id, exit, Some(pid));
    }
}

/// `SIGKILL` to the process group `pid` leads.
fn kill_group(pid: u32) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = kill(Pid::from_raw(-p), Signal::SIGKILL);
    }
}
