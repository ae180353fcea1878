//! Which sign makes a process ready (LAUNCH-3, DEC-27), on the real binaries: a process that
//! speaks the IPC protocol (its `hello` came) is ready only on its `ready` message, however long
//! it has been listening; a server with no channel is ready by its own listening socket; and a
//! child that never says `hello` but says `ready` just after it listens (FHIRsmith 1.0.0) is
//! ready by its message, the socket counting only after a second of silence.

use crate::common;

use std::time::{Duration, Instant};

use common::*;

/// How long the sims below listen (and answer) before they say `ready`.
const READY_DELAY: Duration = Duration::from_millis(4000);

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

/// Polls until `port` accepts, failing with the log if it never does.
fn wait_accepting(port: u16, what: &str) -> Instant {
    poll(what, Duration::from_secs(20), || {
        accepting(port).then(Instant::now)
    });
    Instant::now()
}

#[test]
fn a_worker_that_speaks_the_protocol_gets_no_traffic_until_its_ready_however_long_it_listens() {
    // spec: LAUNCH-3, DEC-27, ROUTE-4c
    let mut c = cluster()
        .workers(1)
        .env("SIM_READY_DELAY_MS_tx1", &ms(READY_DELAY))
        .spawn();
    c.wait_for("m0: ready", Duration::from_secs(20));
    c.wait_until_listening(Duration::from_secs(10));
    let tx1_port = c.internal + 1;
    let listening = wait_accepting(tx1_port, "tx1 listening");
    // It answers on its own port, but the launcher must not count it ready: every tx request
    // through the launcher is served by the master, well past the socket's grace.
    let mut asked = 0;
    while listening.elapsed() < READY_DELAY - Duration::from_millis(800) {
        assert_eq!(c.direct(1, "GET", "/sim/info").status, 200, "tx1 serves");
        let r = c.get("/r4/CodeSystem/$lookup?system=x&code=y");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            r.served_by(),
            "m0",
            "a request reached tx1 {:?} after it began listening, before its ready:\n{}",
            listening.elapsed(),
            c.log_lines().join("\n")
        );
        assert!(
            c.line_index("tx1: ready").is_none(),
            "{}",
            c.log_lines().join("\n")
        );
        asked += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        asked >= 10,
        "only {asked} requests asked while tx1 listened unready"
    );
    let line = c.wait_for("tx1: ready", Duration::from_secs(20));
    assert!(line.contains("(said so on its channel)"), "{line}");
    // Once ready it takes its share.
    poll("a request served by tx1", Duration::from_secs(10), || {
        (c.get("/r4/CodeSystem/$lookup?system=x&code=y").served_by() == "tx1").then_some(())
    });
}

#[test]
fn a_master_that_speaks_the_protocol_starts_no_worker_and_opens_no_port_until_its_ready() {
    // spec: LAUNCH-3, LAUNCH-6, LAUNCH-7, DEC-27
    let mut c = cluster()
        .workers(1)
        .env("SIM_READY_DELAY_MS_m0", &ms(READY_DELAY))
        .spawn();
    let m0_port = c.internal;
    let listening = wait_accepting(m0_port, "m0 listening");
    while listening.elapsed() < READY_DELAY - Duration::from_millis(800) {
        assert!(
            c.line_index("m0: ready").is_none()
                && c.line_index("tx1: started").is_none()
                && !accepting(c.port),
            "the master counted ready {:?} after it began listening, before its ready:\n{}",
            listening.elapsed(),
            c.log_lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let line = c.wait_for("m0: ready", Duration::from_secs(20));
    assert!(line.contains("(said so on its channel)"), "{line}");
    c.wait_for("tx1: ready", Duration::from_secs(20));
    c.wait_until_listening(Duration::from_secs(10));
    assert_eq!(c.get("/r4/metadata").status, 200);
}

#[test]
fn a_server_without_the_channel_is_ready_by_its_listening_socket() {
    // spec: LAUNCH-4 (its own socket), DEC-27 (the socket counts for a process that never spoke)
    // The sim with its channel variable removed runs without one, like a plain HTTP server.
    let script = format!("unset NODE_CHANNEL_FD; exec {SIM} \"$@\"");
    let mut c = cluster()
        .workers(1)
        .command(&["sh", "-c", &script, "sh"])
        .spawn();
    for code in ["m0", "tx1"] {
        let line = c.wait_for(&format!("{code}: ready"), Duration::from_secs(20));
        assert!(line.contains("(its listening socket was seen)"), "{line}");
    }
    c.wait_until_listening(Duration::from_secs(10));
    poll("both processes serve", Duration::from_secs(10), || {
        (c.get("/r4/CodeSystem/$lookup?system=x&code=y").served_by() == "tx1").then_some(())
    });
}

/// A Node child as FHIRsmith is today: no `hello`, listens, says `ready` 0.5 s later.
const LISTEN_THEN_READY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/listen-then-ready.js"
);

#[test]
fn a_child_that_never_says_hello_and_says_ready_just_after_it_listens_is_ready_by_its_message() {
    // spec: DEC-27 (the 1 s grace: a socket counts only after a second of silence, so a child
    // that says `ready` 0.5 s after it listens, as FHIRsmith does, is ready by its message),
    // LAUNCH-3, ROUTE-4c
    let mut c = cluster()
        .workers(1)
        .command(&["node", LISTEN_THEN_READY])
        .spawn();
    let line = c.wait_for("m0: ready", Duration::from_secs(20));
    assert!(line.contains("(said so on its channel)"), "{line}");
    c.wait_until_listening(Duration::from_secs(10));
    // tx1 starts once m0 is ready; while it listens and has not said `ready`, the launcher
    // sends it nothing: every answer comes from a process that had said it.
    let tx1 = c.internal + 1;
    wait_accepting(tx1, "tx1 listening");
    let mut asked = 0;
    while c.line_index("tx1: ready").is_none() {
        let r = c.get("/r4/CodeSystem/$lookup?system=x&code=y");
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.header("x-said-ready"),
            Some("yes"),
            "{} served before its ready:\n{}",
            r.served_by(),
            c.log_lines().join("\n")
        );
        asked += 1;
        assert!(asked < 10_000, "tx1 never became ready");
    }
    let line = c.wait_for("tx1: ready", Duration::from_secs(20));
    assert!(line.contains("(said so on its channel)"), "{line}");
    poll("a request served by tx1", Duration::from_secs(10), || {
        let r = c.get("/r4/CodeSystem/$lookup?system=x&code=y");
        (r.served_by() == "tx1" && r.header("x-said-ready") == Some("yes")).then_some(())
    });
}
