//! The supervisor's shell: runs the `Lifecycle` against real processes. It carries the
//! lifecycle's actions out (spawn, signal, tell the proxy), feeds it what happens to the children
//! (ready by its channel or by its listening socket, exits) and the clock, and passes the
//! workers' request counts on to the master, holding them while the master is down (DEC-18).
//!
//! Its other parts, each an `impl Shell` of its own: the master's mailbox (`mailbox.rs`), the
//! status, upkeep and minute ticks (`ticks.rs`) and reload handling (`reload_shell.rs`); the
//! types its callers see are in `api.rs`.

use std::sync::Arc;

use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

use super::api::{Control, Ended, Hooks, Sizer, SupervisorSetup};
use super::child::{self, describe_exit, ChildEvent, ChildHandle, Tagged};
use super::lifecycle::{Action, Exit, Lifecycle};
use super::mailbox::MasterMailbox;
use super::output::OutputSink;
use super::ticks::Ticks;
use crate::ipc::message::{same_major, FromChild, ToChild, PROTOCOL_VERSION};
use crate::process::{ProcessId, ProcessSpec};
use crate::status::keeper::Keeper;

/// The shell's state; the fields its other parts (`ticks.rs`, `reload_shell.rs`) use are
/// `pub(super)`.
pub(super) struct Shell {
    pub(super) setup: SupervisorSetup,
    pub(super) hooks: Arc<dyn Hooks>,
    pub(super) sizer: Sizer,
    output: OutputSink,
    pub(super) life: Lifecycle,
    pub(super) children: Vec<Option<ChildHandle>>,
    started: Vec<Option<Instant>>,
    generation: u64,
    events_tx: mpsc::UnboundedSender<Tagged>,
    master_mailbox: MasterMailbox,
    pub(super) master_up: bool,
    flushing: bool,
    pub(super) keeper: Keeper,
    /// The worker being recycled, until its replacement is ready (one at a time, DEC-6).
    pub(super) recycling: Option<ProcessId>,
    idle_reported: bool,
}

/// Runs the cluster's processes until `Control::Stop` has been carried out, or the master is
/// given up. Call from a runtime worker thread (see `child::spawn`).
pub async fn run(
    setup: SupervisorSetup,
    keeper: Keeper,
    hooks: Arc<dyn Hooks>,
    sizer: Sizer,
    mut control: mpsc::Receiver<Control>,
    output: OutputSink,
) -> Ended {
    let n = setup.processes.len();
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let life = Lifecycle::new(
        setup.workers.min(n.saturating_sub(1)),
        setup.max_start_failures,
        setup.kill_after,
    );
    let mut shell = Shell {
        setup,
        hooks,
        sizer,
        output,
        life,
        children: (0..n).map(|_| None).collect(),
        started: vec![None; n],
        generation: 0,
        events_tx,
        master_mailbox: MasterMailbox::default(),
        master_up: false,
        flushing: false,
        keeper,
        recycling: None,
        idle_reported: false,
    };
    let mut ticks = Ticks::new(shell.setup.status_seconds);
    if let Some(master) = shell.setup.processes.first() {
        info!(
            "{}: starting the master (maxStartFailures {})",
            master.code, shell.setup.max_start_failures
        );
    }
    shell.life.start(now_std());
    let mut control_open = true;
    loop {
        if let Some(ended) = shell.carry_out() {
            return ended;
        }
        let deadline = shell.life.poll_timeout().map(Instant::from_std);
        tokio::select! {
            Some(ev) = events.recv() => shell.on_event(ev),
            c = control.recv(), if control_open => match c {
                Some(Control::Stop) => shell.life.stop(now_std()),
                Some(Control::Report(reply)) => {
                    let _ = reply.send(shell.keeper.report(now_std()));
                }
                Some(Control::Reload(r)) => {
                    let status_seconds = r.status_seconds;
                    if shell.reload(r) {
                        ticks.set_status_seconds(status_seconds);
                    }
                }
                None => control_open = false,
            },
            _ = sleep_until(deadline), if deadline.is_some() => shell.life.handle_timeout(now_std()),
            _ = ticks.status.tick() => shell.send_snapshot(),
            _ = ticks.upkeep.tick() => shell.upkeep(),
            _ = ticks.minute.tick() => shell.minute(),
        }
        shell.deliver_keeper();
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(d) = deadline {
        tokio::time::sleep_until(d).await;
    }
}

/// The shell's one clock read, as a `std` instant for the pure core (tokio's clock, so tests on a
/// paused runtime see simulated time).
pub(super) fn now_std() -> std::time::Instant {
    Instant::now().into_std()
}

impl Shell {
    fn spec(&self, id: ProcessId) -> &ProcessSpec {
        &self.setup.processes[id.index()]
    }

    pub(super) fn code(&self, id: ProcessId) -> &str {
        &self.setup.processes[id.index()].code
    }

    /// Carries out every pending action; `Some` when the supervisor is done.
    fn carry_out(&mut self) -> Option<Ended> {
        while let Some(action) = self.life.poll_action() {
            match action {
                Action::Spawn(id) => self.spawn(id),
                Action::Terminate(id) => {
                    info!("{}: stopping (SIGTERM)", self.code(id));
                    self.signal(id, Signal::SIGTERM);
                }
                Action::Kill(id) => {
                    warn!(
                        "{}: still running {} s after SIGTERM; sending SIGKILL",
                        self.code(id),
                        self.setup.kill_after.as_secs_f64()
                    );
                    self.signal(id, Signal::SIGKILL);
                }
                Action::Up(id) => {
                    let pid = self.children[id.index()].as_ref().map_or(0, |c| c.pid);
                    self.hooks.up(id, pid);
                    if self.recycling == Some(id) {
                        self.recycling = None;
                    }
                    if id.is_master() {
                        self.master_up = true;
                        let hello_again = self.keeper.master_ready();
                        self.master_mailbox.append(hello_again);
                        self.deliver_to_master();
                    }
                    self.report_idle_once();
                }
                Action::Down(id) => {
                    self.hooks.down(id);
                    if id.is_master() {
                        self.master_up = false;
                        self.keeper.master_down();
                    }
                }
                Action::Drain(id) => self.hooks.draining(id),
                Action::SizeWorkers => {
                    let pid = self.children[0].as_ref().map_or(0, |c| c.pid);
                    let n = (self.sizer)(pid);
                    self.life.set_workers(n, now_std());
                    // Fewer than planned: the rest are not in the cluster (a reload may add them).
                    for i in self.life.workers() + 1..=self.setup.workers {
                        self.hooks.retired(ProcessId(i as u16));
                    }
                    self.fit_rows();
                }
                Action::FlushMaster => self.flush_master(),
                Action::GiveUp { failures } => {
                    error!(
                        "ERROR: the master exited {failures} times in a row without getting ready \
                         (server.cluster.maxStartFailures {}); giving up",
                        self.setup.max_start_failures
                    );
                }
                Action::RestartScheduled { id, after, failing } => {
                    let why = if failing {
                        "failing"
                    } else {
                        "after a stable run"
                    };
                    info!(
                        "{}: starting again in {} s ({why})",
                        self.code(id),
                        after.as_secs_f64()
                    );
                }
                Action::Retired(id) => {
                    info!(
                        "{}: stopped for good (the worker count is lower)",
                        self.code(id)
                    );
                    self.hooks.retired(id);
                    self.fit_rows();
                }
                Action::RollingStep { id, step, of } => info!(
                    "rolling restart {step}/{of}: {}: out of rotation, draining (up to {} s)",
                    self.code(id),
                    self.setup.drain.as_secs_f64()
                ),
                Action::RollingDone => {
                    info!("rolling restart done: every process was started again");
                    self.hooks.reload_finished();
                }
                Action::RollingAborted(id) => {
                    warn!(
                        "WARNING: rolling restart stopped: {} exited before it was ready again; \
                         the processes after it carry on as they were",
                        self.code(id)
                    );
                    self.hooks.reload_finished();
                }
                Action::Finished => {
                    return Some(if self.life.gave_up() {
                        Ended::GaveUp
                    } else {
                        Ended::Stopped
                    });
                }
            }
        }
        None
    }

    fn spawn(&mut self, id: ProcessId) {
        self.generation += 1;
        let spec = self.spec(id).clone();
        let hello = ToChild::Hello {
            protocol: PROTOCOL_VERSION.to_string(),
            role: spec.role.as_str().to_string(),
            code: spec.code.clone(),
            status_seconds: self.setup.status_seconds,
            sample_seconds: self.setup.sample_seconds,
        };
        match child::spawn(
            &spec,
            self.generation,
            hello,
            self.events_tx.clone(),
            &self.output,
        ) {
            Ok(handle) => {
                info!(
                    "{}: started {} (pid {}) on {}:{}",
                    spec.code, spec.role, handle.pid, spec.bind_address, spec.port
                );
                self.keeper.spawned(id, handle.pid, now_std());
                self.hooks.started(id, handle.pid);
                self.children[id.index()] = Some(handle);
                self.started[id.index()] = Some(Instant::now());
            }
            Err(e) => {
                error!(
                    "{}: could not start {:?}: {e}",
                    spec.code,
                    spec.argv.first().map(String::as_str).unwrap_or("")
                );
                self.life.exited(id, Exit::SpawnFailed, now_std());
            }
        }
    }

    fn signal(&self, id: ProcessId, sig: Signal) {
        if let Some(c) = &self.children[id.index()] {
            c.signal(sig);
        }
    }

    fn on_event(&mut self, ev: Tagged) {
        let id = ev.id;
        let current = self.children[id.index()]
            .as_ref()
            .is_some_and(|c| c.generation == ev.generation);
        if !current {
            return;
        }
        let code = self.code(id).to_string();
        match ev.event {
            ChildEvent::Message(FromChild::Ready {
                protocol,
                port,
                memory_limit,
                ..
            }) => {
                if let Some(v) = &protocol {
                    if !same_major(v) {
                        warn!(
                            "{code}: speaks IPC protocol {v}, the launcher {PROTOCOL_VERSION}; \
                             carrying on"
                        );
                    }
                }
                if let Some(c) = &self.children[id.index()] {
                    c.stop_watching();
                }
                self.became_ready(id, port, "said so on its channel", memory_limit);
            }
            ChildEvent::ListeningSeen { .. } => {
                let port = self.spec(id).port;
                self.became_ready(id, port, "its listening socket was seen", None);
            }
            ChildEvent::Message(FromChild::RequestCounts(counts)) => {
                self.hooks
                    .message(id, &FromChild::RequestCounts(counts.clone()));
                if !id.is_master() {
                    self.mail_master(ToChild::WorkerCounts { code, counts });
                }
            }
            ChildEvent::Message(msg) => {
                self.keeper.message(id, &msg, now_std());
                self.hooks.message(id, &msg);
            }
            ChildEvent::Unknown {
                type_name,
                first_time,
            } => {
                if first_time {
                    info!("{code}: ignoring IPC messages of unknown type {type_name:?}");
                }
            }
            ChildEvent::BadLine(e) => warn!("{code}: skipped a bad IPC line: {e}"),
            // The channel is optional: a closed one is not an exit; the exit event says that.
            ChildEvent::ChannelClosed => debug!("{code}: closed its IPC channel"),
            ChildEvent::Flushed => {
                if id.is_master() && self.flushing {
                    self.flushing = false;
                    self.life.master_flushed(now_std());
                }
            }
            ChildEvent::Exited(exit) => {
                let ran = self.started[id.index()].map(|s| s.elapsed().as_secs_f64());
                let stopping = self.life.is_stopping();
                let line = format!(
                    "{code}: exited ({}) after {:.1} s",
                    describe_exit(exit),
                    ran.unwrap_or(0.0)
                );
                // A recycle's, a rolling restart's or a retired worker's exit was asked for.
                if stopping
                    || self.life.is_draining(id)
                    || self.life.is_recycling(id)
                    || self.life.is_leaving(id)
                {
                    info!("{line}");
                } else {
                    warn!("{line}");
                }
                self.children[id.index()] = None;
                self.hooks.exited(id);
                self.keeper.exited(id, exit, stopping);
                self.life.exited(id, exit, now_std());
            }
        }
    }

    /// The status rows follow the processes in the cluster: the wanted ones and any still
    /// running on its way out.
    pub(super) fn fit_rows(&mut self) {
        let keep = (0..self.life.slot_count())
            .rev()
            .find(|&i| i <= self.life.workers() || self.life.is_running(ProcessId(i as u16)))
            .map_or(1, |i| i + 1)
            .min(self.setup.processes.len());
        self.keeper.resize_rows(&self.setup.processes[..keep]);
    }

    /// Passes what the keeper has for the master (history changes, events) while it is up.
    fn deliver_keeper(&mut self) {
        // The master's exit is seen a step before its `Down`: with no master to write to, the
        // events stay in the outbox (taken out, they would count as delivered and be lost with
        // the launcher).
        if !self.master_up || self.children[0].is_none() {
            return;
        }
        let out = self.keeper.for_master();
        if out.is_empty() {
            return;
        }
        self.master_mailbox.append(out);
        self.deliver_to_master();
    }

    /// Once every wanted worker is ready the first time: what they all use idle.
    fn report_idle_once(&mut self) {
        if self.idle_reported {
            return;
        }
        let all = (0..=self.life.workers()).all(|i| self.life.is_ready(ProcessId(i as u16)));
        if all {
            self.idle_reported = true;
            let pids: Vec<u32> = self.children.iter().flatten().map(|c| c.pid).collect();
            (self.setup.idle_report)(&pids);
        }
    }

    /// The first of the two signs (its `ready` message, its own listening socket) makes a
    /// starting process ready; the log says which. A later sign changes nothing.
    fn became_ready(&mut self, id: ProcessId, port: u16, how: &str, memory_limit: Option<u64>) {
        let was = self.life.is_ready(id);
        self.life.ready(id, now_std());
        if was || !self.life.is_ready(id) {
            debug!("{}: {how} (not starting any more)", self.code(id));
            if memory_limit.is_some() {
                self.keeper.guard_limit(id, memory_limit);
            }
            return;
        }
        self.keeper.ready(id, memory_limit, now_std());
        let took = self.started[id.index()].map(|s| s.elapsed().as_secs_f64());
        info!(
            "{}: ready on port {port} after {:.1} s ({how})",
            self.code(id),
            took.unwrap_or(0.0)
        );
    }

    /// Passes a message to the master, or holds it while the master is down.
    fn mail_master(&mut self, msg: ToChild) {
        self.master_mailbox.post(msg);
        if self.master_up {
            self.deliver_to_master();
        }
    }

    pub(super) fn deliver_to_master(&mut self) {
        let Some(master) = &self.children[0] else {
            return;
        };
        for msg in self.master_mailbox.take_all() {
            if !master.send(msg) {
                warn!("the master's IPC queue is full; a message to it was dropped");
            }
        }
    }

    fn flush_master(&mut self) {
        // The last minute's counts go with the workers' last request counts.
        self.keeper.minute(self.hooks.tally());
        self.deliver_keeper();
        self.deliver_to_master();
        match &self.children[0] {
            Some(master) if self.master_up && master.flush() => self.flushing = true,
            _ => self.life.master_flushed(now_std()),
        }
    }
}
