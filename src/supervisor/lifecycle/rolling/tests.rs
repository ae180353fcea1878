//! Unit tests of the reload's lifecycle: the worker count moved, the rolling restart's order.

use std::time::Instant;

use super::super::test_support::*;
use super::super::{Action, Aftermath, Exit, Lifecycle, Status};
use crate::process::ProcessId;

/// Carries one process through its replacement: drained, exits, started again, ready.
fn replace(l: &mut Lifecycle, id: ProcessId, t: Instant) -> Vec<Action> {
    let mut acts = Vec::new();
    l.drained(id, t);
    acts.extend(drain(l));
    l.exited(id, Exit::Code(0), t);
    acts.extend(drain(l));
    l.ready(id, t);
    acts.extend(drain(l));
    acts
}

/// The actions end with the rolling restart's next step: `id`, `step` of `of`, drained.
#[track_caller]
fn assert_next_step(acts: &[Action], id: ProcessId, step: usize, of: usize) {
    let step = Action::RollingStep { id, step, of };
    assert_eq!(
        acts[acts.len().saturating_sub(2)..],
        [step, Action::Drain(id)]
    );
}

#[test]
fn a_rolling_restart_takes_one_process_at_a_time_the_master_last() {
    // spec: DEC-15, RESTART-6, RESTART-11
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(l.rolling_restart(secs(30), t));
    assert_eq!(
        drain(&mut l),
        vec![
            Action::RollingStep {
                id: T1,
                step: 1,
                of: 3
            },
            Action::Drain(T1)
        ]
    );
    assert!(l.is_rolling());
    // Nothing else moves while tx1 drains, stops and starts.
    l.drained(T1, t);
    assert_eq!(drain(&mut l), vec![Action::Terminate(T1)]);
    l.exited(T1, Exit::Code(0), t);
    assert_eq!(drain(&mut l), vec![Action::Down(T1), Action::Spawn(T1)]);
    assert!(
        l.is_ready(T2) && l.is_ready(M),
        "the others serve meanwhile"
    );
    // tx1 ready again: tx2's turn.
    l.ready(T1, t);
    assert_eq!(
        drain(&mut l),
        vec![
            Action::Up(T1),
            Action::RollingStep {
                id: T2,
                step: 2,
                of: 3
            },
            Action::Drain(T2)
        ]
    );
    let acts = replace(&mut l, T2, t);
    assert_next_step(&acts, M, 3, 3);
    let acts = replace(&mut l, M, t);
    assert_eq!(
        acts,
        vec![
            Action::Terminate(M),
            Action::Down(M),
            Action::Spawn(M),
            Action::Up(M),
            Action::RollingDone
        ]
    );
    assert!(!l.is_rolling());
    assert_eq!((l.restarts(M), l.restarts(T1), l.restarts(T2)), (1, 1, 1));
}

#[test]
fn a_drain_that_runs_out_stops_the_process_anyway() {
    // spec: STOP-3 (drainSeconds bounds each step)
    let t = Instant::now();
    let mut l = running(1, t);
    l.rolling_restart(secs(5), t);
    drain(&mut l);
    assert_eq!(l.poll_timeout(), Some(t + secs(5)));
    l.handle_timeout(t + secs(5));
    assert_eq!(drain(&mut l), vec![Action::Terminate(T1)]);
}

#[test]
fn a_process_that_does_not_come_back_stops_the_sequence() {
    let t = Instant::now();
    let mut l = running(2, t);
    l.rolling_restart(secs(30), t);
    drain(&mut l);
    l.drained(T1, t);
    l.exited(T1, Exit::Code(0), t);
    drain(&mut l);
    // The new tx1 fails: backoff as usual, and tx2 and the master are left alone.
    l.exited(T1, Exit::Code(1), t);
    let acts = drain(&mut l);
    assert!(
        acts.contains(&Action::RollingAborted {
            id: T1,
            how: super::super::Failed::Exited(Exit::Code(1))
        }),
        "{acts:?}"
    );
    assert!(
        !acts.iter().any(|a| matches!(a, Action::Drain(_))),
        "{acts:?}"
    );
    assert!(!l.is_rolling());
    assert!(l.is_ready(T2) && l.is_ready(M));
}

#[test]
fn a_second_request_begins_again_after_the_process_at_hand() {
    let t = Instant::now();
    let mut l = running(2, t);
    l.rolling_restart(secs(30), t);
    drain(&mut l);
    let acts = replace(&mut l, T1, t);
    assert!(acts.contains(&Action::Drain(T2)), "{acts:?}");
    // A second SIGHUP while tx2 drains: tx2 finishes, then tx1, tx2, m0 again.
    assert!(l.rolling_restart(secs(30), t));
    assert_eq!(drain(&mut l), vec![], "nothing starts beside tx2");
    let acts = replace(&mut l, T2, t);
    assert_next_step(&acts, T1, 1, 3);
    let order: Vec<ProcessId> = [T1, T2, M]
        .into_iter()
        .flat_map(|id| replace(&mut l, id, t))
        .filter_map(|a| match a {
            Action::Drain(id) => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(order, vec![T2, M], "tx1 was already under way");
    assert!(!l.is_rolling());
}

#[test]
fn a_rolling_restart_waits_for_a_memory_recycle_under_way() {
    // spec: DEC-6
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(l.recycle(T2, secs(30), t));
    drain(&mut l);
    l.rolling_restart(secs(30), t);
    assert_eq!(drain(&mut l), vec![]);
    let acts = replace(&mut l, T2, t);
    assert!(acts.contains(&Action::Drain(T1)), "{acts:?}");
}

#[test]
fn workers_not_ready_when_their_turn_comes_are_skipped() {
    let t = Instant::now();
    let mut l = running(2, t);
    // tx2 crashed and waits out its backoff.
    l.exited(T2, Exit::Code(1), t);
    drain(&mut l);
    l.rolling_restart(secs(30), t);
    drain(&mut l);
    let acts = replace(&mut l, T1, t);
    assert_next_step(&acts, M, 3, 3);
}

#[test]
fn the_master_alone_is_restarted_too() {
    let t = Instant::now();
    let mut l = running(0, t);
    l.rolling_restart(secs(30), t);
    assert_eq!(
        drain(&mut l),
        vec![
            Action::RollingStep {
                id: M,
                step: 1,
                of: 1
            },
            Action::Drain(M)
        ]
    );
}

#[test]
fn nothing_rolls_while_starting_or_stopping_and_a_stop_ends_it() {
    // spec: STOP-5
    let t = Instant::now();
    let mut l = Lifecycle::new(1, 6, secs(30));
    l.start(t);
    assert!(!l.rolling_restart(secs(30), t));
    assert!(!l.resize(3, secs(30), t));
    let mut l = running(2, t);
    l.rolling_restart(secs(30), t);
    drain(&mut l);
    l.stop(t);
    assert!(!l.is_rolling());
    l.exited(T1, Exit::Code(0), t);
    l.exited(T2, Exit::Code(0), t);
    let acts = drain(&mut l);
    assert!(
        !acts.iter().any(|a| matches!(a, Action::Spawn(_))),
        "{acts:?}"
    );
    assert!(!l.rolling_restart(secs(30), t));
}

#[test]
fn more_workers_start_one_after_another() {
    let t = Instant::now();
    let mut l = running(1, t);
    assert!(l.resize(3, secs(30), t));
    assert_eq!(drain(&mut l), vec![Action::Spawn(T2)]);
    l.ready(T2, t);
    assert_eq!(drain(&mut l), vec![Action::Up(T2), Action::Spawn(T3)]);
    l.ready(T3, t);
    assert_eq!(drain(&mut l), vec![Action::Up(T3)]);
    assert_eq!(l.workers(), 3);
    assert_eq!(l.slot_count(), 4);
}

#[test]
fn fewer_workers_drain_and_stop_the_extra_ones_for_good() {
    let t = Instant::now();
    let mut l = running(3, t);
    assert!(l.resize(1, secs(30), t));
    assert_eq!(drain(&mut l), vec![Action::Drain(T2), Action::Drain(T3)]);
    assert!(l.is_draining(T2) && l.is_draining(T3));
    l.drained(T2, t + secs(10));
    l.handle_timeout(t + secs(30)); // tx3 still busy after drainSeconds
    assert_eq!(
        drain(&mut l),
        vec![Action::Terminate(T2), Action::Terminate(T3)]
    );
    l.exited(T2, Exit::Code(0), t);
    l.exited(T3, Exit::Signal(15), t);
    assert_eq!(
        drain(&mut l),
        vec![
            Action::Down(T2),
            Action::Retired(T2),
            Action::Down(T3),
            Action::Retired(T3)
        ]
    );
    assert!(!l.is_running(T2) && !l.is_running(T3));
    assert_eq!(l.poll_timeout(), None, "nothing waits to start them again");
    // Back to two: tx2 starts afresh.
    l.resize(2, secs(30), t);
    assert_eq!(drain(&mut l), vec![Action::Spawn(T2)]);
}

#[test]
fn a_worker_retired_while_waiting_or_starting_is_forgotten_or_stopped() {
    let t = Instant::now();
    let mut l = running(2, t);
    l.exited(T2, Exit::Code(1), t); // waiting out its backoff
    drain(&mut l);
    l.resize(0, secs(30), t);
    assert_eq!(drain(&mut l), vec![Action::Drain(T1), Action::Retired(T2)]);
    l.handle_timeout(t + secs(60));
    let acts = drain(&mut l);
    assert!(!acts.contains(&Action::Spawn(T2)), "{acts:?}");
    let mut l = running(1, t);
    l.resize(2, secs(30), t);
    drain(&mut l); // tx2 starting
    l.resize(1, secs(30), t);
    assert_eq!(drain(&mut l), vec![Action::Terminate(T2)]);
    l.exited(T2, Exit::Signal(15), t);
    // Never up, so no `Down`: the proxy hears `Down` only after an `Up`.
    assert_eq!(drain(&mut l), vec![Action::Retired(T2)]);
}

#[test]
fn a_stop_while_the_master_drains_for_a_rolling_restart_still_stops_it_last() {
    // spec: STOP-5, STOP-7 (found by the property test: the drain's deadline stopped the master
    // before the workers and their last counts)
    let t = Instant::now();
    let mut l = running(1, t);
    l.rolling_restart(secs(1), t);
    replace(&mut l, T1, t);
    let acts = drain(&mut l);
    assert!(acts.is_empty(), "{acts:?}");
    assert_eq!(l.status(M), Status::Replacing, "the master drains");
    l.stop(t);
    assert_eq!(drain(&mut l), vec![Action::Down(T1), Action::Terminate(T1)]);
    l.handle_timeout(t + secs(2));
    let acts = drain(&mut l);
    assert!(!acts.contains(&Action::Terminate(M)), "{acts:?}");
    l.exited(T1, Exit::Code(0), t + secs(2));
    assert_eq!(drain(&mut l), vec![Action::FlushMaster]);
    l.master_flushed(t + secs(2));
    assert_eq!(drain(&mut l), vec![Action::Down(M), Action::Terminate(M)]);
}

#[test]
fn a_worker_wanted_again_while_it_leaves_starts_afresh_in_its_turn() {
    let t = Instant::now();
    let mut l = running(2, t);
    l.resize(1, secs(30), t);
    assert_eq!(drain(&mut l), vec![Action::Drain(T2)]);
    assert_eq!(l.status(T2), Status::Leaving);
    l.resize(2, secs(30), t);
    assert_eq!(l.status(T2), Status::Leaving, "not out for a restart");
    assert!(l.recycle(T1, secs(30), t), "so a recycle may begin");
    drain(&mut l);
    l.drained(T2, t);
    drain(&mut l);
    assert_eq!(
        l.exited(T2, Exit::Code(0), t),
        Aftermath::Restart { asked: true }
    );
    assert_eq!(drain(&mut l), vec![Action::Down(T2), Action::Spawn(T2)]);
}

#[test]
fn a_reloads_rolling_restart_takes_only_the_processes_picked_and_none_begins_without_one() {
    // spec: DEC-44: a reload restarts exactly the processes whose inputs changed.
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(l.rolling_restart_of(&|_| false, secs(30), t));
    assert!(!l.is_rolling(), "nothing to restart: nothing begins");
    assert_eq!(drain(&mut l), vec![]);

    assert!(l.rolling_restart_of(&|id| id == T2, secs(30), t));
    let first = drain(&mut l);
    assert_next_step(&first, T2, 1, 1);
    let acts = replace(&mut l, T2, t);
    assert_eq!(acts.last(), Some(&Action::RollingDone), "{acts:?}");
    assert!(l.is_ready(T1) && l.is_ready(M), "tx1 and the master kept");
}

#[test]
fn a_second_reload_keeps_the_processes_still_waiting_their_turn() {
    // spec: DEC-44: a reload that picks none (or others) during a rolling restart does not
    // drop the processes the one under way has still to restart.
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(l.rolling_restart(secs(30), t));
    assert_next_step(&drain(&mut l), T1, 1, 3);
    assert!(l.rolling_restart_of(&|_| false, secs(30), t));
    assert!(l.is_rolling());
    // The sequence begins again with those still to do (tx2, the master).
    let acts = replace(&mut l, T1, t);
    assert_next_step(&acts, T2, 1, 2);
    assert!(l.rolling_restart_of(&|id| id == T1, secs(30), t));
    // tx2 at hand finishes; then tx1 again (picked) and the master (still waiting).
    let acts = replace(&mut l, T2, t);
    assert_next_step(&acts, T1, 1, 2);
    let acts = replace(&mut l, T1, t);
    assert_next_step(&acts, M, 2, 2);
}
