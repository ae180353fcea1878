//! The memory recycle decision (spec "Memory", RECYCLE-1, 6..12, DEC-4..6): which tx-worker, if
//! any, to restart because the memory guard's measure has stayed over its refusal threshold with
//! nothing at work on it.
//!
//! Theory of operation: the shell calls [`decide`] every upkeep tick (each second), with the
//! launcher's own measure, every worker's figures and the clocks returned last time. Pure: no
//! I/O, time comes in as `now`.
//!
//! * "Over" is the launcher's reading (DEC-5): with a cgroup of the service's own, the cgroup's
//!   private memory against `rejectFraction` × its limit (every worker is then "over" together);
//!   without, each worker's `RssAnon` against `rejectFraction` × the limit its guard reported.
//! * A worker's clock starts when it is over, ready and has no request at work on it; any
//!   request at work, or the measure falling below, throws the clock away (DEC-5).
//! * When a clock has run `recycleSeconds`, the worker is recycled only if doing so can open the
//!   gate: it has grown since it was ready by more than the measure is over the threshold
//!   (RECYCLE-7, RECYCLE-11). One that fails that test would come back at the same size, so it
//!   gets one WARNING and is left running (RECYCLE-12, DEC-4).
//! * One at a time (RECYCLE-9, DEC-6): nothing is chosen while a recycle is in progress (until
//!   the replacement is ready); the largest candidate goes first (RECYCLE-8). Never the master.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::deadline::Later;
use crate::process::ProcessId;

/// What the memory guard measures, as the launcher reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// A cgroup with a memory limit of the service's own: its private memory (`anon`) and limit.
    Cgroup { anon: u64, limit: u64 },
    /// No cgroup of its own (MEM-5): each worker's `RssAnon` against its guard's limit.
    PerProcess,
}

/// One process as the recycle decision sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerView {
    pub id: ProcessId,
    /// Instance code, for the log lines.
    pub code: String,
    /// `RssAnon` now, or None when it couldn't be read.
    pub rss_anon: Option<u64>,
    /// `RssAnon` when it became ready.
    pub rss_anon_at_ready: Option<u64>,
    /// Requests at work on it (in flight in the launcher's slots).
    pub in_flight: u32,
    /// Ready and taking requests (not starting, draining or stopping).
    pub ready: bool,
    /// The limit its memory guard reported in its `ready` message (`memoryLimit`).
    pub guard_limit: Option<u64>,
}

/// The settings the decision uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecyclePolicy {
    pub reject_fraction: f64,
    /// `recycleSeconds`; zero: never recycle.
    pub recycle_after: Duration,
}

/// What carries over from one decision to the next.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecycleClocks {
    /// When each worker's over-and-idle clock started.
    pub over_since: BTreeMap<ProcessId, Instant>,
    /// Workers already warned about (RECYCLE-12: once).
    pub warned: BTreeSet<ProcessId>,
}

impl RecycleClocks {
    /// A worker was replaced (recycled or restarted): its clock and its warning start afresh.
    pub fn forget(&mut self, id: ProcessId) {
        self.over_since.remove(&id);
        self.warned.remove(&id);
    }
}

/// The worker to recycle now, and the line to log (RECYCLE-14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecycleChoice {
    pub id: ProcessId,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecycleDecision {
    pub recycle: Option<RecycleChoice>,
    /// Workers to log a WARNING about now (each only once), with the line.
    pub warn: Vec<(ProcessId, String)>,
    /// Pass these to the next call.
    pub clocks: RecycleClocks,
}

/// The threshold for a limit: `rejectFraction` × limit, in bytes (MEM-1).
pub fn threshold(limit: u64, reject_fraction: f64) -> u64 {
    (limit as f64 * reject_fraction) as u64
}

/// Decides which worker, if any, to recycle now. See the module comment for the rules.
pub fn decide(
    policy: &RecyclePolicy,
    measure: Measure,
    workers: &[WorkerView],
    in_progress: bool,
    clocks: &RecycleClocks,
    now: Instant,
) -> RecycleDecision {
    let mut out = RecycleClocks {
        over_since: BTreeMap::new(),
        warned: clocks.warned.clone(),
    };
    if policy.recycle_after.is_zero() {
        return RecycleDecision {
            recycle: None,
            warn: Vec::new(),
            clocks: out,
        };
    }
    let mut due: Vec<(&WorkerView, Judgement)> = Vec::new();
    for w in workers.iter().filter(|w| !w.id.is_master()) {
        let Some(over) = over_by(measure, w, policy.reject_fraction) else {
            continue;
        };
        if !w.ready || w.in_flight > 0 {
            continue;
        }
        let since = clocks.over_since.get(&w.id).copied().unwrap_or(now);
        out.over_since.insert(w.id, since);
        let deadline = since.later(policy.recycle_after);
        if now >= deadline {
            due.push((w, judge(measure, w, over)));
        }
    }
    let mut recycle = None;
    let mut warn = Vec::new();
    if !in_progress {
        let mut fits: Vec<&(&WorkerView, Judgement)> =
            due.iter().filter(|(_, j)| j.would_help()).collect();
        fits.sort_by(|a, b| {
            let size = |w: &WorkerView| w.rss_anon.unwrap_or(0);
            size(b.0).cmp(&size(a.0)).then(a.0.id.cmp(&b.0.id))
        });
        if let Some((w, j)) = fits.first() {
            recycle = Some(RecycleChoice {
                id: w.id,
                reason: j.reason(w, policy.recycle_after),
            });
        } else {
            for (w, j) in &due {
                if let Judgement::WouldComeBackOver { .. } = j {
                    if out.warned.insert(w.id) {
                        warn.push((w.id, j.reason(w, policy.recycle_after)));
                    }
                }
            }
        }
    }
    RecycleDecision {
        recycle,
        warn,
        clocks: out,
    }
}

/// How far the measure is over the threshold, as it applies to this worker, or None when it is
/// not over (or can't be told).
fn over_by(measure: Measure, w: &WorkerView, reject_fraction: f64) -> Option<u64> {
    let (value, limit) = match measure {
        Measure::Cgroup { anon, limit } => (anon, limit),
        Measure::PerProcess => (w.rss_anon?, w.guard_limit?),
    };
    let at = threshold(limit, reject_fraction);
    (value > at).then(|| value - at)
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Judgement {
    Helps {
        grown: u64,
        over: u64,
        cgroup: bool,
    },
    WouldComeBackOver {
        grown: u64,
        over: u64,
        cgroup: bool,
    },
    /// Its growth can't be told (`RssAnon` not read): neither recycled nor warned about.
    Unknown,
}

impl Judgement {
    fn would_help(&self) -> bool {
        matches!(self, Judgement::Helps { .. })
    }

    fn reason(&self, w: &WorkerView, after: Duration) -> String {
        let (grown, over, cgroup) = match *self {
            Judgement::Helps {
                grown,
                over,
                cgroup,
            }
            | Judgement::WouldComeBackOver {
                grown,
                over,
                cgroup,
            } => (grown, over, cgroup),
            Judgement::Unknown => (0, 0, false),
        };
        let what = if cgroup {
            "the cgroup's private memory".to_string()
        } else {
            format!("{}'s private memory", w.code)
        };
        let head = format!(
            "{what} has been over the refusal threshold by {} MB for {} s with no request at work on {}",
            mb(over),
            after.as_secs(),
            w.code
        );
        match self {
            Judgement::Helps { .. } => format!(
                "{head}; {} has grown {} MB since it was ready (now {} MB)",
                w.code,
                mb(grown),
                mb(w.rss_anon.unwrap_or(0))
            ),
            _ => format!(
                "{head}, but {} has grown only {} MB since it was ready: it would come back over \
                 the threshold, so it is left running",
                w.code,
                mb(grown)
            ),
        }
    }
}

fn judge(measure: Measure, w: &WorkerView, over: u64) -> Judgement {
    let (Some(now), Some(at_ready)) = (w.rss_anon, w.rss_anon_at_ready) else {
        return Judgement::Unknown;
    };
    let grown = now.saturating_sub(at_ready);
    let cgroup = matches!(measure, Measure::Cgroup { .. });
    if grown > over {
        Judgement::Helps {
            grown,
            over,
            cgroup,
        }
    } else {
        Judgement::WouldComeBackOver {
            grown,
            over,
            cgroup,
        }
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests;
