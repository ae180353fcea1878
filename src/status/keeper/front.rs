//! What the launcher measures of each process itself, for every process, channel or not: at
//! each status interval its latency at the front door (median, p99) and its CPU from
//! `/proc/<pid>/stat`; at each sample interval, for a process that takes no graph samples of its
//! own (no IPC channel), a sample from the front door (its answers and the launcher's refusals
//! in the interval, its `RssAnon`, what is in flight on it), so the 24 h graphs have a line for
//! every process. A process that samples itself keeps its own points: the launcher adds none.

use std::time::Instant;

use super::Keeper;
use crate::ipc::message::Sample;
use crate::process::ProcessId;
use crate::status::front::{cpu_percent, Cpu, FrontFigures, Latency};
use crate::status::history::memory_total;
use crate::status::readings::Readings;
use crate::status::snapshot::{CgroupLimit, Life, ProcessState};

/// What the launcher measured of one process over the last interval.
#[derive(Clone, Debug, Default)]
pub(super) struct IntervalFigures {
    /// Its latency at the front door over the last status interval.
    pub(super) latency: Option<Latency>,
    /// Its CPU seconds, and its share of a core over the last status interval.
    pub(super) cpu: Option<Cpu>,
    /// The last CPU reading: of which pid, how many seconds, when.
    cpu_last: Option<(u32, f64, Instant)>,
    /// It has sent a graph sample of its own since it started.
    pub(super) own_samples: bool,
    /// The front door's answers and refusals for it at the last sample interval.
    sampled: Option<(u64, u64)>,
}

impl IntervalFigures {
    /// The CPU of `pid` read now, with its share over the last status interval when that was
    /// measured of the same process.
    pub(super) fn cpu_now(&self, pid: u32, readings: &dyn Readings) -> Option<Cpu> {
        let seconds = readings.cpu_seconds(pid)?;
        let percent = match self.cpu_last {
            Some((was, _, _)) if was == pid => self.cpu.and_then(|c| c.percent),
            _ => None,
        };
        Some(Cpu { seconds, percent })
    }

    /// A new process in the slot: nothing measured of the last one stands for it. (The front
    /// door's counts go on: they are the slot's.)
    pub(super) fn started(&mut self) {
        self.latency = None;
        self.cpu = None;
        self.cpu_last = None;
        self.own_samples = false;
    }
}

impl Keeper {
    /// Every `statusSeconds`: each process's latency over the interval (`latencies`, one per
    /// row, the front door's histograms emptied) and its CPU read now.
    pub fn close_interval(
        &mut self,
        lives: &[Life],
        latencies: &[Option<Latency>],
        readings: &dyn Readings,
        now: Instant,
    ) {
        for (i, row) in self.rows.iter_mut().enumerate() {
            let f = &mut row.interval;
            let life = lives.get(i).copied().unwrap_or(Life::NOT_STARTED);
            f.latency = latencies.get(i).copied().flatten();
            let reading = life
                .running_pid()
                .and_then(|pid| Some((pid, readings.cpu_seconds(pid)?)));
            let Some((pid, seconds)) = reading else {
                f.cpu = None;
                f.cpu_last = None;
                continue;
            };
            let percent = match f.cpu_last {
                Some((was, before, at)) if was == pid => cpu_percent(
                    before,
                    seconds,
                    now.saturating_duration_since(at).as_secs_f64(),
                ),
                _ => None,
            };
            f.cpu = Some(Cpu { seconds, percent });
            f.cpu_last = Some((pid, seconds, now));
        }
    }

    /// Every sample interval: a graph sample from the front door for each ready process that
    /// has sampled nothing itself since it started and has been ready a whole interval (one
    /// with a channel has sent its first by then). The first interval only sets the baseline.
    pub fn front_samples(
        &mut self,
        lives: &[Life],
        fronts: &[Option<FrontFigures>],
        readings: &dyn Readings,
        now: Instant,
    ) {
        let ms = crate::clock::unix_ms();
        let interval = std::time::Duration::from_millis(self.history.interval_ms());
        let mut master_sampled = false;
        for i in 0..self.rows.len() {
            let (Some(life), Some(Some(front))) = (lives.get(i), fronts.get(i)) else {
                continue;
            };
            let row = &mut self.rows[i];
            let now_counts = (front.requests(), front.refused);
            let before = row.interval.sampled.replace(now_counts);
            let whole_interval = life
                .ready_at
                .is_some_and(|at| now.saturating_duration_since(at) >= interval);
            let Some(before) = before else { continue };
            if life.state != ProcessState::Ready || row.interval.own_samples || !whole_interval {
                continue;
            }
            let sample = Sample {
                at: ms,
                requests: now_counts.0.saturating_sub(before.0),
                client_caches: None,
                client_concepts: None,
                refusals: now_counts.1.saturating_sub(before.1),
                heap_used: None,
                turnaround_ms: None,
            };
            let rss = life
                .running_pid()
                .and_then(|pid| readings.process(pid).ok())
                .map(|m| m.rss_anon);
            let (code, role) = (row.code.clone(), row.role.as_str());
            let u = self.history.record_front_sample(
                &code,
                role,
                &sample,
                rss,
                Some(front.in_flight),
                ms,
            );
            self.queue_update(u);
            master_sampled |= i == ProcessId::MASTER.index();
        }
        // The memory Total goes with the master's sample (GRAPH-9); without its own, with this.
        if master_sampled {
            let own = match readings.cgroup() {
                Ok(c) if matches!(c.limit, CgroupLimit::Own(_)) => Some(c.anon),
                _ => None,
            };
            let every: Vec<Option<u64>> = lives
                .iter()
                .map(|l| {
                    l.running_pid()
                        .and_then(|pid| readings.process(pid).ok())
                        .map(|m| m.rss_anon)
                })
                .collect();
            let u = self
                .history
                .record_memory_total(ms, memory_total(own, &every), ms);
            self.queue_update(u);
        }
    }
}
