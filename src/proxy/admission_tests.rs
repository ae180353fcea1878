//! Admission in tokio's paused time: the timer task, the waiters and the tickets around the real
//! scheduler. The scheduler's own rules are `scheduler/tests.rs`'s; these are the shell's: that
//! a decision reaches its waiter when it is made, whoever makes it (a request, a finish, the
//! timer), and that a ticket tells the scheduler how its request ended exactly once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot::error::TryRecvError;

use super::*;
use crate::proxy::lane::Lane;
use crate::proxy::route::{Target, TxDemand};
use crate::proxy::scheduler::Refusal;

const TX1: ProcessId = ProcessId(1);
const TX2: ProcessId = ProcessId(2);
const OK: Finish = Finish::Responded { status: 200 };

/// `max` slots a process (no fast lane, no minimum), `queue` for `queueSeconds`, the processes
/// ready, and the timer task running.
fn admission(max: u32, queue: Duration, tx: &[ProcessId]) -> Arc<Admission> {
    let cfg = SchedulerConfig {
        max_outstanding: max,
        fast_lane_extra: 0,
        normal_min_slots: 0,
        queue,
        ..SchedulerConfig::default()
    };
    let procs: Vec<(ProcessId, bool)> = tx.iter().map(|&p| (p, true)).collect();
    let a = Admission::new(Scheduler::new(cfg, &procs));
    for &p in tx {
        a.set_state(p, ProcessState::Ready);
    }
    tokio::spawn(a.clone().run_timer());
    a
}

fn any() -> TxDemand {
    TxDemand {
        target: Target::LeastLoaded,
        lane: Lane::Normal,
        counted: true,
    }
}

/// The decision, or a failure if none comes within a (paused) minute: a test never hangs.
async fn within(decision: Verdict) -> Result<Decision, &'static str> {
    tokio::time::timeout(Duration::from_secs(60), decision)
        .await
        .expect("a decision within a minute")
        .ok_or("dropped undecided")
}

/// Lets the spawned tasks (the timer) run what is due without moving the clock.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_past_the_slots_is_refused_by_the_timer_when_queue_seconds_run_out() {
    // spec: QUEUE-4
    let a = admission(1, Duration::from_secs(5), &[TX1]);
    let (first, decided) = a.admit(&any());
    assert_eq!(within(decided).await, Ok(Decision::Go(TX1)));
    let (waiting, mut decision) = a.admit(&any());
    assert_eq!(a.queued(), 1);
    // The paused clock moves 4.9 s at once: the queue's time passing is the scenario.
    tokio::time::sleep(Duration::from_millis(4_900)).await;
    settle().await;
    assert_eq!(
        decision.try_recv(),
        Err(TryRecvError::Empty),
        "still waiting"
    );
    // And past the 5 s (paused clock).
    tokio::time::sleep(Duration::from_millis(200)).await;
    settle().await;
    match decision.try_recv() {
        Ok(Decision::Refused(Refusal::QueueTimeout { waited })) => {
            assert_eq!(waited, Duration::from_secs(5))
        }
        other => panic!("expected the queue's refusal, got {other:?}"),
    }
    waiting.settled();
    assert_eq!(a.queued(), 0);
    first.finish(OK);
    assert_eq!(a.load(TX1).in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_request_is_sent_when_a_slot_frees_and_its_wait_is_measured_once() {
    let a = admission(1, Duration::from_secs(30), &[TX1]);
    let (first, _) = a.admit(&any());
    let (mut waiting, decision) = a.admit(&any());
    // The scenario: it waits 2 s (paused clock) before the slot frees; the wait is measured.
    tokio::time::sleep(Duration::from_secs(2)).await;
    first.finish(OK);
    assert_eq!(
        within(decision).await,
        Ok(Decision::Go(TX1)),
        "the freed slot is its"
    );
    assert_eq!(waiting.dispatched(), (Duration::from_secs(2), true));
    assert_eq!(
        waiting.dispatched(),
        (Duration::from_secs(2), false),
        "a retry elsewhere is the same wait, counted once"
    );
    assert_eq!(a.load(TX1).in_flight, 1);
    waiting.finish(OK);
    assert_eq!(a.load(TX1).in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn a_ticket_dropped_while_waiting_cancels_its_request() {
    // The client went away while its request waited: never sent, and the slot goes to the next.
    let a = admission(1, Duration::from_secs(30), &[TX1]);
    let (first, _) = a.admit(&any());
    let (gone, gone_decision) = a.admit(&any());
    let (next, mut next_decision) = a.admit(&any());
    assert_eq!(a.queued(), 2);
    drop((gone, gone_decision));
    assert_eq!(a.queued(), 1);
    first.finish(OK);
    assert_eq!(next_decision.try_recv(), Ok(Decision::Go(TX1)));
    assert_eq!(a.load(TX1).in_flight, 1, "only the next one was sent");
    // A ticket dropped while its request is served ends it too: the slot is freed.
    drop(next);
    assert_eq!(a.load(TX1).in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn not_sent_is_offered_to_another_process_on_a_new_waiter() {
    let a = admission(1, Duration::from_secs(30), &[TX1, TX2]);
    let (mut ticket, decision) = a.admit(&any());
    let Ok(Decision::Go(first)) = within(decision).await else {
        panic!("sent at once");
    };
    let again = within(ticket.retry()).await;
    let other = if first == TX1 { TX2 } else { TX1 };
    assert_eq!(again, Ok(Decision::Go(other)));
    assert_eq!(a.load(first).in_flight, 0);
    assert_eq!(a.load(other).in_flight, 1);
    ticket.finish(OK);
    assert_eq!(a.load(other).in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn stopping_refuses_what_waits_and_what_comes() {
    // spec: QUEUE-15
    let a = admission(1, Duration::from_secs(30), &[TX1]);
    let (first, _) = a.admit(&any());
    let (waiting, decision) = a.admit(&any());
    a.stop();
    assert!(a.is_stopping());
    assert_eq!(
        within(decision).await,
        Ok(Decision::Refused(Refusal::Stopping))
    );
    waiting.settled();
    let (late, decision) = a.admit(&any());
    assert_eq!(
        within(decision).await,
        Ok(Decision::Refused(Refusal::Stopping))
    );
    late.settled();
    first.finish(OK);
}

#[tokio::test(start_paused = true)]
async fn the_saturation_watch_sleeps_until_a_request_is_sent() {
    let a = admission(1, Duration::from_secs(30), &[TX1]);
    let watch = tokio::spawn({
        let a = a.clone();
        async move { a.until_busy().await }
    });
    // The scenario: a minute with nothing in flight (paused clock), over which it must not wake.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!watch.is_finished(), "nothing in flight: it sleeps");
    let (ticket, _) = a.admit(&any());
    tokio::time::timeout(Duration::from_secs(1), watch)
        .await
        .expect("woken by the dispatch")
        .expect("the watch task");
    // Asked while a request is in flight, it does not wait.
    tokio::time::timeout(Duration::from_secs(1), a.until_busy())
        .await
        .expect("busy already");
    ticket.finish(OK);
}

#[tokio::test(start_paused = true)]
async fn has_waiters_says_whether_a_request_waits_whoever_ended_the_wait() {
    // Read without the lock by every connection as its response ends (`conn::hyper_phase`): it must
    // follow a wait's every end, a dispatch, a cancel and the queue's timeout.
    let a = admission(1, Duration::from_secs(5), &[TX1]);
    let (first, decided) = a.admit(&any());
    assert_eq!(within(decided).await, Ok(Decision::Go(TX1)));
    assert!(!a.has_waiters(), "dispatched at once: nothing waits");
    let (second, decision) = a.admit(&any());
    assert!(a.has_waiters());
    first.finish(OK);
    assert!(!a.has_waiters(), "dispatched by the finish");
    assert_eq!(within(decision).await, Ok(Decision::Go(TX1)));
    let (cancelled, _decision) = a.admit(&any());
    assert!(a.has_waiters());
    drop(cancelled);
    assert!(!a.has_waiters(), "the client left");
    let (timed_out, decision) = a.admit(&any());
    assert!(a.has_waiters());
    // The paused clock runs past queueSeconds: the scenario.
    tokio::time::sleep(Duration::from_secs(6)).await;
    settle().await;
    assert!(matches!(within(decision).await, Ok(Decision::Refused(_))));
    assert!(!a.has_waiters(), "refused by the timer");
    timed_out.settled();
    second.finish(OK);
}

/// Whether the drained news has a wake-up waiting (taken if so), without waiting.
async fn woken(news: &tokio::sync::Notify) -> bool {
    tokio::time::timeout(Duration::ZERO, news.notified())
        .await
        .is_ok()
}

#[tokio::test(start_paused = true)]
async fn a_draining_process_wakes_the_supervisor_as_its_last_request_ends() {
    // spec: DEC-83: a roll's next step is not left to the supervisor's once-a-second look.
    let a = admission(2, Duration::from_secs(30), &[TX1, TX2]);
    let news = a.drained_news();
    let (one, _) = a.admit(&TxDemand {
        target: Target::Owner(TX1),
        ..any()
    });
    let (two, _) = a.admit(&TxDemand {
        target: Target::Owner(TX1),
        ..any()
    });
    let (other, _) = a.admit(&TxDemand {
        target: Target::Owner(TX2),
        ..any()
    });
    a.set_state(TX1, ProcessState::Draining);
    assert!(!woken(&news).await, "two at work on it");
    one.finish(OK);
    other.finish(OK);
    assert!(
        !woken(&news).await,
        "one left on it; the other process drains not"
    );
    drop(two); // the client went away: its end counts as well
    assert!(woken(&news).await, "its last request ended");
    // One that drains with nothing at work says so at once.
    a.set_state(TX2, ProcessState::Draining);
    assert!(woken(&news).await);
}
