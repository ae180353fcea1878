//! The launcher's log as an operator's tools read it: with `--log-format json` every line it
//! writes (its own and its children's) is one JSON object with `message` at the top level; under
//! journald (`JOURNAL_STREAM` naming the device and inode of its output) every line starts with
//! its syslog priority and carries no timestamp of its own; `--log-level` chooses the lines; and
//! with `hostPrefix` every line that names a process names it by its full instance code (`atx1`),
//! as do `X-Served-By` and the cache-ids.

use crate::common;

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

/// How `JOURNAL_STREAM` is set for a run whose stdout and stderr are one file.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Journal {
    /// Not set.
    Unset,
    /// The file's device and inode: the output is the journal.
    Matching,
    /// The file's inode on another device.
    OtherDevice,
    /// Another inode on the file's device.
    OtherInode,
}

/// A short run of the launcher whose master writes a line to its stdout and one to its stderr and
/// exits 3 at once (so the launcher logs, gives up and exits), with stdout and stderr both on one
/// file; its lines.
fn short_run(format: &str, journal: Journal, args: &[&str]) -> Vec<String> {
    run_of(
        "echo out-line; echo err-line >&2; exit 3",
        format,
        journal,
        args,
    )
}

/// As `short_run`, with `master` the master's shell script (it must exit at once).
fn run_of(master: &str, format: &str, journal: Journal, args: &[&str]) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("data dir");
    write_config(
        dir.path(),
        &json!({ "server": { "port": free_ports(2), "cluster": {
            "workers": 1, "command": ["sh", "-c", master], "maxStartFailures": 1,
            "logFormat": format
        } } }),
    );
    let path = dir.path().join("out.log");
    let out = std::fs::File::create(&path).expect("out.log");
    let meta = out.metadata().expect("stat out.log");
    let mut cmd = launcher_command(dir.path());
    cmd.args(args);
    let stream = match journal {
        Journal::Unset => None,
        Journal::Matching => Some(format!("{}:{}", meta.dev(), meta.ino())),
        Journal::OtherDevice => Some(format!("{}:{}", meta.dev() + 1, meta.ino())),
        Journal::OtherInode => Some(format!("{}:{}", meta.dev(), meta.ino() + 1)),
    };
    match stream {
        Some(v) => cmd.env("JOURNAL_STREAM", v),
        None => cmd.env_remove("JOURNAL_STREAM"),
    };
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out)
        .spawn()
        .expect("start fhircluster");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&path).expect("read out.log");
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{text}");
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect();
    assert!(lines.len() >= 3, "{text}");
    lines
}

/// A line's syslog priority prefix (`<3>`) and the rest.
fn priority(line: &str) -> Option<(u8, &str)> {
    let rest = line.strip_prefix('<')?;
    let (p, rest) = rest.split_once('>')?;
    Some((p.parse().ok()?, rest))
}

/// The launcher's own lines (not its children's), without their priority.
fn launcher_lines(lines: &[String]) -> Vec<&str> {
    lines
        .iter()
        .map(|l| priority(l).map_or(l.as_str(), |(_, rest)| rest))
        .filter(|l| !l.starts_with('[') && !l.contains("\"process\""))
        .collect()
}

/// The priority journald should read for a line of `level`.
fn priority_of(level: &str) -> Option<u8> {
    match level {
        "ERROR" => Some(3),
        // text says WARNING, JSON says WARN
        "WARN" | "WARNING" => Some(4),
        "INFO" => Some(6),
        "DEBUG" => Some(7),
        _ => None,
    }
}

#[test]
fn under_the_journal_each_line_has_its_priority_and_no_timestamp_and_elsewhere_neither() {
    for format in ["text", "json"] {
        // Not the journal (JOURNAL_STREAM unset, or naming another device or inode): timestamps,
        // and no line starts with a priority.
        for journal in [Journal::Unset, Journal::OtherDevice, Journal::OtherInode] {
            let lines = short_run(format, journal, &[]);
            for l in launcher_lines(&lines) {
                let stamped = if format == "json" {
                    serde_json::from_str::<Value>(l).is_ok_and(|v| v["timestamp"].is_string())
                } else {
                    starts_with_timestamp(l)
                };
                assert!(stamped, "{format}, {journal:?}: {l:?}");
            }
            assert!(
                lines.iter().all(|l| priority(l).is_none()),
                "{format}, {journal:?}: {lines:#?}"
            );
        }
        // The journal: every line has its level's priority, none a timestamp.
        let lines = short_run(format, Journal::Matching, &["--log-level", "debug"]);
        let mut seen = std::collections::BTreeSet::new();
        for l in &lines {
            let (p, rest) = priority(l).unwrap_or_else(|| panic!("{format}: no priority: {l:?}"));
            seen.insert(p);
            let level = if format == "json" {
                let v: Value = serde_json::from_str(rest).unwrap_or_else(|_| panic!("{l:?}"));
                assert!(v.get("timestamp").is_none(), "{format}: {l:?}");
                v["level"].as_str().unwrap_or("").to_string()
            } else {
                assert!(!starts_with_timestamp(rest), "{format}: {l:?}");
                rest.split_whitespace().next().unwrap_or("").to_string()
            };
            if let Some(want) = priority_of(&level) {
                assert_eq!(p, want, "{format}: {l:?}");
            }
        }
        let all: std::collections::BTreeSet<u8> = [3, 4, 6, 7].into_iter().collect();
        assert_eq!(seen, all, "{format}: {lines:#?}");
        let find = |needle: &str| {
            lines
                .iter()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("{format}: no {needle:?}: {lines:#?}"))
        };
        // The children's lines: stdout at info, stderr at warning.
        assert!(find("out-line").starts_with("<6>"), "{format}");
        assert!(find("err-line").starts_with("<4>"), "{format}");
        assert!(find("giving up").starts_with("<3>"), "{format}");
        assert!(find("m0: exited").starts_with("<4>"), "{format}");
        if format == "text" {
            assert_eq!(find("out-line"), "<6>[m0] out-line");
        }
    }
}

#[test]
fn a_warning_line_says_warning_in_text_and_warn_in_json() {
    // spec: MEM-10, MEM-11, MEM-13, RECYCLE-12 (the launcher "logs a WARNING": in text every
    // warn-level line of its own carries the word, for `grep WARNING`); JSON keeps tracing's WARN
    let text = short_run("text", Journal::Unset, &[]);
    let exited = text
        .iter()
        .find(|l| l.contains("m0: exited"))
        .unwrap_or_else(|| panic!("no exit line: {text:#?}"));
    assert_eq!(
        exited.split_whitespace().nth(1),
        Some("WARNING"),
        "{exited}"
    );
    let warnings: Vec<&String> = text.iter().filter(|l| l.contains("WARNING")).collect();
    assert!(
        warnings.iter().all(|l| !l.contains("WARNING WARNING")),
        "{warnings:#?}"
    );
    let json = short_run("json", Journal::Unset, &[]);
    let exited: Value = json
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.contains("m0: exited"))
        })
        .unwrap_or_else(|| panic!("no exit line: {json:#?}"));
    assert_eq!(exited["level"], "WARN", "{exited}");
}

#[test]
fn log_level_chooses_the_launchers_lines_written() {
    let has = |lines: &[String], level: &str| {
        launcher_lines(lines)
            .iter()
            .any(|l| l.split_whitespace().nth(1) == Some(level))
    };
    let debug = short_run("text", Journal::Unset, &["--log-level", "debug"]);
    assert!(has(&debug, "DEBUG") && has(&debug, "INFO"), "{debug:#?}");
    let errors = short_run("text", Journal::Unset, &["--log-level", "error"]);
    assert!(
        !has(&errors, "INFO") && !has(&errors, "WARNING"),
        "{errors:#?}"
    );
    assert!(has(&errors, "ERROR"), "{errors:#?}");
    // The children's lines are not the launcher's log: still written.
    assert!(errors.iter().any(|l| l == "[m0] err-line"), "{errors:#?}");
    // A bad value: one line naming the setting, exit 1. (RUST_LOG, the environment layer, would
    // come before config.json.)
    let dir = tempfile::tempdir().expect("dir");
    write_config(
        dir.path(),
        &json!({ "server": { "port": free_ports(2), "cluster": {
            "logLevel": "loud", "command": ["sh", "-c", "exit 3"]
        } } }),
    );
    let out = run_bounded(
        launcher_command(dir.path()).env_remove("RUST_LOG"),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(1), "{}", out.all());
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.all());
    assert!(
        lines[0].contains("server.cluster.logLevel") && lines[0].contains("\"loud\""),
        "{}",
        lines[0]
    );
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
    let message = |v: &Value| v["message"].as_str().unwrap_or("").to_string();
    assert!(objects.iter().all(|v| v["level"].is_string()));
    // `message` at the top level, as log shippers expect; no `fields` object.
    assert!(
        objects.iter().all(|v| v.get("fields").is_none()),
        "{}",
        lines.join("\n")
    );
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
            objects.iter().any(|v| v["process"] == code
                && v["stream"].is_string()
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

#[test]
fn a_childs_control_characters_are_escaped_one_line_per_line_it_wrote() {
    // spec: issue 39 (a child's stderr relayed raw: a carriage return or an escape sequence
    // forged or hid a line on a terminal)
    // A carriage return, erase-line and a title escape, BEL, BS, VT, FF, NUL, DEL and a C1 CSI
    // (U+009B), then a line of its own.
    let master = r"printf 'safe\rFORGED \033[2K\033]0;t\007 bs\b vt\v ff\f nul\000 del\177 c1\302\233 tab\tend\n' >&2; \
                   echo next >&2; exit 3";
    let escaped =
        r"safe\x0dFORGED \x1b[2K\x1b]0;t\x07 bs\x08 vt\x0b ff\x0c nul\x00 del\x7f c1\u{9b} tab";
    let lines = run_of(master, "text", Journal::Unset, &[]);
    let all = lines.join("\n");
    let raw: Vec<&String> = lines
        .iter()
        .filter(|l| l.chars().any(|c| c.is_control() && c != '\t'))
        .collect();
    assert!(raw.is_empty(), "control characters written raw: {raw:?}");
    let relayed: Vec<&String> = lines.iter().filter(|l| l.starts_with("[m0] ")).collect();
    assert_eq!(
        relayed,
        [&format!("[m0] {escaped}\tend"), &"[m0] next".to_string()],
        "one line per line the child wrote:\n{all}"
    );
    // The line that gives the master up quotes its last stderr lines, escaped as well.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("giving up") && l.contains(escaped)),
        "{all}"
    );
    report_figures(
        "child_control_characters",
        "a server's stderr line with CR, erase-line and title escape sequences, BEL, BS, VT, \
         FF, NUL, DEL and a C1 CSI, then a plain line",
        10,
        0,
        0,
        "each written as an escape (\\x0d, \\x1b, \\u{9b}), one launcher line per line the server \
         wrote, the give-up line's quote of it escaped too; no control character but tab and \
         newline in the output",
    );
}
