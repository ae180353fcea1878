//! `fhircluster --check` end to end, and the settings errors that stop the launcher before it
//! starts anything: the real binary on a temporary data directory, its exit status and output.
//! `--check` is `nginx -t`: validate config.json and print the plan, bind nothing, start nothing.

use crate::common;

use std::net::TcpListener;
use std::time::Duration;

use common::*;
use serde_json::json;

#[test]
fn the_template_passes_and_prints_the_decision_each_process_and_the_limits() {
    // spec: LAUNCH-1, LAUNCH-10, ROLE-1..6, DEC-19, CONF-8, CONF-9
    // The template's own command (`node server.js`), with a `node` of ours first on PATH so the
    // test does not depend on Node being installed.
    let bin = fake_node_dir();
    let dir = tempfile::tempdir().expect("temp data dir");
    // As its head says, copied without its comments (JSON.parse, node's reader, takes none).
    std::fs::write(dir.path().join("config.json"), template()).expect("write config.json");
    let plain = fhircluster::settings::jsonc::read(dir.path())
        .expect("the template parses")
        .expect("the template");
    std::fs::write(dir.path().join("config.json"), plain.to_string()).expect("write config.json");
    // Run from FHIRsmith's folder, as under systemd: node's script must be there.
    let cwd = fhirsmith_folder();
    let mut cmd = launcher_command(dir.path());
    cmd.args(["--check", "--workers=2"])
        .current_dir(cwd.path())
        .env("PATH", path_with(bin.path()));
    let out = run_bounded(&mut cmd, CHECK_LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.all());
    let lines: Vec<&str> = out.stdout.lines().collect();
    let text = &out.stdout;
    let data_dir = dir.path().display().to_string();

    assert!(
        lines[0].starts_with("workers 2: set by --workers;"),
        "the decision line comes first, naming what set the count:\n{text}"
    );
    assert!(lines[0].contains("quota"), "{text}");
    for (role, code, port) in [
        ("master", "m0", 3001),
        ("tx-worker", "tx1", 3002),
        ("tx-worker", "tx2", 3003),
    ] {
        let head = format!("{role} {code} on 127.0.0.1:{port}");
        let at = lines
            .iter()
            .position(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no {head:?} line:\n{text}"));
        let command = lines[at + 1];
        let env = lines[at + 2];
        assert_eq!(
            command.trim(),
            format!(
                "command: node --expose-gc server.js --role={role} --instance-code={code} --port={port}"
            ),
            "{text}"
        );
        for kv in [
            format!("FHIRSMITH_ROLE={role}"),
            format!("FHIRSMITH_INSTANCE_CODE={code}"),
            format!("PORT={port}"),
            "HOST=127.0.0.1".to_string(),
            format!("FHIRSMITH_DATA_DIR={data_dir}"),
            "NODE_CHANNEL_FD=3".to_string(),
        ] {
            assert!(
                env.trim_start().starts_with("env:") && env.contains(&kv),
                "{code}'s env lacks {kv}:\n{text}"
            );
        }
    }
    assert!(
        !text.contains("tx3"),
        "only the two workers asked for:\n{text}"
    );
    let limits = lines
        .iter()
        .find(|l| l.starts_with("limits: "))
        .unwrap_or_else(|| panic!("no limits line:\n{text}"));
    for item in [
        "maxOutstanding 16",
        "queueSeconds 1",
        "ownerQueueSeconds 30",
        "cooldownSeconds 2",
        "upstreamTimeoutSeconds 60",
        "writeTimeoutSeconds 60",
        "fastLaneExtra 4",
        "fastLaneMaxBytes 1024",
        "memoryHeadroomGB 2",
        "normalMinSlots 4",
        "saturatedPercent 90",
        "drainSeconds 30",
        "trimAllocator true",
        "recycleSeconds 30",
    ] {
        assert!(limits.contains(item), "limits line lacks {item}: {limits}");
    }
    assert_eq!(lines.last().copied(), Some("configuration ok"), "{text}");
}

#[test]
fn node_flags_after_double_dash_reach_every_process_and_a_debugger_is_refused() {
    // spec: LAUNCH-12, LAUNCH-13, DEC-19, ROLE-6
    let bin = fake_node_dir();
    let config = json!({"server": {"cluster": {"workers": 1}}}).to_string();
    let dir = tempfile::tempdir().expect("temp data dir");
    std::fs::write(dir.path().join("config.json"), &config).expect("write config.json");
    let cwd = fhirsmith_folder();
    let mut cmd = launcher_command(dir.path());
    cmd.args(["--check", "--", "--max-old-space-size=8192"])
        .current_dir(cwd.path())
        .env("PATH", path_with(bin.path()));
    let out = run_bounded(&mut cmd, CHECK_LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.all());
    let commands: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("command:"))
        .collect();
    assert_eq!(commands.len(), 2, "{}", out.all());
    for c in commands {
        assert!(
            c.contains("node --max-old-space-size=8192 --expose-gc server.js"),
            "flags go after the program, before the script: {c}"
        );
    }

    let mut cmd = launcher_command(dir.path());
    cmd.args(["--check", "--", "--inspect"])
        .current_dir(cwd.path())
        .env("PATH", path_with(bin.path()));
    let out = run_bounded(&mut cmd, CHECK_LIMIT);
    assert_refused(&out, &["--inspect"]);
    assert!(!out.stdout.contains("command:"), "{}", out.all());
}

#[test]
fn comments_of_both_kinds_are_allowed() {
    // spec: LAUNCH-1
    let config = format!(
        "// a line comment\n{{\n  /* a block\n     comment */\n  \"server\": {{ \"port\": 4000, // the port\n    \"cluster\": {{ \"workers\": 1, /* inline */ \"command\": [\"{SIM}\"] }} }}\n}}\n"
    );
    let out = check(&config, &[]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    assert!(
        out.stdout.contains("master m0 on 127.0.0.1:4001"),
        "{}",
        out.all()
    );
    assert!(out.stdout.contains("configuration ok"), "{}", out.all());
    // The sim is not node: its comments are nobody else's concern.
    assert!(!out.stderr.contains("not plain JSON"), "{}", out.all());
}

/// FHIRsmith's server.js reads config.json with JSON.parse: a commented file that fhircluster
/// takes would stop every Node process, so `--check` refuses it (exit 1, naming the first
/// comment's line) when the servers are node's; a plain file passes, and a server that is not
/// node (any HTTP server) may have the comments fhircluster reads.
#[test]
fn a_commented_config_json_with_node_servers_is_refused_naming_the_line() {
    let code = fhirsmith_folder();
    let bin = fake_node_dir();
    let commented =
        "{\n \"server\": {\"port\": 4000, // the port\n \"cluster\": {\"workers\": 1}}}";
    let plain = "{\"server\": {\"port\": 4000, \"cluster\": {\"workers\": 1}}}";
    for (config, refused) in [(commented, true), (plain, false)] {
        let dir = tempfile::tempdir().expect("temp data dir");
        std::fs::write(dir.path().join("config.json"), config).expect("write config.json");
        let mut cmd = launcher_command(dir.path());
        cmd.arg("--check")
            .current_dir(code.path())
            .env("PATH", path_with(bin.path()));
        let out = run_bounded(&mut cmd, CHECK_LIMIT);
        if refused {
            let file = dir.path().join("config.json").display().to_string();
            assert_refused(&out, &[&format!("{file}:2:"), "comment", "JSON.parse"]);
        } else {
            assert_eq!(out.code, Some(0), "{}", out.all());
            assert!(!out.stderr.contains("comment"), "{}", out.all());
        }
    }
}

/// A misspelt section of fhircluster's own (`server.clustr`) would leave every setting in it
/// unread: named, with the section it was likely meant to be, as a misspelt setting is.
#[test]
fn a_misspelt_section_is_named_with_what_it_was_likely_meant_to_be() {
    let config = json!({"server": {"clustr": {"workers": 1}, "memroy": {"rejectFraction": 0.8},
        "cluster": {"command": [SIM]}}});
    let out = check(&config.to_string(), &[]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    for (typo, meant) in [
        ("server.clustr", "server.cluster"),
        ("server.memroy", "server.memory"),
    ] {
        let line = out
            .stderr
            .lines()
            .find(|l| l.contains(typo))
            .unwrap_or_else(|| panic!("{typo} not named:\n{}", out.all()));
        assert!(
            line.starts_with("warning: ") && line.contains(&format!("did you mean {meant}?")),
            "{line}"
        );
    }
}

/// A data directory without config.json runs on the defaults: said on stderr as a warning (as
/// nginx -t says what it finds), not only in the plan's "settings:" line.
#[test]
fn a_data_directory_without_config_json_is_a_warning_on_stderr() {
    let dir = tempfile::tempdir().expect("temp data dir");
    let out = check_in(dir.path(), &["--command", SIM]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    let config = dir.path().join("config.json").display().to_string();
    assert!(
        out.stderr
            .lines()
            .any(|l| l.starts_with("warning: ") && l.contains(&config) && l.contains("defaults")),
        "{}",
        out.all()
    );
}

/// `fhircluster -t`, nginx's habit, is `--check`.
#[test]
fn dash_t_is_check() {
    let dir = tempfile::tempdir().expect("temp data dir");
    std::fs::write(
        dir.path().join("config.json"),
        json!({"server": {"cluster": {"workers": 1, "command": [SIM]}}}).to_string(),
    )
    .expect("write config.json");
    let mut cmd = launcher_command(dir.path());
    cmd.arg("-t");
    let out = run_bounded(&mut cmd, CHECK_LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.all());
    assert!(out.stdout.ends_with("configuration ok\n"), "{}", out.all());
}

/// `--check` names the file it read, or says it read none, and where clients, the launcher's
/// own endpoints and the access log go.
#[test]
fn check_says_which_file_it_read_and_where_everything_listens() {
    let dir = tempfile::tempdir().expect("temp data dir");
    let mut cmd = launcher_command(dir.path());
    cmd.args(["--check", "--workers", "1", "--command", SIM]);
    let out = run_bounded(&mut cmd, CHECK_LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.all());
    let none = format!("settings: no {}", dir.path().join("config.json").display());
    assert!(out.stdout.contains(&none), "{}", out.all());
    assert!(
        out.stdout.contains("clients: [::]:3000 (every interface"),
        "{}",
        out.all()
    );
    assert!(out.stdout.contains("admin endpoint: off"), "{}", out.all());
    assert!(out.stdout.contains("access log: off"), "{}", out.all());

    let config = json!({"server": {"port": 4100, "cluster": {
        "workers": 1, "command": [SIM], "listenAddress": "127.0.0.1", "adminAddress": 9111,
        "accessLog": "json", "accessLogPath": "access.log"}}});
    let out = check(&config.to_string(), &[]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    assert!(
        out.stdout.contains("config.json and the flags"),
        "{}",
        out.all()
    );
    assert!(
        out.stdout.contains("clients: 127.0.0.1:4100\n"),
        "{}",
        out.all()
    );
    assert!(
        out.stdout.contains("admin endpoint: 127.0.0.1:9111 ("),
        "{}",
        out.all()
    );
    assert!(
        out.stdout.contains("access log: json, to /"),
        "{}",
        out.all()
    );
    assert!(
        out.stdout.contains("access.log (reopened on SIGUSR1)"),
        "{}",
        out.all()
    );
}

#[test]
fn a_fractional_worker_count_names_the_setting() {
    // spec: CONF-5, DEC-12
    let out = check(
        &json!({"server": {"cluster": {"workers": 4.5, "command": [SIM]}}}).to_string(),
        &[],
    );
    assert_refused(&out, &["server.cluster.workers", "4.5", "whole number"]);
}

#[test]
fn a_syntax_error_names_the_file_line_and_column() {
    // spec: DEC-12
    let config = format!(
        "{{\n  \"server\": {{\n    \"cluster\": {{ \"workers\": 1 \"command\": [\"{SIM}\"] }}\n  }}\n}}\n"
    );
    let dir = tempfile::tempdir().expect("temp data dir");
    std::fs::write(dir.path().join("config.json"), config).expect("write config.json");
    let out = check_in(dir.path(), &[]);
    let file = dir.path().join("config.json").display().to_string();
    // Line 3; the column of the `"command"` that should have had a comma before it.
    assert_refused(&out, &[&format!("{file}:3:"), "line 3", "column"]);
}

#[test]
fn an_internal_port_range_including_the_port_is_refused() {
    // spec: CONF-10, DEC-21
    let out = check(
        &json!({"server": {"port": 5000, "cluster": {"workers": 3, "internalPort": 4998, "command": [SIM]}}})
            .to_string(),
        &[],
    );
    assert_refused(&out, &["server.cluster.internalPort", "5000"]);
}

#[test]
fn an_unknown_worker_rule_lists_the_known_ones() {
    // spec: DEC-23
    let out = check(
        &json!({"server": {"cluster": {"workerRule": "fancy", "command": [SIM]}}}).to_string(),
        &[],
    );
    assert_refused(&out, &["server.cluster.workerRule", "fancy", "classic"]);
}

#[test]
fn other_bad_numbers_are_errors_naming_the_setting_not_clamps() {
    // spec: DEC-7, CONF-22, CONF-24
    for (cluster, setting) in [
        (
            json!({"normalMinSlots": 20}),
            "server.cluster.normalMinSlots",
        ),
        (json!({"statusSeconds": 0}), "server.cluster.statusSeconds"),
        (json!({"drainSeconds": -1}), "server.cluster.drainSeconds"),
    ] {
        let mut config = json!({"server": {"cluster": {"command": [SIM]}}});
        merge(&mut config, &json!({"server": {"cluster": cluster}}));
        let out = check(&config.to_string(), &[]);
        assert_refused(&out, &[setting]);
    }
}

#[test]
fn a_bad_flag_value_names_the_setting() {
    // spec: CONF-3, CONF-5, DEC-13
    let config = json!({"server": {"cluster": {"workers": 1, "command": [SIM]}}}).to_string();
    let out = check(&config, &["--workers=two"]);
    assert_refused(&out, &["server.cluster.workers", "two", "--workers"]);
    let out = check(&config, &["--port=70000"]);
    assert_refused(&out, &["server.port", "70000"]);
}

#[test]
fn a_missing_command_program_is_refused_and_nothing_starts() {
    // spec: DEC-12
    let config = json!({"server": {"cluster": {"workers": 1}}}).to_string();
    let out = check(&config, &["--command", "/nonexistent/prog"]);
    assert_refused(
        &out,
        &[
            "server.cluster.command",
            "/nonexistent/prog",
            "does not exist",
        ],
    );

    // Without --check too: one line, exit 1 at once, no child ever started.
    let dir = tempfile::tempdir().expect("temp data dir");
    std::fs::write(dir.path().join("config.json"), &config).expect("write config.json");
    let mut cmd = launcher_command(dir.path());
    cmd.args(["--command", "/nonexistent/prog"]);
    let out = run_bounded(&mut cmd, CHECK_LIMIT);
    assert_refused(&out, &["server.cluster.command", "/nonexistent/prog"]);
    assert!(out.took < Duration::from_secs(5), "took {:?}", out.took);
    assert!(
        !out.stderr.contains("started") && !out.stderr.contains("listening"),
        "{}",
        out.all()
    );
    assert_eq!(out.stderr.lines().count(), 1, "one line:\n{}", out.all());
}

#[test]
fn a_missing_data_directory_is_refused() {
    // spec: LAUNCH-1, DEC-12
    let missing = tempfile::tempdir()
        .expect("temp dir")
        .path()
        .join("not-there");
    let out = check_in(&missing, &["--command", SIM]);
    assert_refused(&out, &["data directory", "not-there", "does not exist"]);
}

#[test]
fn check_binds_nothing_and_starts_nothing() {
    // spec: LAUNCH-6 (nothing listens without a ready master; --check starts none)
    use std::os::unix::fs::PermissionsExt;
    let base = free_ports(4);
    // A server command that leaves a mark if it is ever run.
    let bin = tempfile::tempdir().expect("temp bin dir");
    let marker = bin.path().join("ran");
    let server = bin.path().join("server");
    std::fs::write(
        &server,
        format!("#!/bin/sh\ntouch '{}'\n", marker.display()),
    )
    .expect("write the server script");
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755))
        .expect("make it executable");
    let config = json!({"server": {"port": base, "cluster": {
        "workers": 2, "internalPort": base + 1, "command": [server.display().to_string()]}}})
    .to_string();

    // The client port held by someone else (a running cluster, say) does not fail the check.
    let held = TcpListener::bind(("0.0.0.0", base)).expect("hold the client port");
    let out = check(&config, &[]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    assert!(out.stdout.contains("configuration ok"), "{}", out.all());
    drop(held);

    let out = check(&config, &[]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    // Every port of the plan is still free afterwards: nothing was left listening on them.
    for port in base..base + 4 {
        TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("port {port} not free after --check: {e}"));
    }
    assert!(
        !out.stderr.contains("started") && !out.stdout.contains("listening"),
        "{}",
        out.all()
    );
    assert!(!marker.exists(), "--check ran the server command");
}
