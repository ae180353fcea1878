//! A reload (`SIGHUP`): `config.json` read again with the start's flags, checked as at start, the
//! live settings applied, the rest logged, and the supervisor told to restart every process in
//! turn. What changes and what waits for the next start is `reload.rs` (pure).

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::cli::Cli;
use crate::machine;
use crate::proxy::front::Front;
use crate::proxy::listener::LiveListenerSettings;
use crate::proxy::scheduler::SchedulerConfig;
use crate::reload;
use crate::settings::Settings;
use crate::supervisor::{Control, Reload, WorkerCount};

/// What a SIGHUP needs: the start's flags, the settings in force, and where to apply them.
pub(super) struct Reloader {
    pub(super) cli: Cli,
    pub(super) cwd: PathBuf,
    pub(super) running: Settings,
    pub(super) front: Arc<Front>,
    pub(super) listener: Arc<LiveListenerSettings>,
    pub(super) control: mpsc::Sender<Control>,
}

impl Reloader {
    /// Reads `config.json` again; a bad one is refused with its reason (`Err`) and changes
    /// nothing. Otherwise the live settings are applied, the rest logged, and every process
    /// restarted in turn (the supervisor's rolling restart, which tells the hooks when it is
    /// over).
    pub(super) async fn reload(&mut self) -> Result<(), String> {
        let new = match reload::read(&self.cli, &self.cwd) {
            Ok(s) => s,
            Err(e) => {
                error!("SIGHUP: the settings were refused, nothing changed: {e}");
                return Err(e.to_string());
            }
        };
        for w in &new.warnings {
            warn!("{w}");
        }
        let changes = reload::changes(&self.running, &new);
        for line in &changes.live {
            info!("reload: {line}");
        }
        for line in &changes.next_start {
            warn!("reload: {line} takes effect at the next start");
        }
        for line in &changes.servers {
            info!("reload: {line}: the servers take it as they restart");
        }
        if changes.live.is_empty() && changes.next_start.is_empty() && changes.servers.is_empty() {
            info!("reload: no setting changed");
        }
        let c = &new.cluster;
        self.front
            .reconfigure(SchedulerConfig::from(c), c.upstream_timeout);
        let mut cfg = self.listener.get();
        cfg.write_timeout = c.write_timeout;
        cfg.max_head = (c.header_max_kb as usize) << 10;
        self.front.budget.set_limit(c.buffer_max_mb << 20);
        cfg.drain = c.drain;
        self.listener.set(cfg);
        let workers = match (changes.workers, c.workers) {
            (false, _) => WorkerCount::Keep,
            (true, Some(n)) => WorkerCount::Exactly(n as usize),
            (true, None) => match machine::cpu_sizing(&new) {
                Ok(sizing) => WorkerCount::Size(machine::sizer(&new, sizing)),
                Err(e) => {
                    warn!("reload: the worker count is kept: {e}");
                    WorkerCount::Keep
                }
            },
        };
        let r = Reload {
            workers,
            drain: c.drain,
            status_seconds: c.status_interval.as_secs_f64(),
            recycle_after: c.recycle,
            rolling: true,
        };
        self.running = reload::apply_live(&self.running, &new);
        let _ = self.control.send(Control::Reload(r)).await;
        Ok(())
    }
}
