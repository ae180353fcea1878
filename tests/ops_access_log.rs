//! The access log (`server.cluster.accessLog`), through the real binaries: one line per request
//! with every field the issue names, checked against what the test sent and what came back; the
//! client's address from `X-Forwarded-For` when the peer is a trusted proxy; the query string only when
//! asked; a file that `SIGUSR1` reopens after it was renamed (logrotate); on stderr as JSON. (A
//! stuck file costing nothing but dropped, counted lines: `logs::access_log`'s unit test, which
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

/// The client logged for a request carrying `X-Forwarded-For: 198.51.100.1, 203.0.113.9`, from
/// a loopback peer, with `trusted` as `server.cluster.trustedProxies` (none: not set).
fn client_logged(trusted: Option<Value>) -> String {
    let mut cluster_settings = json!({"accessLog": "text", "accessLogPath": "access.log"});
    if let Some(t) = trusted {
        cluster_settings["trustedProxies"] = t;
    }
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": cluster_settings } }))
        .start();
    let r = c.request(
        "GET",
        "/r4/metadata",
        &[("X-Forwarded-For", "198.51.100.1, 203.0.113.9")],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let lines = wait_lines(&c.data_dir().join("access.log"), 1);
    fields(&lines[0])["client"].clone()
}

#[test]
fn the_forwarded_client_is_logged_only_from_a_peer_named_a_trusted_proxy() {
    // spec: DEC-85
    // Not named (the default, and a list naming someone else): anyone on the host could send
    // the header, so the peer is logged.
    assert_eq!(client_logged(None), "127.0.0.1");
    assert_eq!(client_logged(Some(json!(["192.0.2.1"]))), "127.0.0.1");
    // Named: X-Forwarded-For's last hop, the address the proxy saw.
    assert_eq!(
        client_logged(Some(json!(["::1", "127.0.0.1"]))),
        "203.0.113.9"
    );
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
            "accessLog": "text", "accessLogPath": "access.log", "trustedProxies": ["127.0.0.1"]
        } } }))
        .start();
    let path = c.data_dir().join("access.log");

    // Through nginx on the same host (a trusted proxy): its X-Forwarded-For names the client.
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

/// A tmpfs of `size` on a fresh directory, unmounted when dropped (a failed assert included).
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Panics, saying why, when the mount is refused: the test needs a filesystem that fills.
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount -t tmpfs -o size={size} was refused ({}; {}): this test needs root \
             (CAP_SYS_ADMIN) to make a small filesystem that fills",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazy: detached at once even should a process still hold a file open on it.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn on_a_full_disk_every_line_is_written_whole_or_counted_and_the_outage_is_said_twice() {
    // #25 item 5: a 64 KiB filesystem, most of it taken by a ballast file; 3,000 requests fill
    // the rest, then the ballast is removed and 50 more are sent.
    const FIRST: usize = 3000;
    const AFTER: usize = 50;
    let disk = SmallDisk::mount("64k");
    let ballast = disk.path().join("ballast");
    std::fs::write(&ballast, vec![b'.'; 40 * 1024]).expect("write the ballast");
    let log_path = disk.path().join("access.log");
    let admin = admin_addr();
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "accessLog": "json",
            "accessLogPath": log_path.display().to_string(),
            "adminAddress": admin.to_string(),
        } } }))
        .start();
    let send = |n: usize| {
        let mut conn = Conn::open(c.addr()).expect("connect");
        for _ in 0..n {
            conn.send("GET", "/r4/metadata", &[], b"", true)
                .expect("send");
            assert_eq!(conn.read().status, 200);
        }
    };
    send(FIRST);
    // A reader sees whole lines, and at most the beginning of one at the end, to be finished.
    let full = std::fs::read_to_string(&log_path).expect("read the access log");
    let begun = full
        .rsplit_once('\n')
        .map_or(full.as_str(), |(_, tail)| tail);
    assert!(
        begun.is_empty()
            || "{\"timestamp\":\"".starts_with(begun)
            || begun.starts_with("{\"timestamp\":\""),
        "the file ends with {begun:?}"
    );
    let begun = !begun.is_empty();
    let mark = c.mark();
    std::fs::remove_file(&ballast).expect("remove the ballast");
    send(AFTER);
    let sent = FIRST + AFTER;
    // Each line is written when its answer has been sent: wait until the writer has had them all.
    let dropped =
        || scrape(admin.port()).value("fhircluster_access_log_lines_dropped_total", &[]) as usize;
    let counted = eventually(secs(15), || lines_of(&log_path).len() + dropped() == sent);
    let (lines, lost) = (lines_of(&log_path), dropped());
    assert!(
        counted,
        "{sent} requests: {} lines in the file, {lost} counted dropped ({} missing uncounted); \
         output:\n{}",
        lines.len(),
        sent as i64 - lines.len() as i64 - lost as i64,
        c.log_lines().join("\n")
    );
    let text = std::fs::read_to_string(&log_path).expect("read the access log");
    assert!(text.ends_with('\n'), "the file ends inside a line");
    for l in &lines {
        let v: Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("a torn line ({e}): {l:?}"));
        assert_eq!(v["path"], "/r4/metadata", "{l}");
    }
    assert!(lost > 0, "the disk never filled");
    let log = c.log_lines();
    let failed: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("cannot be written"))
        .collect();
    assert_eq!(failed.len(), 1, "one WARNING for the outage: {log:#?}");
    assert!(failed[0].contains("WARN"), "{}", failed[0]);
    assert!(
        failed[0].contains(&log_path.display().to_string()),
        "{}",
        failed[0]
    );
    assert!(
        failed[0].contains("No space left on device"),
        "{}",
        failed[0]
    );
    let again: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("is written again"))
        .collect();
    assert_eq!(again.len(), 1, "one line for the recovery: {log:#?}");
    assert!(
        again[0].contains(&format!("{lost} lines were dropped meanwhile")),
        "{} ({lost} counted)",
        again[0]
    );
    // Said as it happened: the failure while the disk was full, the recovery after.
    assert!(c.line_index("cannot be written") < Some(mark));
    c.wait_for_after(mark, "is written again", secs(1));
    // The last AFTER lines, sent once there was room again, are all there.
    assert!(lines.len() >= AFTER);
    drop(c);
    report_figures(
        "access_log_disk_full",
        "the access log's file on a 64 KiB tmpfs filled by 3,000 requests, then space freed and \
         50 more",
        1,
        sent as u64,
        0,
        &format!(
            "{} lines written whole, {lost} counted dropped (= the lines missing), no torn line \
             (a line begun as the disk filled: {begun}, finished after); one WARNING at the \
             first failure, one line at the recovery",
            lines.len()
        ),
    );
}
