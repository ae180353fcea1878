//! Admission through the real front door under load: a surge past capacity is refused with the
//! launcher's own `503` after `queueSeconds`, and a cheap `$lookup` probe takes the fast lane past
//! a queue of `$expand`s (and, without the lane, waits in that queue). The sims burn real CPU
//! (`SIM_COST_EXPAND_MS`), so the bounds leave room for a busy machine.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

#[test]
fn a_surge_past_capacity_gets_503_retry_after_5_and_connection_close_after_queue_seconds() {
    // spec: QUEUE-1, QUEUE-2, QUEUE-4, QUEUE-5, QUEUE-17
    // Two tx processes (m0 and tx1) with 2 slots each take 4 `$expand`s of 200 ms at a time;
    // 24 at once leave 20 waiting, and in 0.5 s only a few of those get a slot.
    let c = cluster()
        .workers(1)
        .env("SIM_COST_EXPAND_MS", "200")
        .config(json!({ "server": { "cluster": {
            "maxOutstanding": 2, "fastLaneExtra": 0, "normalMinSlots": 0, "queueSeconds": 0.5,
            "saturatedPercent": 0
        } } }))
        .start();
    let addr = c.addr();
    let results = in_parallel(24, move |_| {
        let t = Instant::now();
        let r = request(addr, "GET", "/r4/ValueSet/$expand?url=x", &[], b"");
        (r, t.elapsed())
    });
    let ok: Vec<_> = results.iter().filter(|(r, _)| r.status == 200).collect();
    let refused: Vec<_> = results.iter().filter(|(r, _)| r.status == 503).collect();
    assert_eq!(
        ok.len() + refused.len(),
        24,
        "only 200 and 503: {:?}",
        results.iter().map(|(r, _)| r.status).collect::<Vec<_>>()
    );
    assert!(
        ok.len() >= 4,
        "at least the first 4 are served: {}",
        ok.len()
    );
    assert!(
        refused.len() >= 8,
        "most of the rest are refused: {} refused",
        refused.len()
    );
    for (r, took) in &refused {
        assert_eq!(r.header("retry-after"), Some("5"), "{:?}", r.headers);
        assert_eq!(r.header("connection"), Some("close"), "{:?}", r.headers);
        assert_eq!(r.served_by(), "", "the launcher's own 503, not a process's");
        assert_eq!(r.json()["resourceType"], "OperationOutcome");
        // After about queueSeconds: not at once, and not after the surge has been served.
        assert!(
            *took >= Duration::from_millis(400) && *took < Duration::from_secs(4),
            "a 503 after {took:?}"
        );
    }
    // The processes themselves never had more than maxOutstanding at once: whatever they
    // served, each 200 took at most about 2 turns of 200 ms plus the wait.
    let served_by_m0 = ok.iter().filter(|(r, _)| r.served_by() == "m0").count();
    let served_by_tx1 = ok.iter().filter(|(r, _)| r.served_by() == "tx1").count();
    assert!(
        served_by_m0 >= 2 && served_by_tx1 >= 2,
        "{served_by_m0} {served_by_tx1}"
    );
    // The refusals are logged, once (the next line would come a minute later) (QUEUE-17).
    let needle = "refused with 503: no process had room";
    c.wait_for_count(needle, 1, Duration::from_secs(5));
    holds_for(
        "one refusal line (at most once a minute)",
        Duration::from_millis(1500),
        || c.count_lines(needle) == 1,
    );
    let line = c
        .log_lines()
        .into_iter()
        .find(|l| l.contains(needle))
        .unwrap_or_default();
    // The count: of the refusals so far (a burst may straddle the once-a-second read).
    let count: usize = line
        .split(" request(s) refused")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        (1..=refused.len()).contains(&count),
        "with the count (of {}): {line}",
        refused.len()
    );
    // After the surge, the launcher serves again at once.
    let (r, took) = c.timed("GET", "/r4/CodeSystem/$lookup?code=1", &[], b"");
    assert_eq!(r.status, 200);
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// Runs 24 closed-loop `$expand` clients against a cluster with 2 tx processes of 2 normal slots
/// each (so about 20 wait in the launcher at any time), and times `probes` `GET $lookup`s sent
/// one after another meanwhile. Returns the probes' times, sorted, and their statuses.
fn probe_during_surge(fast_lane_extra: u32, probes: usize) -> (Vec<Duration>, Vec<u16>) {
    let admin = admin_addr();
    let c = cluster()
        .workers(1)
        .env("SIM_COST_EXPAND_MS", "100")
        .config(json!({ "server": { "cluster": {
            "maxOutstanding": 2, "fastLaneExtra": fast_lane_extra, "normalMinSlots": 2,
            "queueSeconds": 20, "adminAddress": admin.to_string()
        } } }))
        .start();
    let addr = c.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let surge: Vec<_> = (0..24)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut served = 0;
                while !stop.load(Ordering::Relaxed) {
                    let r = request(addr, "GET", "/r4/ValueSet/$expand?url=x", &[], b"");
                    served += usize::from(r.status == 200);
                }
                served
            })
        })
        .collect();
    // The queue built up: every slot taken and most of the surge waiting.
    wait_until(
        "a queue of 16 in the launcher",
        Duration::from_secs(10),
        || admin_status(admin)["front"]["queued"].as_u64() >= Some(16),
    );
    let mut times = Vec::new();
    let mut statuses = Vec::new();
    for _ in 0..probes {
        let (r, took) = c.timed(
            "GET",
            "/r4/CodeSystem/$lookup?system=http://loinc.org&code=8480-6",
            &[],
            b"",
        );
        statuses.push(r.status);
        times.push(took);
        // Probes one after another with a pause, as a user clicking would (the scenario).
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let served: usize = surge.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    assert!(served > 0, "the surge was served");
    times.sort();
    eprintln!("fastLaneExtra {fast_lane_extra}: probes took {times:?}; {served} $expand served");
    (times, statuses)
}

#[test]
fn during_a_surge_of_expands_a_lookup_takes_the_fast_lane_and_without_it_waits_in_line() {
    // spec: LANE-2, LANE-3, LANE-8, LANE-13, QUEUE-3, CONF-20
    // The probe's own cost is 4 ms; on a process running its 2 `$expand`s it waits a turn behind
    // each (25 ms slices), and the `$expand`s waiting in the launcher (about 1 s of them) are not
    // in its way. Without the lane (the control) it waits behind them, oldest first.
    let (lane, statuses) = probe_during_surge(2, 5);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let (no_lane, statuses) = probe_during_surge(0, 3);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let lane_median = lane[lane.len() / 2];
    let no_lane_median = no_lane[no_lane.len() / 2];
    assert!(
        lane_median < Duration::from_secs(1),
        "in the fast lane the probe took {lane:?}"
    );
    assert!(
        no_lane_median > Duration::from_millis(500) && no_lane_median > lane_median * 3,
        "without the lane the probe should wait in line: {no_lane:?}, with it {lane:?}"
    );
}
