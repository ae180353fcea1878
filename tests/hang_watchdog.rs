//! The hang watchdog (DEC-82) on the real binary: a process that owes an answer and writes
//! nothing (no byte of any answer, no IPC message) for `hangTimeoutSeconds` is killed and started
//! again; one that is merely slow (streaming, or talking on its channel) never is. And a rolling
//! restart is not paced by the upkeep tick (DEC-83).

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    admin_addr, admin_status, cluster, report_figures, request, run_bounded, secs, unsafe_kill,
    wait_until, ClusterBuilder, LAUNCHER,
};
use serde_json::json;

const NODE_STUCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/node-stuck.js");
const SIGSTOP: i32 = 19;
/// `hangTimeoutSeconds` in these tests.
const HANG: Duration = Duration::from_secs(3);
/// The watchdog looks once a second; a crashed worker that ran under a minute waits 1 s before
/// it starts again; then it must start and be ready on a loaded 2-core machine (a Node server
/// without a channel is ready 1 s after it listens).
const RESTART: Duration = Duration::from_secs(8);

/// One worker that takes every tx request (the master takes none), a 1 s upstream timeout and
/// the test's hang timeout, `/status` on an admin address.
fn watched(admin: std::net::SocketAddr) -> ClusterBuilder {
    cluster().workers(1).config(json!({"server": {"cluster": {
        "masterServesTx": false,
        "upstreamTimeoutSeconds": 1,
        "hangTimeoutSeconds": HANG.as_secs(),
        "adminAddress": admin.to_string()
    }}}))
}

/// Sends `path` in the background (its answer, a 504 or whatever, is not awaited).
fn send_aside(addr: std::net::SocketAddr, path: &'static str) {
    std::thread::spawn(move || request(addr, "GET", path, &[], b""));
}

#[test]
fn a_stopped_worker_owing_answers_is_killed_and_replaced_within_the_hang_timeout() {
    // spec: DEC-82, DEC-84
    let admin = admin_addr();
    let c = watched(admin).start();
    let pid = c.pid_of("tx1");
    let mark = c.mark();
    unsafe_kill(pid, SIGSTOP);
    let stopped = Instant::now();
    for _ in 0..3 {
        send_aside(c.addr(), "/r4/metadata");
    }
    let hung = c.wait_for_after(mark, "tx1: hung", HANG + RESTART);
    let killed_after = stopped.elapsed();
    c.wait_for_after(mark, "tx1: ready", HANG + RESTART);
    let replaced_after = stopped.elapsed();
    // Its 504s at 1 s and the cooldown did not reset the clock; nor did it run out early.
    assert!(
        killed_after >= HANG,
        "killed after {killed_after:?}: {hung}"
    );
    assert!(
        replaced_after < HANG + RESTART,
        "replaced after {replaced_after:?}"
    );
    assert!(hung.contains(" WARNING "), "{hung}");
    assert!(
        hung.contains("GET /r4/metadata"),
        "names the oldest request: {hung}"
    );
    assert!(hung.contains("SIGKILL"), "{hung}");
    assert_ne!(c.pid_of("tx1"), pid, "a new process");
    assert_eq!(c.get("/r4/metadata").status, 200);
    // Counted as a hang kill, an unplanned restart (a problem), in /status.
    let tx1 = admin_status(admin)["processes"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["code"] == "tx1").cloned())
        .expect("tx1 in /status");
    assert_eq!(tx1["restartsBy"]["hung"], 1, "{tx1}");
    assert_eq!(tx1["restarts"], 1, "{tx1}");
    assert!(
        tx1["lastRestart"]
            .as_str()
            .is_some_and(|s| s.starts_with("hung: ")),
        "{tx1}"
    );
    // The exit event the master gets says why it is restarted, and what the watchdog saw.
    let event = common::poll("tx1's exit event at the master", secs(10), || {
        let received = c.get("/sim/received").json();
        received["events"]
            .as_array()?
            .iter()
            .find(|e| e["kind"] == "exit" && e["code"] == "tx1")
            .cloned()
    });
    assert_eq!(event["reason"], "hung", "{event}");
    assert!(
        event["detail"]
            .as_str()
            .is_some_and(|d| d.contains("GET /r4/metadata")),
        "{event}"
    );
    report_figures(
        "hang_sigstop",
        "a worker stopped (SIGSTOP) with 3 requests sent to it; hangTimeoutSeconds 3, \
         upstreamTimeoutSeconds 1",
        1,
        4,
        3,
        &format!(
            "the 3 got their 504 at 1 s; WARNING then SIGKILL {:.1} s after the stop, ready again \
             after {:.1} s, counted hung (restarts 1); served after",
            killed_after.as_secs_f64(),
            replaced_after.as_secs_f64()
        ),
    );
}

#[test]
fn a_node_server_stuck_in_an_endless_loop_is_replaced_and_one_streaming_slowly_never_is() {
    // spec: DEC-82: a plain Node.js server (no channel: its answers' bytes are its only sign
    // of life).
    let admin = admin_addr();
    let c = watched(admin).command(&["node", NODE_STUCK]).start();
    let pid = c.pid_of("tx1");
    // A line a second for more than three hang timeouts: slow, never hung.
    let slow = Instant::now();
    let r = c.get("/r4/slow?seconds=10");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("tick 10"), "{}", r.text());
    assert!(
        slow.elapsed() >= 3 * HANG,
        "streamed for {:?}",
        slow.elapsed()
    );
    assert_eq!(c.line_index("hung"), None, "{}", c.log_lines().join("\n"));
    assert_eq!(c.pid_of("tx1"), pid);

    let mark = c.mark();
    let stuck = Instant::now();
    send_aside(c.addr(), "/r4/loop");
    let hung = c.wait_for_after(mark, "tx1: hung", HANG + RESTART);
    assert!(hung.contains("GET /r4/loop"), "{hung}");
    c.wait_for_after(mark, "tx1: ready", HANG + RESTART);
    let replaced_after = stuck.elapsed();
    assert!(replaced_after >= HANG, "{replaced_after:?}");
    assert!(replaced_after < HANG + RESTART, "{replaced_after:?}");
    let answer = c.get("/r4/metadata");
    assert_eq!(answer.status, 200);
    assert!(
        !answer.text().contains(&pid.to_string()),
        "{}",
        answer.text()
    );
    report_figures(
        "hang_node_loop",
        "a Node.js worker without a channel: a 10 s response of a line a second, then a request \
         that sticks it in while (true) {}; hangTimeoutSeconds 3",
        1,
        3,
        1,
        &format!(
            "the slow stream whole and left alone; the stuck one replaced after {:.1} s, served \
             after",
            replaced_after.as_secs_f64()
        ),
    );
}

#[test]
fn a_process_that_keeps_talking_on_its_channel_is_never_killed_for_a_request_it_never_answers() {
    // spec: DEC-82: the simulator's hung request (`_sim_hang=1`) never begins its answer; the
    // process's event loop runs and its `status` comes every second.
    let admin = admin_addr();
    let c = watched(admin).start();
    let pid = c.pid_of("tx1");
    let asked = Instant::now();
    let r = c.get("/r4/ValueSet/$expand?_sim_hang=1");
    assert_eq!(r.status, 504);
    // More than three hang timeouts, looked at all along.
    let mut looks = 0;
    while asked.elapsed() < 3 * HANG + Duration::from_secs(1) {
        assert_eq!(c.line_index("hung"), None, "{}", c.log_lines().join("\n"));
        looks += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(looks > 0);
    assert_eq!(c.pid_of("tx1"), pid);
    report_figures(
        "hang_talking_channel",
        "a request a simulated worker never answers while its channel sends status every \
         second; hangTimeoutSeconds 3",
        1,
        1,
        1,
        &format!(
            "its 504 at 1 s; the worker left alone for {:.0} s (same pid)",
            asked.elapsed().as_secs_f64()
        ),
    );
}

#[test]
fn a_restart_of_processes_ready_at_once_is_not_paced_by_a_tick() {
    // spec: DEC-83: each step of the roll goes on as soon as the process it drains has nothing
    // at work, not at the next upkeep tick (a second apart: 4 processes took about 4 s).
    let admin = admin_addr();
    let c = cluster()
        .workers(3)
        .config(json!({"server": {"cluster": {"adminAddress": admin.to_string()}}}))
        .start();
    let started = Instant::now();
    let out = run_bounded(
        Command::new(LAUNCHER)
            .args(["restart", "--data-dir"])
            .arg(c.data_dir())
            .env_remove("FHIRSMITH_DATA_DIR"),
        secs(60),
    );
    let took = started.elapsed();
    assert_eq!(out.code, Some(0), "{out:?}\n{}", c.log_lines().join("\n"));
    wait_until("the roll's end logged", secs(10), || {
        c.line_index("rolling restart done").is_some()
    });
    println!(
        "fhircluster restart of a master and 3 workers: {:.2} s",
        took.as_secs_f64()
    );
    // Under a second here, about 1 s with a load average of 15 on 2 cores; paced by the tick
    // the last three steps alone take 3 s (3.8 s measured).
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    // spec: DEC-84: each process restarted once, for the roll: counted by its reason, and no
    // problem.
    let status = admin_status(admin);
    for row in status["processes"].as_array().expect("processes") {
        assert_eq!(row["restartsBy"]["rolling"], 1, "{row}");
        assert_eq!(row["restarts"], 0, "{row}");
    }
    assert_eq!(status["totals"]["restarts"], 0, "{}", status["totals"]);
}
