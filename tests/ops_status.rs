//! `fhircluster status` for people and scripts, with the real binaries: `--json` gives the
//! launcher's `/status` figures, and the exit status says ready (0), not ready or draining (1),
//! or no launcher there (2), through the master's start, serving, the drain and after the exit.
//! A server without the IPC channel shows as ready with "no channel", never `stale`.
//! `fhircluster --version` names the version, the commit and the compiler. A tx endpoint nobody
//! uses (every tx-capable request going to the master) is one WARNING naming the prefix.

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const PLAIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/plain-server.py"
);
const SIGTERM: i32 = 15;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// `fhircluster status [--json] --admin-address PORT`, from a directory without config.json.
fn status(admin: u16, json: bool) -> RunOutput {
    let cwd = tempfile::tempdir().expect("cwd");
    status_in(cwd.path(), admin, json)
}

/// `fhircluster status [--json] --admin-address PORT`, run in `cwd`.
fn status_in(cwd: &std::path::Path, admin: u16, json: bool) -> RunOutput {
    let mut cmd = Command::new(LAUNCHER);
    cmd.arg("status");
    if json {
        cmd.arg("--json");
    }
    cmd.args(["--admin-address", &admin.to_string()])
        .current_dir(cwd)
        .env_remove("FHIRSMITH_DATA_DIR");
    run_bounded(&mut cmd, secs(20))
}

/// A health check (README's Docker `HEALTHCHECK`) runs `status --admin-address` wherever it is:
/// a `config.json` there with a bad value, which the running launcher refused on HUP and serves
/// on without, must not make a ready launcher look "not ready" (exit 1) — or unreachable.
#[test]
fn status_with_an_admin_address_reads_no_config_json() {
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .spawn();
    c.wait_for("tx1: ready", secs(20));
    c.wait_until_listening(secs(10));
    let cwd = tempfile::tempdir().expect("cwd");
    std::fs::write(
        cwd.path().join("config.json"),
        r#"{"server": {"cluster": {"drainSeconds": "five"}}}"#,
    )
    .expect("config.json");
    for json in [false, true] {
        let out = status_in(cwd.path(), admin, json);
        assert_eq!(out.code, Some(0), "{}", out.all());
    }
    // Without an address it goes to the control socket in the data directory, reading only
    // `controlSocket` from its config.json: a bad unrelated value there is no fault (#26.4).
    let bad = c.data_dir().join("config.json");
    let mut config = c.config.clone();
    config["server"]["cluster"]["drainSeconds"] = json!("five");
    std::fs::write(&bad, config.to_string()).expect("config.json");
    let mut cmd = Command::new(LAUNCHER);
    cmd.args(["status", "--data-dir"])
        .arg(c.data_dir())
        .current_dir(cwd.path())
        .env_remove("FHIRSMITH_DATA_DIR");
    let out = run_bounded(&mut cmd, secs(20));
    assert_eq!(out.code, Some(0), "{}", out.all());
    // No launcher on a data directory: "no launcher found" (2), never "not ready" (1).
    let mut cmd = Command::new(LAUNCHER);
    cmd.args(["status", "--data-dir"])
        .arg(cwd.path())
        .current_dir(cwd.path())
        .env_remove("FHIRSMITH_DATA_DIR");
    let out = run_bounded(&mut cmd, secs(20));
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(out.stderr.contains("no control socket"), "{}", out.all());
    c.signal(SIGTERM);
    c.wait_exit(secs(20));
}

#[test]
fn status_exit_codes_follow_the_start_serving_the_drain_and_the_exit() {
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        .env("SIM_START_DELAY_MS_m0", "2000")
        .config(json!({"server": {"cluster": {"drainSeconds": 30}}}))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .spawn();
    // The master is loading: the endpoint answers, not ready.
    c.wait_for("m0: started", secs(10));
    assert!(
        eventually(secs(5), || admin_get(admin, "/livez").status == 200),
        "the admin endpoint never answered"
    );
    let out = status(admin, false);
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(out.stdout.contains("not ready"), "{}", out.all());

    // Ready: 0, and --json is the launcher's /status.
    c.wait_for("tx1: ready", secs(20));
    c.wait_until_listening(secs(10));
    let out = status(admin, true);
    assert_eq!(out.code, Some(0), "{}", out.all());
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("--json is not JSON ({e}):\n{}", out.all()));
    assert_eq!(v["front"]["ready"], json!(true), "{v}");
    let codes: Vec<&str> = v["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["code"].as_str())
        .collect();
    assert_eq!(codes, ["m0", "tx1"], "{v}");
    assert_eq!(
        v["processes"][1]["pid"].as_i64(),
        Some(i64::from(c.pid_of("tx1"))),
        "{v}"
    );
    let direct: Value = admin_get(admin, "/status").json();
    for key in ["front", "processes", "memory", "launcher"] {
        assert!(
            direct.get(key).is_some() && v.get(key).is_some(),
            "{key}: {v}"
        );
    }

    // Draining (a request holds it open): 1, and the table says so.
    let mut held = TcpStream::connect(c.addr()).expect("connect");
    held.write_all(b"GET /r4/metadata?_sim_hang=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    assert!(
        eventually(secs(10), || {
            let v: Value = admin_get(admin, "/status").json();
            v["processes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["frontInFlight"].as_u64() >= Some(1))
        }),
        "the held request never reached a process"
    );
    c.signal(SIGTERM);
    c.wait_for("draining", secs(10));
    let out = status(admin, false);
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(out.stdout.contains("draining"), "{}", out.all());
    drop(held);

    // Gone: 2.
    assert_eq!(c.wait_exit(secs(60)).code(), Some(0));
    let out = status(admin, true);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(out.stdout.is_empty(), "{}", out.all());
}

#[test]
fn a_server_without_the_channel_is_ready_with_no_channel_never_stale() {
    let admin = free_port();
    let server = format!("exec python3 {PLAIN} \"$PORT\" 0");
    let mut c = cluster()
        .workers(1)
        .command(&["sh", "-c", &server])
        .arg("--admin-address")
        .arg(&admin.to_string())
        .spawn();
    c.wait_for("tx1: ready", secs(20));
    // statusSeconds is 1: after more than 3 intervals a silent process would have been stale.
    let row = |v: &Value, code: &str| -> Value {
        v["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["code"] == code)
            .cloned()
            .unwrap_or(Value::Null)
    };
    std::thread::sleep(Duration::from_millis(4500));
    let v: Value = admin_get(admin, "/status").json();
    for code in ["m0", "tx1"] {
        let r = row(&v, code);
        assert_eq!(r["status"], "ready", "{code}: {v}");
        assert_eq!(r["noChannel"], true, "{code}: {v}");
        assert_eq!(r["inFlight"], Value::Null, "{code}: figures unknown: {v}");
    }
    let out = status(admin, false);
    assert_eq!(out.code, Some(0), "{}", out.all());
    assert!(
        out.stdout.contains("ready (no channel)") && !out.stdout.contains("stale"),
        "{}",
        out.all()
    );
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
}

#[test]
fn version_names_the_version_the_commit_and_the_compiler() {
    let out = run_bounded(Command::new(LAUNCHER).arg("--version"), secs(20));
    assert_eq!(out.code, Some(0), "{}", out.all());
    let text = out.stdout;
    assert!(
        text.starts_with(&format!("fhircluster {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    let commit = text
        .lines()
        .find_map(|l| l.strip_prefix("commit: "))
        .unwrap_or_else(|| panic!("no commit line:\n{text}"));
    // Built in a git checkout (as here): HEAD's commit; elsewhere "unknown".
    let head = run_bounded(
        Command::new("git")
            .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
            .env_remove("GIT_DIR"),
        secs(20),
    );
    match head.code {
        Some(0) => assert!(
            commit.len() >= 7 && head.stdout.trim().starts_with(commit),
            "commit {commit:?}, HEAD {}",
            head.stdout
        ),
        _ => assert_eq!(commit, "unknown", "not a git checkout: {}", head.all()),
    }
    let rustc = text
        .lines()
        .find_map(|l| l.strip_prefix("rustc: "))
        .unwrap_or_else(|| panic!("no rustc line:\n{text}"));
    assert!(rustc.starts_with("rustc 1."), "{rustc:?}");
    // The library has the same, for the metrics and logs to come.
    assert_eq!(commit, fhircluster::build_info::COMMIT);
    assert_eq!(rustc, fhircluster::build_info::RUSTC);
}

#[test]
fn a_tx_endpoint_nobody_uses_is_warned_about_once_naming_the_prefix() {
    // The window is 10 minutes; FHIRCLUSTER_TX_USAGE_WINDOW_SECONDS shortens it for tests.
    let mut c = cluster()
        .workers(1)
        .env("FHIRCLUSTER_TX_USAGE_WINDOW_SECONDS", "2")
        .start();
    let lookup = "/4_0_0/CodeSystem/$lookup?system=http://loinc.org&code=1";
    // 5 s (2.5 windows): tx requests under /r4 as well, so no window is master-only.
    let began = std::time::Instant::now();
    while began.elapsed() < secs(5) {
        assert_eq!(c.get("/r4/CodeSystem/$lookup").status, 200);
        for _ in 0..5 {
            c.get(lookup);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        c.line_index("no tx request reached").is_none(),
        "warned while tx requests reached the workers:\n{}",
        c.log_lines().join("\n")
    );
    // Now only the master gets them.
    let mark = c.mark();
    let began = std::time::Instant::now();
    let line = loop {
        for _ in 0..5 {
            c.get(lookup);
        }
        if let Some(l) = c
            .log_lines()
            .into_iter()
            .skip(mark)
            .find(|l| l.contains("no tx request reached"))
        {
            break l;
        }
        assert!(
            began.elapsed() < secs(20),
            "no warning:\n{}",
            c.log_lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(line.contains(" WARNING "), "{line}");
    assert!(line.contains("the most common prefix was /4_0_0"), "{line}");
    assert!(line.contains("modules.tx.endpoints (/r4)"), "{line}");
    // Once per run.
    let more = std::time::Instant::now();
    while more.elapsed() < secs(5) {
        c.get(lookup);
        // The scenario: more unused-prefix requests, paced over 5 s (not a wait for a state).
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(c.count_lines("no tx request reached"), 1);
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
}

/// Outside the data directory, with none given: Deploy's layout, `/var/lib/fhirsmith`, as
/// `pm2 status` needs no path; for `status` and the actions alike.
#[test]
fn status_and_the_actions_outside_the_data_directory_look_in_deploys_layout() {
    let cwd = tempfile::tempdir().expect("an empty directory");
    let deploys = "/var/lib/fhirsmith/fhircluster.sock";
    for args in [
        &["status"][..],
        &["upgrade"][..],
        &["restart"][..],
        &["scale", "2"][..],
    ] {
        let mut cmd = Command::new(LAUNCHER);
        cmd.args(args)
            .current_dir(cwd.path())
            .env_remove("FHIRSMITH_DATA_DIR");
        let out = run_bounded(&mut cmd, secs(20));
        // A host running a launcher in Deploy's layout answers; any other names where it looked.
        if std::path::Path::new(deploys).exists() {
            continue;
        }
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.all());
        assert!(out.stderr.contains(deploys), "{args:?}: {}", out.all());
    }
}
