//! Unit tests of `fhircluster status`' table and exit status.

use super::*;
use serde_json::json;

#[test]
fn the_table_shows_each_process_and_the_meter() {
    let s = json!({
        "front": {"ready": true, "queued": 2, "refusalsLastMinute": 5},
        "processes": [{"code": "m0", "role": "master", "pid": 10, "status": "ready",
            "uptimeMs": 65_000, "restarts": 1, "frontInFlight": 3, "slots": 20, "queued": 0,
            "rssAnon": 104_857_600, "rssFile": null, "frontRequests": 4321,
            "latencyMs": {"count": 9, "median": 1.25, "p99": 30.0}, "cpuPercent": 12.5}],
        "launcher": {"pid": 9, "uptimeMs": 66_000, "rssAnon": 2_097_152, "rssFile": 1},
        "memory": {"cgroup": {"anon": 1_073_741_824u64}, "limit": 4_294_967_296u64,
            "rejectAt": 3_650_722_201u64, "abortAt": 3_951_369_912u64},
        "missing": []
    });
    let t = render(&s, true);
    assert!(t.contains("ready · 2 queued · 5 refused"), "{t}");
    assert!(t.contains("m0"), "{t}");
    assert!(t.contains("3/20"), "{t}");
    assert!(t.contains("1m05s"), "{t}");
    assert!(t.contains("100 MB"), "{t}");
    assert!(t.contains("2.0 MB"), "small figures keep a decimal: {t}");
    assert!(t.contains("1.0 GB of 4.0 GB (25%)"), "{t}");
    assert!(t.contains(" 4321 "), "the front door's count: {t}");
    assert!(t.contains("1.2/30.0") || t.contains("1.3/30.0"), "{t}");
    assert!(t.contains("12.5"), "{t}");
    assert_eq!(exit_status(&s), 0);
}

/// Every field at its widest: a 7-digit pid, the longest state, figures in the thousands.
fn widest() -> Value {
    let p = |code: &str| {
        json!({"code": code, "role": "tx-worker", "pid": 4_194_303, "status": "ready",
            "noChannel": true, "uptimeMs": 8_640_000_000u64, "restarts": 12_345,
            "frontInFlight": 9999, "slots": 9999, "queued": 99_999,
            "rssAnon": 999_999_999_999u64, "rssFile": 999_999_999_999u64,
            "requests": 999_999_999, "heapUsed": 999_999_999_999u64,
            "frontRequests": 999_999_999,
            "latencyMs": {"count": 9, "median": 99_999.0, "p99": 99_999.0},
            "cpuPercent": 199.5})
    };
    json!({"front": {"ready": false, "draining": true, "queued": 99_999,
            "refusalsLastMinute": 99_999},
        "processes": [p("m0"), p("tx1234")],
        "launcher": {"pid": 4_194_303, "uptimeMs": 8_640_000_000u64,
            "rssAnon": 999_999_999_999u64, "rssFile": 999_999_999_999u64},
        "workers": {"wanted": 3, "settled": true},
        "memory": {"cgroup": {"anon": 1_073_741_824u64}, "limit": 4_294_967_296u64,
            "rejectAt": 3_650_722_201u64, "abortAt": 3_951_369_912u64}})
}

#[test]
fn the_table_fits_100_columns() {
    let t = render(&widest(), false);
    for line in t.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}\n{t}",
            line.chars().count()
        );
    }
    assert!(t.contains("PROCESS") && t.contains("STATE"), "{t}");
    // The columns stay aligned at their widest: each row as long as the head's.
    let wide = render(&widest(), true);
    for t in [&t, &wide] {
        let rows: Vec<&str> = t.lines().skip(2).take(3).collect();
        assert!(
            rows.iter()
                .all(|r| r.chars().count() == rows[0].chars().count()),
            "{t}"
        );
    }
    for head in ["QUEUED", "MAPPED", "REQUESTS", "HEAP", "FRONT"] {
        assert!(
            wide.contains(head) && !t.contains(head),
            "{head}:\n{t}\n{wide}"
        );
    }
}

#[test]
fn not_ready_or_draining_is_exit_status_1() {
    for front in [
        json!({"ready": false, "draining": false}),
        json!({"ready": false, "draining": true}),
        json!({}),
    ] {
        assert_eq!(exit_status(&json!({ "front": front })), 1, "{front}");
    }
}

#[test]
fn a_process_without_a_channel_shows_as_such() {
    let s = json!({
        "front": {"ready": true},
        "processes": [{"code": "tx1", "role": "tx-worker", "pid": 11, "status": "ready",
            "noChannel": true}],
    });
    let t = render(&s, true);
    assert!(t.contains("ready (no channel)"), "{t}");
    assert!(!t.contains("stale"), "{t}");
}

#[test]
fn each_process_shows_its_own_requests_and_js_heap() {
    // Issue #30: what a process (FHIRsmith, or the nodeReport preload) reports is in the table.
    let s = json!({
        "front": {"ready": true},
        "processes": [{"code": "tx1", "role": "tx-worker", "pid": 11, "status": "ready",
            "requests": 1234, "heapUsed": 52_428_800u64},
            {"code": "tx2", "role": "tx-worker", "pid": 12, "status": "ready",
            "requests": null, "heapUsed": null, "noChannel": true}],
    });
    let t = render(&s, true);
    let header = t
        .lines()
        .find(|l| l.starts_with("PROCESS"))
        .unwrap_or_default();
    assert!(header.contains("REQUESTS     HEAP"), "{t}");
    let tx1 = t.lines().find(|l| l.starts_with("tx1")).unwrap_or_default();
    assert!(tx1.contains("1234    50 MB"), "{t}");
    let tx2 = t.lines().find(|l| l.starts_with("tx2")).unwrap_or_default();
    assert!(tx2.contains("—         —"), "{t}");
}

#[test]
fn a_refused_reload_and_a_setting_waiting_for_a_restart_have_their_lines() {
    // spec: DEC-91
    let mut s =
        json!({"front": {"ready": true, "reload": {"refused": null, "restartPending": []}}});
    assert!(!render(&s, false).contains('⚠'), "{}", render(&s, false));
    s["front"]["reload"] = json!({"refused": {"reason": "bad JSON", "atMs": 1},
                                  "restartPending": ["server.port"]});
    let t = render(&s, false);
    assert!(
        t.contains("⚠ The last reload was refused, the launcher runs as before: bad JSON."),
        "{t}"
    );
    assert!(
        t.contains("⚠ Waiting for a restart of the launcher (systemctl restart): server.port."),
        "{t}"
    );
}

#[test]
fn both_processes_of_a_place_and_new_inputs_waiting_have_their_rows_and_lines() {
    // spec: DEC-92, DEC-93
    let row = |status: &str, pid: u32| json!({"code": "tx1", "role": "tx-worker", "pid": pid, "status": status});
    let mut new = row("starting", 12);
    new["beside"] = json!(true);
    new["replacement"] = json!(true);
    let mut m0 = row("ready", 10);
    m0["code"] = json!("m0");
    m0["inputsWaiting"] = json!(true);
    let s = json!({
        "front": {"ready": true},
        "processes": [m0, row("ready", 11), new],
        "rollingRestart": {"state": "rolling restart stopped", "why": "tx2's replacement exited"},
    });
    let t = render(&s, false);
    let tx1: Vec<&str> = t.lines().filter(|l| l.starts_with("tx1")).collect();
    assert_eq!(tx1.len(), 2, "{t}");
    assert!(
        tx1[0].contains(" 11 ready") && !tx1[0].contains("(new)"),
        "{t}"
    );
    assert!(tx1[1].contains(" 12 starting (new)"), "{t}");
    assert!(
        t.contains("⚠ The last rolling restart stopped: tx2's replacement exited."),
        "{t}"
    );
    assert!(t.contains("⚠ New inputs wait for m0:"), "{t}");
}
