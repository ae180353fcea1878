//! Unit tests of the replacement before the retirement (DEC-78) and of a rolling restart
//! stopped by its replacement (DEC-79).

use std::time::{Duration, Instant};

use super::super::test_support::*;
use super::super::{Action, Exit, Lifecycle};
use super::{start_limit, Failed, START_LIMIT_FLOOR};
use crate::process::ProcessId;

/// `n` workers running, replacements beside first, a rolling restart begun: its first step
/// asked for room.
fn rolling(n: usize, t: Instant) -> Lifecycle {
    let mut l = running(n, t);
    l.replace_beside_first();
    assert!(l.rolling_restart(secs(30), t));
    assert_eq!(
        drain(&mut l),
        vec![Action::AskRoom {
            id: T1,
            step: 1,
            of: n + 1
        }]
    );
    l
}

/// How many tx places are ready (the lifecycle's word the proxy follows).
fn ready_tx(l: &Lifecycle, n: usize) -> usize {
    (1..=n).filter(|&i| l.is_ready(ProcessId(i as u16))).count()
}

#[test]
fn with_room_the_replacement_starts_beside_and_the_ready_places_never_drop() {
    // spec: DEC-78
    let t = Instant::now();
    let mut l = rolling(2, t);
    l.room(T1, true, t);
    assert_eq!(drain(&mut l), vec![Action::SpawnBeside(T1)]);
    assert_eq!(
        ready_tx(&l, 2),
        2,
        "tx1 serves on while its replacement starts"
    );
    assert!(l.has_second(T1));
    l.second_ready(T1, t + secs(2));
    assert_eq!(
        drain(&mut l),
        vec![Action::Switch {
            id: T1,
            old_runs: true
        }],
        "no Down, no Up: the place stays routed, to its new process"
    );
    assert_eq!(ready_tx(&l, 2), 2);
    assert!(l.is_second_draining(T1));
    assert!(l.is_rolling(), "the next step waits for the old tx1 to go");
    l.second_drained(T1, t + secs(3));
    assert_eq!(drain(&mut l), vec![Action::TerminateSecond(T1)]);
    l.second_exited(T1, Exit::Code(0), t + secs(3));
    assert_eq!(
        drain(&mut l),
        vec![Action::AskRoom {
            id: T2,
            step: 2,
            of: 3
        }]
    );
    assert_eq!(l.restarts(T1), 1);
    // tx2 likewise, then the master in place, last.
    l.room(T2, true, t);
    l.second_ready(T2, t + secs(4));
    l.second_exited(T2, Exit::Code(0), t + secs(4));
    assert_eq!(
        drain(&mut l)[2..],
        [
            Action::RollingStep {
                id: M,
                step: 3,
                of: 3
            },
            Action::Drain(M)
        ]
    );
    assert_eq!(ready_tx(&l, 2), 2);
}

#[test]
fn without_room_the_step_is_the_replacement_in_place() {
    // spec: DEC-78
    let t = Instant::now();
    let mut l = rolling(2, t);
    l.room(T1, false, t);
    assert_eq!(drain(&mut l), vec![Action::Drain(T1)]);
    assert!(!l.has_second(T1));
}

#[test]
fn a_replacement_that_exits_stops_the_roll_and_leaves_the_old_process_serving() {
    // spec: DEC-79
    let t = Instant::now();
    let mut l = rolling(2, t);
    l.room(T1, true, t);
    drain(&mut l);
    l.second_exited(T1, Exit::Code(1), t + secs(1));
    assert_eq!(
        drain(&mut l),
        vec![Action::RollingAborted {
            id: T1,
            how: Failed::Exited(Exit::Code(1))
        }]
    );
    assert!(!l.is_rolling());
    assert!(l.is_ready(T1) && l.is_ready(T2) && l.is_ready(M));
    assert_eq!(l.restarts(T1), 0, "the old tx1 was never touched");
    assert!(!l.has_second(T1));
}

#[test]
fn a_replacement_not_ready_within_its_start_limit_is_killed_and_stops_the_roll() {
    // spec: DEC-79, DEC-81
    let t = Instant::now();
    let mut l = rolling(1, t);
    l.room(T1, true, t);
    drain(&mut l);
    let limit = start_limit(Some(Duration::ZERO));
    assert_eq!(limit, START_LIMIT_FLOOR);
    assert_eq!(l.poll_timeout(), Some(t + limit));
    l.handle_timeout(t + limit);
    assert_eq!(
        drain(&mut l),
        vec![
            Action::KillSecond(T1),
            Action::RollingAborted {
                id: T1,
                how: Failed::NotReady(limit)
            }
        ]
    );
    assert!(l.is_ready(T1) && l.is_ready(M));
    // It exits from the SIGKILL: nothing more happens, and a new roll may begin.
    l.second_exited(T1, Exit::Signal(9), t + limit);
    assert_eq!(drain(&mut l), vec![]);
    assert!(l.rolling_restart(secs(30), t + limit));
    assert!(matches!(
        drain(&mut l)[..],
        [Action::AskRoom { id: T1, .. }]
    ));
}

#[test]
fn a_start_limit_follows_the_last_start_with_a_floor() {
    // spec: DEC-81
    assert_eq!(start_limit(None), START_LIMIT_FLOOR);
    assert_eq!(start_limit(Some(secs(1))), START_LIMIT_FLOOR);
    assert_eq!(start_limit(Some(secs(120))), secs(360));
}

#[test]
fn the_launcher_stopping_stops_a_replacement_and_an_old_process_too() {
    // spec: DEC-78, STOP-5
    let t = Instant::now();
    let mut l = rolling(2, t);
    l.room(T1, true, t);
    drain(&mut l);
    l.stop(t);
    let acts = drain(&mut l);
    assert!(acts.contains(&Action::TerminateSecond(T1)), "{acts:?}");
    assert!(
        !acts.contains(&Action::Terminate(M)),
        "the master last: {acts:?}"
    );
    l.exited(T1, Exit::Code(0), t);
    l.exited(T2, Exit::Code(0), t);
    let acts = drain(&mut l);
    assert!(
        !acts.contains(&Action::FlushMaster),
        "tx1's replacement still runs: {acts:?}"
    );
    l.second_exited(T1, Exit::Code(0), t);
    assert!(drain(&mut l).contains(&Action::FlushMaster));
}

#[test]
fn a_refused_reload_halts_the_roll_after_the_process_at_hand() {
    // spec: DEC-80
    let t = Instant::now();
    let mut l = rolling(2, t);
    l.room(T1, true, t);
    drain(&mut l);
    assert_eq!(l.halt_rolling(t), Some(vec![T2, M]));
    assert_eq!(drain(&mut l), vec![], "tx1's replacement goes on");
    l.second_ready(T1, t);
    l.second_exited(T1, Exit::Code(0), t);
    assert_eq!(
        drain(&mut l),
        vec![
            Action::Switch {
                id: T1,
                old_runs: true
            },
            Action::RollingHalted
        ]
    );
    assert!(!l.is_rolling());
    assert_eq!(l.halt_rolling(t), None);
}

#[test]
fn the_second_process_is_shown_as_the_replacement_then_as_the_old_one() {
    // spec: DEC-92
    use super::super::SecondState;
    let t = Instant::now();
    let mut l = rolling(2, t);
    assert_eq!(l.second_view(T1), None, "one process in the place");
    l.room(T1, true, t + secs(1));
    drain(&mut l);
    let v = l.second_view(T1).expect("the replacement beside tx1");
    assert_eq!((v.state, v.replacement), (SecondState::Starting, true));
    assert_eq!(v.started, Some(t + secs(1)));
    l.second_ready(T1, t + secs(2));
    drain(&mut l);
    assert_eq!(
        l.started(T1),
        Some(t + secs(1)),
        "the place's process: the replacement"
    );
    let v = l
        .second_view(T1)
        .expect("the old tx1 beside its replacement");
    assert_eq!((v.state, v.replacement), (SecondState::Draining, false));
    assert_eq!(
        v.started,
        Some(t),
        "the old one's own start, not its replacement's"
    );
    l.second_drained(T1, t + secs(3));
    let v = l.second_view(T1).expect("the old tx1, stopping");
    assert_eq!((v.state, v.replacement), (SecondState::Stopping, false));
    l.second_exited(T1, Exit::Code(0), t + secs(3));
    assert_eq!(l.second_view(T1), None, "one process again");
}

#[test]
fn a_replacement_killed_at_its_start_limit_is_still_shown_as_the_replacement() {
    // spec: DEC-92
    use super::super::SecondState;
    let t = Instant::now();
    let mut l = rolling(2, t);
    l.room(T1, true, t);
    drain(&mut l);
    l.handle_timeout(t + START_LIMIT_FLOOR);
    let v = l
        .second_view(T1)
        .expect("the killed replacement, not gone yet");
    assert_eq!((v.state, v.replacement), (SecondState::Stopping, true));
}

#[test]
fn a_recycle_with_room_starts_the_replacement_beside_and_ends_when_the_old_one_has_gone() {
    // spec: DEC-94, DEC-6
    use crate::status::restarts::RestartReason;
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(!l.recycle_beside(M, secs(5), t), "never the master");
    assert!(l.recycle_beside(T1, secs(5), t));
    assert_eq!(drain(&mut l), vec![Action::SpawnBeside(T1)]);
    assert_eq!(
        ready_tx(&l, 2),
        2,
        "tx1 serves on while its replacement starts"
    );
    assert!(l.restart_under_way() && l.is_recycling(T1));
    assert!(!l.recycle_beside(T2, secs(5), t), "one at a time");
    assert!(
        l.any_second(),
        "a scale waits: the spare place's port is taken"
    );
    l.second_ready(T1, t + secs(2));
    assert_eq!(
        drain(&mut l),
        vec![Action::Switch {
            id: T1,
            old_runs: true
        }]
    );
    assert_eq!(ready_tx(&l, 2), 2);
    assert_eq!(l.restarts_by(T1).get(RestartReason::Recycle), 1);
    assert_eq!(l.restarts_by(T1).get(RestartReason::Rolling), 0);
    assert!(l.is_recycling(T1), "until the old one has gone");
    // The old one finishes its requests for up to the recycle's drain.
    assert_eq!(l.poll_timeout(), Some(t + secs(7)));
    l.handle_timeout(t + secs(7));
    assert_eq!(drain(&mut l), vec![Action::TerminateSecond(T1)]);
    l.second_exited(T1, Exit::Signal(15), t + secs(7));
    assert!(!l.is_recycling(T1) && !l.any_second());
}

#[test]
fn a_recycle_whose_replacement_does_not_come_recycles_in_place() {
    // spec: DEC-94
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(l.recycle_beside(T1, secs(5), t));
    drain(&mut l);
    l.second_exited(T1, Exit::Code(3), t + secs(1));
    assert_eq!(
        drain(&mut l),
        vec![Action::Drain(T1)],
        "no rolling restart to stop: today's order, out of rotation and drained"
    );
    assert!(l.is_recycling(T1) && l.is_draining(T1));
    // Not ready within its start limit: killed, and the same.
    let mut l = running(2, t);
    assert!(l.recycle_beside(T2, secs(5), t));
    drain(&mut l);
    l.handle_timeout(t + START_LIMIT_FLOOR);
    assert_eq!(
        drain(&mut l),
        vec![Action::KillSecond(T2), Action::Drain(T2)]
    );
    l.second_exited(T2, Exit::Signal(9), t + START_LIMIT_FLOOR);
    assert!(
        l.is_recycling(T2),
        "its killed replacement's end is not the recycle's"
    );
}

#[test]
fn a_worker_count_raised_during_a_replacement_starts_the_new_place_once_the_old_one_has_gone() {
    // spec: DEC-78, DEC-21: tx3's port is the one tx1's replacement borrowed, then (the ports
    // swapped at the switch) the old tx1's.
    let t = Instant::now();
    let mut l = rolling(2, t);
    l.room(T1, true, t);
    assert_eq!(drain(&mut l), vec![Action::SpawnBeside(T1)]);
    assert!(l.resize(3, secs(30), t + secs(1)));
    assert_eq!(drain(&mut l), vec![], "tx3 waits: its port is taken");
    l.second_ready(T1, t + secs(2));
    assert_eq!(
        drain(&mut l),
        vec![Action::Switch {
            id: T1,
            old_runs: true
        }],
        "still waiting: the old tx1 is on tx3's port now"
    );
    l.second_drained(T1, t + secs(3));
    assert_eq!(drain(&mut l), vec![Action::TerminateSecond(T1)]);
    l.second_exited(T1, Exit::Code(0), t + secs(3));
    assert_eq!(
        drain(&mut l),
        vec![
            Action::Spawn(T3),
            Action::AskRoom {
                id: T2,
                step: 2,
                of: 3
            }
        ],
        "tx3 starts as the port frees; the roll goes on"
    );
    l.ready(T3, t + secs(5));
    assert_eq!(drain(&mut l), vec![Action::Up(T3)]);
    assert_eq!(l.restarts(T3), 0, "no failed start counted");
}

#[test]
fn a_worker_count_raised_during_a_recycle_beside_starts_the_new_place_once_its_replacement_ends() {
    // spec: DEC-94, DEC-21
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(l.recycle_beside(T1, secs(5), t));
    assert_eq!(drain(&mut l), vec![Action::SpawnBeside(T1)]);
    assert!(l.resize(3, secs(30), t));
    assert_eq!(drain(&mut l), vec![], "tx3 waits: its port is taken");
    // The replacement exits before it is ready: tx1 is recycled in place, and the port is free.
    l.second_exited(T1, Exit::Code(1), t + secs(1));
    assert_eq!(drain(&mut l), vec![Action::Drain(T1), Action::Spawn(T3)]);
}

#[test]
fn a_worker_count_raised_during_a_replacement_whose_old_process_died_starts_at_the_switch() {
    // spec: DEC-78, DEC-21: no old process to wait for at the switch, the port is free.
    let t = Instant::now();
    let mut l = rolling(2, t);
    l.room(T1, true, t);
    assert!(l.resize(3, secs(30), t));
    drain(&mut l);
    l.exited(T1, Exit::Signal(9), t + secs(1));
    drain(&mut l);
    l.second_ready(T1, t + secs(2));
    let actions = drain(&mut l);
    assert!(
        actions.contains(&Action::Spawn(T3)),
        "tx3 starts at the switch: {actions:?}"
    );
}

#[test]
fn a_worker_count_lowered_during_its_replacement_stops_the_replacement_and_retires_the_place() {
    // spec: DEC-78, DEC-94: the place goes; its replacement must not take it back.
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(l.recycle_beside(T2, secs(5), t));
    drain(&mut l);
    assert!(l.resize(1, secs(30), t));
    assert_eq!(
        drain(&mut l),
        vec![Action::Drain(T2), Action::TerminateSecond(T2)]
    );
    l.second_ready(T2, t + secs(1));
    assert_eq!(drain(&mut l), vec![], "no switch to a place on its way out");
    assert!(!l.is_ready(T2));
    l.second_exited(T2, Exit::Signal(15), t + secs(1));
    l.drained(T2, t + secs(2));
    assert_eq!(drain(&mut l), vec![Action::Terminate(T2)]);
    l.exited(T2, Exit::Code(0), t + secs(2));
    assert_eq!(drain(&mut l), vec![Action::Down(T2), Action::Retired(T2)]);
    assert!(!l.any_second() && !l.restart_under_way());
}
