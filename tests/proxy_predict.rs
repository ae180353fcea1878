//! `predictiveAdmission` (DEC-50) through the real front door: a worker whose requests take
//! long (a sim response that lasts 3 s, so its slot stays busy, with no CPU burnt), and a flood
//! behind its two slots. With it on, the flood gets the queue's `503` at once, in much less than
//! `queueSeconds`, with a `Retry-After` that follows the time the slots have left; with it off,
//! the same flood waits out the queue and is told 5 s.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// A request the worker takes 3 s to answer (its response lasts that long).
const LONG: &str = "/r4/ValueSet/$expand?url=x&_sim_stream=3";
const QUEUE: Duration = Duration::from_secs(1);

fn cluster_with(predictive: bool) -> (Cluster, u16) {
    let admin = admin_addr();
    let c = cluster()
        .workers(1)
        .env("SIM_COST_EXPAND_MS", "0")
        .config(json!({ "server": { "cluster": {
            "masterServesTx": false, "maxOutstanding": 2, "fastLaneExtra": 0,
            "normalMinSlots": 0, "queueSeconds": 1, "saturatedPercent": 0,
            "predictiveAdmission": predictive, "adminAddress": admin.to_string()
        } } }))
        .start();
    (c, admin.port())
}

/// The worker's two slots taken by long requests, answered in the background; returns once
/// the launcher has both in flight.
fn occupy(c: &Cluster, admin: u16) -> Vec<std::thread::JoinHandle<Response>> {
    let addr = c.addr();
    let busy: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || request(addr, "GET", LONG, &[], b"")))
        .collect();
    wait_until(
        "both long requests in flight on tx1",
        Duration::from_secs(10),
        || scrape(admin).value("fhircluster_in_flight", &[("process", "tx1")]) == 2.0,
    );
    busy
}

fn retry_after(r: &Response) -> u64 {
    r.header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn with_prediction_a_flood_behind_long_work_is_refused_at_once_told_when_a_slot_frees() {
    // spec: DEC-50, QUEUE-4, QUEUE-5 (the same 503, OperationOutcome and Connection: close)
    let (c, admin) = cluster_with(true);
    let addr = c.addr();
    // The worker's service time measured: two answers of 3 s.
    for r in in_parallel(2, move |_| request(addr, "GET", LONG, &[], b"")) {
        assert_eq!(r.status, 200);
    }
    let busy = occupy(&c, admin);
    let started = Instant::now();
    // A flood of 12 at once: each refused in much less than queueSeconds.
    let flood = in_parallel(12, move |_| {
        let t = Instant::now();
        let r = request(addr, "GET", LONG, &[], b"");
        (r, t.elapsed())
    });
    for (r, took) in &flood {
        assert_eq!(r.status, 503, "{:?}", r.headers);
        assert!(*took < QUEUE / 3, "refused after {took:?}, not at once");
        assert_eq!(r.header("connection"), Some("close"));
        assert_eq!(r.served_by(), "", "the launcher's own 503");
        assert_eq!(r.json()["resourceType"], "OperationOutcome");
        let ra = retry_after(r);
        assert!(
            (3..=4).contains(&ra),
            "a slot in about 3 s: Retry-After {ra}"
        );
    }
    // Then one client at 10 a second (its own pace, not a wait for anything): refused at once
    // while the slots have more than the wait left, told less and less, until one waits and
    // gets the slot that frees.
    let mut told = Vec::new();
    let served = loop {
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "no slot freed: {told:?}"
        );
        let t = Instant::now();
        let r = request(addr, "GET", LONG, &[], b"");
        let took = t.elapsed();
        if r.status == 200 {
            break took;
        }
        assert_eq!(r.status, 503);
        if took >= QUEUE {
            // Let wait, and timed out: the slot freed later than forecast (the long requests
            // ran slower than their measured times, as on a loaded machine). The spec's own
            // answer, not a false early refusal.
            continue;
        }
        assert!(took < QUEUE / 3, "refused after {took:?}");
        told.push((started.elapsed(), retry_after(&r)));
        // The scenario: the client's own pace, 10 a second, not a wait for a state.
        std::thread::sleep(Duration::from_millis(100));
    };
    let values: Vec<u64> = told.iter().map(|&(_, ra)| ra).collect();
    assert!(
        values.windows(2).all(|w| w[1] <= w[0]),
        "Retry-After follows the time left, never up: {told:?}"
    );
    assert!(values.first().is_some_and(|&v| v >= 2), "{told:?}");
    assert!(values.last().is_some_and(|&v| v <= 2), "{told:?}");
    // The one that waited got the slot within its wait, then its 3 s.
    assert!(
        served < QUEUE + Duration::from_secs(3) + Duration::from_millis(700),
        "{served:?}"
    );
    for b in busy {
        assert_eq!(b.join().map(|r| r.status).unwrap_or(0), 200);
    }
    let early: usize = told.len() + flood.len();
    report_figures(
        "proxy_predict::with_prediction",
        &format!(
            "predictiveAdmission on: a flood behind 2 slots busy 3 s, then a paced client \
             (Retry-After told: {values:?})"
        ),
        0,
        early as u64 + 1,
        0,
        &format!(
            "{early} refused at once (each under a third of queueSeconds), the next served in time"
        ),
    );
}

#[test]
fn without_prediction_the_same_flood_waits_out_the_queue_and_is_told_5_s() {
    // spec: QUEUE-4, QUEUE-5 (predictiveAdmission off: the spec's rule alone)
    let (c, admin) = cluster_with(false);
    let addr = c.addr();
    for r in in_parallel(2, move |_| request(addr, "GET", LONG, &[], b"")) {
        assert_eq!(r.status, 200);
    }
    let busy = occupy(&c, admin);
    let flood = in_parallel(6, move |_| {
        let t = Instant::now();
        let r = request(addr, "GET", LONG, &[], b"");
        (r, t.elapsed())
    });
    for (r, took) in &flood {
        assert_eq!(r.status, 503, "{:?}", r.headers);
        assert!(
            *took >= QUEUE - Duration::from_millis(100),
            "refused after {took:?}"
        );
        assert_eq!(r.header("retry-after"), Some("5"));
        assert_eq!(r.header("connection"), Some("close"));
    }
    for b in busy {
        assert_eq!(b.join().map(|r| r.status).unwrap_or(0), 200);
    }
}
