//! Property tests: random sequences of what the shell tells the lifecycle (exits and failed
//! spawns, readies, time, the stop, reloads that resize and restart in turn, recycles, drains,
//! the master's flush), carried out as the shell does and checked against a model of the
//! processes after every step. Properties (named in `model.rs`, each failure says which):
//! `Finished` exactly once, and only with nothing running; the master stops last; at most one
//! process draining for a recycle or a rolling restart at a time; every spawn answered by an exit
//! or still running (the lifecycle's "running" is the shell's "has a child"); workers start one
//! at a time after the master is ready; nothing starts once the stop has begun; `Up` and `Down`
//! in pairs; what an exit meant (`Aftermath`) matches the actions it gave; no deadline is left in
//! the past. This file has the random events and the property; the model is `proptests/model.rs`.

use std::time::Duration;

use proptest::prelude::*;

mod model;
use model::{Model, Setup};

/// The most workers a reload asks for (the shell's room, `RELOAD_ROOM` in small).
const ROOM: usize = 4;

#[derive(Clone, Debug)]
pub(super) enum Event {
    /// The process's child exits (if it has one): a crash (a signal) or an exit code.
    Exit { p: usize, signal: bool },
    /// The process says it is ready (if it has a child).
    Ready { p: usize },
    /// Time passes; the shell's timer fires if a deadline came.
    Advance { millis: u64 },
    /// SIGTERM to the launcher.
    Stop,
    /// A reload: the worker count, then the rolling restart if asked.
    Reload { workers: usize, rolling: bool },
    /// The memory recycle's choice.
    Recycle { p: usize },
    /// The shell found nothing at work on the process.
    Drained { p: usize },
    /// The master's channel was flushed.
    Flushed,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        6 => (0..=ROOM, any::<bool>()).prop_map(|(p, signal)| Event::Exit { p, signal }),
        8 => (0..=ROOM).prop_map(|p| Event::Ready { p }),
        5 => (0u64..20_000).prop_map(|millis| Event::Advance { millis }),
        1 => Just(Event::Stop),
        2 => (0..=ROOM, any::<bool>())
            .prop_map(|(workers, rolling)| Event::Reload { workers, rolling }),
        2 => (0..=ROOM).prop_map(|p| Event::Recycle { p }),
        2 => (0..=ROOM).prop_map(|p| Event::Drained { p }),
        1 => Just(Event::Flushed),
    ]
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        0..=ROOM,
        0u32..4,
        0u64..10,
        prop::collection::vec(0..=ROOM, 1..3),
        prop::collection::vec(prop::bool::weighted(0.1), 0..40),
    )
        .prop_map(
            |(planned, max_start_failures, drain, sized, spawn_fails)| Setup {
                planned,
                room: ROOM,
                max_start_failures,
                kill_after: Duration::from_secs(30),
                drain: Duration::from_secs(drain),
                sized,
                spawn_fails,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_lifecycle_keeps_its_promises(
        setup in setup(),
        events in prop::collection::vec(event(), 1..150),
    ) {
        // spec: LAUNCH-2, LAUNCH-7, RESTART-7, STOP-5, STOP-6, STOP-7, STOP-8, RECYCLE-9, DEC-6,
        // DEC-15
        let mut m = Model::new(setup);
        for e in &events {
            if let Err(msg) = m.step(e) {
                return Err(TestCaseError::fail(format!("after {e:?}: {msg}\n{}", m.log())));
            }
        }
        if let Err(msg) = m.finish() {
            return Err(TestCaseError::fail(format!("at the stop: {msg}\n{}", m.log())));
        }
    }

    #[test]
    fn a_lifecycle_handed_over_midway_carries_on_as_if_nothing_happened(
        setup in setup(),
        events in prop::collection::vec(event(), 1..120),
        at in 0usize..120,
    ) {
        // The in-place upgrade (#16): the same events, one run handed over before event `at`;
        // both keep every promise and carry out the same actions, to the stop.
        let mut straight = Model::new(setup.clone());
        let mut handed = Model::new(setup);
        for (i, e) in events.iter().enumerate() {
            if i == at.min(events.len() - 1) {
                if let Err(msg) = handed.hand_over() {
                    return Err(TestCaseError::fail(format!("before {e:?}: {msg}\n{}", handed.log())));
                }
            }
            let a = straight.step(e);
            let b = handed.step(e);
            prop_assert_eq!(a.is_ok(), b.is_ok(), "after {:?}: {:?} vs {:?}", e, a, b);
        }
        let (a, b) = (straight.finish(), handed.finish());
        prop_assert_eq!(a.is_ok(), b.is_ok());
        prop_assert_eq!(straight.actions(), handed.actions(), "{}", handed.log());
    }
}
