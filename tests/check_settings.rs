//! The settings' start-up answers through the real binary: every number's bound, the server
//! command's program and node script, `adminAddress` (a port number, and the ports it must
//! leave), the real source of a setting in every message, a fractional `stats.intervalMinutes`
//! and the sample period the launcher tells the processes, the tx endpoints in the plan, and a
//! host name for `bindAddress` (refused, saying why).
//! Each failure is one line naming the setting, exit 1, before anything starts.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// A config.json (as text) running the simulated server.
fn sim_config(patch: Value) -> String {
    let mut config = json!({
        "server": {"cluster": {"command": [SIM]}},
        "modules": {"tx": {"endpoints": [{"path": "/r4"}]}}
    });
    merge(&mut config, &patch);
    config.to_string()
}

#[test]
fn numbers_past_their_bound_are_refused_by_check_and_at_start() {
    // Issue 20 item 7: these passed --check, then panicked or hung at run time.
    for (cluster, setting, bound) in [
        (
            json!({"proxyThreads": 20000}),
            "server.cluster.proxyThreads",
            "from 1 to 1024",
        ),
        (
            json!({"proxyThreads": 4294967295u64}),
            "server.cluster.proxyThreads",
            "from 1 to 1024",
        ),
        (
            json!({"killSeconds": 1e19}),
            "server.cluster.killSeconds",
            "31536000 (a year)",
        ),
        (
            json!({"headerTimeoutSeconds": 1e19}),
            "server.cluster.headerTimeoutSeconds",
            "31536000",
        ),
        (
            json!({"statusSeconds": 1e19}),
            "server.cluster.statusSeconds",
            "31536000",
        ),
        (
            json!({"maxOutstanding": 4294967295u64}),
            "server.cluster.maxOutstanding",
            "1000000",
        ),
    ] {
        let config = sim_config(json!({"server": {"cluster": cluster}}));
        let out = check(&config, &[]);
        assert_refused(&out, &[setting, bound]);
        assert_eq!(out.stderr.lines().count(), 1, "one line:\n{}", out.all());
    }
    // Without --check: the same line, at once, nothing started.
    let dir = tempfile::tempdir().expect("data dir");
    let config = sim_config(json!({"server": {"cluster": {"proxyThreads": 20000}}}));
    std::fs::write(dir.path().join("config.json"), config).expect("write config.json");
    let out = run_bounded(&mut launcher_command(dir.path()), CHECK_LIMIT);
    assert_refused(
        &out,
        &["server.cluster.proxyThreads = 20000", "from 1 to 1024"],
    );
    assert!(out.took < Duration::from_secs(5), "took {:?}", out.took);
    assert!(!out.stderr.contains("started"), "{}", out.all());
}

#[test]
fn the_node_script_must_be_in_the_working_directory() {
    // Issue 14: --check said "configuration ok" with no server.js; the start then failed 32 s
    // later with "the master exited 6 times".
    let bin = fake_node_dir();
    let data = tempfile::tempdir().expect("data dir");
    let config = json!({"server": {"cluster": {"workers": 1}},
        "modules": {"tx": {"endpoints": [{"path": "/r4"}]}}});
    std::fs::write(data.path().join("config.json"), config.to_string()).expect("write");
    let empty = tempfile::tempdir().expect("a folder without server.js");
    let run = |cwd: &std::path::Path, check: bool| {
        let mut cmd = launcher_command(data.path());
        if check {
            cmd.arg("--check");
        }
        cmd.current_dir(cwd).env("PATH", path_with(bin.path()));
        run_bounded(&mut cmd, CHECK_LIMIT)
    };
    let cwd = empty.path().display().to_string();
    for check in [true, false] {
        let out = run(empty.path(), check);
        assert_refused(
            &out,
            &[
                "server.cluster.command = [\"node\",\"server.js\"] (the default)",
                "node's script server.js is not in",
                &cwd,
                "working directory",
            ],
        );
        assert_eq!(out.stderr.lines().count(), 1, "one line:\n{}", out.all());
        assert!(out.took < Duration::from_secs(5), "took {:?}", out.took);
    }
    // From FHIRsmith's folder it passes.
    let folder = fhirsmith_folder();
    let out = run(folder.path(), true);
    assert_eq!(out.code, Some(0), "{}", out.all());
    // A node that isn't there at all is named as such.
    let mut cmd = launcher_command(data.path());
    cmd.arg("--check")
        .current_dir(folder.path())
        .env("PATH", empty.path());
    let out = run_bounded(&mut cmd, CHECK_LIMIT);
    assert_refused(
        &out,
        &["server.cluster.command = \"node\"", "not found on PATH"],
    );
}

#[test]
fn every_message_names_the_real_source_of_a_setting() {
    // spec: DEC-13. Issue 14: a --workers flag was reported as "set by server.cluster.workers".
    let dir = tempfile::tempdir().expect("data dir");
    let config = sim_config(json!({"server": {"cluster": {"workers": 1}}}));
    std::fs::write(dir.path().join("config.json"), &config).expect("write config.json");
    let file = dir.path().join("config.json").display().to_string();
    let first_line = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = launcher_command(dir.path());
        cmd.arg("--check").args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = run_bounded(&mut cmd, CHECK_LIMIT);
        assert_eq!(out.code, Some(0), "{}", out.all());
        out.stdout.lines().next().unwrap_or_default().to_string()
    };
    let line = first_line(&["--workers=2"], &[("FHIRSMITH_WORKERS", "3")]);
    assert!(line.starts_with("workers 2: set by --workers;"), "{line}");
    let line = first_line(&[], &[("FHIRSMITH_WORKERS", "3")]);
    assert!(
        line.starts_with("workers 3: set by environment FHIRSMITH_WORKERS;"),
        "{line}"
    );
    let line = first_line(&[], &[]);
    assert!(
        line.starts_with(&format!(
            "workers 1: set by server.cluster.workers in {file};"
        )),
        "{line}"
    );

    // An error between settings names each one's layer.
    let mut cmd = launcher_command(dir.path());
    cmd.args(["--check", "--workers=3", "--internal-port=2999"])
        .env("PORT", "3001");
    let out = run_bounded(&mut cmd, CHECK_LIMIT);
    assert_refused(
        &out,
        &[
            "server.cluster.internalPort = 2999 (from --internal-port)",
            "(the master and 3 workers, from --workers)",
            "server.port 3001 (from environment PORT)",
        ],
    );
}

#[test]
fn admin_address_may_be_a_port_number_as_readme_writes_it() {
    // Issue 14: `"adminAddress": 9100` was refused with "must be a string".
    let admin = free_port();
    let out = check(
        &sim_config(json!({"server": {"cluster": {"workers": 1, "adminAddress": admin}}})),
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.all());
    // And the launcher's own endpoints answer there, on loopback.
    let c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"adminAddress": admin}}}))
        .start();
    let r = admin_get(admin, "/livez");
    assert_eq!(r.status, 200, "{}", c.log_lines().join("\n"));
}

#[test]
fn an_admin_address_on_the_client_port_or_a_process_port_is_refused_naming_both() {
    // Issue 20 item 7.
    let base = free_ports(4);
    let config = |admin: Value| {
        sim_config(json!({"server": {"port": base, "cluster": {
            "workers": 2, "internalPort": base + 1, "adminAddress": admin}}}))
    };
    let out = check(&config(json!(base)), &[]);
    assert_refused(
        &out,
        &[
            &format!("server.cluster.adminAddress = 127.0.0.1:{base}"),
            &format!("must not use the port clients use, server.port {base}"),
        ],
    );
    let out = check(&config(json!(format!("0.0.0.0:{}", base + 2))), &[]);
    assert_refused(
        &out,
        &[
            "server.cluster.adminAddress",
            &format!("the processes' ports {}-{}", base + 1, base + 3),
            &format!("server.cluster.internalPort {}", base + 1),
        ],
    );
    // At start too, before anything starts.
    let dir = tempfile::tempdir().expect("data dir");
    std::fs::write(dir.path().join("config.json"), config(json!(base + 1))).expect("write");
    let out = run_bounded(&mut launcher_command(dir.path()), CHECK_LIMIT);
    assert_refused(&out, &["server.cluster.adminAddress"]);
    assert!(!out.stderr.contains("started"), "{}", out.all());
    // Beside them is fine.
    let out = check(&config(json!(base + 4)), &[]);
    assert_eq!(out.code, Some(0), "{}", out.all());
}

#[test]
fn a_host_name_bind_address_is_taken_and_one_that_resolves_to_nothing_is_refused_naming_it() {
    // spec: ROLE-9, DEC-40. cluster.js takes a name (Node resolves it); so does the launcher,
    // reaching the processes at every address the name resolves to.
    let mut names = vec!["localhost".to_string()];
    // A name of /etc/hosts other than localhost, where the host has one.
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    if let Some(name) = hosts
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.split_whitespace().skip(1))
        .find(|n| *n != "localhost" && n.parse::<std::net::IpAddr>().is_err())
    {
        names.push(name.to_string());
    }
    for name in &names {
        let config = sim_config(json!({"server": {"cluster": {"bindAddress": name}}}));
        let out = check(&config, &[]);
        assert_eq!(out.code, Some(0), "{name}: {}", out.all());
        assert!(out.stdout.contains("reached at"), "{name}: {}", out.all());
    }
    // A name that resolves to nothing (`.invalid` never does): exit 1, naming it.
    let name = "no-such-host.invalid";
    let config = sim_config(json!({"server": {"cluster": {"bindAddress": name}}}));
    let out = check(&config, &[]);
    let shown = format!("server.cluster.bindAddress = \"{name}\"");
    let needles = [shown.as_str(), "as a host name", "resolve"];
    assert_refused(&out, &needles);
    assert_eq!(out.stderr.lines().count(), 1, "one line:\n{}", out.all());
    // At start too: exit 1 at once, nothing started.
    let dir = tempfile::tempdir().expect("data dir");
    std::fs::write(dir.path().join("config.json"), &config).expect("write config.json");
    let out = run_bounded(&mut launcher_command(dir.path()), CHECK_LIMIT);
    assert_refused(&out, &needles);
    assert!(!out.stderr.contains("started"), "{}", out.all());
    // Its addresses are taken as they are.
    for ip in ["127.0.0.1", "::1", "0.0.0.0", "::"] {
        let out = check(
            &sim_config(json!({"server": {"cluster": {"bindAddress": ip}}})),
            &[],
        );
        assert_eq!(out.code, Some(0), "{ip}: {}", out.all());
    }
}

#[test]
fn a_fractional_interval_minutes_is_taken_and_sets_the_sample_period() {
    // spec: DEC-28. Issue 18: 0.5 stopped the launcher at start; FHIRsmith reads it as 30 s. The spec's
    // sample period with a role: a minute, or stats.intervalMinutes if shorter; the launcher
    // says it in `hello`.
    let out = check(&sim_config(json!({"stats": {"intervalMinutes": 0.5}})), &[]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    let c = cluster()
        .workers(1)
        .config(json!({"stats": {"intervalMinutes": 0.5}}))
        .start();
    for code in ["m0", "tx1"] {
        let got = request(c.process_addr(code), "GET", "/sim/received", &[], b"").json();
        assert_eq!(got["hello"]["sampleSeconds"], json!(30.0), "{code}: {got}");
    }
}

#[test]
fn the_plan_says_the_tx_endpoints_and_none_set_is_said_too() {
    // Issue 18: FHIRsmith has no default tx endpoints (its tx module stops at start without
    // them); with none set no path is a tx path, and --check says so.
    let dir = tempfile::tempdir().expect("data dir");
    let file = dir.path().join("config.json");
    std::fs::write(
        &file,
        json!({"server": {"cluster": {"workers": 1, "command": [SIM]}},
            "modules": {"tx": {"endpoints": [{"path": "/r4"}, {"path": "/r5/"}]}}})
        .to_string(),
    )
    .expect("write");
    let out = check_in(dir.path(), &[]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    let line = format!(
        "tx endpoints: /r4, /r5 (modules.tx.endpoints in {})",
        file.display()
    );
    assert!(
        out.stdout.lines().any(|l| l == line),
        "no {line:?}:\n{}",
        out.all()
    );

    let out = check(
        &json!({"server": {"cluster": {"workers": 1, "command": [SIM]}}}).to_string(),
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.all());
    assert!(
        out.stderr.contains(
            "warning: modules.tx.endpoints is not set, so no path is a tx path: every request goes to the master"
        ),
        "{}",
        out.all()
    );
    assert!(
        out.stdout
            .contains("tx endpoints: none (modules.tx.endpoints is not set"),
        "{}",
        out.all()
    );

    // FHIRsmith's tx module switched on with no endpoints can't start: refused now, not after
    // the master has failed maxStartFailures times.
    let out = check(
        &json!({"server": {"cluster": {"workers": 0, "command": [SIM]}},
            "modules": {"tx": {"enabled": true}}})
        .to_string(),
        &[],
    );
    assert_refused(
        &out,
        &[
            "modules.tx.endpoints = (not set)",
            "stops at start without them",
        ],
    );
}
