//! The property test's model of the processes (`proptests.rs`): it plays the shell (it carries
//! out every action as the shell does: a child per `Spawn`, some spawns failing, `SizeWorkers`
//! answered at once) and keeps what the shell would know, then checks the lifecycle against it
//! after every step. Each check's message starts with the property it guards.

use std::time::{Duration, Instant};

use super::super::{Action, Aftermath, Exit, Lifecycle, Status, COUNTS_WAIT};
use super::Event;
use crate::process::ProcessId;

/// What a case starts with.
#[derive(Clone, Debug)]
pub(super) struct Setup {
    pub planned: usize,
    /// Reloads may ask for up to this many workers.
    pub room: usize,
    pub max_start_failures: u32,
    pub kill_after: Duration,
    pub drain: Duration,
    /// The shell's answers to `SizeWorkers`, in turn.
    pub sized: Vec<usize>,
    /// Whether each spawn, in turn, fails (exec fails: the shell says `SpawnFailed` at once).
    pub spawn_fails: Vec<bool>,
}

/// Why a process was drained, as the model saw the action come.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Context {
    None,
    Recycle(usize),
}

pub(super) struct Model {
    l: Lifecycle,
    setup: Setup,
    now: Instant,
    /// A child is running for the process (spawned, not exited).
    alive: Vec<bool>,
    /// SIGTERM / SIGKILL sent to the current child.
    termed: Vec<bool>,
    killed: Vec<bool>,
    /// The proxy was told `Up` and not yet `Down`.
    up: Vec<bool>,
    /// The process has had a child before (its next spawn is not its first start).
    ran_before: Vec<bool>,
    /// The current child is the process's first, and it has not been ready yet.
    first_start: Vec<bool>,
    master_ready_once: bool,
    sized: bool,
    answers: usize,
    spawns: usize,
    /// The launcher is stopping (a stop was asked for, or the master given up).
    stopping: bool,
    finished: u32,
    flushes: u32,
    all_ready: u32,
    gave_up: u32,
    last_rolling_step: Option<usize>,
    context: Context,
    trace: Vec<String>,
}

fn pid(p: usize) -> ProcessId {
    ProcessId(p as u16)
}

impl Model {
    pub(super) fn new(setup: Setup) -> Model {
        let n = setup.room + 1;
        let now = Instant::now();
        let mut l = Lifecycle::new(setup.planned, setup.max_start_failures, setup.kill_after);
        l.start(now);
        let mut m = Model {
            l,
            setup,
            now,
            alive: vec![false; n],
            termed: vec![false; n],
            killed: vec![false; n],
            up: vec![false; n],
            ran_before: vec![false; n],
            first_start: vec![false; n],
            master_ready_once: false,
            sized: false,
            answers: 0,
            spawns: 0,
            stopping: false,
            finished: 0,
            flushes: 0,
            all_ready: 0,
            gave_up: 0,
            last_rolling_step: None,
            context: Context::None,
            trace: Vec::new(),
        };
        m.trace.push(format!("{:?}", m.setup));
        if let Err(e) = m.carry_out() {
            m.trace.push(format!("at the start: {e}"));
        }
        m
    }

    /// An in-place upgrade here: the lifecycle is captured as data and a new one resumed from
    /// it (at the same instant: the monotonic clock goes on). The capture of the new one must
    /// be the same data.
    pub(super) fn hand_over(&mut self) -> Result<(), String> {
        let before = self
            .l
            .capture(self.now)
            .map_err(|e| format!("capture: {e}"))?;
        let json = serde_json::to_string(&before).map_err(|e| e.to_string())?;
        let read: super::super::LifecycleState =
            serde_json::from_str(&json).map_err(|e| format!("read back: {e}"))?;
        self.l = Lifecycle::resume(&read, self.now).map_err(|e| format!("resume: {e}"))?;
        let after = self
            .l
            .capture(self.now)
            .map_err(|e| format!("capture again: {e}"))?;
        if after != before {
            return Err(format!(
                "handover changed the state:\n{before:?}\n{after:?}"
            ));
        }
        Ok(())
    }

    /// The actions carried out so far (the trace without the events).
    pub(super) fn actions(&self) -> Vec<&str> {
        self.trace
            .iter()
            .filter(|l| l.starts_with("  "))
            .map(String::as_str)
            .collect()
    }

    /// What happened, for a failure's message.
    pub(super) fn log(&self) -> String {
        self.trace.join("\n")
    }

    pub(super) fn step(&mut self, e: &Event) -> Result<(), String> {
        self.trace.push(format!("event {e:?}"));
        if self.finished > 0 {
            return Ok(());
        }
        match *e {
            Event::Exit { p, signal } => {
                if !self.alive[p] {
                    return Ok(()); // the shell reports exits of its children only
                }
                let how = if signal {
                    Exit::Signal(9)
                } else {
                    Exit::Code(1)
                };
                self.exit(p, how)?;
            }
            Event::Ready { p } => {
                if self.alive[p] {
                    self.l.ready(pid(p), self.now);
                }
            }
            Event::Advance { millis } => self.now += Duration::from_millis(millis),
            Event::Stop => {
                self.stopping = true;
                self.l.stop(self.now);
            }
            Event::Reload { workers, rolling } => {
                let n = workers.min(self.setup.room);
                let _ = self.l.resize(n, self.setup.drain, self.now);
                self.carry_out()?;
                if rolling {
                    let _ = self.l.rolling_restart(self.setup.drain, self.now);
                }
            }
            Event::Recycle { p } => {
                let was_up = self.up[p];
                let under_way = self.l.restart_under_way();
                if self.l.recycle(pid(p), self.setup.drain, self.now) {
                    if p == 0 || !was_up || under_way || self.stopping {
                        return Err(format!(
                            "recycle rules: {p} taken (master {}, up {was_up}, another under way \
                             {under_way}, stopping {})",
                            p == 0,
                            self.stopping
                        ));
                    }
                    self.context = Context::Recycle(p);
                }
            }
            Event::Drained { p } => self.l.drained(pid(p), self.now),
            Event::Flushed => self.l.master_flushed(self.now),
        }
        self.carry_out()?;
        self.timeouts()?;
        self.check()
    }

    /// The stop, then every child exits as asked and time passes: `Finished` must come.
    pub(super) fn finish(&mut self) -> Result<(), String> {
        self.trace.push("finish: stop".into());
        if self.finished == 0 {
            self.stopping = true;
            self.l.stop(self.now);
            self.carry_out()?;
        }
        for _ in 0..20 {
            if self.finished > 0 {
                break;
            }
            for p in 0..self.alive.len() {
                if self.alive[p] && self.termed[p] {
                    self.exit(p, Exit::Code(0))?;
                }
            }
            self.now += COUNTS_WAIT + Duration::from_secs(1);
            self.timeouts()?;
            self.check()?;
        }
        if self.finished != 1 {
            return Err(format!(
                "Finished exactly once: said {} times; running {:?}",
                self.finished,
                self.running()
            ));
        }
        Ok(())
    }

    fn running(&self) -> Vec<usize> {
        (0..self.alive.len()).filter(|&p| self.alive[p]).collect()
    }

    /// The child of `p` exits: what the lifecycle says it meant must match what it then does.
    fn exit(&mut self, p: usize, how: Exit) -> Result<(), String> {
        self.alive[p] = false;
        let after = self.l.exited(pid(p), how, self.now);
        self.trace.push(format!("  exited {p} ({how}): {after:?}"));
        let acts = self.carry_out_collect()?;
        let spawned = acts.contains(&Action::Spawn(pid(p)));
        let scheduled = acts
            .iter()
            .any(|a| matches!(a, Action::RestartScheduled { id, .. } if *id == pid(p)));
        let ok = match after {
            // At once, or (one wanted again while it was leaving) in its turn.
            Aftermath::Restart { asked: true } => {
                spawned || self.l.status(pid(p)) == Status::NotStarted
            }
            Aftermath::Restart { asked: false } => scheduled,
            Aftermath::Gone { asked: false } => {
                p == 0 && acts.iter().any(|a| matches!(a, Action::GiveUp { .. }))
            }
            Aftermath::Gone { asked: true } => !spawned,
            Aftermath::NotRunning => false,
        };
        if !ok {
            return Err(format!(
                "the exit's meaning: {after:?} for {p}, yet the actions were {acts:?}"
            ));
        }
        Ok(())
    }

    /// The shell's timer: `handle_timeout` while a deadline has come, a few times at most.
    fn timeouts(&mut self) -> Result<(), String> {
        for _ in 0..8 {
            match self.l.poll_timeout() {
                Some(d) if d <= self.now => {
                    self.l.handle_timeout(self.now);
                    self.carry_out()?;
                }
                _ => return Ok(()),
            }
        }
        Err(format!(
            "no deadline left in the past: still {:?} at {:?} after 8 timeouts",
            self.l.poll_timeout(),
            self.now
        ))
    }

    fn carry_out(&mut self) -> Result<(), String> {
        self.carry_out_collect().map(|_| ())
    }

    /// Carries out every action as the shell does, checking each as it comes.
    fn carry_out_collect(&mut self) -> Result<Vec<Action>, String> {
        let mut done = Vec::new();
        while let Some(a) = self.l.poll_action() {
            self.trace.push(format!("  {a:?}"));
            done.push(a.clone());
            if self.finished > 0 {
                return Err(format!("Finished exactly once: {a:?} after Finished"));
            }
            self.act(a)?;
        }
        self.context = Context::None;
        Ok(done)
    }

    fn act(&mut self, a: Action) -> Result<(), String> {
        let workers_alive = (1..self.alive.len()).any(|q| self.alive[q]);
        match a {
            Action::Spawn(id) => self.spawn(id.index())?,
            Action::Terminate(id) => {
                let p = id.index();
                if !self.alive[p] || self.termed[p] {
                    return Err(format!(
                        "SIGTERM to {p}: alive {}, already {}",
                        self.alive[p], self.termed[p]
                    ));
                }
                if p == 0 && self.stopping && workers_alive {
                    return Err(format!(
                        "the master stops last: SIGTERM to it with {:?} running",
                        self.running()
                    ));
                }
                self.termed[p] = true;
            }
            Action::Kill(id) => {
                let p = id.index();
                if !self.alive[p] || !self.termed[p] || self.killed[p] {
                    return Err(format!("SIGKILL to {p}: only after SIGTERM, once"));
                }
                self.killed[p] = true;
            }
            Action::KillHung(id) => {
                let p = id.index();
                if !self.alive[p] || self.killed[p] {
                    return Err(format!("SIGKILL to hung {p}: only a live one, once"));
                }
                self.killed[p] = true;
            }
            Action::Up(id) => {
                let p = id.index();
                if !self.alive[p] || self.up[p] {
                    return Err(format!(
                        "Up and Down in pairs: Up({p}) with alive {} up {}",
                        self.alive[p], self.up[p]
                    ));
                }
                self.up[p] = true;
                self.first_start[p] = false;
                if p == 0 {
                    self.master_ready_once = true;
                }
            }
            Action::Down(id) => {
                let p = id.index();
                if !self.up[p] {
                    return Err(format!("Up and Down in pairs: Down({p}) without Up"));
                }
                self.up[p] = false;
            }
            Action::Drain(id) => {
                let p = id.index();
                if !self.up[p] {
                    return Err(format!("Drain({p}) of a process not routed to"));
                }
                let for_restart =
                    self.last_rolling_step == Some(p) || self.context == Context::Recycle(p);
                self.last_rolling_step = None;
                // Taken out of rotation for a restart only while no other process is out for
                // one (a worker a lower count retires is leaving, not out for a restart).
                let others: Vec<usize> = (0..self.l.slot_count())
                    .filter(|&q| q != p && self.l.status(pid(q)) == Status::Replacing)
                    .collect();
                if for_restart && !self.stopping && !others.is_empty() {
                    return Err(format!(
                        "at most one process draining for a recycle or a rolling restart: \
                         Drain({p}) with {others:?} out for one"
                    ));
                }
            }
            Action::SizeWorkers => {
                if self.sized || !self.master_ready_once {
                    return Err("SizeWorkers once, after the master is ready".into());
                }
                self.sized = true;
                let n = self.setup.sized[self.answers % self.setup.sized.len()];
                self.answers += 1;
                self.l.set_workers(n, self.now);
            }
            Action::FlushMaster => {
                self.flushes += 1;
                if !self.stopping || workers_alive || self.flushes > 1 {
                    return Err(format!(
                        "the master stops last: FlushMaster #{} with {:?} running",
                        self.flushes,
                        self.running()
                    ));
                }
            }
            Action::GiveUp { .. } => {
                self.gave_up += 1;
                self.stopping = true;
                if self.gave_up > 1 || self.master_ready_once {
                    return Err("GiveUp once, for a master never ready".into());
                }
            }
            Action::RestartScheduled { id, .. } => {
                if self.alive[id.index()] || self.stopping {
                    return Err(format!(
                        "a restart scheduled for {} while running or stopping",
                        id.index()
                    ));
                }
            }
            Action::Finished => {
                self.finished += 1;
                let up: Vec<usize> = (0..self.up.len()).filter(|&q| self.up[q]).collect();
                if !up.is_empty() {
                    return Err(format!(
                        "Up and Down in pairs: Finished with {up:?} still up"
                    ));
                }
                if !self.stopping || !self.running().is_empty() {
                    return Err(format!(
                        "Finished only once stopped and with nothing running: stopping {}, running {:?}",
                        self.stopping,
                        self.running()
                    ));
                }
            }
            Action::Retired(id) => {
                let p = id.index();
                if self.alive[p] || p == 0 || p <= self.l.workers() {
                    return Err(format!(
                        "Retired({p}): running, the master, or still wanted"
                    ));
                }
            }
            Action::RollingStep { id, .. } => self.last_rolling_step = Some(id.index()),
            Action::RollingDone | Action::RollingHalted | Action::RollingAborted { .. } => {}
            // The model runs with replacements in place (`replace_beside_first` not called).
            Action::AskRoom { .. }
            | Action::SpawnBeside(_)
            | Action::Switch { .. }
            | Action::TerminateSecond(_)
            | Action::KillSecond(_) => {
                return Err(format!("{a:?} without replace_beside_first"));
            }
            Action::AllReady => {
                self.all_ready += 1;
                let all_up = (0..=self.l.workers()).all(|q| self.up[q]);
                if self.all_ready > 1 || !all_up {
                    return Err(format!(
                        "AllReady once, with every wanted process up: #{}, up {:?}",
                        self.all_ready, self.up
                    ));
                }
            }
        }
        Ok(())
    }

    fn spawn(&mut self, p: usize) -> Result<(), String> {
        if p >= self.alive.len() || self.alive[p] {
            return Err(format!(
                "every spawn answered by an exit: Spawn({p}) while its child runs"
            ));
        }
        if self.stopping {
            return Err(format!(
                "nothing starts once the stop has begun: Spawn({p})"
            ));
        }
        let first = !self.ran_before[p];
        if p > 0 {
            if !self.master_ready_once || !self.sized {
                return Err(format!(
                    "workers start after the master is ready: Spawn({p})"
                ));
            }
            // A first start that was stopped (SIGTERM) is not starting any more.
            let other_first = (1..self.alive.len())
                .find(|&q| self.alive[q] && self.first_start[q] && !self.termed[q]);
            if let (true, Some(q)) = (first, other_first) {
                return Err(format!(
                    "workers start one at a time: Spawn({p}) while {q} starts"
                ));
            }
        }
        self.alive[p] = true;
        self.termed[p] = false;
        self.killed[p] = false;
        self.first_start[p] = first;
        self.ran_before[p] = true;
        let fails = self
            .setup
            .spawn_fails
            .get(self.spawns)
            .copied()
            .unwrap_or(false);
        self.spawns += 1;
        if fails {
            self.trace.push(format!("  spawn of {p} fails"));
            self.alive[p] = false;
            self.first_start[p] = false;
            let _ = self.l.exited(pid(p), Exit::SpawnFailed, self.now);
        }
        Ok(())
    }

    /// After every step.
    fn check(&self) -> Result<(), String> {
        for p in 0..self.l.slot_count() {
            let id = pid(p);
            if self.l.is_running(id) != self.alive[p] {
                return Err(format!(
                    "every spawn answered by an exit or still running: {p} running for the \
                     lifecycle {}, for the shell {}",
                    self.l.is_running(id),
                    self.alive[p]
                ));
            }
            if self.l.is_up(id) != self.up[p] {
                return Err(format!(
                    "Up and Down in pairs: {p} up {} vs {}",
                    self.l.is_up(id),
                    self.up[p]
                ));
            }
        }
        if self.finished > 1 {
            return Err("Finished exactly once".into());
        }
        if let Some(d) = self.l.poll_timeout() {
            if d < self.now {
                return Err(format!(
                    "no deadline left in the past: {d:?} < {:?}",
                    self.now
                ));
            }
        }
        Ok(())
    }
}
