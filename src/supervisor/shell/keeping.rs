//! What the shell tells the keeper (`status::keeper`), and how: each process's state is the
//! lifecycle's, projected at each use (`lives`), never a copy kept beside it; what an exit meant
//! is the lifecycle's decision (`Aftermath`), passed on as the keeper's `ExitFate`; the machine
//! is read through `SystemReadings`.

use tracing::{info, warn};

use super::Shell;
use crate::clock::now_std;
use crate::process::{Ending, Exit, ProcessId};
use crate::status::front::FrontFigures;
use crate::status::keeper::{ExitFate, Report};
use crate::status::snapshot::{Beside, BesideState, Life, ProcessState};
use crate::supervisor::lifecycle::{Aftermath, SecondState, Status};

impl Shell {
    /// The pid of the process's live child, if it has one.
    pub(super) fn pid(&self, id: ProcessId) -> Option<u32> {
        self.places
            .children
            .get(id.index())?
            .as_ref()
            .map(|c| c.pid)
    }

    /// Seconds since the process's current run was started (0 if it never was).
    pub(super) fn ran_for(&self, id: ProcessId) -> f64 {
        self.life.started(id).map_or(0.0, |s| {
            now_std().saturating_duration_since(s).as_secs_f64()
        })
    }

    /// Every status row's process as the lifecycle has it now, master first.
    pub(super) fn lives(&self) -> Vec<Life> {
        (0..self.keeping.keeper.rows())
            .map(|i| self.life_of(ProcessId(i as u16)))
            .collect()
    }

    /// One process's `Life`: the lifecycle's status in the status's words (STATUS-22: a
    /// replacement not ready yet is `restarting`; one drained for a recycle or leaving serves
    /// until it has exited).
    fn life_of(&self, id: ProcessId) -> Life {
        let status = self.life.status(id);
        let state = match status {
            Status::NotStarted | Status::Starting { again: false } => ProcessState::Starting,
            Status::Starting { again: true } | Status::Restarting => ProcessState::Restarting,
            Status::Ready { .. } | Status::Replacing | Status::Leaving => ProcessState::Ready,
            Status::Stopping | Status::Gone => ProcessState::Stopping,
        };
        Life {
            state,
            pid: self.pid(id),
            started_at: self.life.started(id),
            ready_at: match status {
                Status::Ready { since } => Some(since),
                _ => None,
            },
            // DEC-84: the spec's Restarts are those the launcher did not plan.
            restarts: self.life.restarts_by(id).unplanned(),
            restarts_by: self.life.restarts_by(id),
            beside: self.beside(id),
            inputs_waiting: self.inputs_waiting(id),
        }
    }

    /// The place's second process while a replacement runs beside the old one (DEC-92).
    fn beside(&self, id: ProcessId) -> Option<Beside> {
        let view = self.life.second_view(id)?;
        Some(Beside {
            state: match view.state {
                SecondState::Starting => BesideState::Starting,
                SecondState::Draining => BesideState::Draining,
                SecondState::Stopping => BesideState::Stopping,
            },
            pid: self.roll.second.get(id.index())?.as_ref().map(|c| c.pid),
            started_at: view.started,
            replacement: view.replacement,
        })
    }

    /// The place's process runs its last good inputs while the place's inputs now differ
    /// (DEC-93): a rolling restart stopped before it, or not at it yet. It ends when the
    /// place's own replacement has been ready once, or a reload brings the old inputs back.
    fn inputs_waiting(&self, id: ProcessId) -> bool {
        let good = self
            .places
            .last_good
            .get(id.index())
            .and_then(Option::as_ref);
        good.is_some_and(|g| g.inputs() != self.spec(id).inputs())
    }

    /// How process `id` that exited so ended, for the front door to judge the requests it had
    /// (DEC-73): killed by the hang watchdog (DEC-82), or whether the cgroup's OOM killer struck
    /// since the last exit, read now.
    pub(super) fn ending(&mut self, id: ProcessId, exit: Exit) -> Ending {
        let now = crate::system::oom_kills::read_oom_kills(std::path::Path::new("/"));
        let oom_kills_rose = matches!((self.keeping.oom_kills, now), (Some(a), Some(b)) if b > a);
        self.keeping.oom_kills = now.or(self.keeping.oom_kills);
        if self.life.killed_hung(id) {
            return Ending::KilledHung;
        }
        Ending::Exited {
            exit,
            oom_kills_rose,
        }
    }

    /// A process exited (or could not be started; `pid` was its pid): the lifecycle decides
    /// what it means, the log says it (a WARNING unless the launcher asked for it: a stop, a
    /// recycle, a rolling restart, a retirement), and the keeper records it.
    pub(super) fn exited(&mut self, id: ProcessId, exit: Exit, pid: Option<u32>) {
        let ran = self.ran_for(id);
        let after = self.life.exited(id, exit, now_std());
        let fate = match after {
            Aftermath::Restart { .. } => ExitFate::Restarting,
            Aftermath::Gone { asked: true } => ExitFate::Stopped,
            Aftermath::Gone { asked: false } => ExitFate::Died,
            Aftermath::NotRunning => return,
        };
        // A process that could not be started was never there: its error is logged at the
        // spawn, and the status has nothing to record.
        if exit == Exit::SpawnFailed {
            return;
        }
        let line = format!("{}: exited ({exit}) after {ran:.1} s", self.code(id));
        match after {
            Aftermath::Restart { asked: true } | Aftermath::Gone { asked: true } => info!("{line}"),
            _ => warn!("{line}"),
        }
        if id.is_master() {
            self.keeping.master_end = Some(exit.to_string());
        }
        let why = match after {
            Aftermath::Restart { .. } => self.life.last_restart_reason(id),
            _ => None,
        };
        self.keeping.keeper.exited(id, exit, pid, fate, why);
    }

    /// What the front door knows of each status row's process, master first.
    pub(super) fn fronts(&self) -> Vec<Option<FrontFigures>> {
        (0..self.keeping.keeper.rows())
            .map(|i| self.hooks.front(ProcessId(i as u16)))
            .collect()
    }

    /// The launcher's view for its own endpoints, the machine read now.
    pub(super) fn report(&self) -> Report {
        let fronts = self.fronts();
        self.keeping
            .keeper
            .report(&self.lives(), &fronts, &self.keeping.readings, now_std())
    }

    /// Every `statusSeconds`, whether the master is up or not: the interval's latencies (the
    /// front door's histograms emptied) and each process's CPU.
    pub(super) fn close_interval(&mut self) {
        let latencies: Vec<_> = (0..self.keeping.keeper.rows())
            .map(|i| self.hooks.take_latency(ProcessId(i as u16)))
            .collect();
        let lives = self.lives();
        self.keeping
            .keeper
            .close_interval(&lives, &latencies, &self.keeping.readings, now_std());
    }

    /// Every sample interval: the launcher's samples for processes that take none themselves.
    pub(super) fn front_samples(&mut self) {
        let (lives, fronts) = (self.lives(), self.fronts());
        self.keeping
            .keeper
            .front_samples(&lives, &fronts, &self.keeping.readings, now_std());
    }
}
