//! A reload (`SIGHUP`): `config.json` read again with the start's flags, checked as at start,
//! each change logged with what becomes of it as the table classifies it, the live settings
//! applied, and then either the supervisor told to restart in turn the processes whose inputs
//! changed, or, when a setting needs the launcher's own restart, the in-place upgrade asked for
//! first (`Reloaded::Upgrade`: the launcher runs it, and the new program restarts the processes
//! as its deferred reload). What changes, and what waits for which restart, is `reload.rs`
//! (pure).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::cli::Cli;
use crate::launcher::host;
use crate::logs::journald::Journal;
use crate::logs::logging;
use crate::proxy::front::Front;
use crate::proxy::listener::LiveListenerSettings;
use crate::reload::{self, Change, Changes, Count, Live};
use crate::settings::{self, Settings};
use crate::supervisor::{Control, Reload, Rolling, WorkerCount};

/// What a SIGHUP needs: the start's flags, the settings in force, and where to apply them.
pub(super) struct Reloader {
    pub(super) cli: Cli,
    pub(super) cwd: PathBuf,
    pub(super) running: Settings,
    pub(super) front: Arc<Front>,
    pub(super) listener: Arc<LiveListenerSettings>,
    pub(super) control: mpsc::Sender<Control>,
    /// The workers this run has room for (the supervisor's places less the master).
    pub(super) room: u32,
}

/// How a reload that was not refused goes on.
pub(super) enum Reloaded {
    /// Done here: the supervisor has its part (and says when its rolling restart is over).
    Done,
    /// A setting needs the launcher's own restart: the in-place upgrade comes first, then the
    /// supervisor's part (`Deferred`), by the new program or, should it not happen, by this one.
    Upgrade(Deferred),
}

/// The supervisor's part of a reload that waits for the in-place upgrade, and the settings the
/// upgrade takes (named in its refusal).
pub(super) struct Deferred {
    /// Boxed: the reload is large, and this waits in enums with small variants.
    reload: Box<Reload>,
    pub(super) waiting: Vec<String>,
}

impl Deferred {
    /// The upgrade did not happen: the supervisor's part now.
    pub(super) async fn carry_out(self, control: &mpsc::Sender<Control>) {
        let _ = control.send(Control::Reload(*self.reload)).await;
    }
}

impl Reloader {
    /// Reads `config.json` again; a bad one is refused with its reason (`Err`) and changes
    /// nothing. Otherwise the live settings are applied and every change logged; then the
    /// supervisor's part (`Done`), or the upgrade first (`Upgrade`). `after_upgrade`: this
    /// reload follows an in-place upgrade (a `SIGHUP` deferred, or the one that asked for it),
    /// so the worker count is asked for as the settings say, whatever the program before ran.
    pub(super) async fn reload(&mut self, after_upgrade: bool) -> Result<Reloaded, String> {
        // A reload takes the whole file (DEC-44): with none, the defaults would replace every
        // setting (the port, the command) and the servers, which read it too, would not start.
        // A file removed is refused as a broken one is.
        let file = self.cwd.join(&self.running.data_dir).join("config.json");
        let read = if file.is_file() {
            read(&self.cli, &self.cwd)
        } else {
            Err(anyhow::anyhow!(
                "{}: no such file: a reload takes the whole file, and without one the defaults \
                 would replace every setting; put it back, then reload",
                file.display()
            ))
        };
        let observed = &self.front.counters.observed;
        observed.reloaded(read.is_ok(), crate::clock::unix_ms());
        let new = match read {
            Ok(s) => s,
            Err(e) => {
                error!("SIGHUP: the settings were refused, nothing changed: {e:#}");
                let why = format!("{e:#}");
                observed.reload_note.refused(&why, crate::clock::unix_ms());
                let _ = self.control.send(Control::HaltRolling(why.clone())).await;
                return Err(why);
            }
        };
        for w in &new.warnings {
            warn!("{w}");
        }
        let changes = reload::changes(&self.running, &new);
        let upgrade = !changes.upgrade.is_empty() && changes.restart.is_empty();
        log_changes(&changes, after_upgrade);
        observed.reload_note.taken(
            changes
                .restart
                .iter()
                .map(|c| c.path().to_string())
                .collect(),
        );
        let before = Live::from(&self.running);
        let running = reload::apply_live(&self.running, &new);
        // config.json's count: taken when it changed, after an upgrade (whatever the program
        // before ran), or when the count now was set at run time (`scale`), which a reload
        // ends (DEC-48).
        let (workers, configured) = if changes.workers || after_upgrade {
            (worker_count(&running), WorkerCount::Keep)
        } else {
            (WorkerCount::Keep, worker_count(&running))
        };
        let live = Live::from(&running);
        self.apply(&before, &live);
        let processes = match crate::plan::replan(&running, self.room, String::new()) {
            Ok(plan) => Some(plan.processes),
            Err(e) => {
                warn!("reload: the processes are started as before: {e}");
                None
            }
        };
        let r = Reload {
            workers,
            settings: live.supervisor,
            processes,
            rolling: Rolling::Changed,
            configured,
        };
        self.running = running;
        if upgrade {
            info!(
                "reload: upgrading in place to take {}",
                names(&changes.upgrade)
            );
            return Ok(Reloaded::Upgrade(Deferred {
                reload: Box::new(r),
                waiting: changes
                    .upgrade
                    .iter()
                    .map(|c| c.path().to_string())
                    .collect(),
            }));
        }
        let _ = self.control.send(Control::Reload(r)).await;
        Ok(Reloaded::Done)
    }

    /// Gives each part of the launcher what it takes of the settings in force, but the
    /// supervisor (whose part is `Reload`). Every field of `Live` is taken (no `..`), so one
    /// added there must be applied here.
    fn apply(&self, before: &Live, live: &Live) {
        let Live {
            scheduler,
            listener,
            upstream_timeout,
            buffer_limit,
            log_level,
            access_log,
            supervisor: _, // the supervisor's, in `Reload`
            workers: _,    // as `workers`, sized on this machine
            lame_duck: _,  // read by the stop from the settings in force (`running`)
        } = live.clone();
        self.front.reconfigure(scheduler, upstream_timeout);
        self.front.budget.set_limit(buffer_limit);
        // Connections accepted from now on take these; those open keep the ones they began with.
        self.listener.set(listener);
        if let Err(e) = logging::set_level(&log_level) {
            warn!("reload: the log level is kept: {e}");
        }
        // Reopened only when changed: the requests answered from now on take the new one.
        if access_log != before.access_log {
            if let Err(e) = self.front.access_log.set(&access_log, Journal::detect()) {
                warn!("reload: the access log is kept as it was: {e:#}");
            }
        }
    }
}

/// One line per changed setting saying what becomes of it, then one that sums them up.
fn log_changes(changes: &Changes, after_upgrade: bool) {
    for line in &changes.live {
        info!("reload: {line}: applied");
    }
    for line in &changes.servers {
        info!("reload: {line}: the processes take it as they restart in turn");
    }
    let blocked = changes.restart.first().map(Change::path);
    for line in &changes.upgrade {
        match blocked {
            None => info!("reload: {line}: taken by the in-place upgrade"),
            Some(by) => warn!(
                "reload: {line}: not taken: the in-place upgrade that takes it reads the whole \
                 file, and cannot while {by} differs; it waits for the next reload"
            ),
        }
    }
    for line in &changes.restart {
        warn!(
            "reload: {line}: needs a restart of the launcher (systemctl restart): the processes \
             run where they were started; kept as it was"
        );
    }
    if after_upgrade && changes.is_empty() {
        info!("reload: after the in-place upgrade: every setting is in force");
    } else {
        info!("reload: {}", changes.summary());
    }
}

/// The settings `changes` are of, by their paths.
fn names(changes: &[Change]) -> String {
    changes
        .iter()
        .map(Change::path)
        .collect::<Vec<_>>()
        .join(", ")
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
