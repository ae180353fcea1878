//! The launcher's run, top to bottom, in phases: the signal handlers (first, before any process
//! exists) → settings → plan → `wire` (`launcher/wire.rs`: the front door's state, the
//! launcher's own endpoints, systemd's messages, the supervisor, which starts the master) → `wait_for_master` → `serve`
//! (the listener, once the master is ready) → `until_stop` (SIGHUP reloads the settings and
//! restarts the processes in turn) → `stop` (the drain, then the processes in order) → exit.
//! What each signal means in each phase is `signals`; this file only acts on it.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::sync::{mpsc, watch};
use tracing::{debug, error, info, warn};

use crate::cli::Cli;
use crate::logs::access_log::{AccessLog, InForce};
use crate::logs::child_log::ChildLines;
use crate::logs::journald::Journal;
use crate::logs::logging;
use crate::ops::notify::{self, Notifier};
use crate::ops::signal_stream::Signals;
use crate::plan::Plan;
use crate::proxy::front::Front;
use crate::proxy::listener::{self, ListenerSettings, LiveListenerSettings};
use crate::proxy::roster::RosterNews;
use crate::settings::{self, Settings};
use crate::signals::{meaning, Meaning, Phase, Sig};
use crate::sizing::CpuSizing;
use crate::supervisor::{Control, Ended};

mod client;
mod demo;
mod host;
mod lame_duck;
mod listen_again;
mod own_files;
mod reloader;
mod resume;
mod tx_usage_watch;
mod upgrade;
mod wire;

use demo::prepare_demo;
use reloader::{Deferred, Reloaded, Reloader};
use resume::Resume;
use upgrade::Outcome;

/// Runs the command line: `--check`, `--demo`, or the cluster. The log lines still queued are
/// given their chance to be written before it returns (`logging::flush`).
pub fn main(cli: Cli) -> Result<ExitCode> {
    let ended = run_command(cli);
    logging::flush();
    ended
}

fn run_command(mut cli: Cli) -> Result<ExitCode> {
    if cli.upgrade_formats {
        let line = format!("{}\n", crate::upgrade::state::formats_line());
        return Ok(crate::ops::stdout::emit_then(
            "--upgrade-formats",
            &line,
            ExitCode::SUCCESS,
        ));
    }
    // Held to the end of `main`, however it ends: the demo's own temporary directory goes then.
    let _demo_dir = if cli.demo {
        prepare_demo(&mut cli)?
    } else {
        None
    };
    if let Some(action) = &cli.action {
        return Ok(client::run(&cli, action));
    }
    let mut settings = settings::load(&cli)?;
    let journal = Journal::detect();
    logging::init(
        settings.cluster.log_format,
        &settings.cluster.log_level,
        journal,
    );
    let cwd = std::env::current_dir().context("reading the current directory")?;
    settings::check_command(&settings, &cwd)?;
    let (sizing, plan) = host::plan_for_this_host(&settings)?;
    if cli.check {
        // A group that doesn't exist, or that the launcher's user is not in, would stop the
        // start: so it stops the check (and with it an in-place upgrade, before the execve).
        if settings.control_socket_path().is_some() {
            crate::ops::control_socket::allowed_group(&settings.cluster.control_group)?;
        }
        // As `nginx -t`: findings on stderr, the plan on stdout.
        for w in &settings.warnings {
            eprintln!("warning: {w}");
        }
        let config = std::path::absolute(settings.data_dir.join("config.json"))
            .unwrap_or_else(|_| settings.data_dir.join("config.json"));
        let text = [
            crate::plan::render_check(&plan),
            crate::plan::render_where(&settings),
            crate::plan::render_source(&config, config.is_file()),
            "configuration ok\n".to_string(),
        ]
        .concat();
        return Ok(crate::ops::stdout::emit_then(
            "--check",
            &text,
            ExitCode::SUCCESS,
        ));
    }
    // Every connection, pipe and database takes a descriptor: systemd's soft limit of 1024
    // would run out at a thousand clients (`system::open_files`).
    let files = crate::system::open_files::raise_to_hard();
    if files.now > files.was {
        info!(
            "open files: the soft limit raised from {} to {}, its hard limit",
            files.was, files.now
        );
    }
    // Started (its file opened) before anything is served; put in force on the front door.
    let upgraded = std::env::var_os(crate::upgrade::exec::STATE_VAR).is_some();
    let access_log = own_files::access_log(&mut settings, journal, upgraded)?;
    let pid_file = crate::ops::pid_file::path(&settings.data_dir, &settings.cluster.pid_file);
    // Started by an in-place upgrade: the processes, sockets and state of the program before.
    let resume = match crate::upgrade::exec::inherited() {
        None => {
            // A second launcher on the same pid file is named as such, before its ports are.
            if let Some(path) = &pid_file {
                crate::ops::pid_file::refuse_running(path)?;
            }
            guard_processes(&settings, &plan)?;
            None
        }
        Some(Ok(handover)) => {
            let r = Resume::new(handover);
            r.tree(settings.cluster.kill_after);
            Some(r)
        }
        Some(Err(e)) => anyhow::bail!("the in-place upgrade's state: {e}"),
    };
    // The ports are known free (or kept across the upgrade): the pid can be told from now on.
    if let Some(path) = &pid_file {
        own_files::pid_file(path, resume.is_some())?;
    }
    // The Node preload, before any process that names it starts; written again by an in-place
    // upgrade (the same path: the pid is kept), removed at the end.
    let preload = settings.cluster.node_report.then(crate::node_report::path);
    if preload.is_none() && resume.is_some() {
        // Turned off by this upgrade: the program before wrote one, nothing will name it now.
        crate::node_report::remove(crate::node_report::path());
    }
    if let Some(path) = preload {
        own_files::preload(path, resume.is_some())?;
        info!(
            "nodeReport: each Node process loads {} (--require), which reports for it on its channel",
            path.display()
        );
    }
    let ended = run_processes(cli, settings, sizing, plan, journal, resume, access_log);
    if let Some(path) = preload {
        crate::node_report::remove(path);
    }
    if let Some(path) = &pid_file {
        crate::ops::pid_file::release(path);
    }
    ended
}

/// The runtime, on a thread of its own, running the cluster until it ends.
fn run_processes(
    cli: Cli,
    settings: Settings,
    sizing: CpuSizing,
    plan: Plan,
    journal: Journal,
    resume: Option<Resume>,
    access_log: Option<Arc<AccessLog>>,
) -> Result<ExitCode> {
    // One thread: a current-thread runtime, everything on this thread with no work-stealing
    // bookkeeping (measured faster than one worker of the multi-thread runtime); more: that many
    // workers.
    let threads = settings.cluster.proxy_threads.max(1) as usize;
    let lines = ChildLines {
        format: settings.cluster.log_format,
        journal,
    };
    let runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            // Named, so `/proc/<pid>/task/*/comm` shows the runtime's threads.
            .thread_name("fhc-proxy")
            .enable_all()
            .build()
    }
    .context("starting the runtime")?;
    // The runtime on a thread of its own; this (main) thread forks every child and runs the
    // upgrade's execve (`supervisor::spawner`).
    let ended = crate::supervisor::spawner::serve_here(move || {
        runtime.block_on(run(cli, settings, sizing, plan, lines, resume, access_log))
    })
    .context("starting the runtime's thread")?;
    crate::tree::run::finish();
    ended
}

/// Before any process starts: a port the plan needs that is already held stops the start (one
/// line naming the holder); then the launcher becomes its processes' subreaper and starts their
/// guardian (`tree`), so none outlives it.
fn guard_processes(settings: &Settings, plan: &Plan) -> Result<()> {
    let needs = crate::held_ports::needs(settings, plan);
    crate::held_ports::refuse_held(std::path::Path::new("/"), &needs)?;
    crate::tree::run::start(settings.cluster.kill_after);
    Ok(())
}

async fn run(
    cli: Cli,
    settings: Settings,
    sizing: CpuSizing,
    plan: Plan,
    lines: ChildLines,
    resume: Option<Resume>,
    access_log: Option<Arc<AccessLog>>,
) -> Result<ExitCode> {
    // First, before any process exists: from here no common signal ends the launcher by its
    // default action (which would leave no log, no drain and no orderly stop).
    let mut signals = Signals::install()?;
    // Held back across an upgrade's execve (no handler then): taken now that they are caught.
    crate::upgrade::exec::unblock_signals();
    // The guardian (started, or taken over, before the runtime) is replaced whenever it ends.
    crate::tree::guardian_watch::keep_watched();
    let demo = cli.demo;
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let mut settings = settings;
    let admin = listen_again::admin(&mut settings, resume.as_ref()).await?;
    let mut l = Launcher::wire(&settings, &sizing, &plan, lines, resume.as_ref(), admin).await?;
    l.front.access_log.put(access_log);
    if let Some(code) = l.wait_for_master(&mut signals).await {
        return Ok(code);
    }
    let Some(mut serving) = l.serve(&mut settings, demo, resume.as_ref()).await else {
        // The port can't be had (logged): the processes are stopped, and it is a failure.
        l.stop_processes(&mut signals).await;
        return Ok(ExitCode::from(1));
    };
    let mut reloader = Reloader {
        cli,
        cwd,
        running: settings.clone(),
        front: l.front.clone(),
        listener: serving.live.clone(),
        control: l.control.clone(),
        room: l.room,
    };
    if let Some(r) = &resume {
        let mono_now = crate::ops::notify::monotonic_usec() / 1000;
        info!(
            "upgraded in place: pid {} kept, serving again {} ms after the handover",
            std::process::id(),
            mono_now.saturating_sub(r.handover.captured_monotonic_ms)
        );
    }
    let reload_now = resume.as_ref().is_some_and(|r| r.handover.reload_pending);
    drop(resume);
    // A reload's upgrade to carry out before waiting for a signal.
    let mut upgrade_now = None;
    if reload_now {
        info!(
            "SIGHUP (deferred during the upgrade, or the reload that upgraded): reloading the \
             settings"
        );
        if let Some(d) = l.reload(&mut reloader, true).await {
            // A setting this program could not take (kept as it was, said above) would ask for
            // the same upgrade again at once, and again should it fail the same way: it waits
            // for the next reload instead (DEC-70); the processes' part is carried out now.
            warn!(
                "reload: {}: kept as it was until the next reload",
                d.waiting.join(", ")
            );
            d.carry_out(&l.control).await;
        }
    }
    loop {
        let until = match upgrade_now.take() {
            Some(deferred) => Until::Upgrade(Some(deferred)),
            None => l.until_stop(&mut signals, &mut reloader).await,
        };
        match until {
            Until::Ended(code) => {
                let _ = serving.shutdown.send(listener::Shutdown::Stop);
                let _ = serving.task.await;
                return Ok(code);
            }
            Until::Stop => {
                let lame_duck = reloader.running.cluster.lame_duck;
                return Ok(l.stop(&mut signals, serving, lame_duck).await);
            }
            Until::Upgrade(deferred) => {
                // A `scale` or `restart` on the control socket is refused meanwhile (DEC-49).
                l.desk.set_busy(Some(
                    "an upgrade is under way (send it again once it is over)",
                ));
                let outcome = l
                    .upgrade(serving, &mut signals, &reloader, deferred.as_ref())
                    .await;
                l.desk.set_busy(None);
                match outcome {
                    Outcome::Serving { serving: s, reload } => {
                        serving = s;
                        if let Some(d) = deferred {
                            // Not upgraded: the reload's part for the processes, here.
                            l.reloading();
                            d.carry_out(&l.control).await;
                        }
                        if reload {
                            info!("SIGHUP (deferred during the upgrade): reloading the settings");
                            upgrade_now = l.reload(&mut reloader, false).await;
                        }
                    }
                    Outcome::Stop => {
                        let code = l.stop_processes(&mut signals).await;
                        info!("stopped");
                        return Ok(code);
                    }
                }
            }
        }
    }
}

/// Why `until_stop` returned.
enum Until {
    /// The supervisor ended by itself, with this exit status.
    Ended(ExitCode),
    /// A stop signal.
    Stop,
    /// `SIGUSR2`, or the control socket's `upgrade` (`None`); or a reload whose settings need
    /// the launcher's own restart, with its part for the processes (`Some`).
    Upgrade(Option<Deferred>),
}

/// What runs while the launcher does: the front door, the supervisor and what it is told, and
/// what systemd hears.
struct Launcher {
    front: Arc<Front>,
    /// The launcher's own endpoint's listening socket (a second fd for it: an upgrade hands it
    /// over while the endpoint serves on until the `execve`).
    admin_fd: Option<std::os::fd::OwnedFd>,
    /// Where the launcher's own endpoint listens (`None`: it doesn't).
    admin_at: Option<std::net::SocketAddr>,
    /// HAProxy's agent's listening socket (`agentAddress`), a second fd as `admin_fd` is.
    agent_fd: Option<std::os::fd::OwnedFd>,
    /// The control socket (`None`: off): its file goes when this is dropped at a clean stop.
    control_socket: Option<crate::ops::control_socket::ControlSocket>,
    /// The control socket's `upgrade` (`fhircluster upgrade`): asks, and hears how an upgrade
    /// not done ended.
    desk: crate::ops::upgrade_desk::UpgradeDesk,
    upgrade_asks: mpsc::Receiver<()>,
    control: mpsc::Sender<Control>,
    supervisor: tokio::task::JoinHandle<Ended>,
    notifier: Arc<Notifier>,
    state: watch::Sender<notify::State>,
    /// The roster's news: the master ready, reloads finished.
    news: watch::Receiver<RosterNews>,
    /// Reloads finished when the last one began.
    reloads_seen: u64,
    /// The workers this run has room for.
    room: u32,
    /// The settings a reload's upgrade under way would take (for its refusal's line).
    waiting: Option<String>,
    /// The pid file the upgrade under way moves elsewhere (removed just before the execve).
    old_pid_file: Option<std::path::PathBuf>,
}

/// The client listener's task and how to stop it.
struct Serving {
    task: tokio::task::JoinHandle<Option<listener::Kept>>,
    shutdown: watch::Sender<listener::Shutdown>,
    live: Arc<LiveListenerSettings>,
    /// Where the listener is (what an upgrade compares the new settings with).
    at: Option<std::net::SocketAddr>,
}

impl Launcher {
    /// Until the master is ready (nothing listens before, LAUNCH-6). `Some`: the launcher is
    /// done, with this exit status (stopped by a signal, or the master given up on).
    async fn wait_for_master(&mut self, signals: &mut Signals) -> Option<ExitCode> {
        loop {
            // A master given up on is never ready: the supervisor's end is taken by its own
            // branch.
            let sig = tokio::select! {
                Ok(_) = self.news.wait_for(|n| n.master_ready) => return None,
                ended = &mut self.supervisor => return Some(exit_code(ended.ok())),
                sig = signals.next() => sig,
            };
            match meaning(sig, Phase::Starting) {
                Meaning::Stop => {
                    info!("{sig}: stopping before the master was ready");
                    return Some(self.stop_processes(signals).await);
                }
                m => log_signal(sig, &m, &self.front.access_log),
            }
        }
    }

    /// Opens `server.port` (where `listenAddress` says), tells systemd the launcher is ready, and serves. `None`: the port
    /// can't be had (logged).
    async fn serve(
        &mut self,
        settings: &mut Settings,
        demo: bool,
        resume: Option<&Resume>,
    ) -> Option<Serving> {
        let bound = match listen_again::client(settings, resume) {
            Ok(b) => b,
            Err(e) => {
                let at = settings
                    .cluster
                    .listen_address
                    .map_or(String::new(), |a| format!(" on {a}"));
                error!("server.port {}{at}: cannot listen: {e}", settings.port);
                return None;
            }
        };
        if let Some(note) = &bound.note {
            warn!("{note}");
        }
        info!("listening on port {} on {}", settings.port, bound.place);
        let listener = bound.listener;
        let at = listener.local_addr().ok();
        self.notifier.ready(&cluster_status(&self.front));
        self.state.send_replace(notify::State::Serving);
        if demo {
            let status = settings.cluster.admin_address.map_or(String::new(), |a| {
                format!(" or `fhircluster status --admin-address {a}`")
            });
            info!(
                "demo: try `curl http://127.0.0.1:{0}/r4/metadata`, \
                 `curl -X POST http://127.0.0.1:{0}/r4/\\$cache-control`{status}; Ctrl-C stops",
                settings.port
            );
        }
        tokio::spawn(tx_usage_watch::run(
            self.front.clone(),
            settings.tx.endpoints.clone(),
        ));
        let (shutdown, shutdown_rx) = watch::channel(listener::Shutdown::No);
        let live = LiveListenerSettings::new(ListenerSettings::from(&settings.cluster));
        // The idle client connections the program before handed over, served again.
        let clients = resume.map(Resume::take_client_conns).unwrap_or_default();
        let task = tokio::spawn(listener::serve_live(
            listener,
            clients,
            self.front.clone(),
            live.clone(),
            shutdown_rx,
        ));
        Some(Serving {
            task,
            shutdown,
            live,
            at,
        })
    }

    /// Serves until a stop signal (`None`), or the supervisor ends by itself (`Some`: only a
    /// master that never got ready does, and then nothing listens; kept for completeness).
    /// SIGHUP reloads; systemd hears `RELOADING=1`, then `READY=1` when the rolling restart is
    /// over (or at once when the settings are refused).
    async fn until_stop(&mut self, signals: &mut Signals, reloader: &mut Reloader) -> Until {
        loop {
            tokio::select! {
                sig = signals.next() => match meaning(sig, Phase::Serving) {
                    Meaning::Stop | Meaning::StopNow => {
                        info!(
                            "{}",
                            lame_duck::stop_line(sig, reloader.running.cluster.lame_duck)
                        );
                        return Until::Stop;
                    }
                    Meaning::Upgrade => {
                        info!("{sig}: upgrading in place");
                        return Until::Upgrade(None);
                    }
                    Meaning::Reload => {
                        info!("{sig}: reloading the settings");
                        if let Some(d) = self.reload(reloader, false).await {
                            return Until::Upgrade(Some(d));
                        }
                    }
                    Meaning::Scale(by) => {
                        let s = crate::supervisor::Scale {
                            ask: crate::supervisor::scale::Ask::By(by),
                            by: sig.name().to_string(),
                            reply: None,
                        };
                        let _ = self.control.send(Control::Scale(s)).await;
                    }
                    m => log_signal(sig, &m, &self.front.access_log),
                },
                Ok(()) = self.news.changed() => {
                    let finished = self.news.borrow_and_update().reloads_finished;
                    let over = finished != std::mem::replace(&mut self.reloads_seen, finished);
                    if over && *self.state.borrow() == notify::State::Reloading {
                        self.notifier.ready(&cluster_status(&self.front));
                        self.state.send_replace(notify::State::Serving);
                    }
                }
                Some(()) = self.upgrade_asks.recv() => {
                    info!("upgrade asked for on the control socket: upgrading in place");
                    return Until::Upgrade(None);
                }
                ended = &mut self.supervisor => return Until::Ended(exit_code(ended.ok())),
            }
        }
    }

    /// `SIGHUP`'s reload: systemd hears `RELOADING=1`, then `READY=1` once the rolling restart
    /// is over (`until_stop`), or at once when the settings are refused. `Some`: the in-place
    /// upgrade is to come first (the upgrade tells systemd its own way through).
    async fn reload(&mut self, reloader: &mut Reloader, after_upgrade: bool) -> Option<Deferred> {
        self.reloading();
        match reloader.reload(after_upgrade).await {
            Ok(Reloaded::Done) => None,
            Ok(Reloaded::Upgrade(d)) => Some(d),
            Err(why) => {
                self.notifier
                    .ready(&format!("reload refused, running as before: {why}"));
                self.state.send_replace(notify::State::Serving);
                None
            }
        }
    }

    /// `RELOADING=1`, and `READY=1` once the supervisor says the reload it is told of next is
    /// over (`until_stop`).
    fn reloading(&mut self) {
        // Read before the supervisor is told, so its answer is not missed.
        self.reloads_seen = self.news.borrow_and_update().reloads_finished;
        self.notifier.reloading();
        self.state.send_replace(notify::State::Reloading);
    }

    /// The orderly stop: the lame duck (`lameDuckSeconds`, DEC-88: serving on, no longer ready),
    /// which a second stop signal skips; the drain (STOP-1..4), which a second stop signal cuts
    /// short; then the processes in order (STOP-5..9).
    async fn stop(
        mut self,
        signals: &mut Signals,
        mut serving: Serving,
        lame_duck: std::time::Duration,
    ) -> ExitCode {
        self.desk.set_busy(Some("the launcher is stopping"));
        self.notifier.stopping();
        self.state.send_replace(notify::State::Stopping);
        if !lame_duck.is_zero() {
            if let lame_duck::Ended::Supervisor(code) = self.lame_duck(signals, lame_duck).await {
                let _ = serving.shutdown.send(listener::Shutdown::Stop);
                let _ = serving.task.await;
                return code;
            }
        }
        let _ = serving.shutdown.send(listener::Shutdown::Stop);
        loop {
            tokio::select! {
                _ = &mut serving.task => break,
                sig = signals.next() => match meaning(sig, Phase::Draining) {
                    Meaning::StopNow => {
                        warn!(
                            "{sig} again: stopping now: the drain is cut short ({} request(s) \
                             in progress end); the processes get SIGTERM, and SIGKILL if still \
                             running after killSeconds",
                            self.front
                                .roster.present()
                                .map(|p| self.front.admission.load(p.id).in_flight as u64)
                                .sum::<u64>()
                        );
                        serving.task.abort();
                        let _ = (&mut serving.task).await;
                        break;
                    }
                    m => log_signal(sig, &m, &self.front.access_log),
                },
            }
        }
        let code = self.stop_processes(signals).await;
        info!("stopped");
        code
    }

    /// Stops the processes in order (workers, their last counts, the master) and waits for the
    /// supervisor to be done; signals meanwhile are logged.
    async fn stop_processes(&mut self, signals: &mut Signals) -> ExitCode {
        self.desk.set_busy(Some("the launcher is stopping"));
        if *self.state.borrow() != notify::State::Stopping {
            self.notifier.stopping();
            self.state.send_replace(notify::State::Stopping);
        }
        let _ = self.control.send(Control::Stop).await;
        loop {
            tokio::select! {
                ended = &mut self.supervisor => return exit_code(ended.ok()),
                sig = signals.next() => log_signal(
                    sig,
                    &meaning(sig, Phase::StoppingProcesses),
                    &self.front.access_log,
                ),
            }
        }
    }
}

/// The log line for a signal that is only logged.
fn log_signal(sig: Sig, m: &Meaning, access_log: &InForce) {
    match m {
        Meaning::Ignored(why) if matches!(sig, Sig::Hup | Sig::Ttin | Sig::Ttou) => {
            warn!("{sig}: ignored: {why}")
        }
        Meaning::Ignored(why) => info!("{sig}: ignored: {why}"),
        Meaning::ReopenAccessLog => match access_log.reopen() {
            Some(path) => info!("{sig}: reopening the access log {}", path.display()),
            None => info!(
                "{sig}: ignored: nothing to reopen (no server.cluster.accessLogPath: the \
                 launcher logs to stderr)"
            ),
        },
        other => debug!("{sig}: {other:?}"),
    }
}

/// `3/3 ready, 0 queued`
fn cluster_status(front: &Front) -> String {
    let total = front.roster.present().count();
    let ready = front
        .roster
        .present()
        .filter(|p| front.roster.is_ready(p.id))
        .count();
    notify::status_line(ready, total, front.admission.queued())
}

fn exit_code(ended: Option<Ended>) -> ExitCode {
    match ended {
        Some(Ended::Stopped) => ExitCode::SUCCESS,
        Some(Ended::GaveUp | Ended::HandedOver) | None => ExitCode::from(1),
    }
}
