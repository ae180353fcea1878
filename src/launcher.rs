//! The launcher's run, top to bottom: settings → plan → the front door's state → the supervisor
//! (master first) → the listener once the master is ready → run until a signal → drain → stop
//! the processes in order → exit. Signals become one `Control::Stop` here and nowhere else;
//! SIGHUP reloads the settings and restarts the processes in turn (`reload`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{error, info, warn};

use crate::cli::Cli;
use crate::ipc::message::FromChild;
use crate::machine;
use crate::ops::admin::{self, Admin};
use crate::ops::notify::{self, Notifier};
use crate::plan::Plan;
use crate::process::ProcessId;
use crate::proxy::front::Front;
use crate::proxy::listener::{self, ListenerSettings, LiveListenerSettings};
use crate::proxy::route::RouteTable;
use crate::proxy::scheduler::{Scheduler, SchedulerConfig};
use crate::reload;
use crate::settings::{self, LogFormat, Settings};
use crate::sizing::CpuSizing;
use crate::status::keeper::{Keeper, Tally};
use crate::supervisor::output::OutputSink;
use crate::supervisor::{self, Control, Ended, Hooks, Reload, SupervisorSetup, WorkerCount};

/// Log lines on stderr: levels from `RUST_LOG` (default `info`), text or JSON, and no
/// timestamps of its own under journald (`JOURNAL_STREAM` set), which stamps each line itself.
pub fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = match (format, journald) {
        (LogFormat::Json, true) => builder.json().without_time().try_init(),
        (LogFormat::Json, false) => builder.json().try_init(),
        (LogFormat::Text, true) => builder.without_time().try_init(),
        (LogFormat::Text, false) => builder.try_init(),
    };
}

/// Runs the command line: `--check`, `--demo`, or the cluster.
pub fn main(mut cli: Cli) -> Result<ExitCode> {
    if cli.demo {
        prepare_demo(&mut cli)?;
    }
    let settings = settings::load(&cli).map_err(anyhow::Error::msg)?;
    if cli.action == Some(crate::cli::Action::Status) {
        let addr = settings.cluster.admin_address.context(
            "fhircluster status needs the launcher's own endpoint: give --admin-address or set \
             server.cluster.adminAddress in config.json",
        )?;
        print!(
            "{}",
            crate::ops::status_table::render(&crate::ops::status_table::fetch(addr)?)
        );
        return Ok(ExitCode::SUCCESS);
    }
    init_logging(settings.cluster.log_format);
    let cwd = std::env::current_dir().context("reading the current directory")?;
    settings::check_command(&settings, &cwd).map_err(anyhow::Error::msg)?;
    let (sizing, plan) = machine::plan_for_this_machine(&settings).map_err(anyhow::Error::msg)?;
    if cli.check {
        for w in &settings.warnings {
            println!("warning: {w}");
        }
        print!("{}", crate::plan::render_check(&plan));
        println!("configuration ok");
        return Ok(ExitCode::SUCCESS);
    }
    // One thread: a current-thread runtime, everything on this thread with no work-stealing
    // bookkeeping (measured faster than one worker of the multi-thread runtime); more: that many
    // workers.
    let threads = settings.cluster.proxy_threads.max(1) as usize;
    let runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .context("starting the runtime")?;
    runtime.block_on(run(cli, settings, sizing, plan))
}

/// `--demo`: the built-in simulated server, found beside this binary, in a temporary data
/// directory unless one is given.
fn prepare_demo(cli: &mut Cli) -> Result<()> {
    if cli.command.is_none() {
        let exe = std::env::current_exe().context("finding the fhircluster binary")?;
        let sim = exe.with_file_name("fhirsmith-sim");
        anyhow::ensure!(
            sim.exists(),
            "--demo: the simulated server {} is missing (build it with `cargo build`)",
            sim.display()
        );
        cli.command = Some(sim.display().to_string());
    }
    if cli.data_dir.is_none() && std::env::var_os("FHIRSMITH_DATA_DIR").is_none() {
        let dir: PathBuf =
            std::env::temp_dir().join(format!("fhircluster-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the demo data directory {}", dir.display()))?;
        cli.data_dir = Some(dir);
    }
    Ok(())
}

/// Tells the launcher when the master is first ready, and passes everything on to the front.
struct LauncherHooks {
    front: Arc<Front>,
    master_ready: watch::Sender<bool>,
}

impl Hooks for LauncherHooks {
    fn up(&self, id: ProcessId, pid: u32) {
        self.front.up(id, pid);
        if id.is_master() {
            self.master_ready.send_replace(true);
        }
    }

    fn down(&self, id: ProcessId) {
        self.front.down(id);
    }

    fn draining(&self, id: ProcessId) {
        self.front.draining(id);
    }

    fn in_flight(&self, id: ProcessId) -> u32 {
        self.front.in_flight(id)
    }

    fn tally(&self) -> Tally {
        self.front.tally()
    }

    fn message(&self, id: ProcessId, msg: &FromChild) {
        self.front.message(id, msg);
    }

    fn added(&self, id: ProcessId) {
        self.front.added(id);
    }

    fn retired(&self, id: ProcessId) {
        self.front.retired(id);
    }
}

/// The most workers a reload may ask for without a restart of the launcher.
const RELOAD_ROOM: u32 = 16;

/// How many workers this run makes room for: the plan's, or up to `RELOAD_ROOM` (the vCPUs if
/// more), as far as the ports after `internalPort` leave `server.port` free (DEC-21). The
/// front door's tables are made this size once, so a request never takes a lock to find its
/// process's entry; an unused entry is a few bytes and holds no socket.
fn capacity(settings: &Settings, sizing: &CpuSizing, planned: u32) -> u32 {
    let most = RELOAD_ROOM.max(sizing.vcpu).max(planned);
    (planned..=most)
        .rev()
        .find(|&w| crate::plan::check_port_range(settings, w).is_ok())
        .unwrap_or(planned)
}

async fn run(cli: Cli, settings: Settings, sizing: CpuSizing, plan: Plan) -> Result<ExitCode> {
    // Installed first: SIGHUP's default would end the launcher.
    let mut sighup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let demo = cli.demo;
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let lines =
        crate::ops::child_log::ChildLines::for_format(settings.cluster.log_format, journald);
    let output = OutputSink::start_with(lines).context("starting the output writer")?;
    for w in &settings.warnings {
        warn!("{w}");
    }
    if !plan.dropped_node_flags.is_empty() {
        warn!(
            "node flags not passed on (the launcher's own): {}",
            plan.dropped_node_flags.join(" ")
        );
    }
    info!("{}", plan.decision);
    info!("{}", plan.limits);

    let c = &settings.cluster;
    let room = capacity(&settings, &sizing, plan.workers());
    let all = crate::plan::replan(&settings, room, plan.decision.clone())
        .map(|p| p.processes)
        .unwrap_or_else(|_| plan.processes.clone());
    let tx_processes: Vec<(ProcessId, bool)> =
        plan.processes.iter().map(|p| (p.id, p.serves_tx)).collect();
    let sched = Scheduler::new(SchedulerConfig::from(c), &tx_processes);
    let routes = RouteTable::from_specs(&settings, &all);
    let slots = (c.max_outstanding + c.fast_lane_extra) as usize;
    let front = Front::new(sched, routes, all.clone(), slots, c.upstream_timeout);
    front.budget.set_limit(c.buffer_max_mb << 20);
    tokio::spawn(front.clone().run_timer());
    tokio::spawn(crate::proxy::saturation_watch::run(front.clone()));
    tokio::spawn(crate::proxy::report::run(front.clone()));

    let (ready_tx, mut ready_rx) = watch::channel(false);
    let hooks = Arc::new(LauncherHooks {
        front: front.clone(),
        master_ready: ready_tx,
    });
    let (control, control_rx) = mpsc::channel(16);
    // The launcher's own endpoints answer from the start (/readyz says why it isn't ready yet).
    if let Some(addr) = c.admin_address {
        let l = TcpListener::bind(addr)
            .await
            .with_context(|| format!("server.cluster.adminAddress {addr}: cannot listen"))?;
        info!("the launcher's own endpoints (/livez, /readyz, /status, /metrics) on http://{addr}");
        let admin = Arc::new(Admin::new(front.clone(), control.clone()));
        tokio::spawn(admin::serve(l, admin));
    }
    let notifier = Arc::new(Notifier::from_env());
    let setup = SupervisorSetup {
        processes: all,
        workers: plan.processes.len().saturating_sub(1),
        max_start_failures: c.max_start_failures,
        kill_after: c.kill_after,
        status_seconds: c.status_interval.as_secs_f64(),
        sample_seconds: settings.stats.sample.map_or(60.0, |d| d.as_secs_f64()),
        drain: c.drain,
        idle_report: machine::idle_report(&settings),
    };
    let keeper = Keeper::new(&settings, &plan.processes, Instant::now().into_std());
    let sizer = machine::sizer(&settings, sizing);
    let mut supervisor = tokio::spawn(supervisor::run(
        setup, keeper, hooks, sizer, control_rx, output,
    ));

    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;

    // Nothing listens until the master is ready (LAUNCH-6). `wait_for` also ends with an error
    // when the supervisor has given up and dropped its hooks: that is no ready, so only `Ok`
    // opens the port, and the supervisor's end is then taken by its own branch.
    loop {
        tokio::select! {
            Ok(_) = ready_rx.wait_for(|r| *r) => break,
            ended = &mut supervisor => return Ok(exit_code(ended.ok())),
            _ = sigterm.recv() => return stop_before_listening(control, supervisor).await,
            _ = sigint.recv() => return stop_before_listening(control, supervisor).await,
            _ = sighup.recv() => {
                warn!("SIGHUP while the master starts: ignored; send it again once it is ready");
            }
        }
    }
    let listener = match TcpListener::bind(("0.0.0.0", settings.port)).await {
        Ok(l) => l,
        Err(e) => {
            error!("server.port {}: cannot listen: {e}", settings.port);
            let _ = control.send(Control::Stop).await;
            let _ = supervisor.await;
            return Ok(ExitCode::from(1));
        }
    };
    info!("listening on port {} (every interface)", settings.port);
    notifier.ready(&cluster_status(&front));
    tokio::spawn(notify_loop(notifier.clone(), front.clone()));
    if demo {
        info!(
            "demo: try `curl http://127.0.0.1:{0}/r4/metadata` or \
             `curl -X POST http://127.0.0.1:{0}/r4/\\$cache-control`; Ctrl-C stops",
            settings.port
        );
    }
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let cfg = ListenerSettings {
        write_timeout: c.write_timeout,
        header_read_timeout: c.header_timeout,
        max_head: (c.header_max_kb as usize) << 10,
        drain: c.drain,
        queue: c.queue,
        owner_queue: c.owner_queue,
    };
    let live = LiveListenerSettings::new(cfg);
    let serving = tokio::spawn(listener::serve_live(
        listener,
        front.clone(),
        live.clone(),
        shutdown_rx,
    ));
    let mut reloader = Reloader {
        cli,
        cwd,
        running: settings.clone(),
        front: front.clone(),
        listener: live,
        control: control.clone(),
    };

    loop {
        tokio::select! {
            _ = sigterm.recv() => { info!("SIGTERM: stopping"); break }
            _ = sigint.recv() => { info!("SIGINT: stopping"); break }
            _ = sighup.recv() => reloader.reload().await,
            ended = &mut supervisor => {
                // Only a master that never got ready ends the supervisor by itself, and then
                // nothing listens; kept for completeness.
                let _ = shutdown_tx.send(true);
                let _ = serving.await;
                return Ok(exit_code(ended.ok()));
            }
        }
    }
    // Drain first (STOP-1..4), then the processes in order (STOP-5..9).
    notifier.stopping();
    let _ = shutdown_tx.send(true);
    let _ = serving.await;
    let _ = control.send(Control::Stop).await;
    let ended = supervisor.await.ok();
    info!("stopped");
    Ok(exit_code(ended))
}

/// `3/3 ready, 0 queued`
fn cluster_status(front: &Front) -> String {
    let total = front.present().count();
    let ready = front.present().filter(|p| front.is_ready(p.id)).count();
    notify::status_line(ready, total, front.queued())
}

/// `STATUS=` as processes come and go, and `WATCHDOG=1` pings when systemd asks for them.
async fn notify_loop(notifier: Arc<Notifier>, front: Arc<Front>) {
    if !notifier.enabled() {
        return;
    }
    let every = notifier
        .watchdog_interval()
        .map_or(Duration::from_secs(1), |w| w.min(Duration::from_secs(1)));
    let mut last = String::new();
    let mut pinged = Instant::now();
    loop {
        tokio::time::sleep(every).await;
        if front.is_stopping() {
            return;
        }
        let line = cluster_status(&front);
        if line != last {
            notifier.status(&line);
            last = line;
        }
        if let Some(w) = notifier.watchdog_interval() {
            if pinged.elapsed() >= w {
                notifier.watchdog();
                pinged = Instant::now();
            }
        }
    }
}

/// What a SIGHUP needs: the start's flags, the settings in force, and where to apply them.
struct Reloader {
    cli: Cli,
    cwd: PathBuf,
    running: Settings,
    front: Arc<Front>,
    listener: Arc<LiveListenerSettings>,
    control: mpsc::Sender<Control>,
}

impl Reloader {
    /// Reads `config.json` again; a bad one is refused with its reason and changes nothing.
    /// Otherwise the live settings are applied, the rest logged, and every process restarted in
    /// turn (the supervisor's rolling restart).
    async fn reload(&mut self) {
        info!("SIGHUP: reloading the settings");
        let new = match reload::read(&self.cli, &self.cwd) {
            Ok(s) => s,
            Err(e) => {
                error!("ERROR: SIGHUP: the settings were refused, nothing changed: {e}");
                return;
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
        cfg.queue = c.queue;
        cfg.owner_queue = c.owner_queue;
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
    }
}

async fn stop_before_listening(
    control: mpsc::Sender<Control>,
    supervisor: tokio::task::JoinHandle<Ended>,
) -> Result<ExitCode> {
    info!("stopping before the master was ready");
    let _ = control.send(Control::Stop).await;
    Ok(exit_code(supervisor.await.ok()))
}

fn exit_code(ended: Option<Ended>) -> ExitCode {
    match ended {
        Some(Ended::Stopped) => ExitCode::SUCCESS,
        Some(Ended::GaveUp) | None => ExitCode::from(1),
    }
}
