//! The shell's side of a reload (SIGHUP, `Control::Reload`): it takes the new settings (the
//! drain, the status and sample periods for each process's next `hello`, the recycle policy and
//! what `/status` reports), moves the worker count within the processes it was given at start, and
//! asks the lifecycle for the rolling restart (the pure side is `lifecycle/rolling.rs`).

use tracing::{info, warn};

use super::Shell;
use crate::clock::now_std;
use crate::process::ProcessId;
use crate::supervisor::api::{Reload, SupervisorSettings, WorkerCount};

impl Shell {
    /// A reload: the new settings, the worker count, then the rolling restart. False when the
    /// cluster is starting or stopping and nothing was changed. The hooks hear when it is over
    /// (`reload_finished`): here when no rolling restart begins, else at its end.
    pub(super) fn reload(&mut self, r: Reload) -> bool {
        let rolling = r.rolling;
        let changed = self.reload_settings(r);
        if !(changed && rolling && self.life.is_rolling()) {
            self.hooks.reload_finished();
        }
        changed
    }

    fn reload_settings(&mut self, r: Reload) -> bool {
        let now = now_std();
        if self.life.is_stopping() {
            return false;
        }
        // Every field taken (no `..`): one added to `SupervisorSettings` is applied here too.
        let SupervisorSettings {
            drain,
            status_seconds,
            sample_seconds,
            recycle,
            snapshot,
        } = r.settings.clone();
        self.keeper.reconfigure(snapshot);
        self.recycle.set_policy(recycle);
        self.setup.settings = SupervisorSettings {
            drain,
            status_seconds,
            sample_seconds,
            recycle,
            snapshot,
        };
        let drain = self.setup.settings.drain;
        let current = self.life.workers();
        // A count set at run time (`scale`) holds until a reload: this one goes back to
        // config.json's even when config.json's is unchanged (DEC-48).
        let asked = match r.workers {
            WorkerCount::Keep if self.keeper.workers_set_at_run_time() => r.configured,
            w => w,
        };
        let wanted = match asked {
            WorkerCount::Keep => current,
            WorkerCount::Exactly(n) => n,
            WorkerCount::Size(mut sizer) => {
                let n = match &self.children[0] {
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
            for i in current + 1..=n {
                self.hooks.added(ProcessId(i as u16));
            }
        }
        self.keeper.set_workers(n, Some("reload"), false);
        self.fit_rows();
        if r.rolling {
            if self.life.rolling_restart(drain, now) {
                if self.life.workers() == 0 {
                    warn!(
                        "rolling restart with no worker: tx requests and the master's \
                         paths get 503 while the master restarts"
                    );
                }
                info!("rolling restart: every worker, then the master, one at a time");
            } else {
                warn!("reload: no rolling restart while the cluster starts");
            }
        }
        true
    }
}
