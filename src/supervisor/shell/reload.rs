//! The shell's side of a reload (SIGHUP, `Control::Reload`): it takes the new settings (the
//! drain, the status and sample periods for each process's next `hello`, the recycle policy and
//! what `/status` reports) and each place's process as the settings in force say to start it,
//! moves the worker count within the processes it was given at start, and asks the lifecycle
//! for the rolling restart of the processes whose inputs changed (the pure side is
//! `lifecycle/rolling.rs`); and `fhircluster restart` (`Control::Restart`), every process in
//! turn.

use tokio::sync::oneshot;
use tracing::{info, warn};

use super::Shell;
use crate::clock::now_std;
use crate::process::{ProcessId, ProcessSpec};
use crate::supervisor::api::{Reload, Rolling, SupervisorSettings, WorkerCount};

/// The running processes whose inputs are no longer their place's: `started` is what each was
/// started with (`None`: not running), `now` what its place's process is started with now.
/// Pure, for the tests.
pub(crate) fn changed_inputs(started: &[Option<u64>], now: &[u64]) -> Vec<ProcessId> {
    started
        .iter()
        .zip(now)
        .enumerate()
        .filter(|(_, (s, n))| s.is_some_and(|s| s != **n))
        .map(|(i, _)| ProcessId(i as u16))
        .collect()
}

/// Each place's process from `new`, as far as a reload changes it: how it is started (its
/// program, arguments, environment and config.json's digest). Where it runs and what it is
/// called stay (a change of those waits for the launcher's restart).
fn take_specs(current: &mut [ProcessSpec], new: Vec<ProcessSpec>) {
    for (spec, new) in current.iter_mut().zip(new) {
        spec.argv = new.argv;
        spec.env = new.env;
        spec.config = new.config;
    }
}

impl Shell {
    /// A reload: the new settings, the worker count, then the rolling restart of those whose
    /// inputs changed. False when the cluster is starting or stopping and nothing was changed.
    /// The hooks hear when it is over (`reload_finished`): here when no rolling restart
    /// begins, else at its end.
    pub(super) fn reload(&mut self, r: Reload) -> bool {
        let rolling = r.rolling != Rolling::None;
        let changed = self.reload_settings(r);
        if !(changed && rolling && self.life.is_rolling()) {
            self.hooks.reload_finished();
        }
        changed
    }

    /// `fhircluster restart`: every process in turn; `done` hears once it is over.
    pub(super) fn restart_all(&mut self, done: oneshot::Sender<Result<(), String>>) {
        let drain = self.setup.settings.drain;
        if !self.life.rolling_restart(drain, now_std()) {
            let _ = done.send(Err(
                "the cluster is starting or stopping: nothing was restarted".into(),
            ));
            return;
        }
        info!(
            "restart asked for on the control socket: every worker, then the master, one at a time"
        );
        self.keeping.keeper.rolling_stopped(None);
        self.roll.waiters.push(done);
    }

    /// A reload was refused: the rolling restart under way, if any, restarts no other process
    /// (WARNING, naming those left as they were).
    pub(super) fn halt_rolling(&mut self, why: &str) {
        let Some(left) = self.life.halt_rolling(now_std()) else {
            return;
        };
        let codes: Vec<&str> = left.iter().map(|&id| self.code(id)).collect();
        warn!(
            "rolling restart stopped: the reload was refused ({why}), and the servers read \
             config.json as they start; {} left as they are until the next good reload",
            if codes.is_empty() {
                "none".to_string()
            } else {
                codes.join(", ")
            }
        );
    }

    /// The rolling restart under way ended (`Err`: stopped by a process that did not come
    /// back): those waiting for it hear.
    pub(super) fn rolling_ended(&mut self, outcome: Result<(), String>) {
        for w in self.roll.waiters.drain(..) {
            let _ = w.send(outcome.clone());
        }
    }

    /// The running processes whose inputs changed, by their codes (for the log).
    fn to_restart(&self) -> Vec<ProcessId> {
        let now: Vec<u64> = self
            .setup
            .processes
            .iter()
            .map(ProcessSpec::inputs)
            .collect();
        let running: Vec<Option<u64>> = self
            .places
            .started_with
            .iter()
            .zip(&self.places.children)
            .map(|(s, c)| s.filter(|_| c.is_some()))
            .collect();
        changed_inputs(&running, &now)
    }

    fn reload_settings(&mut self, r: Reload) -> bool {
        let now = now_std();
        if self.life.is_stopping() {
            return false;
        }
        // Every field taken (no `..`): one added to `SupervisorSettings` is applied here too.
        if let Some(specs) = r.processes {
            take_specs(&mut self.setup.processes, specs);
            // A place whose process is not ready now (starting, failing, waiting out a
            // backoff) has no good inputs to keep: it starts with the new ones (DEC-79).
            for (i, good) in self.places.last_good.iter_mut().enumerate() {
                if !self.life.is_ready(ProcessId(i as u16)) {
                    *good = None;
                }
            }
        }
        self.keeping.keeper.rolling_stopped(None);
        let SupervisorSettings {
            drain,
            status_seconds,
            sample_seconds,
            recycle,
            hang_timeout,
            snapshot,
        } = r.settings.clone();
        self.keeping.keeper.reconfigure(snapshot);
        self.watch.recycle.set_policy(recycle);
        self.setup.settings = SupervisorSettings {
            drain,
            status_seconds,
            sample_seconds,
            recycle,
            hang_timeout,
            snapshot,
        };
        let drain = self.setup.settings.drain;
        let current = self.life.workers();
        // A count set at run time (`scale`) holds until a reload: this one goes back to
        // config.json's even when config.json's is unchanged (DEC-48).
        let asked = match r.workers {
            WorkerCount::Keep if self.keeping.keeper.workers_set_at_run_time() => r.configured,
            w => w,
        };
        let wanted = match asked {
            WorkerCount::Keep => current,
            WorkerCount::Exactly(n) => n,
            WorkerCount::Size(mut sizer) => {
                let n = match &self.places.children[0] {
                    Some(master) if self.life.is_up(ProcessId::MASTER) => sizer(master.pid),
                    _ => current,
                };
                self.sizer = sizer;
                n
            }
        };
        let room = self.setup.processes.len().saturating_sub(1);
        let n = if wanted > room {
            warn!(
                "reload: {wanted} workers asked for, but this run has room for {room} \
                 (ports and tables are set at start); running {room}, the rest at the next start"
            );
            room
        } else {
            wanted
        };
        if n != current {
            if !self.life.resize(n, drain, now) {
                warn!("reload: the worker count can't change while the cluster starts; kept at {current}");
                return false;
            }
            info!("reload: workers {current} → {n}");
            if let Some(held) = (n > current)
                .then(|| self.second_holding_a_port())
                .flatten()
            {
                info!(
                    "reload: {} starts once {held}'s second process has gone (it holds the port \
                     of the place beyond the count, DEC-78)",
                    self.code(ProcessId(current as u16 + 1))
                );
            }
            for i in current + 1..=n {
                self.hooks.added(ProcessId(i as u16));
            }
        }
        self.keeping.keeper.set_workers(n, Some("reload"), false);
        self.fit_rows();
        if r.rolling == Rolling::Changed {
            let mut ids = self.to_restart();
            // In the order they restart: the workers, then the master.
            ids.sort_by_key(|id| (id.is_master(), id.0));
            let codes: Vec<String> = ids.iter().map(|&id| self.code(id).to_string()).collect();
            if ids.is_empty() {
                info!("reload: no process restarts: what they read is unchanged");
            } else if self
                .life
                .rolling_restart_of(&|id| ids.contains(&id), drain, now)
            {
                if self.life.workers() == 0 && ids.contains(&ProcessId::MASTER) {
                    warn!(
                        "rolling restart with no worker: tx requests and the master's \
                         paths get 503 while the master restarts"
                    );
                }
                info!(
                    "rolling restart of {}: what they read changed (their command, node flags, \
                     environment or config.json outside server.cluster); one at a time, the \
                     master last",
                    codes.join(", ")
                );
            } else {
                warn!("reload: no rolling restart while the cluster starts");
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_running_processes_whose_inputs_differ_are_restarted() {
        // spec: DEC-44
        let started = [Some(1), Some(2), None, Some(4)];
        assert_eq!(changed_inputs(&started, &[1, 2, 3, 4]), vec![]);
        assert_eq!(
            changed_inputs(&started, &[9, 2, 9, 9]),
            vec![ProcessId(0), ProcessId(3)],
            "tx2 is not running: it starts with the new inputs anyway"
        );
    }
}
