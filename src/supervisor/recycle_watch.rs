//! The memory recycle, the shell's side (RECYCLE-1, 6..12): every upkeep tick it reads what the
//! memory guard measures (the cgroup's private memory, each worker's `RssAnon`), asks the pure
//! decision (`recycle.rs`) which worker, if any, to recycle, and logs its WARNINGs. Between ticks
//! it keeps the decision's clocks and each worker's `RssAnon` when it became ready (what its
//! growth is measured from). One recycle at a time is the lifecycle's rule: it says when one is
//! under way.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use tracing::warn;

use super::lifecycle::Lifecycle;
use super::recycle::{decide, Measure, RecycleChoice, RecycleClocks, RecyclePolicy, WorkerView};
use crate::process::ProcessId;
use crate::status::readings::Readings;
use crate::status::snapshot::{CgroupLimit, CgroupReading};

/// The memory recycle's clocks as an in-place upgrade hands them over (`upgrade::state`'s
/// `shell.recycle`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecycleState {
    /// Each worker found over the threshold and idle, and for how long before the capture (ms):
    /// its `recycleSeconds` go on counting.
    pub over_for_ms: Vec<(u16, u64)>,
    /// Workers already warned about (RECYCLE-12: once).
    pub warned: Vec<u16>,
    /// Each process's `RssAnon` when it last became ready (its growth is measured from it).
    pub rss_at_ready: Vec<Option<u64>>,
}

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

    /// The clocks as data for an in-place upgrade, their times counted back from `at`.
    pub(crate) fn capture(&self, at: Instant) -> RecycleState {
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        RecycleState {
            over_for_ms: self
                .clocks
                .over_since
                .iter()
                .map(|(id, since)| (id.0, ms(at.saturating_duration_since(*since))))
                .collect(),
            warned: self.clocks.warned.iter().map(|id| id.0).collect(),
            rss_at_ready: self.rss_at_ready.clone(),
        }
    }

    /// Takes over the clocks the program before an in-place upgrade captured at `at`.
    pub(crate) fn resume(&mut self, s: &RecycleState, at: Instant) {
        let back = |ms: u64| {
            at.checked_sub(std::time::Duration::from_millis(ms))
                .unwrap_or(at)
        };
        self.clocks.over_since = s
            .over_for_ms
            .iter()
            .map(|&(id, ms)| (ProcessId(id), back(ms)))
            .collect();
        self.clocks.warned = s.warned.iter().map(|&id| ProcessId(id)).collect();
        self.rss_at_ready = s.rss_at_ready.clone();
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_clocks_go_on_counting_across_an_in_place_upgrade() {
        // #16: a worker over the threshold for 20 s of its recycleSeconds before the upgrade has
        // 20 s behind it after it, not none; the warning given is not given again.
        let policy = RecyclePolicy {
            reject_fraction: 0.85,
            recycle_after: Duration::from_secs(60),
        };
        let t0 = Instant::now();
        let mut old = RecycleWatch::new(policy);
        old.clocks.over_since.insert(ProcessId(2), t0);
        old.clocks.warned.insert(ProcessId(2));
        old.rss_at_ready = vec![None, Some(1 << 20), Some(2 << 20)];
        let at = t0 + Duration::from_secs(20);
        let state = old.capture(at);
        assert_eq!(state.over_for_ms, vec![(2, 20_000)]);

        let later = at + Duration::from_secs(3600);
        let mut new = RecycleWatch::new(policy);
        new.resume(&state, later);
        assert_eq!(
            new.clocks.over_since.get(&ProcessId(2)),
            Some(&(later - Duration::from_secs(20)))
        );
        assert!(new.clocks.warned.contains(&ProcessId(2)));
        assert_eq!(new.rss_at_ready, old.rss_at_ready);
    }
}
