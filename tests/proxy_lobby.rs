//! The lobby (`proxy::lobby`): a tx request that arrives on a new (or parked) connection and
//! must wait in the queue waits outside hyper, holding only its own bytes. Through the real
//! binaries: it is answered when a slot frees, with the request that was pipelined behind it and
//! with its body; a client that hangs up leaves the queue; a drain answers it; and a crowd of
//! them costs the launcher a few KB each, not hyper's 13.

mod common;

use std::io::Write;
use std::time::Duration;

use common::*;
use serde_json::json;

const HANG: &str = "/r4/ValueSet/$expand?url=x&_sim_hang=1";
const EXPAND: &str = "/r4/ValueSet/$expand?url=x";
const SIGTERM: i32 = 15;

/// The master alone serves tx with one slot, no lane; returns the cluster and its admin port.
fn one_slot() -> (Cluster, u16) {
    let admin = free_port();
    let c = cluster()
        .workers(0)
        .config(json!({ "server": { "cluster": {
            "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
            "queueSeconds": 60, "saturatedPercent": 0,
            "adminAddress": format!("127.0.0.1:{admin}")
        } } }))
        .start();
    (c, admin)
}

fn queue_length(admin: u16) -> f64 {
    scrape(admin).value("fhircluster_queue_length", &[])
}

fn wait_queue(admin: u16, n: f64) {
    assert!(
        eventually(Duration::from_secs(10), || queue_length(admin) == n),
        "the queue never held {n}: {}",
        queue_length(admin)
    );
}

/// A request that takes the one slot and keeps it until its connection is closed.
fn hold_the_slot(c: &Cluster, admin: u16) -> Conn {
    let mut conn = Conn::open(c.addr()).expect("connect");
    conn.send("GET", HANG, &[], b"", true).expect("send");
    assert!(
        eventually(Duration::from_secs(10), || {
            scrape(admin).value("fhircluster_in_flight", &[("process", "m0")]) == 1.0
        }),
        "the hanging request never reached m0"
    );
    conn
}

#[test]
fn a_waiting_request_is_answered_when_the_slot_frees_with_the_one_pipelined_behind_it() {
    // spec: QUEUE-1, EDGE-6
    let (c, admin) = one_slot();
    let holder = hold_the_slot(&c, admin);
    let mut conn = Conn::open(c.addr()).expect("connect");
    let two = format!(
        "GET {EXPAND} HTTP/1.1\r\nHost: a\r\n\r\n\
         GET /r4/metadata HTTP/1.1\r\nHost: a\r\n\r\n"
    );
    conn.stream.write_all(two.as_bytes()).expect("send");
    wait_queue(admin, 1.0);
    drop(holder);
    let first = conn.read();
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.served_by(), "m0");
    assert_eq!(first.json()["resourceType"], "ValueSet");
    let second = conn.read();
    assert_eq!(second.status, 200, "{}", second.text());
    assert_eq!(second.json()["resourceType"], "CapabilityStatement");
    // And the connection goes on serving.
    conn.send("GET", EXPAND, &[], b"", true).expect("send");
    assert_eq!(conn.read().status, 200);
}

#[test]
fn a_waiting_post_takes_its_whole_body_to_the_process() {
    // spec: QUEUE-1
    let (c, admin) = one_slot();
    let holder = hold_the_slot(&c, admin);
    let body = br#"{"resourceType":"Parameters","parameter":[{"name":"code","valueCode":"x"}]}"#;
    let mut conn = Conn::open(c.addr()).expect("connect");
    conn.send(
        "POST",
        "/r4/CodeSystem/$validate-code",
        &[("Content-Type", "application/fhir+json")],
        body,
        true,
    )
    .expect("send");
    wait_queue(admin, 1.0);
    drop(holder);
    let r = conn.read();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("x-sim-body-length"),
        Some(body.len().to_string().as_str()),
        "{:?}",
        r.headers
    );
}

#[test]
fn a_client_that_hangs_up_while_waiting_leaves_the_queue() {
    // spec: QUEUE-1
    let (c, admin) = one_slot();
    let holder = hold_the_slot(&c, admin);
    let mut waiting: Vec<Conn> = (0..3)
        .map(|_| {
            let mut conn = Conn::open(c.addr()).expect("connect");
            conn.send("GET", EXPAND, &[], b"", true).expect("send");
            conn
        })
        .collect();
    wait_queue(admin, 3.0);
    waiting.truncate(1);
    wait_queue(admin, 1.0);
    drop(holder);
    assert_eq!(waiting[0].read().status, 200);
    wait_queue(admin, 0.0);
}

#[test]
fn a_drain_answers_a_request_waiting_in_the_lobby() {
    // spec: STOP-3
    let (mut c, admin) = one_slot();
    let holder = hold_the_slot(&c, admin);
    let mut conn = Conn::open(c.addr()).expect("connect");
    conn.send("GET", EXPAND, &[], b"", true).expect("send");
    wait_queue(admin, 1.0);
    c.signal(SIGTERM);
    let r = conn.read();
    assert_eq!(r.status, 503, "answered, not cut off: {}", r.text());
    assert_eq!(r.json()["resourceType"], "OperationOutcome");
    assert_eq!(r.served_by(), "", "the launcher's own answer");
    // The request in progress holds the drain until its client goes.
    drop(holder);
    assert!(c.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn a_crowd_of_waiting_requests_costs_a_few_kb_each() {
    // Waiting inside hyper, each held hyper's two 8 KB buffers (13 KB a request, measured);
    // in the lobby about 2.5 KB.
    const N: usize = 2000;
    const MAX_KB_EACH: u64 = 6;
    raise_fd_limit();
    let (c, admin) = one_slot();
    let _holder = hold_the_slot(&c, admin);
    let pid = c.child.id() as i32;
    let before = proc_status_bytes(pid, "VmRSS").expect("the launcher's RSS");
    let mut conns = Vec::with_capacity(N);
    for _ in 0..N {
        let mut conn = Conn::open(c.addr()).expect("connect");
        conn.send("GET", HANG, &[], b"", true).expect("send");
        conns.push(conn);
    }
    wait_queue(admin, N as f64);
    assert_rss_each_below(pid, before, N, "waiting requests", MAX_KB_EACH);
}
