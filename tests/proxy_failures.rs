//! Failures around the front door, through the real binaries: a process that never answers
//! (`504`, its slot back, a cooldown after three), a client that never reads (cut off after
//! `writeTimeoutSeconds` while others are served), and the master down (its paths `503`, tx
//! work carrying on).

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

#[test]
fn a_hung_process_gets_504_naming_it_its_slots_back_and_after_three_a_cooldown() {
    // spec: TIMEOUT-1, TIMEOUT-2, TIMEOUT-3, TIMEOUT-4, COOL-4, COOL-2, COOL-6, DEC-8
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "upstreamTimeoutSeconds": 1, "cooldownSeconds": 2, "maxOutstanding": 3,
            "fastLaneExtra": 0, "normalMinSlots": 0, "ownerQueueSeconds": 2
        } } }))
        .start();
    let id = c.session_on("tx1");
    let addr = c.addr();
    // Three at once fill every slot tx1 has; tx1 never begins a response to any of them.
    let hung = {
        let id = id.clone();
        in_parallel(3, move |_| {
            let t = Instant::now();
            let r = request(
                addr,
                "GET",
                "/r4/ValueSet/$expand?_sim_hang=1",
                &[("X-Cache-Id", &id)],
                b"",
            );
            (r, t.elapsed())
        })
    };
    for (r, took) in &hung {
        assert_eq!(r.status, 504, "{}", r.text());
        assert_eq!(r.served_by(), "", "the launcher's own answer");
        assert!(
            r.outcome_text().contains("tx1"),
            "names the process: {}",
            r.text()
        );
        assert!(
            *took >= Duration::from_millis(900) && *took < Duration::from_secs(5),
            "after about upstreamTimeoutSeconds: {took:?}"
        );
    }
    // Three timeouts in a row: tx1 cools down, and requests with a choice go to m0 (COOL-4).
    for _ in 0..6 {
        let r = c.get("/r4/metadata");
        assert_eq!(
            (r.status, r.served_by()),
            (200, "m0"),
            "during tx1's cooldown"
        );
    }
    // The aborted requests gave their slots back: tx1 (only it can take this one, cooldown or
    // not) has room for it at once, where with its 3 slots still held it would wait 2 s and get
    // 503 (TIMEOUT-3, DEC-8).
    let (r, took) = c.timed("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", &id)], b"");
    assert_eq!((r.status, r.served_by()), (200, "tx1"), "{}", r.text());
    assert!(took < Duration::from_millis(1500), "{took:?}");
    // And tx1 itself saw the requests end.
    wait_until(
        "tx1 to let go of the aborted requests",
        Duration::from_secs(5),
        || in_flight_on(&c, "tx1") == 0,
    );
    assert!(
        c.log_lines()
            .iter()
            .any(|l| l.contains("tx1: no response began within 1 s") && l.contains(" WARNING ")),
        "a warning names the process (TIMEOUT-4)"
    );
    // Not restarted for it (COOL-6), and back in the rotation once the cooldown is over.
    assert_eq!(c.count_lines("tx1: started"), 1);
    let mut served = Vec::new();
    assert!(
        eventually(Duration::from_secs(10), || {
            let by = c.get("/r4/metadata").served_by().to_string();
            served.push(by);
            served.last().is_some_and(|s| s == "tx1")
        }),
        "tx1 takes requests again after its cooldown: {served:?}"
    );
}

#[test]
fn a_client_that_never_reads_is_cut_off_after_write_timeout_while_others_are_served() {
    // spec: STREAM-4, STREAM-3, STREAM-5, STREAM-7
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "writeTimeoutSeconds": 1 } } }))
        .start();
    const MB: usize = 32;
    // A non-tx response (streamed as the client takes it) and a tx one (read whole by the
    // launcher): neither client reads.
    let mut stalled = Vec::new();
    for path in [
        format!("/sim/large?mb={MB}"),
        format!("/r4/metadata?_sim_large_mb={MB}"),
    ] {
        let mut conn = Conn::open(c.addr()).expect("connect");
        conn.send("GET", &path, &[], b"", false).expect("send");
        stalled.push((path, conn));
    }
    // Others are served meanwhile, on the master and on the tx processes, for over twice
    // writeTimeoutSeconds (the span is the scenario; the pause paces the requests).
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(2500) {
        for path in ["/", "/r4/metadata"] {
            let (r, took) = c.timed("GET", path, &[], b"");
            assert_eq!(r.status, 200, "{path}");
            assert!(took < Duration::from_secs(1), "{path} took {took:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // By now (over twice writeTimeoutSeconds) both connections were closed: what is left is
    // what the socket buffers held, far short of the whole.
    for (path, mut conn) in stalled {
        let (got, ended) = conn.drain(Duration::from_secs(5));
        assert!(ended, "{path}: the connection was closed");
        assert!(got < MB << 20, "{path}: cut short, got {got} bytes");
    }
    // Logged, with a count, once (STREAM-7).
    let needle = "closed: the client took none of its response";
    c.wait_for_count(needle, 1, Duration::from_secs(5));
    assert_eq!(c.count_lines(needle), 1);
    // The control: a client that pauses less than writeTimeoutSeconds, then reads, gets it all.
    let mut conn = Conn::open(c.addr()).expect("connect");
    conn.send("GET", &format!("/sim/large?mb={MB}"), &[], b"", false)
        .expect("send");
    // The pause is the scenario: a client slower than the launcher, within the timeout.
    std::thread::sleep(Duration::from_millis(400));
    let r = conn.read();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body.len(),
        MB << 20,
        "a reading client gets the whole response"
    );
}

#[test]
fn with_the_master_down_its_paths_get_503_and_tx_requests_carry_on() {
    // spec: LIMIT-1, LIMIT-2, LIMIT-3, DEC-24, RESTART-11, DEC-34 (each waits queueSeconds for
    // a master first)
    // Each start of the master takes 15 s, so it stays down for the whole check after its kill
    // (five requests each waiting queueSeconds, 1 s, for it).
    let c = cluster()
        .workers(2)
        .env("SIM_START_DELAY_MS_m0", "15000")
        .start();
    let pid = c.pid_of("m0");
    unsafe_kill(pid, 9);
    let mut c = c;
    c.wait_for("m0: exited", Duration::from_secs(10));
    for (method, path) in [
        ("POST", "/r4/$closure"),
        ("GET", "/"),
        ("GET", "/dashboard"),
        ("GET", "/r4/syndication"),
        ("GET", "/r4/info/loinc"),
    ] {
        let asked = std::time::Instant::now();
        let r = c.request(method, path, &[], b"");
        assert_eq!(r.status, 503, "{method} {path}: {}", r.text());
        assert!(
            asked.elapsed() >= Duration::from_millis(900),
            "{path}: refused before queueSeconds had passed for a master"
        );
        assert_eq!(r.json()["resourceType"], "OperationOutcome", "{path}");
        assert_eq!(r.header("retry-after"), Some("5"), "{path}");
    }
    for _ in 0..4 {
        let r = c.get("/r4/metadata");
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(["tx1", "tx2"].contains(&r.served_by()), "{}", r.served_by());
    }
    // Back once the master is ready again.
    c.wait_for_count("m0: ready", 2, Duration::from_secs(40));
    let r = c.request("POST", "/r4/$closure", &[], b"");
    assert_eq!((r.status, r.served_by()), (200, "m0"));
}

#[test]
fn write_timeout_seconds_0_is_no_write_timeout() {
    // spec: CONF-17
    // A client that takes none of a 32 MB response for 2 s, then reads it all: with 0 read as a
    // zero-length timeout it would be cut off at its first stalled write.
    const MB: usize = 32;
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "writeTimeoutSeconds": 0 } } }))
        .start();
    let mut conns: Vec<Conn> = [
        format!("/sim/large?mb={MB}"),
        format!("/r4/metadata?_sim_large_mb={MB}"),
    ]
    .iter()
    .map(|path| {
        let mut conn = Conn::open(c.addr()).expect("connect");
        conn.send("GET", path, &[], b"", false).expect("send");
        conn
    })
    .collect();
    // The scenario: a client that reads nothing for 2 s.
    std::thread::sleep(Duration::from_secs(2));
    for conn in &mut conns {
        let r = conn.read();
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), MB << 20, "the whole response");
    }
    assert_eq!(c.count_lines("closed: the client took none"), 0);
}
