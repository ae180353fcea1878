//! Tests of the cluster events and the queue for the master, by spec ID.

use super::*;
use serde_json::json;

const T0: u64 = 1_700_000_000_000;

#[test]
fn the_launcher_start_is_an_event() {
    // spec: EVENT-1
    let mut log = EventLog::new(0, T0);
    let e = log.launcher_started(42, T0);
    assert_eq!(
        e.to_json(),
        json!({"id": T0 * 1000, "at": T0, "kind": "launcherStarted", "pid": 42})
    );
}

#[test]
fn an_exit_names_the_process_and_its_code_or_signal() {
    // spec: EVENT-2
    let mut log = EventLog::new(0, T0);
    let e = log.exited("tx1", "tx-worker", Some(7), Exit::Code(3), T0);
    assert_eq!(
        e.map(|e| e.to_json()),
        Some(
            json!({"id": T0 * 1000, "at": T0, "kind": "exit", "code": "tx1",
            "role": "tx-worker", "pid": 7, "exitCode": 3, "signal": null,
            "how": "exit code 3"})
        )
    );
    let e = log.exited("m0", "master", Some(8), Exit::Signal(9), T0 + 1);
    let v = e.map(|e| e.to_json()).unwrap_or_default();
    assert_eq!(v["signal"], "SIGKILL");
    assert_eq!(v["exitCode"], Value::Null);
}

#[test]
fn a_recycle_says_why_and_its_exit_is_part_of_it() {
    // spec: EVENT-3, DEC-25
    let mut log = EventLog::new(0, T0);
    let e = log.recycling("tx2", "over the threshold for 30 s", T0);
    assert_eq!(e.to_json()["kind"], "recycle");
    assert_eq!(e.to_json()["reason"], "over the threshold for 30 s");
    assert_eq!(
        log.exited("tx2", "tx-worker", None, Exit::Code(0), T0 + 5),
        None
    );
    let back = log.ready("tx2", T0 + 9_000).map(|e| e.to_json());
    assert_eq!(
        back.as_ref().map(|v| v["cause"].clone()),
        Some(json!("recycle"))
    );
    assert_eq!(back.map(|v| v["ms"].clone()), Some(json!(9_000)));
}

#[test]
fn unavailable_time_is_reported_when_ready_again() {
    // spec: EVENT-4, EVENT-5
    let mut log = EventLog::new(0, T0);
    assert_eq!(log.ready("tx1", T0), None, "a first start is no outage");
    log.exited("tx1", "tx-worker", None, Exit::Code(1), T0);
    // It fails again before it is ready: the outage runs from the first exit.
    log.exited("tx1", "tx-worker", None, Exit::Code(1), T0 + 1_000);
    let e = log.ready("tx1", T0 + 4_000).map(|e| e.to_json());
    assert_eq!(
        e.map(|mut v| {
            v.as_object_mut().map(|o| o.remove("id"));
            v
        }),
        Some(
            json!({"at": T0 + 4_000, "kind": "unavailable", "code": "tx1", "cause": "exit",
            "from": T0, "until": T0 + 4_000, "ms": 4_000})
        )
    );
    assert_eq!(log.ready("tx1", T0 + 5_000), None);
}

#[test]
fn the_minute_counts_lost_and_refused_requests_and_write_timeouts() {
    // spec: EVENT-6, EVENT-7, EVENT-8, EVENT-9, EVENT-10, EVENT-11, EVENT-12, EVENT-14
    let mut log = EventLog::new(0, T0);
    assert_eq!(
        log.minute(T0 + 60_000),
        None,
        "nothing counted, nothing sent"
    );
    log.count_lost("tx1", LostKind::Timeout504);
    log.count_lost("tx1", LostKind::Timeout504);
    log.count_lost("tx1", LostKind::BadGateway502);
    log.count_lost("tx2", LostKind::CacheIdWhileRestarting);
    log.count_refused(RefusalKind::QueueWait);
    log.count_refused(RefusalKind::NoProcessReady);
    log.count_refused(RefusalKind::Stopping);
    log.count_refused(RefusalKind::Stopping);
    log.count_write_timeout();
    let v = log
        .minute(T0 + 120_000)
        .map(|e| e.to_json())
        .unwrap_or_default();
    assert_eq!(v["kind"], "counts");
    assert_eq!(v["from"], T0 + 60_000);
    assert_eq!(v["to"], T0 + 120_000);
    assert_eq!(
        v["lost"],
        json!({
            "tx1": {"timeout504": 2, "badGateway502": 1, "cacheIdWhileRestarting": 0},
            "tx2": {"timeout504": 0, "badGateway502": 0, "cacheIdWhileRestarting": 1},
        })
    );
    assert_eq!(
        v["refused"],
        json!({"queueWait": 1, "noProcessReady": 1, "stopping": 2})
    );
    assert_eq!(v["writeTimeoutCloses"], 1);
    assert_eq!(log.minute(T0 + 180_000), None, "the counters start again");
}

#[test]
fn ids_are_unique_and_increasing_even_across_a_restart() {
    let mut log = EventLog::new(0, T0);
    let a = log.launcher_started(1, T0).id;
    let b = log.recycling("tx1", "x", T0).id;
    let c = log.ready("tx1", T0 - 5).map(|e| e.id).unwrap_or(0);
    assert!(a < b && b < c);
    // A new launcher a second later, with nothing saved, still counts up.
    let mut next = EventLog::new(0, T0 + 1_000);
    assert!(next.launcher_started(2, T0 + 1_000).id > c);
    // With the saved last id, after it whatever the clock says.
    let mut next = EventLog::new(c, T0 - 60_000);
    assert_eq!(next.launcher_started(2, T0 - 60_000).id, c + 1);
}

#[test]
fn an_event_reads_back_as_it_was_written() {
    let mut log = EventLog::new(0, T0);
    log.count_lost("tx1", LostKind::Timeout504);
    let evs = [
        log.exited("tx1", "tx-worker", Some(1), Exit::Signal(15), T0),
        log.minute(T0 + 1),
        log.ready("tx1", T0 + 2),
    ];
    for e in evs.into_iter().flatten() {
        let back: Result<Event, _> = serde_json::from_value(e.to_json());
        assert_eq!(back.ok(), Some(e));
    }
}
