//! The memory recycle decision (spec "Memory", RECYCLE-1, 6..12, DEC-4..6): which tx-worker, if
//! any, to restart because the memory guard's measure has stayed over its refusal threshold with
//! nothing at work on it.
//!
//! Theory of operation: the shell calls [`decide`] on every reading (each status tick), with the
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
    /// The earliest moment a clock still running runs out, for the shell's timer (clocks
    /// already out are looked at again on the next call).
    pub next_due: Option<Instant>,
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
            next_due: None,
        };
    }
    let mut due: Vec<(&WorkerView, Judgement)> = Vec::new();
    let mut next_due: Option<Instant> = None;
    for w in workers.iter().filter(|w| !w.id.is_master()) {
        let Some(over) = over_by(measure, w, policy.reject_fraction) else {
            continue;
        };
        if !w.ready || w.in_flight > 0 {
            continue;
        }
        let since = clocks.over_since.get(&w.id).copied().unwrap_or(now);
        out.over_since.insert(w.id, since);
        let deadline = since + policy.recycle_after;
        if now >= deadline {
            due.push((w, judge(measure, w, over)));
        } else {
            next_due = Some(next_due.map_or(deadline, |d| d.min(deadline)));
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
        next_due,
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
mod tests {
    use super::*;

    const GB: u64 = 1 << 30;

    fn policy() -> RecyclePolicy {
        RecyclePolicy {
            reject_fraction: 0.85,
            recycle_after: Duration::from_secs(30),
        }
    }

    fn worker(n: u16, rss_gb: f64, at_ready_gb: f64) -> WorkerView {
        WorkerView {
            id: ProcessId(n),
            code: if n == 0 {
                "m0".into()
            } else {
                format!("tx{n}")
            },
            rss_anon: Some((rss_gb * GB as f64) as u64),
            rss_anon_at_ready: Some((at_ready_gb * GB as f64) as u64),
            in_flight: 0,
            ready: true,
            guard_limit: Some(10 * GB),
        }
    }

    /// 10 GB limit, threshold 8.5 GB: the cgroup at `anon_gb`.
    fn cgroup(anon_gb: f64) -> Measure {
        Measure::Cgroup {
            anon: (anon_gb * GB as f64) as u64,
            limit: 10 * GB,
        }
    }

    /// Runs the decision at `t0` and again `secs` later with the same inputs.
    fn after(
        secs: u64,
        measure: Measure,
        workers: &[WorkerView],
        in_progress: bool,
    ) -> RecycleDecision {
        let t0 = Instant::now();
        let first = decide(
            &policy(),
            measure,
            workers,
            in_progress,
            &RecycleClocks::default(),
            t0,
        );
        decide(
            &policy(),
            measure,
            workers,
            in_progress,
            &first.clocks,
            t0 + Duration::from_secs(secs),
        )
    }

    fn chosen(d: &RecycleDecision) -> Option<ProcessId> {
        d.recycle.as_ref().map(|c| c.id)
    }

    #[test]
    fn threshold_is_the_reject_fraction_of_the_limit() {
        // spec: MEM-1
        assert_eq!(threshold(100, 0.85), 85);
        assert_eq!(threshold(32 * 1_000_000_000, 0.85), 27_200_000_000);
    }

    #[test]
    fn over_and_idle_for_recycle_seconds_is_recycled() {
        // spec: RECYCLE-1, DEC-5
        let ws = [worker(0, 3.0, 3.0), worker(1, 6.0, 3.0)];
        let early = after(29, cgroup(9.0), &ws, false);
        assert_eq!(chosen(&early), None);
        assert!(early.next_due.is_some());
        let due = after(30, cgroup(9.0), &ws, false);
        assert_eq!(chosen(&due), Some(ProcessId(1)));
        let reason = due.recycle.map(|c| c.reason).unwrap_or_default();
        assert!(
            reason.contains("tx1") && reason.contains("30 s"),
            "{reason}"
        );
    }

    #[test]
    fn recycle_seconds_zero_never_recycles() {
        // spec: RECYCLE-15 (recycling off)
        let p = RecyclePolicy {
            recycle_after: Duration::ZERO,
            ..policy()
        };
        let ws = [worker(1, 6.0, 1.0)];
        let now = Instant::now();
        let d = decide(&p, cgroup(9.5), &ws, false, &RecycleClocks::default(), now);
        assert_eq!(d.recycle, None);
        assert!(d.clocks.over_since.is_empty());
    }

    #[test]
    fn never_the_master() {
        // spec: RECYCLE-6
        let ws = [worker(0, 8.0, 1.0)];
        let d = after(60, cgroup(9.5), &ws, false);
        assert_eq!(d.recycle, None);
        assert!(d.warn.is_empty());
        let d = after(60, Measure::PerProcess, &[worker(0, 9.5, 1.0)], false);
        assert_eq!(d.recycle, None);
    }

    /// One decision `secs` after `t0`.
    fn step(
        t0: Instant,
        secs: u64,
        measure: Measure,
        ws: &[WorkerView],
        clocks: &RecycleClocks,
    ) -> RecycleDecision {
        let now = t0 + Duration::from_secs(secs);
        decide(&policy(), measure, ws, false, clocks, now)
    }

    #[test]
    fn a_request_at_work_restarts_the_clock() {
        // spec: DEC-5
        let t0 = Instant::now();
        let idle = [worker(1, 6.0, 1.0)];
        let mut busy = idle.clone();
        busy[0].in_flight = 1;
        let c = step(t0, 0, cgroup(9.0), &idle, &Default::default());
        let c = step(t0, 20, cgroup(9.0), &busy, &c.clocks);
        assert!(c.clocks.over_since.is_empty());
        let c = step(t0, 21, cgroup(9.0), &idle, &c.clocks);
        let d = step(t0, 40, cgroup(9.0), &idle, &c.clocks);
        assert_eq!(d.recycle, None, "only 19 s since the request ended");
        let d = step(t0, 51, cgroup(9.0), &idle, &d.clocks);
        assert_eq!(chosen(&d), Some(ProcessId(1)));
    }

    #[test]
    fn falling_below_the_threshold_restarts_the_clock() {
        // spec: DEC-5
        let t0 = Instant::now();
        let ws = [worker(1, 6.0, 1.0)];
        let c = step(t0, 0, cgroup(9.0), &ws, &Default::default());
        let c = step(t0, 10, cgroup(8.0), &ws, &c.clocks);
        assert!(c.clocks.over_since.is_empty());
        let d = step(t0, 31, cgroup(9.0), &ws, &c.clocks);
        assert_eq!(d.recycle, None);
    }

    #[test]
    fn with_a_cgroup_only_a_worker_grown_by_more_than_the_excess() {
        // spec: RECYCLE-7
        // cgroup 9.5 GB: 1 GB over. tx1 grew 0.5 GB, tx2 grew 1.5 GB.
        let ws = [worker(1, 4.0, 3.5), worker(2, 3.5, 2.0)];
        let d = after(30, cgroup(9.5), &ws, false);
        assert_eq!(chosen(&d), Some(ProcessId(2)));
        let d = after(30, cgroup(9.5), &ws[..1], false);
        assert_eq!(d.recycle, None);
    }

    #[test]
    fn the_largest_first() {
        // spec: RECYCLE-8
        let ws = [
            worker(1, 3.0, 1.0),
            worker(2, 5.0, 1.0),
            worker(3, 4.0, 1.0),
        ];
        let d = after(30, cgroup(9.0), &ws, false);
        assert_eq!(chosen(&d), Some(ProcessId(2)));
    }

    #[test]
    fn one_at_a_time() {
        // spec: RECYCLE-9, DEC-6
        let ws = [worker(1, 6.0, 1.0), worker(2, 5.0, 1.0)];
        let d = after(30, cgroup(9.0), &ws, true);
        assert_eq!(d.recycle, None);
        assert!(d.warn.is_empty());
        // The clocks keep running, so the next goes as soon as the replacement is ready.
        let again = decide(
            &policy(),
            cgroup(9.0),
            &ws,
            false,
            &d.clocks,
            Instant::now() + Duration::from_secs(31),
        );
        assert!(again.recycle.is_some());
    }

    #[test]
    fn a_worker_not_ready_has_no_clock() {
        // spec: RECYCLE-2, DEC-6 (a draining or starting worker is not a candidate)
        let mut w = worker(1, 6.0, 1.0);
        w.ready = false;
        let d = after(60, cgroup(9.0), &[w], false);
        assert_eq!(d.recycle, None);
        assert!(d.clocks.over_since.is_empty());
    }

    #[test]
    fn without_a_cgroup_only_a_worker_over_on_its_own() {
        // spec: RECYCLE-10, MEM-5
        // Guard limit 10 GB: threshold 8.5 GB per process.
        let ws = [worker(1, 8.0, 1.0), worker(2, 9.0, 1.0)];
        let d = after(30, Measure::PerProcess, &ws, false);
        assert_eq!(chosen(&d), Some(ProcessId(2)));
        assert!(!d.clocks.over_since.contains_key(&ProcessId(1)));
        let mut no_limit = worker(3, 9.0, 1.0);
        no_limit.guard_limit = None;
        let d = after(30, Measure::PerProcess, &[no_limit], false);
        assert_eq!(d.recycle, None);
    }

    #[test]
    fn without_a_cgroup_grown_by_more_than_it_is_over() {
        // spec: RECYCLE-11
        // 9.0 GB is 0.5 GB over; grown 1.0 GB: recycled. Grown 0.25 GB: left.
        let d = after(30, Measure::PerProcess, &[worker(1, 9.0, 8.0)], false);
        assert_eq!(chosen(&d), Some(ProcessId(1)));
        let d = after(30, Measure::PerProcess, &[worker(1, 9.0, 8.75)], false);
        assert_eq!(d.recycle, None);
    }

    #[test]
    fn one_that_would_come_back_over_is_warned_about_once_and_left() {
        // spec: RECYCLE-12, DEC-4 (with and without a cgroup)
        for measure in [cgroup(9.5), Measure::PerProcess] {
            // Over when it became ready: grown 0.
            let ws = [worker(1, 9.0, 9.0)];
            let t0 = Instant::now();
            let mut clocks = RecycleClocks::default();
            let mut warnings = 0;
            for s in [0u64, 30, 45, 60, 90] {
                let d = step(t0, s, measure, &ws, &clocks);
                assert_eq!(d.recycle, None);
                for (id, line) in &d.warn {
                    assert_eq!(*id, ProcessId(1));
                    assert!(line.contains("come back over"), "{line}");
                }
                warnings += d.warn.len();
                clocks = d.clocks;
            }
            assert_eq!(warnings, 1, "{measure:?}");
            // A new process in its place may be warned about again.
            clocks.forget(ProcessId(1));
            let d = step(t0, 0, measure, &ws, &clocks);
            let d = step(t0, 30, measure, &ws, &d.clocks);
            assert_eq!(d.warn.len(), 1);
        }
    }

    #[test]
    fn unknown_growth_is_neither_recycled_nor_warned() {
        // spec: STATUS-13 (nothing made up)
        let mut w = worker(1, 6.0, 1.0);
        w.rss_anon_at_ready = None;
        let d = after(30, cgroup(9.0), &[w], false);
        assert_eq!(d.recycle, None);
        assert!(d.warn.is_empty());
    }
}
