//! fhircluster in front of servers that don't speak its IPC protocol exactly (the "any HTTP
//! server" issue): a plain Python server that never touches its channel, found ready by its own
//! listening socket; a decoy on a worker's port that must never count (LAUNCH-4); servers under
//! wrapper shells; a child that closes its channel at once; a Node.js child that says `ready`
//! with another major protocol version. Real binaries on 127.0.0.1, free ports, bounded waits.

use crate::common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{
    accepting, alive, children_of, cluster, free_ports, holds_for, is_guardian, unsafe_kill,
    wait_until, Cluster,
};
use fhircluster::ipc::message::PROTOCOL_VERSION;
use serde_json::json;

const PLAIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/plain-server.py"
);
const NODE_V2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/node-v2.js");
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;
const WAIT: Duration = Duration::from_secs(20);

/// `sh -c '<script>'` with the plain server as `{server}`; the launcher's `--role=...` arguments
/// land in the shell's `$0`, `$1` ... and are ignored, the port comes from `$PORT`.
fn shell(script: &str, delay: f64) -> Vec<String> {
    let server = format!("python3 {PLAIN} \"$PORT\" {delay}");
    vec![
        "sh".to_string(),
        "-c".to_string(),
        script.replace("{server}", &server),
    ]
}

fn argv(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The seconds in `<code>: ready on port N after X s (...)`.
fn ready_after(line: &str) -> f64 {
    line.split(" after ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no time in {line:?}"))
}

/// Every process below the launcher (wrappers and the servers under them; not its guardian).
fn descendants(root: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for k in children_of(p).into_iter().filter(|&k| !is_guardian(k)) {
            out.push(k);
            todo.push(k);
        }
    }
    out
}

fn wait_gone(pids: &[i32], timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops the launcher with SIGTERM, expects exit 0 and none of `pids` left; kills any that are
/// (they are this test's) before failing.
fn stop_cleanly(c: &mut Cluster, pids: &[i32]) {
    c.signal(SIGTERM);
    let status = c.wait_exit(WAIT);
    let left = wait_gone(pids, Duration::from_secs(5));
    for &p in &left {
        unsafe_kill(p, SIGKILL);
    }
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
}

fn served_by_any(c: &Cluster, path: &str, codes: &[&str]) -> String {
    let r = c.get(path);
    assert_eq!(r.status, 200, "{path}: {r:?}\n{}", c.log_lines().join("\n"));
    let by = r.served_by().to_string();
    assert!(codes.contains(&by.as_str()), "{path} served by {by:?}");
    by
}

#[test]
fn a_plain_http_server_is_found_ready_by_its_socket_and_supervised() {
    // spec: LAUNCH-2, LAUNCH-7 (start order holds with socket readiness), LAUNCH-8
    // Issue: readiness from the socket; the channel is optional (never written to).
    let cmd = shell("exec {server}", 0.4);
    let mut c = cluster().workers(2).command(&argv(&cmd)).start();
    for code in ["m0", "tx1", "tx2"] {
        let line = c.wait_for(&format!("{code}: ready on port"), WAIT);
        assert!(line.contains("(its listening socket was seen)"), "{line}");
        // Started, but not listening for 0.4 s: not ready before its socket existed.
        assert!(ready_after(&line) >= 0.4, "{line}");
    }
    let m0 = c.line_index("m0: ready").unwrap_or(usize::MAX);
    let tx1 = c.line_index("tx1: started").unwrap_or(0);
    assert!(m0 < tx1, "a worker started before the master was ready");

    served_by_any(&c, "/r4/metadata", &["m0", "tx1", "tx2"]);
    served_by_any(&c, "/", &["m0"]);
    let pids_before = descendants(c.child.id() as i32);

    // RESTART: SIGKILL one worker; it is started again after its backoff and found ready again.
    let old = c.pid_of("tx1");
    let mark = c.mark();
    unsafe_kill(old, SIGKILL);
    c.wait_for_after(mark, "tx1: exited (signal SIGKILL)", WAIT);
    c.wait_for_after(mark, "tx1: starting again in 1 s (failing)", WAIT);
    let line = c.wait_for_after(mark, "tx1: ready on port", WAIT);
    assert!(line.contains("(its listening socket was seen)"), "{line}");
    let new = c.pid_of("tx1");
    assert_ne!(old, new);
    for _ in 0..6 {
        served_by_any(&c, "/r4/metadata", &["m0", "tx1", "tx2"]);
    }

    // STOP: drained and stopped on SIGTERM, exit 0, nothing left.
    let mut all = pids_before;
    all.extend(descendants(c.child.id() as i32));
    stop_cleanly(&mut c, &all);
    assert!(c.line_index("tx1: exited (exit code 0)").is_some());
}

#[test]
fn a_decoy_on_a_workers_port_never_makes_it_ready() {
    // spec: LAUNCH-4, RESTART-2, RESTART-3
    // Issue: a socket on the port held by another process never counts; a WARNING names it
    // (pid and command) once per start; once it is gone the worker gets ready.
    let base = free_ports(3);
    let (port, internal) = (base, base + 1);
    let me = std::process::id();
    // Each start waits 1 s before it binds, so the launcher looks while the decoy is there.
    let cmd = shell("exec {server}", 1.0);
    let mut c = cluster()
        .workers(1)
        .command(&argv(&cmd))
        .config(json!({"server": {"port": port, "cluster": {"internalPort": internal}}}))
        .spawn();
    c.port = port;
    c.internal = internal;
    // Taken once the launcher has started (a port held before it starts stops the start:
    // reliability_orphans.rs); tx1 starts once m0 is ready, 1 s on.
    c.wait_for("m0: started", WAIT);
    let decoy = TcpListener::bind(("127.0.0.1", internal + 1)).expect("bind the decoy");
    c.wait_for("m0: ready", WAIT);
    c.wait_until_listening(WAIT);

    let warning = c.wait_for(&format!("pid {me} ("), WAIT);
    assert!(warning.contains(" WARNING "), "{warning}");
    assert!(warning.contains("tx1: its port"), "{warning}");
    assert!(
        warning.contains(&format!("127.0.0.1:{}", internal + 1)),
        "{warning}"
    );
    // The worker cannot bind: it fails and is started again with a growing backoff.
    c.wait_for("tx1: exited (exit code 1)", WAIT);
    c.wait_for("tx1: starting again in 1 s (failing)", WAIT);
    c.wait_for("tx1: starting again in 2 s (failing)", WAIT);
    let log = c.log_lines();
    assert!(
        !log.iter().any(|l| l.contains("tx1: ready")),
        "tx1 counted ready on the decoy:\n{}",
        log.join("\n")
    );
    // Once per start: at most one WARNING per start so far, and one for each of the first two.
    let starts = log.iter().filter(|l| l.contains("tx1: started")).count();
    let warnings = log
        .iter()
        .filter(|l| l.contains(&format!("pid {me} (")))
        .count();
    assert!(
        (2..=starts).contains(&warnings),
        "{starts} starts, {warnings} warnings"
    );
    // Nothing is sent to the decoy (it would never answer): the master serves everything.
    for _ in 0..3 {
        served_by_any(&c, "/r4/metadata", &["m0"]);
    }

    let mark = c.mark();
    drop(decoy);
    let line = c.wait_for_after(mark, "tx1: ready on port", WAIT);
    assert!(line.contains("(its listening socket was seen)"), "{line}");
    let deadline = Instant::now() + WAIT;
    while served_by_any(&c, "/r4/metadata", &["m0", "tx1"]) != "tx1" {
        assert!(Instant::now() < deadline, "tx1 never served a request");
    }
    let pids = descendants(c.child.id() as i32);
    stop_cleanly(&mut c, &pids);
}

#[test]
fn servers_under_wrapper_shells_are_found_ready() {
    // Issue: the listening socket of a descendant counts (an `exec` wrapper is the server
    // itself; a non-`exec` one leaves the shell as the launcher's child and the server below).
    for script in ["exec {server}", "{server} ; true"] {
        let cmd = shell(script, 0.0);
        let mut c = cluster().workers(1).command(&argv(&cmd)).start();
        for code in ["m0", "tx1"] {
            let line = c.wait_for(&format!("{code}: ready on port"), WAIT);
            assert!(
                line.contains("(its listening socket was seen)"),
                "{script}: {line}"
            );
        }
        served_by_any(&c, "/r4/metadata", &["m0", "tx1"]);
        served_by_any(&c, "/", &["m0"]);
        let below = descendants(c.child.id() as i32);
        if script.starts_with("exec") {
            assert_eq!(below.len(), 2, "{script}: {below:?}");
        } else {
            // sh and python3 for each process; the stop reaches the servers under the shells.
            assert_eq!(below.len(), 4, "{script}: {below:?}");
        }
        stop_cleanly(&mut c, &below);
    }
}

#[test]
fn a_child_that_closes_its_channel_at_once_keeps_running() {
    // Issue: the channel is optional; a closed channel is not an exit while the process lives.
    let cmd = shell("exec 3>&-; exec {server}", 0.0);
    let mut c = cluster().workers(1).command(&argv(&cmd)).start();
    let (m0, tx1) = (c.pid_of("m0"), c.pid_of("tx1"));
    // Running on is the behaviour: both stay up and nothing is restarted, looked at throughout
    // 1.5 s of requests.
    let quiet = |c: &Cluster| {
        alive(m0)
            && alive(tx1)
            && !c
                .log_lines()
                .iter()
                .any(|l| l.contains("exited") || l.contains("starting again"))
    };
    for _ in 0..5 {
        served_by_any(&c, "/r4/metadata", &["m0", "tx1"]);
        holds_for(
            "m0 and tx1 running, nothing restarted",
            Duration::from_millis(300),
            || quiet(&c),
        );
    }
    let log = c.log_lines();
    assert_eq!(log.iter().filter(|l| l.contains(": started ")).count(), 2);
    stop_cleanly(&mut c, &[m0, tx1]);
}

#[test]
fn a_node_child_with_another_major_version_is_warned_about_and_works() {
    // spec: ROLE-8
    // Issue: handshake. `hello` (the launcher's protocol) comes first; a `ready` with protocol 2.0 gives a
    // WARNING naming both versions, not a failure.
    // Issue: the `ready` message wins: the fixture sends it 300 ms before it listens.
    let mut c = cluster().workers(1).command(&["node", NODE_V2]).start();
    for code in ["m0", "tx1"] {
        let w = c.wait_for(
            &format!("{code}: speaks IPC protocol 2.0, the launcher {PROTOCOL_VERSION}"),
            WAIT,
        );
        assert!(w.contains(" WARNING "), "{w}");
        let line = c.wait_for(&format!("{code}: ready on port"), WAIT);
        assert!(line.contains("(said so on its channel)"), "{line}");
    }
    // Ready before it listens: wait for both to listen.
    wait_until("m0 and tx1 listening", WAIT, || {
        accepting(c.internal) && accepting(c.internal + 1)
    });
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let r = c.get("/r4/metadata");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("x-first-message"), Some("hello"));
        assert_eq!(r.header("x-hello-protocol"), Some(PROTOCOL_VERSION));
        let by = r.served_by().to_string();
        if !seen.contains(&by) {
            seen.push(by);
        }
        assert!(Instant::now() < deadline, "served only by {seen:?}");
    }
    let pids = descendants(c.child.id() as i32);
    stop_cleanly(&mut c, &pids);
}

#[test]
fn a_server_listening_on_every_interface_is_warned_about_once_per_start() {
    // Issue #14: a server on 0.0.0.0 instead of bindAddress (127.0.0.1) can be reached around
    // the launcher. The sim without a role listens on 0.0.0.0:$PORT. The master says `ready` on
    // its channel (looked at once then); tx1 has no channel (found by its socket).
    let sim = common::SIM;
    let script = format!(
        "case \"$FHIRSMITH_ROLE\" in \
           master) exec env -u FHIRSMITH_ROLE {sim} ;; \
           *) exec env -u FHIRSMITH_ROLE -u NODE_CHANNEL_FD {sim} 3>&- ;; \
         esac"
    );
    let mut c = cluster()
        .workers(1)
        .command(&["sh", "-c", &script, "sh"])
        .start();
    let exposed = |c: &Cluster, code: &str| {
        c.log_lines()
            .into_iter()
            .filter(|l| l.contains(&format!("{code}: pid ")) && l.contains("every interface"))
            .collect::<Vec<_>>()
    };
    for (code, port) in [("m0", c.internal), ("tx1", c.internal + 1)] {
        let w = c.wait_for(&format!("{code}: pid {}", c.pid_of(code)), WAIT);
        assert!(w.contains(" WARNING "), "{w}");
        for want in [
            format!("listens on 0.0.0.0:{port}, every interface"),
            "bindAddress 127.0.0.1".to_string(),
            "bypassing the launcher's queue".to_string(),
            format!("({sim})"),
        ] {
            assert!(w.contains(&want), "{want:?} not in {w}");
        }
    }
    // A new start of tx1 is warned about again, once.
    let mark = c.mark();
    unsafe_kill(c.pid_of("tx1"), SIGKILL);
    c.wait_for_after(mark, "tx1: ready on port", WAIT);
    c.wait_for_after(mark, &format!("tx1: pid {}", c.pid_of("tx1")), WAIT);
    assert_eq!(exposed(&c, "m0").len(), 1, "{:?}", exposed(&c, "m0"));
    assert_eq!(exposed(&c, "tx1").len(), 2, "{:?}", exposed(&c, "tx1"));
    let pids = descendants(c.child.id() as i32);
    stop_cleanly(&mut c, &pids);
}

/// README's "Any HTTP server" example, as printed there: its `config.json` block (comments
/// dropped), with nothing of the tests' own defaults for the tx paths, spreads its tx paths over
/// the workers and keeps the rest on the master.
#[test]
fn readmes_any_server_example_spreads_its_tx_paths_over_the_workers() {
    let readme = include_str!("../README.md");
    let section = readme
        .split("\n## Any HTTP server")
        .nth(1)
        .expect("README has an Any HTTP server section");
    let block = section
        .split("```jsonc\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("the section's config.json block");
    let text: String = block
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let example: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    let c = cluster()
        .workers(2)
        .config(json!({"modules": {"tx": {"endpoints": null}}}))
        .config(example)
        .config(json!({"server": {"cluster": {"servedByHeader": "X-Process"}}}))
        .start();
    // The master serves tx too (masterServesTx), and ties rotate: in six requests one at a time
    // each process takes some; without the example's endpoints the master would take them all.
    let by: Vec<String> = (0..6)
        .map(|_| {
            c.get("/r4/metadata")
                .header("x-process")
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert!(by.iter().any(|p| p == "tx1" || p == "tx2"), "{by:?}");
    let r = c.get("/");
    assert_eq!(r.header("x-process"), Some("m0"), "{r:?}");
}

#[test]
fn a_host_name_bind_address_reaches_a_real_node_server_and_says_where() {
    // spec: ROLE-9, DEC-40. `localhost`, as cluster.js takes it: each Node process resolves the
    // name for itself (Node 17+: the first address the system lists), and the launcher reaches
    // it at every address the name resolves to (its `--check` lists them).
    let node = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/plain-node-server.js"
    );
    let mut c = cluster()
        .workers(1)
        .command(&["node", node])
        .config(json!({ "server": { "cluster": { "bindAddress": "localhost" } } }))
        .start();
    let mut served = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let r = c.get("/r4/CodeSystem/$lookup?system=http://loinc.org&code=1");
        assert_eq!(r.status, 200, "{:?}", c.log_lines());
        served.extend(r.header("x-served-by").map(str::to_string));
    }
    assert!(served.contains("tx1"), "tx1 never served: {served:?}");
    // The processes were told the name, not an address of the launcher's choosing.
    let started = c.wait_for("tx1: started", WAIT);
    assert!(started.contains("localhost"), "{started}");
}
