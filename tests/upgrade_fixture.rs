//! How `tests/fixtures/handover-format-1.json` was captured: a real cluster (the simulator's
//! master and two workers) through one real in-place upgrade, with the test hook's
//! `record-state` (`src/test_hooks.rs`) writing the state the old program handed over.
//! The fixture is frozen (never captured again, never edited; a new format number gets a fixture
//! of its own, captured the same way). The suite runs the capture every time and holds what
//! today's program writes to the fixture's top level (each part still written, under the same
//! name); to keep a copy: `FHIRCLUSTER_CAPTURE_TO=/tmp/state.json cargo nextest run --test
//! integration -E 'test(/capture_a_handed_over_state/)'`, then pretty-print it into
//! `tests/fixtures/`.

use std::io::Write;
use std::path::Path;

use crate::common::*;
use crate::upgrade::Bin;

#[test]
fn capture_a_handed_over_state() {
    let hook = tempfile::tempdir().expect("hook dir");
    let bin = Bin::new();
    let admin = admin_addr();
    let c = cluster()
        .workers(2)
        .config(serde_json::json!({"server": {"cluster": {
            "adminAddress": admin.to_string(),
            "cooldownSeconds": 600,
        }}}))
        // tx2 refuses (its memory guard), so it cools down.
        .env("SIM_REFUSE_tx2", "1")
        .env("SIM_COUNTS_SECONDS", "0.2")
        .env(
            "FHIRCLUSTER_TEST_HANDOVER",
            &hook.path().display().to_string(),
        )
        .start_wrapped(&bin.wrap());
    // tx1 killed and restarted: a restart and its reason in the lifecycle and the keeper.
    let first = c.sim_pid(1).expect("tx1's pid");
    unsafe_kill(first, libc::SIGKILL);
    poll("tx1 restarted", secs(30), || {
        c.sim_pid(1).filter(|&p| p != first)
    });
    wait_until("tx1 ready again", secs(30), || {
        c.log_lines()
            .iter()
            .filter(|l| l.contains("tx1") && l.contains("ready"))
            .count()
            >= 2
    });
    let session = c.session_on("tx1");
    let r = c.request("GET", LOOKUP, &[("X-Cache-Id", &session)], b"");
    assert_eq!(r.status, 200);
    // A 503 from tx2 sets its cooldown going.
    for _ in 0..4 {
        let _ = c.get(LOOKUP);
    }
    // An idle keep-alive connection that has sent half of its next head.
    let mut conn = Conn::open(c.addr()).expect("connect");
    conn.send("GET", LOOKUP, &[], b"", true).expect("send");
    assert_eq!(conn.read().status, 200);
    conn.stream
        .write_all(b"GET /r4/metadata HTTP/1.1\r\nHo")
        .expect("half a head");
    std::fs::write(hook.path().join("record-state"), b"").expect("record-state");
    bin.replace_with(Path::new(LAUNCHER));
    let mark = c.mark();
    unsafe_kill(c.child.id() as i32, libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    let state = hook.path().join("state.json");
    if let Ok(to) = std::env::var("FHIRCLUSTER_CAPTURE_TO") {
        std::fs::copy(&state, to).expect("copy the state");
    }
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).expect("a state")).expect("JSON")
    };
    let now = read(&state);
    let frozen =
        read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/handover-format-1.json"));
    assert_eq!(now["format"], 1);
    let missing: Vec<&String> = frozen
        .as_object()
        .expect("an object")
        .keys()
        .filter(|k| now.get(k.as_str()).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "written no more, or renamed: {missing:?}"
    );
    conn.stream.write_all(b"st: x\r\n\r\n").expect("the rest");
    assert_eq!(conn.read().status, 200);
}
