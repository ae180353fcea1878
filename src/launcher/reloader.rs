//! A reload (`SIGHUP`): `config.json` read again with the start's flags, checked as at start, each
//! change logged as the table classifies it, the live settings applied, and the supervisor told
//! to restart every process in turn. What changes, and what waits for which restart, is
//! `reload.rs` (pure).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::cli::Cli;
use crate::ops::logging;
use crate::proxy::front::Front;
use crate::proxy::listener::LiveListenerSettings;
use crate::reload::{self, Count, Live};
use crate::settings::{self, Settings};
use crate::sizing::host;
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
        let read = read(&self.cli, &self.cwd);
        let observed = &self.front.counters.observed;
        observed.reloaded(read.is_ok(), crate::clock::unix_ms());
        let new = match read {
            Ok(s) => s,
            Err(e) => {
                error!("SIGHUP: the settings were refused, nothing changed: {e:#}");
                return Err(format!("{e:#}"));
            }
        };
        for w in &new.warnings {
            warn!("{w}");
        }
        let changes = reload::changes(&self.running, &new);
        for line in &changes.live {
            info!("reload: {line}");
        }
        for line in &changes.servers {
            info!("reload: {line}: the servers take it as they restart");
        }
        for line in &changes.launcher {
            warn!("reload: {line}: the launcher takes it at its next start");
        }
        if changes.is_empty() {
            info!("reload: no setting changed");
        }
        let running = reload::apply_live(&self.running, &new);
        // config.json's count: taken when it changed, or when the count now was set at run
        // time (`scale`), which a reload ends (DEC-48).
        let (workers, configured) = if changes.workers {
            (worker_count(&running), WorkerCount::Keep)
        } else {
            (WorkerCount::Keep, worker_count(&running))
        };
        self.apply(Live::from(&running), workers, configured).await;
        self.running = running;
        Ok(())
    }

    /// Gives each part of the launcher what it takes of the settings in force. Every field of
    /// `Live` is taken (no `..`), so one added there must be applied here.
    async fn apply(&self, live: Live, workers: WorkerCount, configured: WorkerCount) {
        let Live {
            scheduler,
            listener,
            upstream_timeout,
            buffer_limit,
            log_level,
            supervisor,
            workers: _, // as `workers`, sized on this machine
        } = live;
        self.front.reconfigure(scheduler, upstream_timeout);
        self.front.budget.set_limit(buffer_limit);
        // Connections accepted from now on take these; those open keep the ones they began with.
        self.listener.set(listener);
        if let Err(e) = logging::set_level(&log_level) {
            warn!("reload: the log level is kept: {e}");
        }
        let r = Reload {
            workers,
            settings: supervisor,
            rolling: true,
            configured,
        };
        let _ = self.control.send(Control::Reload(r)).await;
    }
}

/// The worker count the settings in force ask for: given, or sized again on the running master.
fn worker_count(running: &Settings) -> WorkerCount {
    match Count::from(&running.cluster) {
        Count::Exactly(n) => WorkerCount::Exactly(n as usize),
        Count::Sized { .. } => match host::cpu_sizing(running) {
            Ok(sizing) => WorkerCount::Size(Box::new(host::sizer(running, sizing))),
            Err(e) => {
                warn!("reload: the worker count is kept: {e:#}");
                WorkerCount::Keep
            }
        },
    }
}

/// Reads and checks the settings again, as at start (the same flags; the environment as it is
/// the launcher's own, unchanged): the settings, or what is wrong, its causes kept.
pub(super) fn read(cli: &Cli, cwd: &Path) -> anyhow::Result<Settings> {
    let s = settings::load(cli)?;
    settings::check_command(&s, cwd)?;
    // The worker rule must be known and the count's ports must fit, as at start (DEC-21, DEC-23).
    let sizing = host::cpu_sizing(&s)?;
    crate::plan::check_port_range(&s, sizing.planned())?;
    Ok(s)
}
