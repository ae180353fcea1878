//! The loop meter's rules (`saturation.rs`) on made-up readings: when a loop is saturated, and
//! how its hold starts, grows, shrinks and ends.

use super::*;

const MS: u64 = 1_000_000;

/// A reading taken while the loop ran or waited for a core.
fn awake(busy_ns: u64) -> Reading {
    Reading {
        busy_ns,
        asleep: false,
    }
}

/// Nothing waits: the hold never grows.
const NONE: Demand = Demand {
    waiting: false,
    ceiling: 4,
};

/// Feeds one sample per `step_ms`, each with `busy` of it busy; returns the changes.
fn run(
    m: &mut LoopMeter,
    t0: Instant,
    busy: &[u64],
    step_ms: u64,
    percent: u32,
) -> Vec<Option<bool>> {
    let mut ns = 0;
    let mut out = vec![m.sample(t0, awake(ns), percent, NONE)];
    for (k, b) in busy.iter().enumerate() {
        ns += b * MS;
        let at = t0 + Duration::from_millis(step_ms * (k as u64 + 1));
        out.push(m.sample(at, awake(ns), percent, NONE));
    }
    out
}

#[test]
fn a_loop_busy_all_the_time_is_saturated_and_an_idle_one_is_not() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    let changes = run(&mut m, t0, &[100, 100], 100, 90);
    assert_eq!(changes, vec![None, Some(true), None]);
    assert!(m.saturated());
    let mut idle = LoopMeter::default();
    assert_eq!(run(&mut idle, t0, &[0, 30, 89], 100, 90), vec![None; 4]);
}

#[test]
fn it_ends_only_well_below_the_threshold() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    // 95 % enters; 80 % and 70 % stay (not below 90 - 20); 60 % twice leaves; 85 % does
    // not re-enter
    let changes = run(&mut m, t0, &[95, 80, 70, 60, 60, 85], 100, 90);
    assert_eq!(
        changes,
        vec![None, Some(true), None, None, None, Some(false), None]
    );
}

#[test]
fn one_low_sample_is_a_wait_not_yet_counted_and_does_not_end_it() {
    // As read with 3 other busy processes on 2 cores: the wait missed by one sample is in
    // the next. Each low sample alone, however low, keeps the hold; the first of two ends
    // it only with the second.
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    let changes = run(&mut m, t0, &[100, 63, 142, 10, 190, 69, 100, 0, 0], 100, 90);
    assert_eq!(
        changes,
        vec![
            None,
            Some(true),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            Some(false)
        ]
    );
    // and a sample back above the exit threshold starts the count again
    let mut m = LoopMeter::default();
    let changes = run(&mut m, t0, &[100, 50, 80, 50, 50], 100, 90);
    assert_eq!(
        changes,
        vec![None, Some(true), None, None, None, Some(false)]
    );
}

#[test]
fn zero_percent_means_never() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    assert_eq!(run(&mut m, t0, &[100, 100], 100, 0), vec![None; 3]);
}

#[test]
fn samples_too_close_together_are_skipped_not_misread() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    assert_eq!(m.sample(t0, awake(0), 90, NONE), None);
    // 5 ms later, 5 ms busy: ignored, and the next sample measures from t0
    assert_eq!(
        m.sample(t0 + Duration::from_millis(5), awake(5 * MS), 90, NONE),
        None
    );
    assert_eq!(
        m.sample(t0 + Duration::from_millis(100), awake(99 * MS), 90, NONE),
        Some(true)
    );
    // the clock standing still says nothing either
    assert_eq!(
        m.sample(t0 + Duration::from_millis(100), awake(200 * MS), 90, NONE),
        None
    );
}

#[test]
fn a_counter_that_goes_back_is_a_new_process_and_starts_over() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    run(&mut m, t0, &[100], 100, 90);
    assert!(m.saturated());
    assert_eq!(
        m.sample(t0 + Duration::from_millis(200), awake(1), 90, NONE),
        Some(false)
    );
    assert_eq!(
        m.sample(
            t0 + Duration::from_millis(300),
            awake(1 + 100 * MS),
            90,
            NONE
        ),
        Some(true)
    );
    m.reset();
    assert!(!m.saturated());
}

#[test]
fn waiting_for_a_core_counts_as_busy() {
    // the shell passes run + wait; 50 ms running and 45 ms waiting in 100 ms is saturated
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    assert_eq!(run(&mut m, t0, &[50 + 45], 100, 90), vec![None, Some(true)]);
}

/// Feeds one 100 ms sample per `(busy_ms, waiting, asleep)`; returns `held` after each.
fn held_after(m: &mut LoopMeter, t0: Instant, steps: &[(u64, bool, bool)]) -> Vec<Option<u32>> {
    let mut ns = 0;
    m.sample(t0, awake(ns), 90, NONE);
    let mut out = Vec::new();
    for (k, &(busy, waiting, asleep)) in steps.iter().enumerate() {
        ns += busy * MS;
        let at = t0 + Duration::from_millis(100 * (k as u64 + 1));
        let reading = Reading {
            busy_ns: ns,
            asleep,
        };
        m.sample(
            at,
            reading,
            90,
            Demand {
                waiting,
                ceiling: 4,
            },
        );
        out.push(m.held());
    }
    out
}

const BUSY: (u64, bool, bool) = (100, true, false);

#[test]
fn a_hold_starts_at_one_and_a_loop_busy_all_the_time_stays_there() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    // heavy requests wait all along, but the loop never has a moment for another
    let held = held_after(&mut m, t0, &[BUSY; 30]);
    assert!(held.iter().all(|&h| h == Some(1)), "{held:?}");
}

#[test]
fn it_grows_by_one_for_each_quiet_sample_read_asleep_while_heavy_requests_wait() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    let steps = [
        BUSY,              // saturated: 1
        (80, true, false), // read while it ran or waited for a core: no proof
        (80, true, true),  // read asleep: 2
        (75, true, true),  // 3
        (40, true, true),  // 4
        (40, true, true),  // the ceiling: no more
        (40, true, true),  // and well below the threshold twice: it ends
    ];
    assert_eq!(
        held_after(&mut m, t0, &steps),
        vec![Some(1), Some(1), Some(2), Some(3), Some(4), Some(4), None]
    );
}

#[test]
fn a_quiet_sample_read_awake_or_with_nothing_waiting_grows_nothing() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    // the wait missed by one sample (read while waiting for a core) is in the next
    let mut steps = vec![BUSY];
    steps.extend([(63, true, false), (137, true, false)].repeat(8));
    // quiet samples in a row, each read while the loop ran
    steps.extend([(80, true, false); 6]);
    steps.push(BUSY);
    // and quiet while nothing waits: the hold isn't what keeps the loop idle
    steps.extend([(80, false, true); 6]);
    let held = held_after(&mut m, t0, &steps);
    assert!(held.iter().all(|&h| h == Some(1)), "{held:?}");
}

#[test]
fn while_heavy_requests_wait_only_low_samples_read_asleep_end_it() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    // read while it ran or waited for a core, however low: not the end
    let mut steps = vec![BUSY];
    steps.extend([(10, true, false); 8]);
    let held = held_after(&mut m, t0, &steps);
    assert!(held.iter().all(|&h| h == Some(1)), "{held:?}");
    // read asleep: it grows to the ceiling, then two low ones end it
    let mut m = LoopMeter::default();
    let mut steps = vec![BUSY];
    steps.extend([(10, true, true); 3]);
    steps.extend([(10, true, false), (10, true, true), (10, true, false)]);
    steps.push((10, true, true));
    assert_eq!(
        held_after(&mut m, t0, &steps),
        vec![
            Some(1),
            Some(2),
            Some(3),
            Some(4),
            Some(4),
            Some(4),
            Some(4),
            None
        ]
    );
}

#[test]
fn a_second_busy_all_the_time_takes_it_one_lower_but_never_below_one() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    let mut steps = vec![BUSY, (80, true, true), (80, true, true)];
    steps.extend([BUSY; 40]);
    let held = held_after(&mut m, t0, &steps);
    assert_eq!(held[2], Some(3));
    // 9 busy samples: still 3; the 10th: 2; 10 more: 1; and there it stays
    assert_eq!(held[11], Some(3));
    assert_eq!(held[12], Some(2));
    assert_eq!(held[21], Some(2));
    assert_eq!(held[22], Some(1));
    assert!(held[22..].iter().all(|&h| h == Some(1)), "{held:?}");
}

#[test]
fn the_hold_stays_within_the_ceiling_even_when_it_is_lowered() {
    let t0 = Instant::now();
    let mut m = LoopMeter::default();
    let demand = |ceiling| Demand {
        waiting: true,
        ceiling,
    };
    let asleep = |busy_ns| Reading {
        busy_ns,
        asleep: true,
    };
    let mut ns = 0;
    m.sample(t0, asleep(ns), 90, demand(0));
    let mut held = Vec::new();
    for (k, (busy, ceiling)) in [(100, 0), (80, 0), (80, 0), (100, 3), (80, 3), (80, 3)]
        .into_iter()
        .enumerate()
    {
        ns += busy * MS;
        let at = t0 + Duration::from_millis(100 * (k as u64 + 1));
        m.sample(at, asleep(ns), 90, demand(ceiling));
        held.push(m.held());
    }
    // ceiling 0 is taken as 1 (normalMinSlots 0: the scheduler ignores the hold anyway)
    assert_eq!(
        held,
        vec![Some(1), Some(1), Some(1), Some(1), Some(2), Some(3)]
    );
    // a reload to a lower normalMinSlots: the next sample takes the hold down to it
    ns += 100 * MS;
    m.sample(t0 + Duration::from_millis(700), asleep(ns), 90, demand(1));
    assert_eq!(m.held(), Some(1));
}

proptest::proptest! {
    /// Any run of samples: a hold is within 1 ..= the ceiling, moves by at most one a
    /// sample, grows only on a sample below the threshold read while the loop slept with
    /// heavy requests waiting, starts at 1, and only a busy sample starts one.
    #[test]
    fn the_hold_moves_only_as_measured(
        percent in 0u32..=100,
        steps in proptest::collection::vec(
            (0u64..200, proptest::bool::ANY, proptest::bool::ANY, 0u32..6),
            1..80,
        ),
    ) {
        let t0 = Instant::now();
        let mut m = LoopMeter::default();
        let mut ns = 0;
        m.sample(t0, awake(ns), percent, NONE);
        let mut before: Option<u32> = None;
        for (k, &(busy, waiting, asleep, ceiling)) in steps.iter().enumerate() {
            ns += busy * MS;
            let at = t0 + Duration::from_millis(100 * (k as u64 + 1));
            let reading = Reading { busy_ns: ns, asleep };
            m.sample(at, reading, percent, Demand { waiting, ceiling });
            let now = m.held();
            proptest::prop_assert_eq!(now.is_some(), m.saturated());
            if let Some(n) = now {
                proptest::prop_assert!(percent > 0);
                proptest::prop_assert!((1..=ceiling.max(1)).contains(&n), "{} > {}", n, ceiling);
            }
            match (before, now) {
                (Some(_), None) if waiting && percent > 0 => {
                    // while heavy requests wait, only a whole (asleep) sample ends it
                    proptest::prop_assert!(asleep, "ended on a sample read awake");
                }
                (None, Some(n)) => {
                    proptest::prop_assert_eq!(n, 1);
                    proptest::prop_assert!(busy >= u64::from(percent));
                }
                (Some(a), Some(b)) if b > a => {
                    proptest::prop_assert_eq!(b, a + 1);
                    proptest::prop_assert!(waiting && asleep && busy < u64::from(percent));
                }
                (Some(a), Some(b)) if b < a => {
                    // one lower after busy samples, or cut to a lowered ceiling
                    proptest::prop_assert!(b == a - 1 || b == ceiling.max(1), "{} -> {}", a, b);
                }
                _ => {}
            }
            before = now;
        }
    }
}
