//! The launcher's log as an operator's tools read it: with `--log-format json` every line it
//! writes (its own and its children's) is one JSON object; under journald (`JOURNAL_STREAM` set)
//! no line carries a timestamp of its own; and with `hostPrefix` every line that names a process
//! names it by its full instance code (`atx1`), as do `X-Served-By` and the cache-ids.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

/// Whether `line` starts with an RFC 3339 timestamp (`2026-01-02T03:04:05...`).
fn starts_with_timestamp(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
}

/// A short run of the launcher whose master fails at once (so it logs, gives up and exits),
/// with `JOURNAL_STREAM` set or not; its stderr and stdout lines.
fn short_run(format: &str, journald: bool) -> Vec<String> {
    let dir = tempfile::tempdir().expect("data dir");
    write_config(
        dir.path(),
        &json!({ "server": { "port": free_ports(2), "cluster": {
            "workers": 1, "command": [SIM], "maxStartFailures": 1, "logFormat": format
        } } }),
    );
    let mut cmd = launcher_command(dir.path());
    cmd.env("SIM_FAIL_AT_START", "3");
    if journald {
        cmd.env("JOURNAL_STREAM", "8:12345");
    } else {
        cmd.env_remove("JOURNAL_STREAM");
    }
    let out = run_bounded(&mut cmd, Duration::from_secs(20));
    assert_eq!(out.code, Some(1), "{}", out.all());
    let lines: Vec<String> = out
        .stderr
        .lines()
        .chain(out.stdout.lines())
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect();
    assert!(lines.len() >= 4, "{}", out.all());
    lines
}

#[test]
fn journald_gets_no_timestamps_in_text_or_json_and_a_terminal_or_file_does() {
    for format in ["text", "json"] {
        let plain = short_run(format, false);
        let journal = short_run(format, true);
        let launcher_lines = |lines: &[String]| -> Vec<String> {
            lines
                .iter()
                .filter(|l| !l.starts_with('[') && !l.contains("\"process\""))
                .cloned()
                .collect()
        };
        for l in launcher_lines(&plain) {
            let stamped = if format == "json" {
                serde_json::from_str::<Value>(&l).is_ok_and(|v| v["timestamp"].is_string())
            } else {
                starts_with_timestamp(&l)
            };
            assert!(stamped, "{format}, no journald: {l:?}");
        }
        for l in &journal {
            if format == "json" {
                let v: Value = serde_json::from_str(l).unwrap_or_else(|_| panic!("{l:?}"));
                assert!(v.get("timestamp").is_none(), "{format}, journald: {l:?}");
            } else {
                assert!(!starts_with_timestamp(l), "{format}, journald: {l:?}");
            }
        }
        assert!(
            journal
                .iter()
                .any(|l| l.contains("m0") && l.contains("exit")),
            "{journal:?}"
        );
    }
}

#[test]
fn json_logs_are_one_object_per_line_for_the_launcher_and_its_children() {
    let mut c = cluster().workers(1).arg("--log-format").arg("json").start();
    assert_eq!(c.get("/r4/metadata").status, 200);
    unsafe_kill(c.pid_of("tx1"), SIGKILL);
    c.wait_for_count("tx1: ready", 2, Duration::from_secs(15));
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));
    c.wait_output_end(Duration::from_secs(5));
    let lines = c.log_lines();
    let objects: Vec<Value> = lines
        .iter()
        .map(|l| match serde_json::from_str::<Value>(l) {
            Ok(v) if v.is_object() => v,
            _ => panic!("not one JSON object: {l:?}\n{}", lines.join("\n")),
        })
        .collect();
    let message = |v: &Value| v["fields"]["message"].as_str().unwrap_or("").to_string();
    assert!(objects.iter().all(|v| v["level"].is_string()));
    // The launcher's own lines, the restart among them.
    for needle in ["m0: ready", "tx1: exited", "listening on port", "stopped"] {
        assert!(
            objects.iter().any(|v| message(v).contains(needle)),
            "no {needle:?}:\n{}",
            lines.join("\n")
        );
    }
    // The children's lines, each with its process and stream.
    for code in ["m0", "tx1"] {
        assert!(
            objects.iter().any(|v| v["fields"]["process"] == code
                && v["fields"]["stream"].is_string()
                && message(v).contains("listening on")),
            "no output of {code}:\n{}",
            lines.join("\n")
        );
    }
}

/// Every occurrence of `code` in `line` preceded by `prefix` (the host prefix).
fn always_prefixed(line: &str, code: &str, prefix: &str) -> bool {
    line.match_indices(code)
        .all(|(i, _)| line[..i].ends_with(prefix))
}

#[test]
fn with_a_host_prefix_every_line_naming_a_process_carries_its_full_instance_code() {
    // spec: ROUTE-3a (cache-ids name their issuer, here with the host's prefix)
    let admin = free_port();
    let mut c = cluster()
        .workers(2)
        .config(json!({ "server": { "cluster": { "hostPrefix": "a" } } }))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let codes = ["am0", "atx1", "atx2"];
    for _ in 0..6 {
        let r = c.request("POST", "/r4/$cache-control", &[], b"{}");
        assert_eq!(r.status, 200, "{}", r.text());
        let by = r.served_by().to_string();
        assert!(codes.contains(&by.as_str()), "X-Served-By {by:?}");
        let id = r.header("x-cache-id").unwrap_or("");
        assert!(id.starts_with(&format!("{by}.")), "{id:?} from {by}");
        let again = c.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", id)], b"");
        assert_eq!((again.status, again.served_by()), (200, by.as_str()));
    }
    let status = admin_get(admin, "/status").json();
    let listed: Vec<&str> = status["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["code"].as_str())
        .collect();
    assert_eq!(listed, codes);
    unsafe_kill(c.pid_of("atx1"), SIGKILL);
    c.wait_for_count("atx1: ready", 2, Duration::from_secs(15));
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));

    let lines = c.log_lines();
    let all = lines.join("\n");
    for needle in [
        "am0: started master (pid ",
        "atx1: started tx-worker (pid ",
        "atx1: exited",
        "atx2: ready",
        "[am0] ",
        "[atx1] ",
        "atx1: stopping (SIGTERM)",
    ] {
        assert!(all.contains(needle), "no {needle:?}:\n{all}");
    }
    for l in &lines {
        for code in ["m0", "tx1", "tx2"] {
            assert!(
                always_prefixed(l, code, "a"),
                "{code} without its host prefix: {l:?}"
            );
        }
        if l.contains("(pid ") {
            assert!(
                codes.iter().any(|code| l.contains(code)),
                "a line with a pid names no process: {l:?}"
            );
        }
    }
}
