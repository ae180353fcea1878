//! The orderly stop end to end: the real `fhircluster` running `fhirsmith-sim` processes on
//! loopback. SIGTERM and SIGINT stop the workers, then the master, and exit 0; a process that
//! ignores SIGTERM gets SIGKILL after `killSeconds`; a stop while a process waits out its
//! restart backoff starts nothing again; a launcher killed with SIGKILL leaves no process behind.
//! Order is asserted on the launcher's own log lines (one stream, written in order).

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const SIGINT: i32 = 2;
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

/// The orderly stop on `sig`: workers, then the master, then exit 0 with no child left.
fn stops_in_order(sig: i32, name: &str) {
    let mut c = cluster().workers(2).start();
    let children = c.child_pids();
    assert_eq!(children.len(), 3, "{children:?}");
    c.signal(sig);
    let status = c.wait_exit(secs(20));
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    c.wait_output_end(secs(5));
    assert!(c.line_index(&format!("{name}: stopping")).is_some());
    let tx1 = c.must_index("tx1: exited");
    let tx2 = c.must_index("tx2: exited");
    let m0_term = c.must_index("m0: stopping (SIGTERM)");
    let m0_exit = c.must_index("m0: exited");
    assert!(
        tx1 < m0_term && tx2 < m0_term && m0_term < m0_exit,
        "workers stop before the master:\n{}",
        c.log_lines().join("\n")
    );
    for code in ["m0", "tx1", "tx2"] {
        let exit = &c.log_lines()[c.must_index(&format!("{code}: exited"))];
        assert!(exit.contains("exit code 0"), "{exit}");
    }
    assert!(
        c.line_index("starting again").is_none(),
        "nothing restarted during the stop"
    );
    assert!(wait_gone(&children, secs(2)).is_empty());
}

#[test]
fn sigterm_stops_the_workers_then_the_master_and_exits_0() {
    // spec: STOP-5, STOP-6, STOP-9, DEC-12
    stops_in_order(SIGTERM, "SIGTERM");
}

#[test]
fn sigint_stops_like_sigterm() {
    // spec: STOP-5, STOP-6, STOP-9 (SIGINT)
    stops_in_order(SIGINT, "SIGINT");
}

#[test]
fn sigterm_while_the_master_is_starting_stops_it_and_exits_0() {
    // spec: STOP-5, STOP-9, LAUNCH-6
    let mut c = cluster()
        .workers(1)
        .env("SIM_START_DELAY_MS_m0", "3000")
        .spawn();
    c.wait_for("m0: started", secs(10));
    let children = c.child_pids();
    c.signal(SIGTERM);
    let status = c.wait_exit(secs(20));
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    assert!(wait_gone(&children, secs(2)).is_empty());
    assert!(c.line_index("listening on port").is_none());
    assert!(!accepting(c.port));
}

#[test]
fn a_killed_launcher_leaves_no_process_behind() {
    // spec: STOP-11
    let mut c = cluster().workers(2).start();
    let children = c.child_pids();
    assert_eq!(children.len(), 3, "{children:?}");
    c.signal(SIGKILL);
    c.wait_exit(secs(5));
    let left = wait_gone(&children, secs(2));
    assert!(
        left.is_empty(),
        "still running 2 s after the launcher's SIGKILL: {left:?}"
    );
    // Their ports are free for the next launcher.
    for port in c.internal..c.internal + 3 {
        assert!(!accepting(port), "port {port} still taken");
    }
}

#[test]
fn a_child_that_ignores_sigterm_gets_sigkill_after_kill_seconds_and_the_launcher_exits_0() {
    // spec: STOP-8, STOP-6, STOP-9
    let mut c = cluster()
        .workers(2)
        .config(json!({"server": {"cluster": {"killSeconds": 1}}}))
        .env("SIM_IGNORE_SIGTERM_tx1", "1")
        .start();
    let children = c.child_pids();
    let began = Instant::now();
    c.signal(SIGTERM);
    let status = c.wait_exit(secs(20));
    let took = began.elapsed();
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    assert!(
        took >= Duration::from_millis(900),
        "SIGKILL came early: {took:?}"
    );
    assert!(took < secs(10), "took {took:?}");
    c.wait_output_end(secs(5));
    let warned = c.must_index("tx1: still running");
    assert!(c.log_lines()[warned].contains("SIGKILL"));
    let killed = c.must_index("tx1: exited");
    assert!(
        c.log_lines()[killed].contains("signal SIGKILL"),
        "{}",
        c.log_lines()[killed]
    );
    assert!(
        killed < c.must_index("m0: stopping (SIGTERM)"),
        "the master waits for tx1"
    );
    assert!(c.line_index("m0: still running").is_none());
    assert!(wait_gone(&children, secs(2)).is_empty());
}

#[test]
fn a_master_that_ignores_sigterm_gets_sigkill_too() {
    // spec: STOP-8, STOP-9
    let mut c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"killSeconds": 1}}}))
        .env("SIM_IGNORE_SIGTERM_m0", "1")
        .start();
    let children = c.child_pids();
    c.signal(SIGTERM);
    assert_eq!(
        c.wait_exit(secs(20)).code(),
        Some(0),
        "{}",
        c.log_lines().join("\n")
    );
    c.wait_output_end(secs(5));
    let exit = &c.log_lines()[c.must_index("m0: exited")];
    assert!(exit.contains("signal SIGKILL"), "{exit}");
    assert!(c.must_index("tx1: exited") < c.must_index("m0: stopping (SIGTERM)"));
    assert!(wait_gone(&children, secs(2)).is_empty());
}

/// SIGTERM while `code` waits out its restart backoff: nothing starts again, exit 0.
fn stop_during_backoff(code: &str) {
    let once = tempfile::tempdir().expect("once dir");
    let mut c = cluster()
        .workers(1)
        .env("SIM_ONCE_DIR", &once.path().display().to_string())
        .env(&format!("SIM_EXIT_AFTER_MS_{code}"), "300")
        .start();
    c.wait_for(&format!("{code}: starting again in 1 s"), secs(10));
    c.signal(SIGTERM);
    let status = c.wait_exit(secs(20));
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    // Its whole log: nothing can start once it has exited.
    c.wait_output_end(secs(5));
    assert_eq!(
        c.line_indices(&format!("{code}: started")).len(),
        1,
        "started again during the stop:\n{}",
        c.log_lines().join("\n")
    );
    let pids: Vec<i32> = ["m0", "tx1"]
        .iter()
        .filter_map(|p| c.logged_pid(p))
        .collect();
    assert!(wait_gone(&pids, secs(2)).is_empty());
}

#[test]
fn a_stop_during_a_workers_backoff_does_not_start_it_again() {
    // spec: STOP-5, RESTART-1 (not while stopping)
    stop_during_backoff("tx1");
}

#[test]
fn a_stop_during_the_masters_backoff_stops_the_workers_and_exits_0() {
    // spec: STOP-5, STOP-6, RESTART-11
    stop_during_backoff("m0");
}
