//! The access log (`server.cluster.accessLog`), through the real binaries: one line per request
//! with every field the issue names, checked against what the test sent and what came back; the
//! client's address from `X-Forwarded-For` when the peer is loopback; the query string only when
//! asked; a file that `SIGUSR1` reopens after it was renamed (logrotate); on stderr as JSON. (A
//! stuck file costing nothing but dropped, counted lines: `ops::access_log`'s unit test, which
//! can write more lines than its queue holds faster than any client could send requests.)

use crate::common;

use std::path::Path;

use common::*;
use serde_json::{json, Value};

/// The `key=value` fields of a text line (the path's quotes removed).
fn fields(line: &str) -> std::collections::HashMap<String, String> {
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// Waits until `path` has `n` lines, and returns them.
fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    poll(
        &format!("{n} lines in {}", path.display()),
        secs(10),
        || {
            let lines = lines_of(path);
            (lines.len() >= n).then_some(lines)
        },
    )
}

fn seconds(f: &std::collections::HashMap<String, String>, key: &str) -> f64 {
    f[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key}={} is no number", f[key]))
}

#[test]
fn each_request_is_one_line_in_the_file_which_usr1_reopens() {
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "accessLog": "text", "accessLogPath": "access.log"
        } } }))
        .start();
    let path = c.data_dir().join("access.log");

    // Through nginx on the same host (a loopback peer): its X-Forwarded-For names the client.
    let r = c.request(
        "GET",
        "/r4/metadata?code=secret",
        &[("X-Forwarded-For", "198.51.100.1, 203.0.113.9")],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let lines = wait_lines(&path, 1);
    let f = fields(&lines[0]);
    assert_eq!(f["client"], "203.0.113.9", "{}", lines[0]);
    assert_eq!(f["method"], "GET");
    assert_eq!(
        f["path"], "/r4/metadata",
        "no query unless asked: {}",
        lines[0]
    );
    assert!(!lines[0].contains("secret"), "{}", lines[0]);
    assert_eq!(f["status"], "200");
    assert_eq!(f["bytes"], r.body.len().to_string());
    assert_eq!(f["process"], r.served_by());
    assert_eq!(f["refusal"], "-");
    let (queued, first, total) = (
        seconds(&f, "queued"),
        seconds(&f, "first_byte"),
        seconds(&f, "total"),
    );
    assert!(
        queued >= 0.0 && first > 0.0 && total >= first,
        "{}",
        lines[0]
    );
    assert!(
        lines[0].split(' ').next().is_some_and(|t| t.contains('T')),
        "starts with its time: {}",
        lines[0]
    );

    // The master's own path: no queue; a target the launcher refuses: its reason, no process.
    let r = c.get("/dashboard");
    assert!(r.status < 300, "{}", r.status);
    let r = c.get("/r4/%zz");
    assert_eq!(r.status, 400);
    let lines = wait_lines(&path, 3);
    let f = fields(&lines[1]);
    assert_eq!(
        (f["path"].as_str(), f["process"].as_str()),
        ("/dashboard", "m0")
    );
    assert_eq!(f["queued"], "-");
    assert_eq!(f["client"], "127.0.0.1", "no X-Forwarded-For: the peer");
    let f = fields(&lines[2]);
    assert_eq!(f["status"], "400");
    assert_eq!(f["process"], "-");
    assert_eq!(f["refusal"], "bad_target");
    assert_eq!(f["first_byte"], "-");

    // logrotate: renamed, then SIGUSR1; the next lines go to a new file of the same name.
    let rotated = c.data_dir().join("access.log.1");
    std::fs::rename(&path, &rotated).expect("rename");
    let mark = c.mark();
    c.signal(10);
    c.wait_for_after(mark, "SIGUSR1: reopening the access log", secs(5));
    wait_until("the new file", secs(5), || {
        assert_eq!(c.get("/r4/metadata").status, 200);
        !lines_of(&path).is_empty()
    });
    assert_eq!(lines_of(&rotated).len(), 3, "the old file kept its lines");
}

#[test]
fn on_stderr_json_lines_go_with_the_launchers_own_and_the_query_when_asked() {
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "accessLog": "json", "accessLogQuery": true, "logFormat": "json"
        } } }))
        .start();
    let r = c.get("/r4/metadata?_format=json");
    assert_eq!(r.status, 200);
    let line = poll("the access line", secs(10), || {
        c.log_lines()
            .into_iter()
            .find(|l| l.contains("\"message\":\"access\""))
    });
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["path"], "/r4/metadata?_format=json");
    assert_eq!(v["status"], 200);
    assert_eq!(v["level"], "INFO");
    assert_eq!(v["client"], "127.0.0.1");
    assert_eq!(v["process"], r.served_by());
    assert_eq!(v["bytes"], r.body.len());
    assert!(
        v["timestamp"].is_string() && v["totalSeconds"].is_f64(),
        "{line}"
    );
    assert_eq!(v["refusal"], Value::Null);
}
