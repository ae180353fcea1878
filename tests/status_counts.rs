//! The workers' request counts reach the master exactly once (spec "Request counts"): tx1 sends
//! every second, tx2 only as it stops; counts sent while the master is down wait and arrive
//! once; at the stop the master (made to ignore SIGTERM, so it can still be asked) has them all.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

fn received(c: &Cluster) -> Value {
    c.direct(0, "GET", "/sim/received").json()
}

fn worker_total(r: &Value, code: &str) -> u64 {
    r["workerCounts"][code].as_u64().unwrap_or(0)
}

/// A cache-id issued by `code`, created through the front door.
fn cache_id_of(c: &Cluster, code: &str) -> String {
    poll(
        &format!("a cache-id from {code}"),
        Duration::from_secs(10),
        || {
            let r = c.request("POST", "/r4/$cache-control", &[], b"");
            (r.status == 200 && r.served_by() == code)
                .then(|| r.header("x-cache-id").unwrap_or("").to_string())
        },
    )
}

/// `n` requests pinned to the issuer of `id`; each must be served by `code`.
fn send(c: &Cluster, id: &str, code: &str, n: u64) {
    for _ in 0..n {
        let r = c.request(
            "GET",
            "/r4/CodeSystem/$lookup?code=x",
            &[("X-Cache-Id", id)],
            b"",
        );
        assert_eq!((r.status, r.served_by()), (200, code), "{}", r.text());
    }
}

/// Requests each worker has served, by its own word.
fn served(c: &Cluster, index: u16) -> u64 {
    c.direct(index, "GET", "/sim/info").json()["requests"]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn worker_counts_reach_the_master_exactly_once() {
    // spec: COUNT-1, COUNT-2, COUNT-3, DEC-18
    let mut c = cluster()
        .workers(2)
        .env("SIM_COUNTS_SECONDS_tx1", "1")
        .env("SIM_COUNTS_SECONDS_tx2", "3600")
        .env("SIM_IGNORE_SIGTERM_m0", "1")
        // The master takes 3 s to start, so counts pile up while it is down.
        .env("SIM_START_DELAY_MS_m0", "3000")
        .config(json!({"server": {"cluster": {"recycleSeconds": 0}}}))
        .start();
    let id1 = cache_id_of(&c, "tx1");
    let id2 = cache_id_of(&c, "tx2");
    send(&c, &id1, "tx1", 7);
    send(&c, &id2, "tx2", 5);
    let n1 = served(&c, 1);
    let n2 = served(&c, 2);
    assert!(n1 >= 8 && n2 >= 6, "tx1 {n1}, tx2 {n2}");

    // COUNT-1: tx1's minute (here: second) sends add up to what it served; tx2 hasn't sent.
    let r = poll(
        "tx1's counts at the master",
        Duration::from_secs(10),
        || {
            let r = received(&c);
            (worker_total(&r, "tx1") >= n1).then_some(r)
        },
    );
    // Nothing more arrives over tx1's next sends (one a second).
    holds_for(
        "tx1's counts at the master, not sent twice",
        Duration::from_millis(1500),
        || worker_total(&received(&c), "tx1") == n1,
    );
    assert_eq!(worker_total(&r, "tx2"), 0);

    // DEC-18: counts tx1 sends while the master is down wait, and arrive once.
    let m0 = c.sim_pid(0).expect("m0 pid");
    unsafe_kill(m0, 9);
    // Two sends' worth: two requests, then two more after tx1's next send.
    send(&c, &id1, "tx1", 2);
    // The scenario: the next two come after tx1's next send (once a second), so what waits is
    // two sends merged.
    std::thread::sleep(Duration::from_millis(1300));
    send(&c, &id1, "tx1", 2);
    c.wait_for_nth("m0: ready", 2, Duration::from_secs(15));
    let n3 = served(&c, 1) - n1;
    assert_eq!(n3, 4);
    poll(
        "the held counts at the new master",
        Duration::from_secs(10),
        || (worker_total(&received(&c), "tx1") >= n3).then_some(()),
    );
    holds_for(
        "the held counts at the new master, once",
        Duration::from_millis(1500),
        || worker_total(&received(&c), "tx1") == n3,
    );
    let r = received(&c);
    assert_eq!(
        worker_total(&r, "tx1"),
        n3,
        "only what the old master hadn't had: {}",
        r["workerCountMessages"]
    );
    // DEC-18: what waited (one send a second for the 4 s the master was down) is one entry.
    let first = r["workerCountMessages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["code"] == "tx1"))
        .cloned();
    let first = first.unwrap_or_default();
    let span =
        first["counts"]["to"].as_u64().unwrap_or(0) - first["counts"]["from"].as_u64().unwrap_or(0);
    assert!(
        span >= 2500,
        "one entry spans the sends made while the master was down: {first}"
    );
    assert_eq!(
        first["counts"]["total"].as_u64(),
        Some(n3),
        "merged while waiting: {}",
        r["workerCountMessages"]
    );
    assert!(first["counts"]["seq"].as_u64().unwrap_or(0) >= 3, "{first}");

    // COUNT-2: at the stop, tx2 sends everything as it stops, tx1 the rest; the master (which
    // ignores SIGTERM here, so it can still be asked) has each request once.
    c.signal(15);
    c.wait_for("m0: stopping (SIGTERM)", Duration::from_secs(20));
    let r = received(&c);
    assert_eq!(worker_total(&r, "tx1"), n3, "{}", r["workerCountMessages"]);
    assert_eq!(worker_total(&r, "tx2"), n2, "{}", r["workerCountMessages"]);
    let mut by_code: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for m in r["workerCountMessages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        by_code
            .entry(m["code"].as_str().unwrap_or("").to_string())
            .or_default()
            .push(m["counts"].clone());
    }
    for (code, msgs) in &by_code {
        let seqs: Vec<u64> = msgs.iter().filter_map(|m| m["seq"].as_u64()).collect();
        for w in seqs.windows(2) {
            assert!(w[0] < w[1], "{code}: each send once, in order: {seqs:?}");
        }
        assert_eq!(
            msgs.last().map(|m| m["last"].clone()),
            Some(json!(true)),
            "{code}: the send at stop last"
        );
        let sum: u64 = msgs.iter().filter_map(|m| m["total"].as_u64()).sum();
        assert_eq!(sum, worker_total(&r, code));
    }
    assert_eq!(
        by_code.get("tx2").map(Vec::len),
        Some(1),
        "tx2 sent once, at its stop"
    );
    // Counted once in the master's total: its own plus the workers' it merged.
    let s = c.direct(0, "GET", "/dashboard/status.json").json();
    let req = &s["requests"];
    assert_eq!(req["workers"]["tx1"].as_u64(), Some(n3), "{req}");
    assert_eq!(req["workers"]["tx2"].as_u64(), Some(n2), "{req}");
    assert_eq!(
        req["total"].as_u64(),
        req["own"].as_u64().map(|o| o + n3 + n2),
        "{req}"
    );

    c.wait_exit(Duration::from_secs(30));
}
