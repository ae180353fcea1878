//! The shell's clocks: the status snapshot to the master every `statusSeconds` (STATUS-5), the
//! upkeep every second (drained workers stopped if the front door's news was missed, hung
//! processes killed, the recycle decision taken) and the front
//! door's counts every minute (EVENT-14). The intervals live here so the shell's loop only
//! says which tick calls what, and a reload can move the status one alone.

use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::Shell;
use crate::clock::now_std;
use crate::deadline::Later;
use crate::ipc::message::ToChild;
use crate::process::ProcessId;
use crate::supervisor::recycle_watch::Worker;

/// How often the shell looks after draining workers and the recycle decision.
const UPKEEP: Duration = Duration::from_secs(1);
/// How often the front door's counts go to the master as one event (EVENT-14).
const MINUTE: Duration = Duration::from_secs(60);

pub(super) struct Ticks {
    status_every: Duration,
    sample_every: Duration,
    pub(super) status: Interval,
    /// The launcher's own graph samples, for processes that take none (`stats.sampleSeconds`).
    pub(super) sample: Interval,
    pub(super) upkeep: Interval,
    pub(super) minute: Interval,
}

impl Ticks {
    /// The first of each tick comes one period from now, not at once.
    pub(super) fn new(status_seconds: f64, sample_seconds: f64) -> Ticks {
        let status_every = status_period(status_seconds);
        let sample_every = status_period(sample_seconds);
        Ticks {
            status_every,
            sample_every,
            status: every(status_every),
            sample: every(sample_every),
            upkeep: every(UPKEEP),
            minute: every(MINUTE),
        }
    }

    /// A reload's `statusSeconds`: the status tick starts again only if its period changed.
    pub(super) fn set_status_seconds(&mut self, status_seconds: f64) {
        let period = status_period(status_seconds);
        if period != self.status_every {
            self.status_every = period;
            self.status = every(period);
        }
    }

    /// A reload's sample period: the sample tick starts again only if it changed.
    pub(super) fn set_sample_seconds(&mut self, sample_seconds: f64) {
        let period = status_period(sample_seconds);
        if period != self.sample_every {
            self.sample_every = period;
            self.sample = every(period);
        }
    }
}

/// A floor on `statusSeconds`, so a tiny or zero setting can't spin the loop.
fn status_period(status_seconds: f64) -> Duration {
    Duration::from_secs_f64(status_seconds.max(0.05))
}

/// A late tick is delayed rather than fired in a burst to catch up.
fn every(period: Duration) -> Interval {
    let mut t = tokio::time::interval_at(Instant::now().later(period), period);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

impl Shell {
    /// Every `statusSeconds`: the cluster snapshot to the master (STATUS-5); not held while
    /// the master is down (a newer one follows).
    pub(super) fn send_snapshot(&mut self) {
        self.close_interval();
        if !self.life.is_up(ProcessId::MASTER) {
            return;
        }
        let fronts = self.fronts();
        let status =
            self.keeping
                .keeper
                .snapshot(&self.lives(), &fronts, &self.keeping.readings, now_std());
        if let Some(master) = &self.places.children[0] {
            master.send(ToChild::Snapshot { status });
        }
    }

    /// A draining process with nothing left at work is stopped: at each upkeep, and at once
    /// when the front door says a draining process's last request has ended, so a rolling
    /// restart of processes with nothing in flight is not paced by the tick (DEC-83).
    pub(super) fn stop_drained(&mut self, now: std::time::Instant) {
        if self.life.is_stopping() {
            return;
        }
        for i in 0..self.life.slot_count() {
            let id = ProcessId(i as u16);
            if self.life.is_draining(id) && self.hooks.in_flight(id) == 0 {
                self.life.drained(id, now);
            }
        }
    }

    /// Every minute: the front door's counts as one event (EVENT-14).
    pub(super) fn minute(&mut self) {
        self.keeping.keeper.minute(self.hooks.tally());
    }

    /// Every second: a drained worker is stopped, hung processes are killed (DEC-82), and the
    /// recycle decision is taken.
    pub(super) fn upkeep(&mut self) {
        let now = now_std();
        if self.life.is_stopping() {
            return;
        }
        self.stop_drained(now);
        self.seconds_drained(now);
        self.watch_hangs(now);
        let (specs, children) = (&self.setup.processes, &self.places.children);
        let (hooks, keeper) = (&self.hooks, &self.keeping.keeper);
        let worker = |id: ProcessId| Worker {
            code: specs.get(id.index()).map_or("", |p| p.code.as_str()),
            pid: children
                .get(id.index())
                .and_then(|c| c.as_ref().map(|c| c.pid)),
            in_flight: hooks.in_flight(id),
            guard_limit: keeper.reported_limit(id),
        };
        let choice = self
            .watch
            .recycle
            .due(&self.life, &worker, &self.keeping.readings, now);
        if let Some(choice) = choice {
            self.recycle(choice.id, &choice.reason, now);
        }
    }
}
