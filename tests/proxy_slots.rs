//! What holds a tx slot, and for how long, on the real listener (the real `fhircluster` in front
//! of `fhirsmith-sim` processes): the master's own pages hold none and never wait (QUEUE-10,
//! QUEUE-11); a tx response frees its slot when the process has sent it, not when the client has
//! read it (STREAM-1, STREAM-2); the upstream timer starts after the queue wait (TIMEOUT-5); and
//! `upstreamTimeoutSeconds` 0 is no timeout at all (CONF-16). Each state is read from the
//! launcher's own `/status` (its slots and queue) and the sims' own counts.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// One process's row of the launcher's `/status`.
fn front_row(admin: std::net::SocketAddr, code: &str) -> Value {
    admin_status(admin)["processes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["code"] == code).cloned())
        .unwrap_or(Value::Null)
}

/// `(in flight on m0's slots, waiting in the launcher)`, from `/status`.
fn m0_load(admin: std::net::SocketAddr) -> (Option<u64>, Option<u64>) {
    (
        front_row(admin, "m0")["frontInFlight"].as_u64(),
        admin_status(admin)["front"]["queued"].as_u64(),
    )
}

/// A request sent on a connection the test keeps open and doesn't read (yet).
fn send_and_hold(c: &Cluster, path: &str) -> Conn {
    let mut conn = Conn::open(c.addr()).expect("connect");
    conn.send("GET", path, &[], b"", false).expect("send");
    conn
}

/// The master alone serves tx, with one slot and no fast lane, its admin address `admin`; `more`
/// adds settings to `server.cluster` (the queue's length, a timeout).
fn one_slot(admin: std::net::SocketAddr, more: Value) -> Cluster {
    let mut settings = json!({
        "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
        "adminAddress": admin.to_string()
    });
    if let (Some(all), Value::Object(more)) = (settings.as_object_mut(), more) {
        all.extend(more);
    }
    cluster()
        .workers(0)
        .config(json!({ "server": { "cluster": settings } }))
        .start()
}

#[test]
fn master_pages_hold_no_tx_slot_and_never_wait_while_every_slot_is_full_and_a_queue_exists() {
    // spec: QUEUE-10, QUEUE-11
    // The master alone serves tx, with one slot. Were master pages counted, the two long ones
    // below would fill it and the tx request after them would wait and get 503 after
    // queueSeconds; were they made to wait, the pages asked for with the slot full would too.
    let admin = admin_addr();
    let c = one_slot(admin, json!({ "queueSeconds": 20 }));

    // QUEUE-11: two long master pages at work on m0 hold none of its tx slots...
    let _long: Vec<Conn> = (0..2)
        .map(|_| send_and_hold(&c, "/dashboard?_sim_hang=1"))
        .collect();
    wait_until("the two long master pages at work on m0", secs(10), || {
        in_flight_on(&c, "m0") == 2
    });
    assert_eq!(
        m0_load(admin),
        (Some(0), Some(0)),
        "{}",
        admin_status(admin)
    );
    // ... so a tx request gets the slot at once.
    let r = c.get("/r4/metadata");
    assert_eq!((r.status, r.served_by()), (200, "m0"), "{}", r.text());

    // QUEUE-10: the slot taken by a tx request that never answers, and another waiting for it.
    let _hung = send_and_hold(&c, "/r4/ValueSet/$expand?_sim_hang=1");
    wait_until("m0's one slot taken", secs(10), || {
        m0_load(admin).0 == Some(1)
    });
    let _waiting = send_and_hold(&c, "/r4/ValueSet/$expand?url=x");
    wait_until("a tx request waiting in the launcher", secs(10), || {
        m0_load(admin) == (Some(1), Some(1))
    });
    for path in [
        "/",
        "/dashboard",
        "/r4/syndication",
        "/r4/info/loinc",
        "/sim/info",
        "/not-a-tx-path",
    ] {
        // At once: well before the queued request would be refused (queueSeconds 20).
        let (r, took) = c.timed("GET", path, &[], b"");
        assert_eq!(r.served_by(), "m0", "{path}: answered by the master");
        assert!(
            r.status != 503 && r.status != 0,
            "{path}: {} {}",
            r.status,
            r.text()
        );
        assert!(took < secs(5), "{path} waited {took:?}");
    }
    let (r, took) = c.timed("POST", "/r4/$closure", &[], b"{}");
    assert_eq!((r.status, r.served_by()), (200, "m0"), "{}", r.text());
    assert!(took < secs(5), "$closure waited {took:?}");
    // The queue and the slots are as they were: the pages neither waited nor counted.
    assert_eq!(
        m0_load(admin),
        (Some(1), Some(1)),
        "{}",
        admin_status(admin)
    );
}

#[test]
fn a_tx_client_that_reads_nothing_frees_its_process_slot_when_the_process_is_done() {
    // spec: STREAM-1, STREAM-2
    // One tx process (tx1) with one slot. A client asks for 32 MB and reads none of it: the
    // launcher takes the whole response from tx1 as it comes (STREAM-2), so tx1's slot is free
    // while the client still has it all to read (STREAM-1), and the next request to tx1 is
    // served. Were the slot held until the client read, it would wait and get 503 after
    // queueSeconds.
    const MB: usize = 32;
    let admin = admin_addr();
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "masterServesTx": false, "maxOutstanding": 1, "fastLaneExtra": 0,
            "normalMinSlots": 0, "queueSeconds": 3, "writeTimeoutSeconds": 60,
            "adminAddress": admin.to_string()
        } } }))
        .start();
    let mut slow = send_and_hold(&c, &format!("/r4/metadata?_sim_large_mb={MB}"));
    // tx1 has sent it all (its own count of requests at work is back to 0) and its slot is free.
    wait_until("tx1 done with the large response", secs(20), || {
        answered_by(&c, "tx1") >= 1 && in_flight_on(&c, "tx1") == 0
    });
    wait_until("tx1's slot free", secs(10), || {
        front_row(admin, "tx1")["frontInFlight"].as_u64() == Some(0)
    });
    let (r, took) = c.timed("GET", "/r4/CodeSystem/$lookup?code=1", &[], b"");
    assert_eq!(
        (r.status, r.served_by()),
        (200, "tx1"),
        "after {took:?}: {}",
        r.text()
    );
    // The slow client gets the whole response afterwards: nothing was lost by freeing the slot.
    let r = slow.read();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body.len(),
        MB << 20,
        "the whole response, held by the launcher"
    );
}

#[test]
fn a_request_queued_longer_than_the_upstream_timeout_is_not_timed_out_for_its_wait() {
    // spec: TIMEOUT-5, TIMEOUT-6
    // The master alone serves tx, one slot, upstreamTimeoutSeconds 1. A response that begins at
    // once and lasts 2 s holds the slot (not a timeout: it began, TIMEOUT-6); a request queued
    // behind it waits about 2 s, twice the timeout, and is then served: its timer started when
    // it was sent to the process, not when it arrived.
    let admin = admin_addr();
    let c = one_slot(
        admin,
        json!({ "queueSeconds": 10, "upstreamTimeoutSeconds": 1 }),
    );
    let addr = c.addr();
    let long =
        std::thread::spawn(move || request(addr, "GET", "/r4/metadata?_sim_stream=2", &[], b""));
    wait_until("the long response holding m0's slot", secs(10), || {
        m0_load(admin).0 == Some(1)
    });
    let queued_at = Instant::now();
    let queued =
        std::thread::spawn(move || request(addr, "GET", "/r4/CodeSystem/$lookup?code=1", &[], b""));
    wait_until("the second request waiting", secs(10), || {
        m0_load(admin).1 == Some(1)
    });
    let r = queued.join().expect("the queued request");
    let waited = queued_at.elapsed();
    assert_eq!(
        (r.status, r.served_by()),
        (200, "m0"),
        "after {waited:?}: {}",
        r.text()
    );
    assert!(
        waited > Duration::from_millis(1200),
        "it waited longer than upstreamTimeoutSeconds (1 s): {waited:?}"
    );
    let r = long.join().expect("the long request");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        c.count_lines("no response began within"),
        0,
        "no 504 logged"
    );
}

#[test]
fn upstream_timeout_seconds_0_is_no_timeout() {
    // spec: CONF-16
    // A tx response that begins after 1.5 s and a master page that begins after 1.5 s are
    // waited for: with 0 read as a zero-length timeout every request would be 504 at once.
    let c = cluster()
        .workers(1)
        .env("SIM_COST_EXPAND_MS", "1500")
        .env("SIM_COST_OTHER_MS_m0", "1500")
        .config(json!({ "server": { "cluster": { "upstreamTimeoutSeconds": 0 } } }))
        .start();
    let (r, took) = c.timed("GET", "/r4/ValueSet/$expand?url=x", &[], b"");
    assert_eq!(r.status, 200, "after {took:?}: {}", r.text());
    assert!(took >= Duration::from_millis(1400), "{took:?}");
    let r = c.get("/r4/metadata");
    assert_eq!(r.status, 200, "{}", r.text());
    let (r, took) = c.timed("GET", "/", &[], b"");
    assert_eq!((r.status, r.served_by()), (200, "m0"), "{}", r.text());
    assert!(took >= Duration::from_millis(1400), "{took:?}");
}

#[test]
fn a_request_that_waits_on_a_kept_connection_is_passed_on_as_it_came_absolute_form_or_not() {
    // spec: EDGE-1, SIM-11
    // One slot, held by a 2 s response; requests sent meanwhile on a connection kept alive wait
    // in the launcher (their heads compacted while they wait: `forward::compact`), then go to
    // the process rewritten as any request is: an absolute-form target's authority as Host,
    // the client's Host otherwise, X-Forwarded-For added.
    let admin = admin_addr();
    let c = one_slot(admin, json!({ "queueSeconds": 10 }));
    let addr = c.addr();
    let mut conn = Conn::open(addr).expect("connect");
    conn.send("GET", "/r4/metadata", &[], b"", true)
        .expect("send");
    assert_eq!(conn.read().status, 200);
    for (target, host) in [
        (
            "http://fhir.example.org:8080/r4/metadata?_format=json",
            "fhir.example.org:8080",
        ),
        ("/r4/metadata?_format=json", "localhost"),
        ("/r4/metadata?_format=json", "localhost"),
    ] {
        let long = std::thread::spawn(move || {
            request(addr, "GET", "/r4/metadata?_sim_stream=2", &[], b"")
        });
        wait_until("the long response holding m0's slot", secs(10), || {
            m0_load(admin).0 == Some(1)
        });
        conn.send(
            "GET",
            target,
            &[("Accept", "application/fhir+json")],
            b"",
            true,
        )
        .expect("send");
        wait_until("the request waiting", secs(10), || {
            m0_load(admin).1 == Some(1)
        });
        let r = conn.read();
        assert_eq!(
            (r.status, r.served_by()),
            (200, "m0"),
            "{target}: {}",
            r.text()
        );
        assert_eq!(r.header("x-sim-host"), Some(host), "{target}");
        assert_eq!(
            r.header("x-sim-forwarded-for"),
            Some("127.0.0.1"),
            "{target}"
        );
        assert_eq!(long.join().expect("the long request").status, 200);
    }
}
