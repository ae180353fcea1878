//! The shell's side of a run-time change of the worker count (`Control::Scale`: `SIGTTIN`,
//! `SIGTTOU`, the control socket's `scale`): it gathers the facts (the count, the room made at
//! start, memory read now as the start's fit reads it, whether the cluster is busy), asks the
//! pure decision (`supervisor/scale.rs`), and carries a change out through the lifecycle's
//! `resize`: a worker more starts and joins once ready, as at launch; a worker fewer is the
//! highest-numbered, drained as a recycle drains it (DEC-15), then stopped for good. One log
//! line either way; a refusal changes nothing.

use tracing::{info, warn};

use super::Shell;
use crate::clock::now_std;
use crate::process::ProcessId;
use crate::supervisor::api::Scale;
use crate::supervisor::scale::{decide, Ask, Decision, Facts};

impl Shell {
    pub(super) fn scale(&mut self, s: Scale) {
        let now = now_std();
        let current = self.life.workers();
        let busy = if self.life.is_stopping() {
            Some("the launcher is stopping")
        } else if !self.life.is_serving() {
            Some("the cluster is starting (the master loads, or the count is being sized): send it again once it serves")
        } else if self.life.is_rolling() {
            Some("a rolling restart (a reload) is under way: send it again once it is done")
        } else if self.life.any_second() {
            // A recycle's replacement beside its worker holds a spare place's port (DEC-94).
            Some("a memory recycle's replacement runs beside its worker: send it again once the old one has gone")
        } else {
            None
        };
        let grows = match s.ask {
            Ask::By(d) => d > 0,
            Ask::To(n) => n > current,
        };
        let master = self.pid(ProcessId::MASTER);
        let memory = match (grows && busy.is_none(), master) {
            (true, Some(pid)) => (self.setup.scale.memory)(pid),
            _ => None,
        };
        let facts = Facts {
            current,
            room: self.setup.processes.len().saturating_sub(1),
            room_why: &self.setup.scale.room_why,
            memory,
            busy,
        };
        let by = s.by;
        let answer = match decide(s.ask, &facts) {
            Decision::Change { from, to } => {
                if self.life.resize(to, self.setup.settings.drain, now) {
                    let leaving: Vec<&str> = (to + 1..=from)
                        .map(|i| self.code(ProcessId(i as u16)))
                        .collect();
                    if leaving.is_empty() {
                        info!(
                            "{by}: workers {from} → {to} (set at run time, until the next reload \
                             or start)"
                        );
                    } else {
                        info!(
                            "{by}: workers {from} → {to} (set at run time, until the next reload \
                             or start): {} out of rotation, draining (up to {} s), then stopped",
                            leaving.join(", "),
                            self.setup.settings.drain.as_secs_f64()
                        );
                    }
                    for i in from + 1..=to {
                        self.hooks.added(ProcessId(i as u16));
                    }
                    self.keeping.keeper.set_workers(to, Some(&by), true);
                    self.fit_rows();
                    Ok((from, to))
                } else {
                    let why = format!("the cluster is not serving; the worker count stays {from}");
                    warn!("{by}: refused: {why}");
                    Err(why)
                }
            }
            Decision::Same(n) => {
                info!("{by}: the worker count is already {n}");
                Ok((n, n))
            }
            Decision::Refused(why) => {
                warn!("{by}: refused: {why}");
                Err(why)
            }
        };
        if let Some(reply) = s.reply {
            let _ = reply.send(answer);
        }
    }
}
