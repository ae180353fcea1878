//! `server.cluster.nodeReport`: the launcher's Node preload speaking the IPC protocol for Node
//! servers that don't. Real Node on 127.0.0.1: the plain server of `tests/fixtures` (knowing
//! nothing of fhircluster) and node-fhir-server-core from npm (`tests/fixtures/node-fhir-server`,
//! `npm ci` by `.ci/run`), as master and two workers; `/status` and `fhircluster status` must show
//! every process's JS heap and requests, the preload must change no answer and keep no process
//! alive, and its file is private to the service user and gone at the end.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{
    admin_get, cluster, free_port, get_direct, poll, run_bounded, wait_until, Cluster, LAUNCHER,
};
use serde_json::{json, Value};

const PLAIN_NODE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/plain-node-server.js"
);
const FHIR_SERVER_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/node-fhir-server"
);
const WAIT: Duration = Duration::from_secs(30);
const SIGTERM: i32 = 15;
const CODES: [&str; 3] = ["m0", "tx1", "tx2"];

/// A cluster of `command` with nodeReport on (and `config` over it), the launcher's
/// `XDG_RUNTIME_DIR` in `runtime`, every process ready by its preload's `ready`.
fn start(command: &[&str], config: Value, runtime: &Path, admin: u16) -> Cluster {
    let mut c = cluster()
        .workers(2)
        .command(command)
        .config(json!({"server": {"cluster": {"nodeReport": true}}}))
        .config(config)
        .env("XDG_RUNTIME_DIR", &runtime.display().to_string())
        .arg("--admin-address")
        .arg(&admin.to_string())
        .spawn();
    for code in CODES {
        let line = c.wait_for(&format!("{code}: ready on port"), WAIT);
        // spec: ROLE-8: the preload's `ready` made it ready, not its socket.
        assert!(line.contains("(said so on its channel)"), "{line}");
    }
    c.wait_until_listening(WAIT);
    c
}

/// The preload's file for the launcher `pid` under `runtime`.
fn preload_path(runtime: &Path, pid: u32) -> PathBuf {
    runtime
        .join(format!("fhircluster-{pid}"))
        .join("node-report.js")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).map_or(0, |m| m.permissions().mode() & 0o777)
}

fn row(v: &Value, code: &str) -> Value {
    v["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["code"] == code)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Waits until `/status` has every process's own figures with at least `requests[i]` served.
fn figures_reach(admin: u16, requests: [u64; 3]) -> Value {
    poll("every process's own figures in /status", WAIT, || {
        let v: Value = admin_get(admin, "/status").json();
        let all = CODES.iter().zip(requests).all(|(code, want)| {
            let r = row(&v, code);
            r["noChannel"] == false
                && r["heapUsed"].as_u64().is_some_and(|h| h > 1 << 20)
                && r["heapLimit"]
                    .as_u64()
                    .is_some_and(|h| h > r["heapUsed"].as_u64().unwrap_or(0))
                && r["requests"].as_u64().is_some_and(|n| n >= want)
                && r["inFlight"] == 0
                && r["eventLoopDelayMs"].as_f64().is_some_and(|d| d >= 0.0)
        });
        all.then_some(v)
    })
}

/// `fhircluster status --wide` against the admin address: each process's row has its requests
/// and heap.
fn status_table_shows_figures(admin: u16) {
    let mut cmd = Command::new(LAUNCHER);
    cmd.args(["status", "--wide", "--admin-address", &admin.to_string()]);
    let out = run_bounded(&mut cmd, WAIT);
    assert_eq!(out.code, Some(0), "{}", out.all());
    for code in CODES {
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(code))
            .unwrap_or_default();
        assert!(!line.contains("no channel"), "{code}: {}", out.stdout);
        // Private, mapped, and the heap.
        let mbs = line.matches(" MB").count();
        assert!(mbs >= 3, "{code} has no heap: {}", out.stdout);
    }
}

/// Stops the cluster with SIGTERM and checks that every process exited by itself (the preload
/// keeps nothing alive) or by the signal, never SIGKILL after killSeconds, and the file is gone.
fn stop_and_check_removed(mut c: Cluster, preload: &Path, exit_line: &str) {
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(WAIT).code(), Some(0));
    for code in CODES {
        let line = c.wait_for(&format!("{code}: exited"), WAIT);
        assert!(line.contains(exit_line), "{line}");
    }
    assert!(!preload.exists(), "{} left behind", preload.display());
    assert!(
        !preload.parent().is_some_and(Path::exists),
        "its directory left behind"
    );
}

#[test]
fn a_plain_node_server_reports_its_heap_and_requests_through_the_preload() {
    // spec: ROLE-8, STATUS-1 (issue #30.3: nodeReport)
    let runtime = tempfile::tempdir().expect("runtime dir");
    let admin = free_port();
    // The master keeps its own paths only, so the workers' counts are /r4's.
    let own = json!({"server": {"cluster": {"masterServesTx": false}}});
    let c = start(&["node", PLAIN_NODE], own, runtime.path(), admin);

    // The file: 0600 in a 0700 directory of the launcher's own, named in every node's argv.
    let preload = preload_path(runtime.path(), c.child.id());
    let said = c
        .line_index("nodeReport: each Node process loads")
        .map(|i| c.log_lines()[i].clone());
    assert!(
        said.is_some_and(|l| l.contains(&preload.display().to_string())),
        "the start names the preload's file"
    );
    assert_eq!(mode(&preload), 0o600, "{}", preload.display());
    assert_eq!(mode(preload.parent().unwrap_or(runtime.path())), 0o700);

    // The answers are the server's own: the same head and body with the preload as by hand.
    let by_hand_port = free_port();
    let mut by_hand = std::process::Command::new("node")
        .arg(PLAIN_NODE)
        .env("PORT", by_hand_port.to_string())
        .env("HOST", "127.0.0.1")
        .env("FHIRSMITH_INSTANCE_CODE", "m0")
        .env_remove("NODE_CHANNEL_FD")
        .spawn()
        .expect("node by hand");
    wait_until("the server by hand listening", WAIT, || {
        std::net::TcpStream::connect(("127.0.0.1", by_hand_port)).is_ok()
    });
    let preloaded = get_direct(c.internal, "/x/y?z=1");
    let plain = get_direct(by_hand_port, "/x/y?z=1");
    let _ = by_hand.kill();
    let _ = by_hand.wait();
    let head = |r: &common::Response| {
        let mut h: Vec<_> = r
            .headers
            .iter()
            .filter(|(k, _)| k.as_str() != "date")
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        h.sort();
        (r.status, h, r.body.clone())
    };
    assert_eq!(head(&preloaded), head(&plain));

    // Requests to the master (/) and to the workers (/r4): each counts its own.
    for _ in 0..5 {
        assert_eq!(c.get("/fhir/metadata").status, 200);
    }
    for _ in 0..20 {
        assert_eq!(c.get("/r4/Patient/1").status, 200);
    }
    // A slow one shows in flight.
    let slow = std::thread::spawn({
        let addr = c.internal;
        move || get_direct(addr, "/slow?ms=3000").status
    });
    poll("the slow request in flight on m0", WAIT, || {
        let v: Value = admin_get(admin, "/status").json();
        (row(&v, "m0")["inFlight"] == 1).then_some(())
    });
    assert_eq!(slow.join().ok(), Some(200));
    // m0: 5 through the front door, the slow one and the comparison's.
    figures_reach(admin, [7, 1, 1]);
    poll("the workers' 20 requests in their own counts", WAIT, || {
        let v: Value = admin_get(admin, "/status").json();
        let served = |code| row(&v, code)["requests"].as_u64().unwrap_or(0);
        (served("tx1") + served("tx2") >= 20).then_some(())
    });
    status_table_shows_figures(admin);

    // The server closes on SIGTERM and ends by itself: nothing of the preload holds it.
    stop_and_check_removed(c, &preload, "(exit code 0)");
}

#[test]
fn node_fhir_server_core_reports_its_heap_and_requests_through_the_preload() {
    // spec: ROLE-8, STATUS-1 (issue #30.3: nodeReport with node-fhir-server-core from npm)
    let installed =
        Path::new(FHIR_SERVER_DIR).join("node_modules/@asymmetrik/node-fhir-server-core");
    assert!(
        installed.is_dir(),
        "node-fhir-server-core is not installed: run `npm ci` in {FHIR_SERVER_DIR} (.ci/run does)"
    );
    let runtime = tempfile::tempdir().expect("runtime dir");
    let admin = free_port();
    let server = format!("{FHIR_SERVER_DIR}/server.js");
    // Its API base, `/4_0_0`, is the workers' path.
    let tx = json!({"modules": {"tx": {"endpoints": [{"path": "/4_0_0"}]}}});
    let c = start(&["node", &server], tx, runtime.path(), admin);
    let preload = preload_path(runtime.path(), c.child.id());

    for i in 0..4 {
        let r = c.get("/metadata");
        assert!(r.status == 200 || r.status == 404, "{r:?}");
        let r = c.get(&format!("/4_0_0/Patient/{i}"));
        assert_eq!(r.status, 200, "{r:?}");
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        assert_eq!(body["resourceType"], "Patient", "{body}");
    }
    for _ in 0..10 {
        assert_eq!(c.get("/4_0_0/metadata").status, 200);
    }
    figures_reach(admin, [4, 1, 1]);
    status_table_shows_figures(admin);
    // node-fhir-server-core has no SIGTERM handler of its own: the signal ends it.
    stop_and_check_removed(c, &preload, "(signal SIGTERM)");
}

#[test]
fn a_wrapper_shells_node_finds_the_preload_in_node_options() {
    // spec: DEC-19 (proposed: a non-node command's node gets nodeReport's --require in
    // NODE_OPTIONS as well as FHIRCLUSTER_NODE_FLAGS)
    let runtime = tempfile::tempdir().expect("runtime dir");
    let admin = free_port();
    // The wrapper passes no flags on: only NODE_OPTIONS can bring the preload to its node.
    let script = format!("exec node {PLAIN_NODE}");
    let c = start(&["sh", "-c", &script], json!({}), runtime.path(), admin);
    let preload = preload_path(runtime.path(), c.child.id());
    for _ in 0..3 {
        assert_eq!(c.get("/r4/x").status, 200);
    }
    figures_reach(admin, [0, 0, 0]);
    stop_and_check_removed(c, &preload, "(exit code 0)");
}

#[test]
fn the_preload_is_kept_across_an_in_place_upgrade_and_loaded_by_a_process_started_after() {
    // Issue #30.3: the preload kept across an in-place upgrade (cluster.md, The in-place upgrade),
    // removed at the stop after it.
    let runtime = tempfile::tempdir().expect("runtime dir");
    let admin = free_port();
    let own = json!({"server": {"cluster": {"masterServesTx": false}}});
    let c = start(&["node", PLAIN_NODE], own, runtime.path(), admin);
    let preload = preload_path(runtime.path(), c.child.id());
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", WAIT);
    assert_eq!(
        mode(&preload),
        0o600,
        "{} after the upgrade",
        preload.display()
    );

    // A worker started by the upgraded launcher loads it from the same place.
    let old = c.pid_of("tx1");
    let mark = c.mark();
    common::unsafe_kill(old, libc::SIGKILL);
    let line = c.wait_for_after(mark, "tx1: ready on port", WAIT);
    assert!(line.contains("(said so on its channel)"), "{line}");
    assert_eq!(c.get("/r4/after").status, 200);
    poll("the new tx1's own figures", WAIT, || {
        let v: Value = admin_get(admin, "/status").json();
        let r = row(&v, "tx1");
        (r["pid"] != old && r["heapUsed"].as_u64().is_some_and(|h| h > 0)).then_some(())
    });

    // Turned off, then upgraded in place: the file goes at once (nothing names it any more).
    let mut config = c.config.clone();
    config["server"]["cluster"]["nodeReport"] = json!(false);
    common::write_config(&c.data_dir(), &config);
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", WAIT);
    assert!(
        !preload.exists(),
        "{} kept with nodeReport off",
        preload.display()
    );
    stop_and_check_removed(c, &preload, "exit");
}
