//! Property tests: random sequences of submits, finishes, cancels, process changes, config
//! reloads and time, checked against a model of what the scheduler may do. Properties: every
//! request ends exactly once; no slot leaks (the scheduler's counts equal the model's, and are
//! zero once everything ends); a dispatch respects the slot, lane and reservation rules with the
//! counts of that moment; nothing goes to a process that isn't ready, or to one its target
//! forbids; oldest first within a class. The model and its checks are in `proptest_model.rs`;
//! this file has the random events and the property.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::process::ProcessId;
use crate::proxy::lane::Lane;
use crate::proxy::route::{Target, TxDemand};

#[path = "proptest_model.rs"]
mod model;
use model::Model;

#[derive(Clone, Debug)]
enum Event {
    Submit {
        kind: u8,
        p: u16,
        fast: bool,
        counted: bool,
    },
    Finish {
        pick: usize,
        outcome: u8,
    },
    Cancel {
        pick: usize,
    },
    SetProcess {
        p: u16,
        state: u8,
    },
    SetSaturated {
        p: u16,
        held: Option<u32>,
    },
    Advance {
        millis: u64,
    },
    Reload {
        cfg: SchedulerConfig,
    },
}

fn config() -> impl Strategy<Value = SchedulerConfig> {
    (
        0u32..5,
        0u32..4,
        0u32..5,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(max, extra, min, q, oq, cool)| SchedulerConfig {
            max_outstanding: max,
            fast_lane_extra: extra,
            normal_min_slots: min.min(max),
            saturated_percent: 90,
            queue: Duration::from_secs(u64::from(q)),
            owner_queue: Duration::from_secs(30 * u64::from(oq)),
            cooldown: Duration::from_secs(2 * u64::from(cool)),
            predictive: false,
        })
}

/// `held`: whether processes may be saturated (DEC-29's hold). Without it the spec's own rules
/// (QUEUE-1, LANE-4, LANE-6) are checked with the hold off, where DEC-29 says they hold exactly.
fn event(n: u16, held: bool) -> impl Strategy<Value = Event> {
    let saturated = u32::from(held);
    prop_oneof![
        8 => (0u8..4, 0..n, any::<bool>(), prop::bool::weighted(0.9))
            .prop_map(|(kind, p, fast, counted)| Event::Submit { kind, p, fast, counted }),
        6 => (any::<usize>(), 0u8..6).prop_map(|(pick, outcome)| Event::Finish { pick, outcome }),
        1 => any::<usize>().prop_map(|pick| Event::Cancel { pick }),
        1 => (0..n, 0u8..3).prop_map(|(p, state)| Event::SetProcess { p, state }),
        saturated => (0..n, prop::option::of(0u32..6)).prop_map(|(p, held)| Event::SetSaturated { p, held }),
        2 => (0u64..3000).prop_map(|millis| Event::Advance { millis }),
        1 => config().prop_map(|cfg| Event::Reload { cfg }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_scheduler_keeps_its_promises(
        cfg in config(),
        serves in prop::collection::vec(prop::bool::weighted(0.8), 1..5),
        events in prop::collection::vec(event(4, false), 1..120),
    ) {
        // spec: QUEUE-1, QUEUE-3, LANE-1, LANE-4, LANE-5, LANE-6, LANE-15, ROUTE-4c, DEC-15
        // With the saturation hold off (no process is ever saturated): the spec's rules exactly.
        keeps_its_promises(cfg, serves, events)?;
    }

    #[test]
    fn the_scheduler_keeps_its_promises_with_saturated_processes(
        cfg in config(),
        serves in prop::collection::vec(prop::bool::weighted(0.8), 1..5),
        events in prop::collection::vec(event(4, true), 1..120),
    ) {
        // spec: DEC-29 (a held process takes no more normal requests than its hold, and the lane
        // reserves only the hold; every other promise as without it)
        keeps_its_promises(cfg, serves, events)?;
    }
}

fn keeps_its_promises(
    cfg: SchedulerConfig,
    serves: Vec<bool>,
    events: Vec<Event>,
) -> Result<(), TestCaseError> {
    let n = serves.len();
    let procs: Vec<_> = serves
        .iter()
        .enumerate()
        .map(|(i, s)| (ProcessId(i as u16), *s))
        .collect();
    let now = Instant::now();
    let mut s = Scheduler::new(cfg.clone(), &procs);
    for &(p, _) in &procs {
        s.set_process(p, ProcessState::Ready, now);
    }
    let mut m = Model::new(s, cfg, now, serves);
    for e in &events {
        let e = match e {
            Event::Submit {
                kind,
                p,
                fast,
                counted,
            } => Event::Submit {
                kind: *kind,
                p: p % n as u16,
                fast: *fast,
                counted: *counted,
            },
            other => other.clone(),
        };
        if let Err(msg) = m.step(&e) {
            return Err(TestCaseError::fail(format!("after {e:?}: {msg}")));
        }
    }
    m.drain().map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_scheduler_keeps_its_promises_when_predicting(
        cfg in config().prop_map(|c| SchedulerConfig { predictive: true, ..c }),
        serves in prop::collection::vec(prop::bool::weighted(0.8), 1..5),
        events in prop::collection::vec(event(4, true), 1..120),
    ) {
        // spec: DEC-50 (refusing early ends a request once, leaks no slot, and admits nothing
        // the rules forbid; every other promise as without it)
        keeps_its_promises(cfg, serves, events)?;
    }
}
