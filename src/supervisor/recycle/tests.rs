//! The recycle decision's tests: which worker is chosen, when, and which are left (RECYCLE-*).

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
    // spec: CONF-19, RECYCLE-15 (recycling off)
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
