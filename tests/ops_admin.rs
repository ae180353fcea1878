//! The launcher's own endpoints through a whole life: `/readyz` says why it isn't ready while the
//! master starts (the admin listener answers from the first moment), `200` when running, `503`
//! while the master restarts and `200` again, `503` "draining" once SIGTERM arrives with a slow
//! request still in flight; `/livez` is `200` throughout; `/status` lists each process; and the
//! real `fhircluster status` binary prints them as a table.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

/// `/readyz`'s status and reason.
fn readyz(admin: u16) -> (u16, String) {
    let r = admin_get(admin, "/readyz");
    let reason = r.json()["reason"].as_str().unwrap_or("").to_string();
    (r.status, reason)
}

fn live(admin: u16) -> bool {
    admin_get(admin, "/livez").status == 200
}

#[test]
fn readyz_follows_start_master_restart_and_drain_while_livez_stays_200() {
    // spec: LAUNCH-6, RESTART-10, STOP-1, STOP-3
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        // Long enough that the admin listener answers before the master is ready, and that the
        // launcher is still draining while the checks of the drain are made, on a loaded host.
        .env("SIM_START_DELAY_MS_m0", "3000")
        .env("SIM_COST_EXPAND_MS", "5000")
        .config(json!({ "server": { "cluster": { "drainSeconds": 10 } } }))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .spawn();

    // Starting: the admin listener answers at once, before the master is ready.
    assert!(
        eventually(Duration::from_secs(5), || admin_get(admin, "/livez").status
            == 200),
        "the admin listener never answered:\n{}",
        c.log_lines().join("\n")
    );
    // The reason says the start delay isn't over yet.
    let (status, reason) = readyz(admin);
    assert_eq!(status, 503, "{reason}");
    assert!(reason.contains("master is not ready"), "{reason}");
    let r = admin_get(admin, "/readyz");
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["ready"], json!(false));

    // Running.
    c.wait_for("tx1: ready", Duration::from_secs(20));
    c.wait_until_listening(Duration::from_secs(10));
    assert!(eventually(Duration::from_secs(2), || readyz(admin).0 == 200));
    assert_eq!(admin_get(admin, "/readyz").json(), json!({"ready": true}));

    // The master restarts: 503 with the reason, then 200 again once it is back.
    unsafe_kill(c.pid_of("m0"), SIGKILL);
    let mut seen = Vec::new();
    assert!(
        eventually(Duration::from_secs(10), || {
            let r = readyz(admin);
            seen.push(r.clone());
            r.0 == 503 && r.1.contains("master is not ready")
        }),
        "no 503 while the master was down: {seen:?}"
    );
    assert!(live(admin), "live while the master restarts");
    assert!(
        eventually(Duration::from_secs(15), || readyz(admin).0 == 200),
        "not ready again after the master's restart:\n{}",
        c.log_lines().join("\n")
    );
    // The line is written a moment after the roster has the master ready: waited for, not
    // counted at once.
    c.wait_for_count("m0: ready", 2, Duration::from_secs(10));

    // Draining: SIGTERM with a slow request in flight.
    let addr = c.addr();
    let slow = std::thread::spawn(move || {
        let t = Instant::now();
        (
            request(addr, "GET", "/r4/ValueSet/$expand", &[], b""),
            t.elapsed(),
        )
    });
    wait_until(
        "the slow $expand in flight",
        Duration::from_secs(10),
        || {
            admin_get(admin, "/status").json()["processes"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["frontInFlight"].as_u64() > Some(0)))
        },
    );
    c.signal(SIGTERM);
    let mut seen = Vec::new();
    assert!(
        eventually(Duration::from_secs(10), || {
            let r = readyz(admin);
            seen.push(r.clone());
            r.0 == 503 && r.1.contains("draining")
        }),
        "no 503 draining: {seen:?}"
    );
    assert!(live(admin), "live while draining");
    let status = admin_get(admin, "/status").json();
    assert_eq!(status["front"]["draining"], json!(true), "{status}");
    let (r, took) = slow.join().expect("the slow request's thread");
    assert_eq!(
        r.status,
        200,
        "the request in flight finishes: {}",
        r.text()
    );
    assert!(took >= Duration::from_millis(5000), "{took:?}");
    let exit = c.wait_exit(Duration::from_secs(20));
    assert_eq!(exit.code(), Some(0));
}

#[test]
fn status_lists_each_process_and_fhircluster_status_prints_the_table() {
    let admin = free_port();
    let c = cluster()
        .workers(2)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    // A status round (statusSeconds 1) fills in every process's pid and memory: the answer that
    // has them all is the one looked at.
    let v = poll(
        "/status with every process's pid and memory",
        Duration::from_secs(10),
        || {
            let s = admin_get(admin, "/status");
            let v = s.json();
            let complete = ["m0", "tx1", "tx2"].iter().all(|code| {
                v["processes"].as_array().is_some_and(|ps| {
                    ps.iter().any(|p| {
                        p["code"] == *code
                            && p["pid"].as_i64() == Some(i64::from(c.pid_of(code)))
                            && p["rssAnon"].as_u64().is_some()
                    })
                })
            });
            (s.status == 200 && complete).then_some(v)
        },
    );
    let procs = v["processes"].as_array().cloned().unwrap_or_default();
    let codes: Vec<&str> = procs.iter().filter_map(|p| p["code"].as_str()).collect();
    assert_eq!(codes, ["m0", "tx1", "tx2"], "{v}");
    for p in &procs {
        let code = p["code"].as_str().unwrap_or("");
        assert_eq!(p["pid"].as_i64(), Some(i64::from(c.pid_of(code))), "{p}");
        assert_eq!(p["routable"], json!(true), "{p}");
        assert!(p["slots"].as_u64().is_some(), "{p}");
    }
    assert_eq!(v["front"]["ready"], json!(true), "{v}");
    assert_eq!(v["front"]["draining"], json!(false), "{v}");

    // The real binary, from a directory without config.json, flags after the subcommand.
    let cwd = tempfile::tempdir().expect("cwd");
    let out = run_bounded(
        Command::new(LAUNCHER)
            .args(["status", "--admin-address", &admin.to_string()])
            .current_dir(cwd.path())
            .env_remove("FHIRSMITH_DATA_DIR"),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(0), "{}", out.all());
    let table = out.stdout;
    assert!(table.contains("ready ·"), "{table}");
    let header = table
        .lines()
        .find(|l| l.starts_with("PROCESS"))
        .unwrap_or_else(|| panic!("no header:\n{table}"));
    for col in ["ROLE", "PID", "STATE", "RESTARTS", "IN FLIGHT", "PRIVATE"] {
        assert!(header.contains(col), "{header}");
    }
    for code in ["m0", "tx1", "tx2"] {
        let row = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(code))
            .unwrap_or_else(|| panic!("no row for {code}:\n{table}"));
        assert!(
            row.split_whitespace()
                .any(|f| f == c.pid_of(code).to_string()),
            "{code}'s pid in {row:?}"
        );
    }
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("launcher") && l.contains(&c.pid().to_string())),
        "{table}"
    );

    // With nothing listening there: exit 2 (unreachable) and a message saying where it looked.
    let nobody = free_port();
    let out = run_bounded(
        Command::new(LAUNCHER)
            .args(["status", "--admin-address", &nobody.to_string()])
            .current_dir(cwd.path())
            .env_remove("FHIRSMITH_DATA_DIR"),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(
        out.stderr.contains(&format!("127.0.0.1:{nobody}")),
        "{}",
        out.all()
    );
}
