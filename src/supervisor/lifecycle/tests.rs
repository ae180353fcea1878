//! Unit tests of the lifecycle: no processes, no sleeps, simulated time.

use super::test_support::*;
use super::*;

#[test]
fn master_first_then_workers_one_at_a_time() {
    // spec: LAUNCH-2, LAUNCH-7, ROLE-1, ROLE-3
    let t = Instant::now();
    let mut l = Lifecycle::new(2, 6, secs(30));
    l.start(t);
    assert_eq!(drain(&mut l), vec![Action::Spawn(M)]);
    l.ready(M, t);
    assert_eq!(drain(&mut l), vec![Action::Up(M), Action::SizeWorkers]);
    l.set_workers(2, t);
    assert_eq!(drain(&mut l), vec![Action::Spawn(T1)]);
    l.ready(T1, t);
    assert_eq!(drain(&mut l), vec![Action::Up(T1), Action::Spawn(T2)]);
    l.ready(T2, t);
    assert_eq!(drain(&mut l), vec![Action::Up(T2), Action::AllReady]);
    // Said once: a worker restarted and ready again is not "every worker ready" again.
    l.exited(T1, Exit::Code(1), t + secs(100));
    l.handle_timeout(t + secs(200));
    l.ready(T1, t + secs(201));
    let acts = drain(&mut l);
    assert!(!acts.contains(&Action::AllReady), "{acts:?}");
}

#[test]
fn sizing_can_lower_the_worker_count() {
    // spec: MEM-8, SIZE-13
    let t = Instant::now();
    let mut l = Lifecycle::new(3, 6, secs(30));
    l.start(t);
    l.ready(M, t);
    l.set_workers(1, t);
    l.ready(T1, t);
    let acts = drain(&mut l);
    assert!(!acts.contains(&Action::Spawn(T2)), "{acts:?}");
    assert_eq!(l.workers(), 1);
}

#[test]
fn zero_workers_is_the_master_alone() {
    // spec: CONF-6
    let t = Instant::now();
    let mut l = Lifecycle::new(0, 6, secs(30));
    l.start(t);
    l.ready(M, t);
    l.set_workers(0, t);
    assert_eq!(
        drain(&mut l),
        vec![
            Action::Spawn(M),
            Action::Up(M),
            Action::SizeWorkers,
            Action::AllReady
        ]
    );
}

#[test]
fn a_worker_that_fails_to_start_does_not_hold_the_next_back() {
    let t = Instant::now();
    let mut l = Lifecycle::new(2, 6, secs(30));
    l.start(t);
    l.ready(M, t);
    l.set_workers(2, t);
    drain(&mut l);
    l.exited(T1, Exit::Code(1), t);
    let acts = drain(&mut l);
    assert!(acts.contains(&Action::Spawn(T2)), "{acts:?}");
}

#[test]
fn a_crashed_worker_is_restarted_after_its_backoff_with_the_master_untouched() {
    // spec: RESTART-1, RESTART-2, RESTART-6, RESTART-11
    let t = Instant::now();
    let mut l = running(2, t);
    l.exited(T1, Exit::Signal(9), t + secs(1));
    assert_eq!(
        drain(&mut l),
        vec![
            Action::Down(T1),
            Action::RestartScheduled {
                id: T1,
                after: secs(1),
                failing: true
            }
        ]
    );
    assert_eq!(l.poll_timeout(), Some(t + secs(2)));
    l.handle_timeout(t + secs(2));
    assert_eq!(drain(&mut l), vec![Action::Spawn(T1)]);
    assert_eq!(l.restarts(T1), 1);
    assert!(l.is_ready(M));
    // Exits again before ready: the wait doubles.
    l.exited(T1, Exit::Code(1), t + secs(3));
    assert_eq!(
        drain(&mut l),
        vec![Action::RestartScheduled {
            id: T1,
            after: secs(2),
            failing: true
        }]
    );
}

#[test]
fn the_master_that_never_gets_ready_is_given_up_after_max_start_failures() {
    // spec: RESTART-7, LAUNCH-6
    let mut t = Instant::now();
    let mut l = Lifecycle::new(2, 3, secs(30));
    l.start(t);
    drain(&mut l);
    for _ in 0..2 {
        l.exited(M, Exit::Code(1), t);
        let next = l.poll_timeout().expect("a restart is scheduled");
        t = next;
        l.handle_timeout(t);
        drain(&mut l);
    }
    l.exited(M, Exit::Code(1), t);
    assert_eq!(
        drain(&mut l),
        vec![Action::GiveUp { failures: 3 }, Action::Finished]
    );
    assert_eq!(l.gave_up(), Some(3));
    assert_eq!(l.poll_timeout(), None);
}

#[test]
fn stop_terminates_workers_then_flushes_then_the_master() {
    // spec: STOP-5, STOP-6, STOP-7, STOP-9
    let t = Instant::now();
    let mut l = running(2, t);
    l.stop(t);
    assert_eq!(
        drain(&mut l),
        vec![
            Action::Down(T1),
            Action::Terminate(T1),
            Action::Down(T2),
            Action::Terminate(T2)
        ]
    );
    l.exited(T1, Exit::Code(0), t);
    assert_eq!(drain(&mut l), vec![]);
    l.exited(T2, Exit::Code(0), t);
    assert_eq!(drain(&mut l), vec![Action::FlushMaster]);
    l.master_flushed(t);
    assert_eq!(drain(&mut l), vec![Action::Down(M), Action::Terminate(M)]);
    l.exited(M, Exit::Code(0), t);
    assert_eq!(drain(&mut l), vec![Action::Finished]);
}

#[test]
fn the_counts_wait_ends_after_five_seconds_without_an_answer() {
    // spec: STOP-7
    let t = Instant::now();
    let mut l = running(2, t);
    l.stop(t);
    l.exited(T1, Exit::Code(0), t);
    l.exited(T2, Exit::Code(0), t);
    drain(&mut l);
    assert_eq!(l.poll_timeout(), Some(t + COUNTS_WAIT));
    l.handle_timeout(t + COUNTS_WAIT);
    assert_eq!(drain(&mut l), vec![Action::Down(M), Action::Terminate(M)]);
}

#[test]
fn a_process_still_running_after_kill_after_is_killed() {
    // spec: STOP-8
    let t = Instant::now();
    let mut l = running(2, t);
    l.stop(t);
    drain(&mut l);
    l.exited(T2, Exit::Code(0), t);
    assert_eq!(l.poll_timeout(), Some(t + secs(30)));
    l.handle_timeout(t + secs(29));
    assert_eq!(drain(&mut l), vec![]);
    l.handle_timeout(t + secs(30));
    assert_eq!(drain(&mut l), vec![Action::Kill(T1)]);
    // Killed once only.
    l.handle_timeout(t + secs(40));
    assert_eq!(drain(&mut l), vec![]);
    l.exited(T1, Exit::Signal(9), t + secs(30));
    assert_eq!(drain(&mut l), vec![Action::FlushMaster]);
}

#[test]
fn a_second_stop_does_not_skip_the_order() {
    let t = Instant::now();
    let mut l = running(2, t);
    l.stop(t);
    drain(&mut l);
    l.stop(t);
    assert_eq!(drain(&mut l), vec![]);
    assert!(l.is_running(M));
}

#[test]
fn nothing_is_restarted_while_stopping() {
    // spec: STOP-5
    let t = Instant::now();
    let mut l = running(2, t);
    l.exited(T1, Exit::Code(1), t);
    drain(&mut l);
    l.stop(t);
    let acts = drain(&mut l);
    assert_eq!(acts, vec![Action::Down(T2), Action::Terminate(T2)]);
    l.handle_timeout(t + secs(100));
    let acts = drain(&mut l);
    assert!(
        !acts.iter().any(|a| matches!(a, Action::Spawn(_))),
        "{acts:?}"
    );
}

#[test]
fn stop_while_the_master_waits_out_a_backoff_finishes_without_it() {
    let t = Instant::now();
    let mut l = running(2, t);
    l.exited(M, Exit::Code(1), t);
    drain(&mut l);
    l.stop(t);
    l.exited(T1, Exit::Code(0), t);
    l.exited(T2, Exit::Code(0), t);
    let acts = drain(&mut l);
    assert_eq!(acts.last(), Some(&Action::Finished), "{acts:?}");
}

#[test]
fn a_master_restart_leaves_the_workers_running() {
    // spec: RESTART-11, RESTART-9
    let t = Instant::now();
    let mut l = running(2, t);
    l.exited(M, Exit::Signal(9), t + secs(120));
    let acts = drain(&mut l);
    assert!(!acts.iter().any(|a| matches!(a, Action::Terminate(_))));
    assert!(l.is_ready(T1) && l.is_ready(T2));
    l.handle_timeout(t + secs(121));
    assert_eq!(drain(&mut l), vec![Action::Spawn(M)]);
    l.ready(M, t + secs(122));
    // Ready again after the first time: no second sizing.
    assert_eq!(drain(&mut l), vec![Action::Up(M)]);
}

#[test]
fn a_recycle_drains_then_stops_then_starts_again_at_once() {
    // spec: RECYCLE-2, RECYCLE-3, RECYCLE-4, RECYCLE-5
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(l.recycle(T1, secs(30), t));
    assert_eq!(drain(&mut l), vec![Action::Drain(T1)]);
    assert_eq!(l.status(T1), Status::Replacing);
    l.drained(T1, t + secs(1));
    assert_eq!(drain(&mut l), vec![Action::Terminate(T1)]);
    l.exited(T1, Exit::Code(0), t + secs(2));
    assert_eq!(drain(&mut l), vec![Action::Down(T1), Action::Spawn(T1)]);
    assert_eq!(l.restarts(T1), 1);
    l.ready(T1, t + secs(3));
    assert_eq!(drain(&mut l), vec![Action::Up(T1)]);
    assert_eq!(l.status(T1), Status::Ready { since: t + secs(3) });
}

#[test]
fn a_drain_that_runs_out_of_time_stops_the_worker_anyway() {
    // spec: RECYCLE-3, CONF-11
    let t = Instant::now();
    let mut l = running(2, t);
    l.recycle(T2, secs(30), t);
    drain(&mut l);
    assert_eq!(l.poll_timeout(), Some(t + secs(30)));
    l.handle_timeout(t + secs(30));
    assert_eq!(drain(&mut l), vec![Action::Terminate(T2)]);
    // A zero drain stops it at the first tick.
    let mut l = running(2, t);
    l.recycle(T1, Duration::ZERO, t);
    l.handle_timeout(t);
    assert_eq!(
        drain(&mut l),
        vec![Action::Drain(T1), Action::Terminate(T1)]
    );
}

#[test]
fn the_master_is_never_recycled() {
    // spec: RECYCLE-6
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(!l.recycle(M, secs(30), t));
    assert_eq!(drain(&mut l), vec![]);
}

#[test]
fn stop_during_a_recycle_keeps_the_order_and_does_not_restart() {
    let t = Instant::now();
    let mut l = running(2, t);
    l.recycle(T1, secs(30), t);
    drain(&mut l);
    l.stop(t);
    let acts = drain(&mut l);
    assert!(acts.contains(&Action::Terminate(T1)), "{acts:?}");
    l.exited(T1, Exit::Code(0), t);
    l.exited(T2, Exit::Code(0), t);
    let acts = drain(&mut l);
    assert!(!acts.contains(&Action::Spawn(T1)), "{acts:?}");
    assert!(acts.contains(&Action::FlushMaster), "{acts:?}");
}

#[test]
fn each_exit_says_what_it_meant() {
    // spec: RESTART-1, RECYCLE-5, RESTART-7, STOP-5
    let t = Instant::now();
    let mut l = running(2, t);
    // A crash: started again after a backoff, not asked for.
    assert_eq!(
        l.exited(T1, Exit::Signal(9), t),
        Aftermath::Restart { asked: false }
    );
    assert_eq!(l.status(T1), Status::Restarting);
    assert_eq!(l.restarts(T1), 1, "counted when the exit is seen");
    l.handle_timeout(t + secs(1));
    assert_eq!(l.status(T1), Status::Starting { again: true });
    l.ready(T1, t + secs(1));
    // A recycle: asked for, started again at once.
    assert!(l.recycle(T2, secs(30), t + secs(2)));
    assert_eq!(l.status(T2), Status::Replacing);
    assert_eq!(
        l.exited(T2, Exit::Code(0), t + secs(3)),
        Aftermath::Restart { asked: true }
    );
    l.ready(T2, t + secs(4));
    // Retired by a lower count: asked for, gone.
    assert!(l.resize(1, secs(30), t + secs(5)));
    assert_eq!(l.status(T2), Status::Leaving);
    assert_eq!(
        l.exited(T2, Exit::Code(0), t + secs(6)),
        Aftermath::Gone { asked: true }
    );
    assert_eq!(l.status(T2), Status::Gone);
    assert_eq!(l.restarts(T2), 1, "the retirement is no restart");
    // Stopped with the launcher: asked for, gone; an exit from nothing running changes nothing.
    l.stop(t + secs(7));
    assert_eq!(l.status(T1), Status::Stopping);
    assert_eq!(
        l.exited(T1, Exit::Code(0), t + secs(8)),
        Aftermath::Gone { asked: true }
    );
    assert_eq!(
        l.exited(T2, Exit::Code(0), t + secs(8)),
        Aftermath::NotRunning
    );
    drain(&mut l);
    // The master given up: gone, not asked for.
    let mut l = Lifecycle::new(1, 1, secs(30));
    l.start(t);
    assert_eq!(
        l.exited(M, Exit::Code(3), t),
        Aftermath::Gone { asked: false }
    );
    assert_eq!(l.gave_up(), Some(1));
}

#[test]
fn one_restart_at_a_time_and_the_proxy_hears_up_and_down_in_pairs() {
    // spec: DEC-6, RECYCLE-9
    let t = Instant::now();
    let mut l = running(2, t);
    assert!(l.recycle(T1, secs(30), t));
    assert!(l.restart_under_way());
    assert!(!l.recycle(T2, secs(30), t), "one recycle at a time");
    l.drained(T1, t);
    l.exited(T1, Exit::Code(0), t);
    assert!(l.restart_under_way(), "until the replacement is ready");
    assert!(!l.is_up(T1));
    l.ready(T1, t);
    assert!(!l.restart_under_way() && l.is_up(T1));
    assert!(l.rolling_restart(secs(30), t));
    assert!(!l.recycle(T2, secs(30), t), "not during a rolling restart");
    // A recycled worker stopped by the launcher's stop still gets its `Down`, once.
    let mut l = running(2, t);
    l.recycle(T1, secs(30), t);
    l.drained(T1, t);
    drain(&mut l);
    l.stop(t);
    l.exited(T1, Exit::Code(0), t);
    let downs = drain(&mut l)
        .into_iter()
        .filter(|a| *a == Action::Down(T1))
        .count();
    assert_eq!(downs, 1);
}

#[test]
fn restarts_are_counted_by_reason_and_a_planned_one_is_no_crash() {
    // spec: DEC-47
    use crate::status::restarts::RestartReason::{Crash, Recycle, Rolling};
    let t = Instant::now();
    let mut l = running(2, t);
    // A crash.
    l.exited(T1, Exit::Signal(9), t);
    l.handle_timeout(t + secs(1));
    l.ready(T1, t + secs(1));
    // A recycle.
    assert!(l.recycle(T2, secs(30), t + secs(2)));
    l.drained(T2, t + secs(2));
    l.exited(T2, Exit::Code(0), t + secs(2));
    l.ready(T2, t + secs(3));
    drain(&mut l);
    // A rolling restart: every process, one at a time, the master last.
    assert!(l.rolling_restart(secs(30), t + secs(4)));
    let mut at = t + secs(4);
    for _ in 0..20 {
        at += secs(1);
        for a in drain(&mut l) {
            match a {
                Action::Drain(id) => l.drained(id, at),
                Action::Terminate(id) => {
                    l.exited(id, Exit::Code(0), at);
                }
                Action::Spawn(id) => l.ready(id, at),
                _ => {}
            }
        }
        if !l.is_rolling() {
            break;
        }
    }
    assert!(!l.is_rolling(), "the rolling restart ended");
    let by = |id| l.restarts_by(id);
    assert_eq!((by(T1).get(Crash), by(T1).get(Rolling)), (1, 1));
    assert_eq!((by(T2).get(Recycle), by(T2).get(Rolling)), (1, 1));
    assert_eq!((by(M).get(Crash), by(M).get(Rolling)), (0, 1));
    assert_eq!(l.restarts(T1), 2, "the total counts them all");
}
