//! The supervisor's shell: runs the `Lifecycle` against real processes. It carries the
//! lifecycle's actions out (spawn, signal, tell the proxy), feeds it what happens to the children
//! (ready by its channel or by its listening socket, exits) and the clock, and passes the
//! workers' request counts and the keeper's events on to the master, holding them while the
//! master is down or not reading (DEC-18).
//!
//! Readiness (LAUNCH-3, DEC-27): a process that has sent anything valid on its channel is ready
//! only on its `ready`; its listening socket (`socket_watch.rs`, after a grace with the channel
//! silent) counts only for a process that never spoke.
//!
//! The lifecycle holds every process's state; the shell keeps only what is the channel's (who
//! has spoken, whether the master acknowledges, a flush awaited). The status keeper is told what
//! happened and takes each state from the lifecycle (`shell/keeping.rs`).
//!
//! Its other parts, each an `impl Shell` of its own in `shell/`: what goes to the master
//! (`to_master.rs`, with the master's mailbox in `../mailbox.rs`), the status, upkeep and minute
//! ticks (`ticks.rs`, the memory recycle's reading in `../recycle_watch.rs`), reload handling
//! (`reload.rs`), the keeper's feed (`keeping.rs`) and the give-up line (`give_up.rs`); the
//! types its callers see are in `api.rs`. Its state besides the lifecycle is in five parts
//! (`parts.rs`): the places' processes, the roll's replacements, the master's channel, the
//! keeper's feed and the watches.

use std::sync::Arc;

use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

use super::api::{Control, Ended, Hooks, Sizer, SupervisorSetup};
use super::child::{self, ChildEvent, ChildHandle, Tagged};
use super::lifecycle::{Action, Exit, Lifecycle};
use super::output::OutputSink;
use super::recycle_watch::RecycleWatch;
use crate::clock::now_std;
use crate::ipc::message::{acknowledges_events, same_major, FromChild, ToChild, PROTOCOL_VERSION};
use crate::process::{ProcessId, ProcessSpec};
use crate::status::keeper::Keeper;
use parts::{Keeping, MasterLink, Places, Roll, Watches};
use ticks::Ticks;

pub(crate) use handover::{HandedChild, ShellHandover, ShellState};

mod beside;
mod give_up;
mod handover;
mod keeping;
mod parts;
mod reload;
mod scale;
mod ticks;
mod to_master;
mod watchdog;

/// The shell's state (its other parts, in `shell/`, are child modules and see every field).
struct Shell {
    setup: SupervisorSetup,
    hooks: Arc<dyn Hooks>,
    sizer: Sizer,
    output: OutputSink,
    /// Every decision about the processes, and their state: the parts below hold what is the
    /// channels' and the children's, never a copy of the lifecycle's.
    life: Lifecycle,
    places: Places,
    roll: Roll,
    master: MasterLink,
    keeping: Keeping,
    watch: Watches,
}

/// Runs the cluster's processes until `Control::Stop` has been carried out, or the master is
/// given up, or everything is handed over (`Control::HandOver`).
pub async fn run(
    setup: SupervisorSetup,
    keeper: Keeper,
    hooks: Arc<dyn Hooks>,
    sizer: Sizer,
    control: mpsc::Receiver<Control>,
    output: OutputSink,
) -> Ended {
    let (mut shell, events) = Shell::new(setup, keeper, hooks, sizer, output);
    if let Some(master) = shell.setup.processes.first() {
        info!(
            "{}: starting the master (maxStartFailures {})",
            master.code, shell.setup.max_start_failures
        );
    }
    shell.life.start(now_std());
    shell.run(events, control).await
}

/// Takes over the processes and state an in-place upgrade handed over (`handover`), then runs
/// as [`run`] does. Nothing is started: the processes run on.
pub(crate) async fn resume(
    setup: SupervisorSetup,
    keeper: Keeper,
    hooks: Arc<dyn Hooks>,
    sizer: Sizer,
    control: mpsc::Receiver<Control>,
    output: OutputSink,
    handover: ShellHandover,
) -> Ended {
    let (mut shell, events) = Shell::new(setup, keeper, hooks, sizer, output);
    if let Err(e) = shell.resume(handover) {
        error!("the upgrade's state cannot be taken over: {e}; stopping");
        shell.life.stop(now_std());
    }
    shell.run(events, control).await
}

impl Shell {
    fn new(
        setup: SupervisorSetup,
        keeper: Keeper,
        hooks: Arc<dyn Hooks>,
        sizer: Sizer,
        output: OutputSink,
    ) -> (Shell, mpsc::UnboundedReceiver<Tagged>) {
        let n = setup.processes.len();
        let (events_tx, events) = mpsc::unbounded_channel();
        let mut life = Lifecycle::new(
            setup.workers.min(n.saturating_sub(1)),
            setup.max_start_failures,
            setup.kill_after,
        );
        life.replace_beside_first();
        let shell = Shell {
            places: Places::new(&setup, events_tx),
            roll: Roll::new(n),
            master: MasterLink::default(),
            keeping: Keeping::new(keeper),
            watch: Watches {
                hang: Default::default(),
                recycle: RecycleWatch::new(setup.settings.recycle),
            },
            setup,
            hooks,
            sizer,
            output,
            life,
        };
        (shell, events)
    }

    async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<Tagged>,
        mut control: mpsc::Receiver<Control>,
    ) -> Ended {
        let shell = &mut self;
        let mut ticks = Ticks::new(
            shell.setup.settings.status_seconds,
            shell.setup.settings.sample_seconds,
        );
        let mut control_open = true;
        let drained = shell.hooks.drained_news();
        loop {
            if let Some(ended) = shell.carry_out() {
                if let Some(failures) = shell.life.gave_up() {
                    let code = shell.code(ProcessId::MASTER).to_string();
                    let (max, end) = (
                        shell.setup.max_start_failures,
                        shell.keeping.master_end.take(),
                    );
                    give_up::log(shell.output.clone(), code, failures, max, end).await;
                }
                return ended;
            }
            // After the actions: what the lifecycle says (the master up or not) is what the
            // shell has carried out.
            shell.retry_master();
            shell.deliver_keeper();
            let deadline = shell.life.poll_timeout().map(Instant::from_std);
            tokio::select! {
                Some(ev) = events.recv() => shell.on_event(ev),
                c = control.recv(), if control_open => match c {
                    Some(Control::Stop) => shell.life.stop(now_std()),
                    Some(Control::Report(reply)) => {
                        let _ = reply.send(shell.report());
                    }
                    Some(Control::Reload(r)) => {
                        let status_seconds = r.settings.status_seconds;
                        let sample_seconds = r.settings.sample_seconds;
                        if shell.reload(r) {
                            ticks.set_status_seconds(status_seconds);
                            ticks.set_sample_seconds(sample_seconds);
                        }
                    }
                    Some(Control::Scale(s)) => shell.scale(s),
                    Some(Control::HaltRolling(why)) => shell.halt_rolling(&why),
                    Some(Control::Restart(done)) => shell.restart_all(done),
                    Some(Control::HandOver { reply, back }) => match shell.hand_over().await {
                        Ok(h) => {
                            let _ = reply.send(Ok(h));
                            let Ok(h) = back.await else {
                                return Ended::HandedOver;
                            };
                            // The execve failed (or a step before it): everything back,
                            // as it was.
                            shell.give_back(*h);
                        }
                        Err(why) => {
                            let _ = reply.send(Err(why));
                        }
                    },
                    None => control_open = false,
                },
                _ = sleep_until(deadline), if deadline.is_some() => {
                    shell.life.handle_timeout(now_std())
                }
                _ = ticks.status.tick() => shell.send_snapshot(),
                _ = notified(drained.as_deref()) => {
                    let now = now_std();
                    shell.stop_drained(now);
                    shell.seconds_drained(now);
                }
                _ = ticks.upkeep.tick() => shell.upkeep(),
                _ = ticks.minute.tick() => shell.minute(),
                _ = ticks.sample.tick() => shell.front_samples(),
            }
        }
    }
}

/// The front door's news that a draining process has nothing left at work; never without one.
async fn notified(news: Option<&tokio::sync::Notify>) {
    match news {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(d) = deadline {
        tokio::time::sleep_until(d).await;
    }
}

impl Shell {
    fn spec(&self, id: ProcessId) -> &ProcessSpec {
        &self.setup.processes[id.index()]
    }

    fn code(&self, id: ProcessId) -> &str {
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
                // The WARNING saying why was logged as it was decided (`watchdog.rs`).
                Action::KillHung(id) => self.signal(id, Signal::SIGKILL),
                Action::Kill(id) => {
                    warn!(
                        "{}: still running {} s after SIGTERM; sending SIGKILL",
                        self.code(id),
                        self.setup.kill_after.as_secs_f64()
                    );
                    self.signal(id, Signal::SIGKILL);
                }
                Action::Up(id) => {
                    self.watch.hang.started(id, now_std());
                    self.places.last_good[id.index()] =
                        self.places.started_spec[id.index()].clone();
                    let pid = self.pid(id);
                    self.hooks.up(id, pid.unwrap_or(0));
                    self.keeping.keeper.ready(id);
                    self.watch.recycle.ready(id, pid, &self.keeping.readings);
                    if id.is_master() {
                        let hello_again = self.keeping.keeper.master_ready();
                        self.master.mailbox.append(hello_again);
                        self.deliver_to_master();
                    }
                }
                Action::Down(id) => {
                    self.hooks.down(id);
                    if id.is_master() {
                        self.keeping.keeper.master_down();
                    }
                }
                Action::AllReady => {
                    let pids: Vec<u32> = self
                        .places
                        .children
                        .iter()
                        .flatten()
                        .map(|c| c.pid)
                        .collect();
                    (self.setup.idle_report)(&pids);
                }
                Action::Drain(id) => self.hooks.draining(id),
                Action::SizeWorkers => {
                    let pid = self.places.children[0].as_ref().map_or(0, |c| c.pid);
                    let n = (self.sizer)(pid);
                    self.life.set_workers(n, now_std());
                    self.keeping
                        .keeper
                        .set_workers(self.life.workers(), None, false);
                    // Fewer than planned: the rest are not in the cluster (a reload may add them).
                    for i in self.life.workers() + 1..=self.setup.workers {
                        self.hooks.retired(ProcessId(i as u16));
                    }
                    self.fit_rows();
                }
                Action::FlushMaster => self.flush_master(),
                // Logged once the run has ended (`log_give_up`), with the master's last words.
                Action::GiveUp { .. } => {}
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
                Action::RollingStep { id, step, of } => {
                    self.roll.renew[id.index()] = true;
                    info!(
                        "rolling restart {step}/{of}: {}: out of rotation, draining (up to {} s)",
                        self.code(id),
                        self.setup.settings.drain.as_secs_f64()
                    );
                }
                Action::AskRoom { id, step, of } => self.ask_room(id, step, of),
                Action::SpawnBeside(id) => self.spawn_beside(id),
                Action::Switch { id, old_runs } => self.switch(id, old_runs),
                Action::TerminateSecond(id) => {
                    info!(
                        "{}: stopping the process its replacement took over from (SIGTERM)",
                        self.code(id)
                    );
                    self.signal_second(id, Signal::SIGTERM);
                }
                Action::KillSecond(id) => {
                    warn!("{}: its second process gets SIGKILL", self.code(id));
                    self.signal_second(id, Signal::SIGKILL);
                }
                Action::RollingDone => {
                    info!("rolling restart done: every process in it was started again");
                    self.hooks.reload_finished();
                    self.rolling_ended(Ok(()));
                }
                Action::RollingAborted { id, how } => self.rolling_aborted(id, how),
                Action::RollingHalted => {
                    let why = "a reload was refused (config.json, which the servers read as they \
                               start, is not valid): the processes not reached carry on as they \
                               were; the next good reload restarts them";
                    self.keeping.keeper.rolling_stopped(Some(why.to_string()));
                    self.hooks.reload_finished();
                    self.rolling_ended(Err(format!("rolling restart stopped: {why}")));
                }
                Action::Finished => {
                    return Some(if self.life.gave_up().is_some() {
                        Ended::GaveUp
                    } else {
                        Ended::Stopped
                    });
                }
            }
        }
        None
    }

    /// Starts the place's process: a rolling restart's replacement with the place's inputs
    /// now, any other start with its last good ones (DEC-79), on the place's port.
    fn spawn(&mut self, id: ProcessId) {
        let i = id.index();
        let renew = std::mem::take(&mut self.roll.renew[i]);
        let inputs = match &self.places.last_good[i] {
            Some(good) if !renew => good.clone(),
            _ => self.spec(id).clone(),
        };
        let spec = inputs.on_port(self.places.ports.of(i));
        if self.moved_port(id).is_some() {
            self.hooks.listens_at(id, spec.connect_addr);
        }
        match self.start_child(&spec) {
            Ok(handle) => {
                info!(
                    "{}: started {} (pid {}) on {}:{}",
                    spec.code, spec.role, handle.pid, spec.bind_address, spec.port
                );
                self.keeping.keeper.started(id);
                self.places.spoke[i] = false;
                self.places.started_with[i] = Some(inputs.inputs());
                self.places.started_spec[i] = Some(inputs);
                if id.is_master() {
                    self.master.acks = false;
                    self.master.stalled = false;
                }
                self.hooks.started(id, handle.pid);
                self.places.children[i] = Some(handle);
            }
            Err(e) => {
                error!(
                    "{}: could not start {:?}: {e}",
                    spec.code,
                    spec.argv.first().map(String::as_str).unwrap_or("")
                );
                if id.is_master() {
                    self.keeping.master_end = Some(format!("{}: {e}", Exit::SpawnFailed));
                }
                self.exited(id, Exit::SpawnFailed, None);
            }
        }
    }

    /// Starts a child for `spec` with the next generation and its `hello`.
    fn start_child(&mut self, spec: &ProcessSpec) -> std::io::Result<ChildHandle> {
        self.places.generation += 1;
        let hello = ToChild::Hello {
            protocol: PROTOCOL_VERSION.to_string(),
            role: spec.role.as_str().to_string(),
            code: spec.code.clone(),
            status_seconds: self.setup.settings.status_seconds,
            sample_seconds: self.setup.settings.sample_seconds,
        };
        child::spawn(
            spec,
            self.places.generation,
            hello,
            self.places.events_tx.clone(),
            &self.output,
            self.setup.kill_after,
        )
    }

    fn signal(&self, id: ProcessId, sig: Signal) {
        if let Some(c) = &self.places.children[id.index()] {
            c.signal(sig);
        }
    }

    fn on_event(&mut self, ev: Tagged) {
        let id = ev.id;
        let current = self.places.children[id.index()]
            .as_ref()
            .is_some_and(|c| c.generation == ev.generation);
        if !current {
            self.on_second_event(ev);
            return;
        }
        let code = self.code(id).to_string();
        if let ChildEvent::Message(_) | ChildEvent::Unknown { .. } = &ev.event {
            self.spoken(id);
        }
        if let ChildEvent::Message(_) | ChildEvent::Unknown { .. } | ChildEvent::BadLine(_) =
            &ev.event
        {
            self.watch.hang.spoke(id, now_std());
        }
        match ev.event {
            ChildEvent::Message(FromChild::Hello { protocol, .. }) => {
                self.check_protocol(id, protocol.as_deref());
            }
            ChildEvent::Message(FromChild::EventsReceived { up_to }) => {
                if id.is_master() {
                    self.keeping.keeper.events_delivered(up_to);
                    self.flushed_if_confirmed();
                }
            }
            ChildEvent::Written { receipt } => {
                if id.is_master() && !self.master.acks {
                    self.keeping.keeper.events_delivered(receipt);
                }
            }
            ChildEvent::Message(FromChild::Ready {
                protocol,
                port,
                memory_limit,
                ..
            }) => {
                self.check_protocol(id, protocol.as_deref());
                self.became_ready(id, port, "said so on its channel", memory_limit);
            }
            ChildEvent::ListeningSeen => {
                let port = self.spec(id).port;
                if self.places.spoke[id.index()] {
                    // LAUNCH-3, DEC-27: it speaks the protocol, so its `ready` says when.
                    debug!("{code}: listens on port {port}; ready only on its `ready` message");
                } else {
                    self.became_ready(id, port, "its listening socket was seen", None);
                }
            }
            ChildEvent::Message(FromChild::RequestCounts(counts)) => {
                self.hooks
                    .message(id, &FromChild::RequestCounts(counts.clone()));
                if !id.is_master() {
                    self.mail_master(ToChild::WorkerCounts { code, counts });
                }
            }
            ChildEvent::Message(msg) => {
                let lives = self.lives();
                self.keeping
                    .keeper
                    .message(id, &msg, &lives, &self.keeping.readings, now_std());
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
                if id.is_master() && self.master.flushing {
                    self.master.flushing = false;
                    self.flushed_if_confirmed();
                }
            }
            ChildEvent::Exited(exit) => {
                let pid = self.pid(id);
                self.places.children[id.index()] = None;
                let ending = self.ending(id, exit);
                self.hooks.exited(id, ending);
                self.exited(id, exit, pid);
            }
        }
    }

    /// The status rows follow the processes in the cluster: the wanted ones and any still
    /// running on its way out.
    fn fit_rows(&mut self) {
        let keep = (0..self.life.slot_count())
            .rev()
            .find(|&i| i <= self.life.workers() || self.life.is_running(ProcessId(i as u16)))
            .map_or(1, |i| i + 1)
            .min(self.setup.processes.len());
        self.keeping
            .keeper
            .resize_rows(&self.setup.processes[..keep]);
    }

    /// The first of the two signs (its `ready` message, its own listening socket) makes a
    /// starting process ready; the log says which. A later sign changes nothing.
    fn became_ready(&mut self, id: ProcessId, port: u16, how: &str, memory_limit: Option<u64>) {
        let was = self.life.is_ready(id);
        self.life.ready(id, now_std());
        if memory_limit.is_some() || (!was && self.life.is_ready(id)) {
            self.keeping.keeper.guard_limit(id, memory_limit);
        }
        if was || !self.life.is_ready(id) {
            debug!("{}: {how} (not starting any more)", self.code(id));
            return;
        }
        let took = self.ran_for(id);
        info!(
            "{}: ready on port {port} after {:.1} s ({how})",
            self.code(id),
            took
        );
    }

    /// Any valid message on its channel: the process speaks the protocol, so it needs no
    /// watching for its socket (LAUNCH-3, DEC-27).
    fn spoken(&mut self, id: ProcessId) {
        if std::mem::replace(&mut self.places.spoke[id.index()], true) {
            return;
        }
        if let Some(c) = &self.places.children[id.index()] {
            c.stop_watching();
        }
    }

    /// A process's protocol version, from its `hello` or `ready`: a WARNING for another major;
    /// for the master, whether it acknowledges events.
    fn check_protocol(&mut self, id: ProcessId, protocol: Option<&str>) {
        let Some(v) = protocol else {
            return;
        };
        if !same_major(v) {
            warn!(
                "{}: speaks IPC protocol {v}, the launcher {PROTOCOL_VERSION}; carrying on",
                self.code(id)
            );
        }
        if id.is_master() {
            self.master.acks = acknowledges_events(v);
        }
    }
}
