//! The memory recycle, the shell's side (RECYCLE-1, 6..12): every upkeep tick it reads what the
//! memory guard measures (the cgroup's private memory, each worker's `RssAnon`), asks the pure
//! decision (`recycle.rs`) which worker, if any, to recycle, and logs its WARNINGs. Between ticks
//! it keeps the decision's clocks and each worker's `RssAnon` when it became ready (what its
//! growth is measured from). One recycle at a time is the lifecycle's rule: it says when one is
//! under way.

use std::time::Instant;

use tracing::warn;

use super::lifecycle::Lifecycle;
use super::recycle::{decide, Measure, RecycleChoice, RecycleClocks, RecyclePolicy, WorkerView};
use crate::process::ProcessId;
use crate::status::readings::Readings;
use crate::status::snapshot::{CgroupLimit, CgroupReading};

pub(crate) struct RecycleWatch {
    policy: RecyclePolicy,
    clocks: RecycleClocks,
    /// Each process's `RssAnon` when it last became ready (index = `ProcessId`).
    rss_at_ready: Vec<Option<u64>>,
}

/// What the decision needs of each process besides its memory: its code, pid, requests at work
/// and the limit its guard reported.
pub(crate) struct Worker<'a> {
    pub code: &'a str,
    pub pid: Option<u32>,
    pub in_flight: u32,
    pub guard_limit: Option<u64>,
}

impl RecycleWatch {
    pub(crate) fn new(policy: RecyclePolicy) -> RecycleWatch {
        RecycleWatch {
            policy,
            clocks: RecycleClocks::default(),
            rss_at_ready: Vec::new(),
        }
    }

    /// The recycle policy in force after a reload (`recycleSeconds`, `rejectFraction`).
    pub(crate) fn set_policy(&mut self, policy: RecyclePolicy) {
        self.policy = policy;
    }

    /// A process became ready: its memory now is what its growth is measured from, and its
    /// clock and warning start afresh.
    pub(crate) fn ready(&mut self, id: ProcessId, pid: Option<u32>, readings: &dyn Readings) {
        let rss = pid
            .and_then(|pid| readings.process(pid).ok())
            .map(|m| m.rss_anon);
        if self.rss_at_ready.len() <= id.index() {
            self.rss_at_ready.resize(id.index() + 1, None);
        }
        self.rss_at_ready[id.index()] = rss;
        self.clocks.forget(id);
    }

    /// The worker to recycle now, if any; the decision's WARNINGs are logged here. `workers`
    /// gives every process the lifecycle has (index = `ProcessId`).
    pub(crate) fn due<'w>(
        &mut self,
        life: &Lifecycle,
        workers: &dyn Fn(ProcessId) -> Worker<'w>,
        readings: &dyn Readings,
        now: Instant,
    ) -> Option<RecycleChoice> {
        if self.policy.recycle_after.is_zero() {
            return None;
        }
        let measure = match readings.cgroup() {
            Ok(CgroupReading {
                anon,
                limit: CgroupLimit::Own(limit),
                ..
            }) => Measure::Cgroup { anon, limit },
            _ => Measure::PerProcess,
        };
        let views: Vec<WorkerView> = (0..life.slot_count())
            .map(|i| {
                let id = ProcessId(i as u16);
                let w = workers(id);
                WorkerView {
                    id,
                    code: w.code.to_string(),
                    rss_anon: w
                        .pid
                        .and_then(|pid| readings.process(pid).ok())
                        .map(|m| m.rss_anon),
                    rss_anon_at_ready: self.rss_at_ready.get(i).copied().flatten(),
                    in_flight: w.in_flight,
                    ready: life.is_ready(id),
                    guard_limit: w.guard_limit,
                }
            })
            .collect();
        let d = decide(
            &self.policy,
            measure,
            &views,
            life.restart_under_way(),
            &self.clocks,
            now,
        );
        for (_, line) in &d.warn {
            warn!("{line}");
        }
        self.clocks = d.clocks;
        d.recycle
    }
}
