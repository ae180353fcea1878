//! The admin address's status page in a real browser: headless Chromium loads `GET /` from a
//! running cluster; the DOM it rendered holds a row per process of `/status` and the launcher,
//! each with its status, one polyline per process line in every graph, no problem while all is
//! well; the page's own script refreshes it in place; screenshots at a wall screen's and a
//! phone's size go to `target/tmp/status-page/` for a person to look at. A worker killed
//! (SIGKILL, kept down by its start delay) shows as a problem line on the next load, within an
//! interval. Without Chromium the tests fail, saying what to install (`.ci/run` installs it).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const SIGKILL: i32 = 9;

pub(crate) fn require_chromium() {
    let found = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "chromium is not installed: this test loads the status page in a real browser \
         (apt-get install chromium; .ci/run installs it)"
    );
}

/// Where the screenshots go, kept after the test for a person to look at.
pub(crate) fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page");
    std::fs::create_dir_all(&d).expect("the screenshots' folder");
    d
}

/// Runs headless Chromium on the admin page with `extra` flags, in a profile of its own; its
/// standard output (the DOM, with `--dump-dom`).
pub(crate) fn chromium(admin: u16, extra: &[&str]) -> String {
    chromium_at(&format!("http://127.0.0.1:{admin}/"), extra)
}

/// The same on any `url` (a `file://` copy of the page, with a script that measures it).
pub(crate) fn chromium_at(url: &str, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().expect("chromium profile");
    // coreutils' `timeout`: a browser that hangs fails the test instead of holding it.
    let out = Command::new("timeout")
        .args([
            "60",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("running chromium");
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn dump(admin: u16) -> String {
    chromium(admin, &["--dump-dom"])
}

/// The value of each `attr="..."` following `prefix` in `html`.
pub(crate) fn after_each(html: &str, prefix: &str, attr: &str) -> Vec<String> {
    html.split(prefix)
        .skip(1)
        .filter_map(|rest| {
            let head = &rest[..rest.find('>')?];
            let v = head.split(&format!("{attr}=\"")).nth(1)?;
            Some(v.split('"').next()?.to_string())
        })
        .collect()
}

/// Each chart's id and the `data-code` of each of its polylines.
pub(crate) fn charts(html: &str) -> Vec<(String, Vec<String>)> {
    html.split(r#"<svg class="chart" data-graph=""#)
        .skip(1)
        .map(|c| {
            let id = c.split('"').next().unwrap_or("").to_string();
            let body = c.split("</svg>").next().unwrap_or("");
            (id, after_each(body, "<polyline", "data-code"))
        })
        .collect()
}

/// (data-code, data-status) of each process row.
fn rows(html: &str) -> Vec<(String, String)> {
    after_each(html, r#"<tr class="row""#, "data-code")
        .into_iter()
        .zip(after_each(html, r#"<tr class="row""#, "data-status"))
        .collect()
}

pub(crate) fn problem_lines(html: &str) -> Vec<(String, String)> {
    let kinds = after_each(html, r#"<li class="problem""#, "data-kind");
    let codes: Vec<String> = html
        .split(r#"<li class="problem""#)
        .skip(1)
        .map(|r| {
            let head = r.split('>').next().unwrap_or("");
            head.split("data-code=\"")
                .nth(1)
                .and_then(|v| v.split('"').next())
                .unwrap_or("")
                .to_string()
        })
        .collect();
    kinds.into_iter().zip(codes).collect()
}

pub(crate) fn status(admin: u16) -> Value {
    admin_get(admin, "/status").json()
}

pub(crate) fn codes(st: &Value) -> Vec<String> {
    st["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["code"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn the_status_page_in_chromium_shows_every_process_its_graph_lines_and_a_killed_worker() {
    // spec: STATUS-16, STATUS-17, GRAPH-1, GRAPH-10 (the spec's Status page, on the admin address)
    require_chromium();
    let admin = free_port();
    let c = cluster()
        .workers(2)
        .env("SIM_START_DELAY_MS_tx1", "4000")
        .config(json!({
            "stats": {"sampleSeconds": 1},
            "server": {"cluster": {"statusSeconds": 1, "recycleSeconds": 0}},
        }))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    c.wait_for_nth("tx1: ready", 1, Duration::from_secs(30));
    for _ in 0..20 {
        assert_eq!(c.get("/r4/metadata").status, 200);
    }
    let procs = codes(&status(admin));
    assert_eq!(procs, ["m0", "tx1", "tx2"]);

    // Every process has two samples in every graph: one polyline each.
    let mut last = Vec::new();
    let found = eventually(Duration::from_secs(20), || {
        let dom = dump(admin);
        last = charts(&dom);
        let whole = last.len() == 4
            && last
                .iter()
                .filter(|(id, _)| id != "turnaround")
                .all(|(_, lines)| {
                    procs
                        .iter()
                        .all(|p| lines.iter().filter(|l| *l == p).count() == 1)
                });
        whole
    });
    assert!(found, "no line per process in every graph: {last:?}");
    let dom = dump(admin);
    for (id, lines) in charts(&dom) {
        let totals = lines.iter().filter(|l| *l == "total").count();
        let want = usize::from(id == "requests" || id == "memory");
        assert_eq!(totals, want, "{id}: {lines:?}");
        assert_eq!(lines.len(), procs.len() + want, "{id}: {lines:?}");
        assert!(
            lines.iter().all(|l| l == "total" || procs.contains(l)),
            "{id}: {lines:?}"
        );
    }
    let st = status(admin);
    let mut want: Vec<(String, String)> = st["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["code"].as_str().unwrap_or("").into(),
                p["status"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    want.push(("launcher".into(), "ready".into()));
    assert_eq!(rows(&dom), want, "the rows against /status");
    assert_eq!(
        problem_lines(&dom),
        [],
        "a healthy cluster has no problem line"
    );
    assert!(dom.contains(r#"<p class="summary" id="summary">"#));

    // The page refreshes itself: its script fetched `/` and swapped the live part in.
    let refreshed = chromium(admin, &["--virtual-time-budget=3500", "--dump-dom"]);
    let n: u32 = after_each(&refreshed, "<html", "data-refreshes")
        .first()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        n >= 1,
        "the page's script did not refresh it: {}",
        &refreshed[..refreshed.len().min(400)]
    );
    assert!(refreshed.contains(r#"<main id="live""#));

    let dir = out_dir();
    for (w, h) in [(1280, 800), (390, 844)] {
        let file = dir.join(format!("status-{w}x{h}.png"));
        let _ = std::fs::remove_file(&file);
        chromium(
            admin,
            &[
                &format!("--screenshot={}", file.display()),
                &format!("--window-size={w},{h}"),
            ],
        );
        let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        assert!(size > 1000, "no screenshot at {}", file.display());
    }

    // A worker killed: the first load begun an interval after the kill shows its problem line.
    let interval = Duration::from_millis(st["intervalMs"].as_u64().unwrap_or(1000));
    let pid = c.sim_pid(1).expect("tx1's pid");
    let killed = Instant::now();
    unsafe_kill(pid, SIGKILL);
    let (dom, seen_after) = poll("tx1's problem line", Duration::from_secs(15), || {
        let began = killed.elapsed();
        let dom = dump(admin);
        let lines = problem_lines(&dom);
        let shown = lines.iter().any(|(k, c)| k == "not-ready" && c == "tx1");
        assert!(
            shown || began < interval,
            "a load begun {began:?} after the kill (interval {interval:?}) has no problem \
             line for tx1: {lines:?}"
        );
        shown.then_some((dom, began))
    });
    eprintln!("STATUS-PAGE problem line on a load begun {seen_after:?} after the kill");
    let st = status(admin);
    let tx1 = &st["processes"][1];
    assert!(
        matches!(tx1["status"].as_str(), Some("starting" | "restarting")),
        "{tx1}"
    );
    let row = rows(&dom).into_iter().find(|(c, _)| c == "tx1");
    assert!(
        matches!(
            row.as_ref().map(|(_, s)| s.as_str()),
            Some("starting" | "restarting")
        ),
        "{row:?}"
    );
    assert!(
        problem_lines(&dom).iter().any(|(k, _)| k == "restarts") || tx1["restarts"] == 0,
        "a restart counted in /status has its line: {:?}",
        problem_lines(&dom)
    );
    chromium(
        admin,
        &[
            &format!(
                "--screenshot={}",
                dir.join("status-killed-1280x800.png").display()
            ),
            "--window-size=1280,800",
        ],
    );
}

const PLAIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/plain-server.py"
);

#[test]
fn the_status_page_in_chromium_draws_every_process_of_a_server_without_a_channel() {
    // spec: DEC-46 (a server that knows nothing of the IPC channel still has its lines)
    require_chromium();
    let admin = free_port();
    let server = format!("exec python3 {PLAIN} \"$PORT\" 0");
    let c = cluster()
        .workers(2)
        .command(&["sh", "-c", &server])
        .config(json!({"stats": {"sampleSeconds": 1}}))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let procs = codes(&status(admin));
    assert_eq!(procs, ["m0", "tx1", "tx2"]);
    // Requests while the launcher takes its samples, so every line has points to join.
    let mut last = Vec::new();
    let found = eventually(Duration::from_secs(30), || {
        for path in ["/r4/metadata", "/r4/metadata", "/"] {
            assert_eq!(c.get(path).status, 200);
        }
        last = charts(&dump(admin));
        last.len() == 4
            && last.iter().all(|(_, lines)| {
                procs
                    .iter()
                    .all(|p| lines.iter().filter(|l| *l == p).count() == 1)
            })
    });
    assert!(found, "no line per process in every graph: {last:?}");
    let dom = dump(admin);
    // The headline is the front door's count (DEC-91), whether a process counts its own or not.
    assert!(
        dom.contains(r#"Requests <b data-figure="requests">"#) && !dom.contains("processes' own"),
        "{dom}"
    );
    let rows = rows(&dom);
    assert_eq!(rows.len(), procs.len() + 1, "{rows:?}");
    chromium(
        admin,
        &[
            &format!(
                "--screenshot={}",
                out_dir().join("status-no-channel-1280x800.png").display()
            ),
            "--window-size=1280,800",
        ],
    );
}
