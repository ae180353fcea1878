//! The shell's part of an in-place upgrade: handing every child and the state over
//! (`Control::HandOver`), and taking them over in the new program (`resume`), so the processes
//! run on untouched: same pid, same channel, nothing read or queued lost.
//!
//! Only a steady cluster is handed over: every wanted process ready, none starting, waiting out
//! a backoff, draining or stopping, no rolling restart or recycle under way, and not stopping.
//! Anything else is refused with the reason, and the supervisor runs on as before.

use std::time::Instant;

use tracing::info;

use super::Shell;
use crate::ipc::message::ToChild;
use crate::process::ProcessId;
use crate::status::keeper::KeeperState;
use crate::supervisor::child::{self, Carried};
use crate::supervisor::lifecycle::{LifecycleState, Status};
use crate::supervisor::mailbox::MasterMailbox;
use crate::upgrade::state::ShellState;

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
}

impl Shell {
    /// Why the cluster can't be handed over now, if it can't.
    fn not_steady(&self) -> Option<String> {
        if self.life.is_stopping() {
            return Some("the launcher is stopping".into());
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
        if self.flushing {
            return Some("the master's channel is being flushed".into());
        }
        None
    }

    /// Hands everything over (`Ok`), or says why not (`Err`: nothing was changed).
    pub(super) async fn hand_over(&mut self) -> Result<Box<ShellHandover>, String> {
        if let Some(why) = self.not_steady() {
            return Err(why);
        }
        let at = crate::clock::now_std();
        let lifecycle = self.life.capture(at).map_err(|e| e.to_string())?;
        let keeper = self.keeper.hand_over(self.hooks.tally(), at);
        let mut children = Vec::new();
        for i in 0..self.children.len() {
            let code = self.setup.processes[i].code.clone();
            if self.children[i].is_none() {
                continue;
            }
            let hook = crate::upgrade::test_hook::step(&format!("child-{code}")).await;
            let Some(handle) = self.children[i].take() else {
                continue;
            };
            let carried = handle
                .hand_over()
                .await
                .map_err(|e| format!("handing over {code}: {e}"))?;
            hook.map_err(|e| format!("handing over {code}: {e}"))?;
            children.push(HandedChild {
                id: ProcessId(i as u16),
                carried,
                spoke: self.spoke[i],
            });
        }
        crate::upgrade::test_hook::step("handed").await?;
        let mailbox = std::mem::take(&mut self.master_mailbox).handed_over();
        Ok(Box::new(ShellHandover {
            at,
            lifecycle,
            children,
            shell: ShellState {
                generation: self.generation,
                master_acks: self.master_acks,
                master_stalled: self.master_stalled,
                flushing: self.flushing,
                recycle: self.recycle.capture(at),
            },
            mailbox,
            keeper,
        }))
    }

    /// Takes over what `h` hands: the lifecycle, each child (its tasks started on its fds, the
    /// front door told it is up when `fresh`: a new program's), the mailbox and the flags.
    /// Nothing is started or signalled.
    pub(super) fn resume(&mut self, h: ShellHandover, fresh: bool) -> Result<(), String> {
        self.life = crate::supervisor::lifecycle::Lifecycle::resume(&h.lifecycle, h.at)
            .map_err(|e| e.to_string())?;
        if fresh {
            self.life
                .set_limits(self.setup.max_start_failures, self.setup.kill_after);
        }
        self.generation = h.shell.generation;
        self.master_acks = h.shell.master_acks;
        self.master_stalled = h.shell.master_stalled;
        self.flushing = h.shell.flushing;
        self.recycle.resume(&h.shell.recycle, h.at);
        self.master_mailbox = MasterMailbox::resumed(h.mailbox);
        let n = self.setup.processes.len();
        // The master last: its `up` lets the launcher serve, and by then every worker must be
        // up in the front door (or a cache-id of theirs would read as lost).
        let mut children = h.children;
        children.sort_by_key(|c| std::cmp::Reverse(c.id.index()));
        for c in children {
            let i = c.id.index();
            if i >= n {
                return Err(format!(
                    "process {i} was handed over; this configuration has {n} places"
                ));
            }
            let spec = self.setup.processes[i].clone();
            let pid = c.carried.pid;
            let handle = child::attach_to(
                &spec,
                c.carried,
                false,
                self.events_tx.clone(),
                &self.output,
                self.setup.kill_after,
            )
            .map_err(|e| format!("taking over {}: {e}", spec.code))?;
            self.spoke[i] = c.spoke;
            self.children[i] = Some(handle);
            if fresh {
                self.hooks.started(c.id, pid);
                if self.life.is_up(c.id) {
                    self.hooks.up(c.id, pid);
                    self.recycle.ready(c.id, Some(pid), &self.readings);
                }
                info!("{}: taken over (pid {pid})", spec.code);
            }
        }
        if fresh {
            for i in self.life.workers() + 1..n {
                self.hooks.retired(ProcessId(i as u16));
            }
            self.fit_rows();
        }
        Ok(())
    }
}
