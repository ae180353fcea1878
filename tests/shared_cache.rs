//! `sharedCache` and `cacheAffinity` end to end (spec "Routing", options table), on the real
//! launcher with sims sharing one cache store (`<data dir>/databases/sim-resource-cache`, so any
//! process answers any live cache-id, SIM-8): with `sharedCache` alone a request with a cache-id
//! goes to the least-loaded tx process and waits like any other; with `cacheAffinity` too it
//! stays on its issuer while the issuer is up (waiting for it up to `ownerQueueSeconds`), and
//! goes to any tx process once the issuer is down. The status counts the shared store once.

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const EXPAND: &str = "/r4/ValueSet/$expand?url=x";

fn shared(affinity: bool, extra: Value) -> ClusterBuilder {
    let mut config = json!({ "server": { "cluster": {
        "sharedCache": true, "cacheAffinity": affinity, "recycleSeconds": 0
    } } });
    merge(&mut config, &extra);
    cluster().workers(2).config(config)
}

/// A `$cache-control` session started through the launcher on process `code`.
fn session_on(c: &Cluster, code: &str) -> String {
    poll(
        &format!("a session issued by {code}"),
        Duration::from_secs(10),
        || {
            let r = c.request("POST", "/r4/$cache-control", &[], b"{}");
            assert_eq!(r.status, 200, "{}", r.text());
            let id = r.header("x-cache-id").unwrap_or("").to_string();
            id.starts_with(&format!("{code}.")).then_some(id)
        },
    )
}

/// `n` requests with `id` at once through `addr`: (status, served by).
fn at_once(addr: SocketAddr, id: &str, n: usize) -> Vec<(u16, String)> {
    let id = id.to_string();
    in_parallel(n, move |_| {
        let r = request(addr, "GET", EXPAND, &[("X-Cache-Id", &id)], b"");
        assert!(!r.is_cache_id_unknown(), "{id} unknown: {}", r.text());
        (r.status, r.served_by().to_string())
    })
}

/// Holds one slot of whichever process the launcher picks, with a request that never answers.
fn hang(c: &Cluster, headers: &[(&str, &str)]) -> Conn {
    let mut conn = Conn::open(c.addr()).expect("connect");
    conn.send(
        "GET",
        "/r4/CodeSystem/$lookup?_sim_hang=1",
        headers,
        b"",
        true,
    )
    .expect("send");
    conn
}

#[test]
fn shared_cache_alone_spreads_a_sessions_requests_and_survives_its_issuer() {
    // spec: ROUTE-5b, OPT-5, STATUS-9
    let mut c = shared(false, json!({}))
        .env("SIM_COST_EXPAND_MS", "150")
        .start();
    let id = session_on(&c, "tx1");
    // Rule 4: the session's requests go to the least-loaded process, not all to tx1, and every
    // process knows the id (one store).
    let served = at_once(c.addr(), &id, 12);
    let by: BTreeSet<&str> = served.iter().map(|(_, s)| s.as_str()).collect();
    assert!(served.iter().all(|(s, _)| *s == 200), "{served:?}");
    assert!(
        by.len() >= 2,
        "every request with tx1's id went to {by:?}: not rule 4"
    );
    // STATUS-9: the caches are counted once, the master's count of the one store, not once
    // per process (each process counts the whole store).
    assert_eq!(c.direct(0, "GET", "/sim/info").json()["sharedCache"], true);
    for code in ["m0", "tx2"] {
        session_on(&c, code);
    }
    let (snap, live) = poll(
        "a snapshot where every process counts the sessions",
        Duration::from_secs(10),
        || {
            let s = c.direct(0, "GET", "/sim/received").json()["lastSnapshot"].clone();
            let rows: Vec<Option<u64>> = s["processes"]
                .as_array()
                .map(|ps| ps.iter().map(|p| p["clientCaches"].as_u64()).collect())
                .unwrap_or_default();
            let first = rows.first().copied().flatten()?;
            (rows.len() == 3 && first >= 3 && rows.iter().all(|r| *r == Some(first)))
                .then_some((s, first))
        },
    );
    assert_eq!(snap["caches"]["scope"], "shared", "{snap}");
    assert_eq!(
        snap["caches"]["clientCaches"].as_u64(),
        Some(live),
        "counted once, not once per process ({}): {snap}",
        3 * live
    );
    // The issuer killed: its sessions go on at the other processes, no 404.
    let pid = c.pid_of("tx1");
    unsafe_kill(pid, 9);
    c.wait_for("tx1: exited", Duration::from_secs(10));
    for (status, by) in at_once(c.addr(), &id, 4) {
        assert_eq!(status, 200);
        assert_ne!(by, "tx1");
    }
}

#[test]
fn shared_cache_alone_a_cache_id_waits_queue_seconds_like_any_request() {
    // spec: QUEUE-9, ROUTE-5b
    let c = shared(
        false,
        json!({ "server": { "cluster": {
            "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
            "queueSeconds": 0.5, "ownerQueueSeconds": 20
        } } }),
    )
    .start();
    let id = session_on(&c, "tx1");
    // Every slot held (m0, tx1, tx2: one each).
    let held: Vec<Conn> = (0..3).map(|_| hang(&c, &[])).collect();
    poll("three hung requests", Duration::from_secs(5), || {
        (["m0", "tx1", "tx2"]
            .iter()
            .map(|code| in_flight_on(&c, code))
            .sum::<i64>()
            == 3)
            .then_some(())
    });
    let t = Instant::now();
    let r = c.request("GET", EXPAND, &[("X-Cache-Id", &id)], b"");
    let took = t.elapsed();
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.served_by(), "", "the launcher's own 503");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(5),
        "refused after {took:?}: queueSeconds (0.5), not ownerQueueSeconds (20)"
    );
    drop(held);
}

#[test]
fn with_affinity_a_session_stays_on_its_issuer_waits_for_it_and_moves_when_it_is_down() {
    // spec: ROUTE-5c, OPT-5, QUEUE-8, ROUTE-3d, DEC-9
    let mut c = shared(
        true,
        json!({ "server": { "cluster": {
            "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
            "queueSeconds": 0.3, "ownerQueueSeconds": 2
        } } }),
    )
    .env("SIM_COST_EXPAND_MS", "50")
    .start();
    let id = session_on(&c, "tx1");
    // ROUTE-5c: while tx1 is up, all of the session's requests go to it (they take turns on
    // its one slot), though m0 and tx2 are free.
    let served = at_once(c.addr(), &id, 6);
    assert!(
        served.iter().all(|(s, by)| *s == 200 && by == "tx1"),
        "{served:?}"
    );
    // QUEUE-8: tx1 full (a hung request of the session holds its slot): the next request of
    // the session waits for tx1 up to ownerQueueSeconds, not queueSeconds, while requests with
    // no cache-id go to the others at once.
    let held = hang(&c, &[("X-Cache-Id", &id)]);
    poll("tx1's slot held", Duration::from_secs(5), || {
        (in_flight_on(&c, "tx1") == 1).then_some(())
    });
    let r = c.request("GET", "/r4/metadata", &[], b"");
    assert_eq!(r.status, 200);
    assert_ne!(r.served_by(), "tx1");
    let t = Instant::now();
    let r = c.request("GET", EXPAND, &[("X-Cache-Id", &id)], b"");
    let took = t.elapsed();
    assert_eq!((r.status, r.served_by()), (503, ""), "{r:?}");
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_secs(8),
        "refused after {took:?}: ownerQueueSeconds (2), not queueSeconds (0.3)"
    );
    drop(held);
    // ROUTE-3d: tx1 down: its session goes to any tx process instead of the launcher's 404.
    let pid = c.pid_of("tx1");
    unsafe_kill(pid, 9);
    c.wait_for("tx1: exited", Duration::from_secs(10));
    for (status, by) in at_once(c.addr(), &id, 4) {
        assert_eq!(status, 200);
        assert!(["m0", "tx2"].contains(&by.as_str()), "served by {by:?}");
    }
    // Back up: the session returns to its issuer.
    c.wait_for_count("tx1: ready", 2, Duration::from_secs(20));
    poll("the session back on tx1", Duration::from_secs(10), || {
        let r = c.request("GET", EXPAND, &[("X-Cache-Id", &id)], b"");
        (r.status == 200 && r.served_by() == "tx1").then_some(())
    });
}

#[test]
fn without_shared_cache_the_control_a_session_only_ever_reaches_its_issuer() {
    // spec: OPT-3 (the control for the tests above: what they'd see if the options did nothing)
    let mut c = cluster()
        .workers(2)
        .env("SIM_COST_EXPAND_MS", "150")
        .start();
    let id = session_on(&c, "tx1");
    let served = at_once(c.addr(), &id, 12);
    assert!(
        served.iter().all(|(s, by)| *s == 200 && by == "tx1"),
        "{served:?}"
    );
    let pid = c.pid_of("tx1");
    unsafe_kill(pid, 9);
    c.wait_for("tx1: exited", Duration::from_secs(10));
    let r = c.request("GET", EXPAND, &[("X-Cache-Id", &id)], b"");
    assert!(r.is_cache_id_unknown(), "{} {}", r.status, r.text());
}
