//! The lame-duck stop (`lameDuckSeconds`, DEC-88) with the real binary: on `SIGTERM` `/readyz`
//! turns `503` at once while `/livez` stays `200`, and the launcher goes on accepting and serving
//! new connections for the lame duck's seconds; then the usual drain and stop. A second
//! `SIGTERM` skips what is left of the wait.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const SIGTERM: i32 = 15;

/// A one-worker cluster with its own endpoints on `admin` and a lame duck of `secs`.
fn lame_duck_cluster(admin: u16, secs: u64) -> Cluster {
    cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "lameDuckSeconds": secs,
            "adminAddress": admin,
            "drainSeconds": 5
        } } }))
        .start()
}

#[test]
fn a_stop_with_a_lame_duck_serves_new_connections_with_readyz_503_then_drains() {
    // spec: DEC-88, STOP-1
    const LAME: u64 = 4;
    let admin = free_port();
    let mut c = lame_duck_cluster(admin, LAME);
    assert_eq!(admin_get(admin, "/readyz").status, 200);
    let mark = c.mark();
    c.signal(SIGTERM);
    // The launcher got the signal after this: its lame duck ends no sooner than LAME from here.
    let sent = Instant::now();
    let stopping = c.wait_for_after(mark, "SIGTERM: stopping", secs(10));
    assert!(stopping.contains("lame duck"), "{stopping}");
    wait_until("/readyz 503", secs(3), || {
        admin_get(admin, "/readyz").status == 503
    });
    let reason = admin_get(admin, "/readyz").json()["reason"].clone();
    assert!(
        reason.as_str().is_some_and(|r| r.contains("lame duck")),
        "{reason}"
    );
    // Within the lame duck: new connections accepted and served, /livez 200.
    let mut served = 0;
    while sent.elapsed() < Duration::from_secs(LAME) - Duration::from_millis(500) {
        let r = c.get("/r4/metadata");
        let live = admin_get(admin, "/livez").status;
        if sent.elapsed() < Duration::from_secs(LAME) {
            assert_eq!(r.status, 200, "a new connection in the lame duck: {r:?}");
            assert_eq!(live, 200, "/livez in the lame duck");
            served += 1;
        }
    }
    assert!(served >= 3, "only {served} requests within the lame duck");
    // Then the drain, at the lame duck's end, and the stop as usual.
    let over = c.wait_for_after(mark, "lame duck over", secs(LAME + 10));
    let span = log_span(&stopping, &over);
    assert!(
        span >= Duration::from_secs(LAME) - Duration::from_millis(50),
        "the drain began {span:?} after the signal"
    );
    wait_until("the client port closed", secs(10), || !accepting(c.port));
    let status = c.wait_exit(secs(30));
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
}

#[test]
fn a_second_sigterm_skips_the_rest_of_the_lame_duck() {
    // spec: DEC-88
    let admin = free_port();
    let mut c = lame_duck_cluster(admin, 120);
    let mark = c.mark();
    c.signal(SIGTERM);
    c.wait_for_after(mark, "SIGTERM: stopping", secs(10));
    wait_until("/readyz 503", secs(3), || {
        admin_get(admin, "/readyz").status == 503
    });
    assert_eq!(c.get("/r4/metadata").status, 200, "served in the lame duck");
    c.signal(SIGTERM);
    let again = c.wait_for_after(mark, "SIGTERM again", secs(10));
    assert!(again.contains("lame duck"), "{again}");
    let status = c.wait_exit(secs(30));
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    assert!(c.line_index("lame duck over").is_none(), "the wait ran out");
}
