//! The front door's drain on SIGTERM, through the real binaries: a request in progress finishes
//! (with `Connection: close`), idle keep-alive connections are closed, new connections are
//! refused, and whatever still runs after `drainSeconds` is cut short.

use crate::common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const SIGTERM: i32 = 15;

#[test]
fn a_request_in_progress_at_sigterm_finishes_and_new_connections_are_refused() {
    // spec: STOP-1, STOP-2, STOP-3, STOP-9, DEC-12
    let mut c = cluster()
        .workers(1)
        .env("SIM_COST_EXPAND_MS", "1500")
        .config(json!({ "server": { "cluster": { "drainSeconds": 20 } } }))
        .start();
    // An idle keep-alive connection, used once.
    let mut idle = Conn::open(c.addr()).expect("connect");
    idle.send("GET", "/r4/metadata", &[], b"", true)
        .expect("send");
    assert_eq!(idle.read().status, 200);
    // A slow request on a keep-alive connection, under way when SIGTERM comes.
    let mut busy = Conn::open(c.addr()).expect("connect");
    busy.send("GET", "/r4/ValueSet/$expand?url=x", &[], b"", true)
        .expect("send");
    wait_until(
        "the slow $expand at work on a process",
        Duration::from_secs(10),
        || in_flight_on(&c, "m0") + in_flight_on(&c, "tx1") >= 1,
    );
    let signalled = Instant::now();
    c.signal(SIGTERM);
    c.wait_for("draining", Duration::from_secs(5));
    // No new connections (STOP-1).
    assert!(
        TcpStream::connect(c.addr()).is_err(),
        "a new connection after SIGTERM was accepted"
    );
    // The idle connection is closed (STOP-2), well before the slow request ends.
    let (_, ended) = idle.drain(Duration::from_millis(800));
    assert!(ended, "the idle keep-alive connection was left open");
    // The request in progress gets its whole answer, and the connection ends with it (STOP-3).
    let r = busy.read();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["resourceType"], "ValueSet");
    assert_eq!(r.header("connection"), Some("close"));
    let (_, ended) = busy.drain(Duration::from_secs(2));
    assert!(ended);
    // Then the launcher stops its processes and exits 0, long before drainSeconds.
    let status = c.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status:?}");
    assert!(signalled.elapsed() < Duration::from_secs(15));
}

#[test]
fn a_request_still_running_after_drain_seconds_is_cut_short() {
    // spec: STOP-4, STOP-9
    let mut c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "drainSeconds": 1 } } }))
        .start();
    // One that never answers (a tx request) and one that streams for longer than the drain (a
    // master path, its response begun).
    let mut hung = c.hung_request();
    let mut stream = Conn::open(c.addr()).expect("connect");
    stream
        .send("GET", "/sim/stream?seconds=30", &[], b"", true)
        .expect("send");
    // The stream's response has begun (its first bytes can be read).
    let mut first = [0u8; 1];
    assert_eq!(
        stream.stream.peek(&mut first).ok(),
        Some(1),
        "the stream began"
    );
    let signalled = Instant::now();
    c.signal(SIGTERM);
    let (_, ended) = hung.drain(Duration::from_secs(8));
    assert!(ended, "the hung request's connection was not closed");
    let (_, ended) = stream.drain(Duration::from_secs(8));
    assert!(ended, "the stream went on past the drain");
    let took = signalled.elapsed();
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(6),
        "cut after about drainSeconds: {took:?}"
    );
    c.wait_for("cut short", Duration::from_secs(5));
    let status = c.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status:?}");
}

#[test]
fn drain_seconds_0_cuts_a_request_in_progress_at_once_on_stop() {
    // spec: CONF-11 (at the launcher's stop; before a recycle: supervisor/lifecycle/tests.rs), STOP-4
    // The test above is the control: with drainSeconds 1 the same request is cut after 1 s.
    let mut c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "drainSeconds": 0 } } }))
        .start();
    let mut hung = c.hung_request();
    let signalled = Instant::now();
    c.signal(SIGTERM);
    let (_, ended) = hung.drain(Duration::from_secs(8));
    let took = signalled.elapsed();
    assert!(ended, "the hung request's connection was not closed");
    assert!(took < Duration::from_secs(5), "cut after {took:?}");
    // By the launcher's own clock: the cut follows the drain's start at once.
    let draining = c.wait_for("draining", Duration::from_secs(5));
    let cut = c.wait_for("cut short", Duration::from_secs(5));
    assert!(cut.contains("after 0 s"), "{cut}");
    let span = log_span(&draining, &cut);
    assert!(
        span < Duration::from_millis(300),
        "cut {span:?} into the drain, drainSeconds is 0:\n{draining}\n{cut}"
    );
    assert!(c.wait_exit(Duration::from_secs(15)).success());
}
