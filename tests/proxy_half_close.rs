//! A client that sends a whole request and then closes its sending side (`shutdown(SHUT_WR)`,
//! as `nc -N` and some health checkers do) gets its answer, then the close: on a new connection
//! (its request read by the lobby), on a kept-alive connection's next request (read by hyper),
//! for a master path and a tx one, with a body too. Before, nothing was answered: the end of
//! the client's sending was taken for a hang-up and the request dropped.

use crate::common;

use std::net::Shutdown;
use std::time::{Duration, Instant};

use common::*;

/// Half-closes `conn` after its request, reads the answer, then waits for the close: the
/// status, and how long the close took after the answer.
fn answered_then_closed(conn: &mut Conn, what: &str) -> (u16, Duration) {
    conn.stream.shutdown(Shutdown::Write).expect("half-close");
    let r = conn.read();
    let answered = Instant::now();
    let (more, closed) = conn.drain(Duration::from_secs(20));
    assert!(
        closed,
        "{what}: the connection was not closed after the answer"
    );
    assert_eq!(more, 0, "{what}: bytes after the answer");
    (r.status, answered.elapsed())
}

/// The requests sent before the half-close: method, path, body, and whether kept alive
/// (`false`: `Connection: close`, as `printf 'GET ...' | nc -N` sends it).
const REQUESTS: &[(&str, &str, &[u8], bool)] = &[
    ("GET", "/r4/metadata", b"", true),
    ("GET", "/r4/metadata", b"", false),
    ("GET", "/r4/ValueSet/$expand?url=x", b"", true),
    ("GET", "/r4/ValueSet/$expand?url=x", b"", false),
    (
        "POST",
        "/r4/ValueSet/$expand",
        b"{\"resourceType\":\"Parameters\"}",
        true,
    ),
];

#[test]
fn a_client_that_half_closes_after_its_request_gets_the_answer_then_the_close() {
    // spec: DEC-52
    let c = cluster().workers(1).start();
    let mut closes = Vec::new();
    for &(method, path, body, keep_alive) in REQUESTS {
        // On a new connection (read by the lobby), then as a kept-alive connection's second
        // request (read by hyper).
        for second in [false, true] {
            let what = format!("{method} {path} (kept alive {keep_alive}, second {second})");
            let mut conn = Conn::open(c.addr()).expect("connect");
            if second {
                conn.send("GET", "/r4/metadata", &[], b"", true)
                    .expect("send");
                assert_eq!(conn.read().status, 200, "{what}: the first");
            }
            conn.send(method, path, &[], body, keep_alive)
                .expect("send");
            let (status, close) = answered_then_closed(&mut conn, &what);
            assert_eq!(status, 200, "{what}: answered, not dropped");
            closes.push(close);
        }
    }
    eprintln!("half-close: closed after the answer in {closes:?}");
}

#[test]
fn a_half_closed_client_whose_answer_does_not_come_frees_its_slot_after_the_grace() {
    // spec: DEC-52 (a half-close and a hang-up look alike until an answer is
    // written: a request whose answer never comes is ended after the grace, as for a hang-up)
    let admin = free_port();
    let c = cluster()
        .workers(0)
        .config(serde_json::json!({ "server": { "cluster": {
            "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
            "adminAddress": format!("127.0.0.1:{admin}")
        } } }))
        .start();
    let in_flight = || scrape(admin).value("fhircluster_in_flight", &[("process", "m0")]);
    let mut conn = Conn::open(c.addr()).expect("connect");
    conn.send(
        "GET",
        "/r4/ValueSet/$expand?url=x&_sim_hang=1",
        &[],
        b"",
        true,
    )
    .expect("send");
    conn.stream.shutdown(Shutdown::Write).expect("half-close");
    assert!(
        eventually(Duration::from_secs(10), || in_flight() == 1.0),
        "the request never reached m0"
    );
    let sent = Instant::now();
    assert!(
        eventually(Duration::from_secs(20), || in_flight() == 0.0),
        "the half-closed client's request still holds its slot"
    );
    let (_, closed) = conn.drain(Duration::from_secs(10));
    assert!(closed, "the connection was not closed");
    eprintln!(
        "half-close: the unanswered request ended after {:?}",
        sent.elapsed()
    );
    // The slot is free for the next client.
    let r = c.get("/r4/ValueSet/$expand?url=x");
    assert_eq!(r.status, 200, "{}", r.text());
}
