//! A client that sends a whole request and then closes its sending side (`shutdown(SHUT_WR)`,
//! as `nc -N` does) is taken for gone, as nginx takes it (a hang-up and a half-close look
//! alike until something is written): its request is given up, its slot freed at once, and the
//! connection closed with nothing written; on a new connection (its request read by the lobby)
//! and on a kept-alive connection's next request (read by hyper), for a tx path with and
//! without a body, kept alive or not.

use crate::common;

use std::net::Shutdown;
use std::time::{Duration, Instant};

use common::*;

/// The requests sent before the half-close: method, path, body, and whether kept alive
/// (`false`: `Connection: close`, as `printf 'GET ...' | nc -N` sends it). Each is answered a
/// while after it comes, so the end of sending always comes first.
const REQUESTS: &[(&str, &str, &[u8], bool)] = &[
    (
        "GET",
        "/r4/ValueSet/$expand?url=x&_sim_delay_ms=300",
        b"",
        true,
    ),
    (
        "GET",
        "/r4/ValueSet/$expand?url=x&_sim_delay_ms=300",
        b"",
        false,
    ),
    (
        "POST",
        "/r4/ValueSet/$expand?_sim_delay_ms=300",
        b"{\"resourceType\":\"Parameters\"}",
        true,
    ),
];

#[test]
fn a_client_that_half_closes_is_taken_for_gone_as_nginx_takes_it() {
    // spec: DEC-52
    let c = cluster().workers(1).start();
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
            conn.stream.shutdown(Shutdown::Write).expect("half-close");
            let (wrote, closed) = conn.drain(Duration::from_secs(10));
            assert!(closed, "{what}: the connection was not closed");
            assert_eq!(
                wrote, 0,
                "{what}: answered, though the client was taken for gone"
            );
        }
    }
    // The cluster is none the worse.
    assert_eq!(c.get("/r4/ValueSet/$expand?url=x").status, 200);
}

#[test]
fn a_half_closed_clients_request_that_would_never_be_answered_frees_its_slot() {
    // spec: DEC-52
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
    assert!(
        eventually(Duration::from_secs(10), || in_flight() == 1.0),
        "the request never reached m0"
    );
    // The client goes (or half-closes: the same to the launcher) while its request is at m0.
    conn.stream.shutdown(Shutdown::Write).expect("half-close");
    let sent = Instant::now();
    assert!(
        eventually(Duration::from_secs(20), || in_flight() == 0.0),
        "the half-closed client's request still holds its slot"
    );
    let (wrote, closed) = conn.drain(Duration::from_secs(10));
    assert!(
        closed && wrote == 0,
        "closed {closed}, {wrote} bytes written"
    );
    eprintln!(
        "half-close: the request's slot freed {:?} after the half-close",
        sent.elapsed()
    );
    // The slot is free for the next client.
    let r = c.get("/r4/ValueSet/$expand?url=x");
    assert_eq!(r.status, 200, "{}", r.text());
}
