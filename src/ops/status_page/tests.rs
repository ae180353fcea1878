//! The status page rendered from JSON alone: every problem kind has its line, each graph has a
//! polyline per unbroken run of each line (a gap breaks it), process codes and messages are
//! escaped, and what isn't known is `—`.

use serde_json::{json, Value};

use super::fmt::{bytes, count, duration, esc};
use super::problems::{problems, Kind};
use super::{render, PageInput};

const NOW: u64 = 1_800_000_000_000;

fn process(code: &str, status: &str) -> Value {
    json!({
        "code": code, "role": if code == "m0" { "master" } else { "tx-worker" }, "pid": 100,
        "status": status, "uptimeMs": 65_000, "restarts": 0, "lastRestart": null,
        "requests": 10, "rssAnon": 1_000_000, "rssFile": 2_000_000, "heapUsed": null,
        "heapLimit": null, "inFlight": 0, "figuresAgeMs": 400, "noChannel": false,
        "frontInFlight": 0,
    })
}

fn status(processes: Vec<Value>) -> Value {
    json!({
        "scope": "cluster", "sampledAt": NOW - 500, "intervalMs": 1000,
        "memory": {"cgroup": null, "processAnon": 3_000_000, "limit": null, "rejectAt": null},
        "refusing": [], "processes": processes,
        "launcher": {"code": "launcher", "role": "launcher", "pid": 1, "status": "ready",
                     "uptimeMs": 70_000, "restarts": null, "requests": null, "rssAnon": 5,
                     "rssFile": 6, "inFlight": null, "figuresAgeMs": 0},
        "missing": [], "totals": {"requests": 30, "heapUsed": null, "heapCount": 0,
                                  "restarts": 0, "uptimeMs": 60_000},
        "front": {"ready": true, "draining": false, "refusalsLastMinute": 0},
    })
}

fn page(status: &Value, history: &Value, upgrade: &Value) -> String {
    render(&PageInput {
        status,
        history,
        upgrade,
        now_ms: NOW,
    })
}

fn sample(at: u64, requests: u64) -> Value {
    json!({"kind": "sample", "at": at, "requests": requests, "refusals": 0,
           "rssAnon": 1_000_000 + requests, "turnaroundMs": 2.0, "inFlight": requests,
           "clientCaches": null, "clientConcepts": null, "heapUsed": null})
}

fn history(series: Vec<(&str, Vec<Value>)>) -> Value {
    let processes: Vec<Value> = series
        .into_iter()
        .map(|(code, points)| json!({"code": code, "role": "tx-worker", "state": "live", "points": points}))
        .collect();
    json!({
        "append": false, "sampleIntervalMs": 1000, "processes": processes,
        "memoryTotal": [{"at": NOW - 3000, "bytes": 5}, {"at": NOW - 2000, "bytes": 6}],
        "totals": [{"at": NOW - 3000, "requests": 4}, {"at": NOW - 2000, "requests": 5}],
    })
}

/// Each chart's polylines, as (chart id, [data-code of each polyline]).
fn polylines(html: &str) -> Vec<(String, Vec<String>)> {
    html.split(r#"<svg class="chart" data-graph=""#)
        .skip(1)
        .map(|chart| {
            let id = chart.split('"').next().unwrap_or("").to_string();
            let body = chart.split("</svg>").next().unwrap_or("");
            let codes = body
                .split(r#"<polyline class="line" data-code=""#)
                .skip(1)
                .map(|p| p.split('"').next().unwrap_or("").to_string())
                .collect();
            (id, codes)
        })
        .collect()
}

#[test]
fn planned_restarts_are_no_problem() {
    // spec: DEC-84: a reload's, `restart`'s, a recycle's or a scale's restarts are counted by
    // reason (`restartsBy`) but not in `restarts`, so no problem line.
    let mut tx1 = process("tx1", "ready");
    tx1["restartsBy"] = json!({"crash": 0, "hung": 0, "rolling": 3, "recycle": 1, "scale": 1});
    let st = status(vec![process("m0", "ready"), tx1]);
    let found = problems(&st, &Value::Null);
    assert!(found.iter().all(|p| p.kind != Kind::Restarts), "{found:#?}");
}

#[test]
fn every_problem_kind_has_a_line_of_its_own() {
    // spec: STATUS-17, STATUS-21 (the spec's "Status": the problems, a line each with a ⚠)
    let mut tx1 = process("tx1", "restarting");
    tx1["restarts"] = json!(2);
    tx1["lastRestart"] = json!("exited (signal 9)");
    let mut st = status(vec![
        process("m0", "ready"),
        tx1,
        process("tx2", "stale"),
        process("tx3", "starting"),
    ]);
    st["refusing"] = json!(["tx2"]);
    st["totals"]["restarts"] = json!(2);
    st["memory"]["processAnon"] = json!(95);
    st["memory"]["rejectAt"] = json!(100);
    st["front"]["ready"] = json!(false);
    st["front"]["refusalsLastMinute"] = json!(7);
    st["front"]["reload"] = json!({"refused": {"reason": "config.json: bad", "atMs": 1},
                                   "restartPending": ["server.cluster.hostPrefix"]});
    let upgrade = json!({"seq": 1, "outcome": "failed", "reason": "the new binary exited"});
    let found = problems(&st, &upgrade);
    let kinds: Vec<Kind> = found.iter().map(|p| p.kind).collect();
    for k in [
        Kind::NotReady,
        Kind::Stale,
        Kind::Refusing,
        Kind::Restarts,
        Kind::Memory,
        Kind::LauncherNotReady,
        Kind::Refusals,
        Kind::Upgrade,
        Kind::ReloadRefused,
        Kind::RestartPending,
    ] {
        assert!(kinds.contains(&k), "{k:?} missing from {found:#?}");
    }
    assert_eq!(kinds.iter().filter(|k| **k == Kind::NotReady).count(), 2);
    let html = page(&st, &Value::Null, &upgrade);
    for p in &found {
        let tag = format!(r#"<li class="problem" data-kind="{}""#, p.kind.label());
        assert!(html.contains(&tag), "{tag} not on the page");
        assert!(html.contains(&esc(&p.text)), "{} not on the page", p.text);
    }
    assert!(html.contains("tx1 is restarting, not ready (last: exited (signal 9))."));
    assert!(html.contains("2 restarts since the launcher started, crashes and hang kills (tx1 2)."));
    assert!(html.contains("Memory is at 95% of the refuse threshold"));
    assert!(
        html.contains(r#"Problems <b data-figure="problems">11</b>"#),
        "{html}"
    );

    // Draining, and no figures from the supervisor.
    let mut st = status(vec![]);
    st["front"]["draining"] = json!(true);
    let kinds: Vec<Kind> = problems(&st, &Value::Null).iter().map(|p| p.kind).collect();
    assert_eq!(kinds, [Kind::NoReport, Kind::LauncherNotReady]);
}

#[test]
fn a_healthy_cluster_has_no_problem_line_and_memory_under_90_percent_is_none() {
    let mut st = status(vec![process("m0", "ready"), process("tx1", "ready")]);
    st["memory"]["processAnon"] = json!(89);
    st["memory"]["rejectAt"] = json!(100);
    assert_eq!(problems(&st, &Value::Null), []);
    let html = page(&st, &Value::Null, &Value::Null);
    assert!(!html.contains(r#"class="problem""#));
    assert!(!html.contains("Problems"));
}

#[test]
fn each_graph_has_a_polyline_per_run_of_each_line_and_a_gap_breaks_one() {
    // spec: GRAPH-4 (a restart leaves a gap, the earlier points kept), GRAPH-9, GRAPH-11
    let h = history(vec![
        ("m0", vec![sample(NOW - 3000, 1), sample(NOW - 2000, 2)]),
        (
            "tx1",
            vec![
                sample(NOW - 5000, 1),
                sample(NOW - 4000, 1),
                json!({"kind": "gap", "at": NOW - 3500}),
                sample(NOW - 2000, 3),
                sample(NOW - 1000, 4),
            ],
        ),
    ]);
    let st = status(vec![process("m0", "ready"), process("tx1", "ready")]);
    let charts = polylines(&page(&st, &h, &Value::Null));
    let ids: Vec<&str> = charts.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["requests", "memory", "refusals", "inflight"]);
    for (id, codes) in &charts {
        let n = |c: &str| codes.iter().filter(|x| *x == c).count();
        assert_eq!((n("m0"), n("tx1")), (1, 2), "{id}: {codes:?}");
        let total = if id == "requests" || id == "memory" {
            1
        } else {
            0
        };
        assert_eq!(n("total"), total, "{id}: {codes:?}");
    }
}

#[test]
fn a_chart_with_no_two_samples_says_it_waits_and_a_lone_sample_is_a_dot() {
    let h = history(vec![("tx1", vec![sample(NOW - 1000, 1)])]);
    let mut h2 = h.clone();
    h2["memoryTotal"] = json!([]);
    h2["totals"] = json!([]);
    let st = status(vec![process("tx1", "ready")]);
    let html = page(&st, &h2, &Value::Null);
    assert_eq!(html.matches("waiting for two samples").count(), 4);
    assert!(!html.contains("<polyline"));
    // With the Totals' two points, requests and memory draw; tx1's one sample is a dot.
    let html = page(&st, &h, &Value::Null);
    assert!(html.contains(r#"<circle class="dot" data-code="tx1""#));
    assert_eq!(html.matches("waiting for two samples").count(), 2);
}

#[test]
fn the_headline_is_the_front_doors_count_and_the_launchers_uptime() {
    // spec: DEC-91
    let mut st = status(vec![process("m0", "ready")]);
    st["totals"]["frontRequests"] = json!(4007);
    let html = page(&st, &Value::Null, &Value::Null);
    assert!(
        html.contains("Requests <b data-figure=\"requests\">4\u{2009}007</b>"),
        "{html}"
    );
    assert!(
        html.contains(r#"Uptime <b data-figure="uptime">1 min 10 s</b>"#),
        "{html}"
    );
}

#[test]
fn a_process_out_of_the_plan_is_no_legend_entry_nor_line() {
    // spec: DEC-91
    let two = vec![sample(NOW - 2000, 1), sample(NOW - 1000, 2)];
    let mut h = history(vec![("tx1", two.clone()), ("tx3", two)]);
    h["processes"][1]["state"] = json!("unavailable");
    let html = page(&status(vec![process("tx1", "ready")]), &h, &Value::Null);
    assert!(!html.contains("tx3"), "{html}");
    // Without the plan (no figures came), the history's processes, all of them.
    let html = page(&status(vec![]), &h, &Value::Null);
    assert!(html.contains("tx3 (unavailable)"), "{html}");
}

#[test]
fn past_eight_processes_the_legend_says_how_many_are_left_out() {
    // spec: GRAPH-10 (up to eight drawn)
    let series: Vec<(String, Vec<Value>)> = (1..=10)
        .map(|i| {
            (
                format!("tx{i}"),
                vec![sample(NOW - 2000, 1), sample(NOW - 1000, 2)],
            )
        })
        .collect();
    let h = history(
        series
            .iter()
            .map(|(c, p)| (c.as_str(), p.clone()))
            .collect(),
    );
    let html = page(&status(vec![]), &h, &Value::Null);
    assert!(html.contains("2 more not drawn"), "{html}");
    let charts = polylines(&html);
    assert_eq!(charts[2].1.len(), 8, "{:?}", charts[2]);
}

#[test]
fn process_codes_and_messages_are_escaped_everywhere() {
    let code = r#"<img src=x onerror="alert(1)">&"#;
    let mut p = process(code, "restarting");
    p["lastRestart"] = json!("<script>alert('x')</script>");
    p["restarts"] = json!(1);
    let mut st = status(vec![p]);
    st["refusing"] = json!([code]);
    st["missing"] = json!([{"what": "<b>", "why": "a & b"}]);
    let upgrade = json!({"outcome": "refused", "reason": "<i>no</i>"});
    let h = history(vec![(
        code,
        vec![sample(NOW - 2000, 1), sample(NOW - 1000, 2)],
    )]);
    let html = page(&st, &h, &upgrade);
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(!html.contains("<b>") && !html.contains("<i>"));
    assert!(html.contains("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;"));
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    assert!(html.contains("a &amp; b"));
    // The only scripts are the page's own refresh.
    assert_eq!(html.matches("<script>").count(), 1);
}

#[test]
fn the_page_is_whole_on_its_own_and_refreshes_every_interval() {
    let html = page(
        &status(vec![process("m0", "ready")]),
        &Value::Null,
        &Value::Null,
    );
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains(r#"<meta name="viewport" content="width=device-width"#));
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("src="));
    assert!(
        html.contains("var ms=1000,"),
        "the refresh runs each intervalMs"
    );
    assert!(html.contains(r#"<meta http-equiv="refresh" content="1">"#));
    assert!(html.contains(r#"<tr class="row" data-code="m0""#));
    assert!(html.contains(r#"<tr class="row" data-code="launcher""#));
    assert!(html.contains("The graph history did not come in time."));
}

#[test]
fn figures_are_written_short_and_unknown_ones_as_a_dash() {
    assert_eq!(duration(None), "—");
    assert_eq!(duration(Some(450)), "450 ms");
    assert_eq!(duration(Some(65_000)), "1 min 5 s");
    assert_eq!(duration(Some(3 * 3_600_000 + 120_000)), "3 h 2 min");
    assert_eq!(duration(Some(2 * 86_400_000 + 3_600_000)), "2 d 1 h");
    assert_eq!(bytes(Some(1_500_000)), "1.5 MB");
    assert_eq!(bytes(Some(12_000_000_000)), "12.0 GB");
    assert_eq!(count(Some(1_234_567)), "1\u{2009}234\u{2009}567");
    assert_eq!(count(None), "—");
}

#[test]
fn a_full_day_is_drawn_a_point_per_pixel_column_and_a_spike_is_kept() {
    // spec: GRAPH-6, GRAPH-7 (24 h, 1,440 points a process)
    let mut points: Vec<Value> = (0..1440u64)
        .map(|i| sample(NOW - (1440 - i) * 60_000, 1))
        .collect();
    points[700] = sample(NOW - 740 * 60_000, 5000);
    let series: Vec<(String, Vec<Value>)> =
        (0..9).map(|i| (format!("tx{i}"), points.clone())).collect();
    let h = history(
        series
            .iter()
            .map(|(c, p)| (c.as_str(), p.clone()))
            .collect(),
    );
    let mut h60 = h.clone();
    h60["sampleIntervalMs"] = json!(60_000);
    let html = page(&status(vec![]), &h60, &Value::Null);
    let first = html
        .split(r#"<polyline class="line" data-code="tx0""#)
        .nth(1)
        .and_then(|p| p.split("points=\"").nth(1))
        .and_then(|p| p.split('"').next())
        .unwrap_or("");
    let n = first.split(' ').count();
    assert!((300..=360).contains(&n), "{n} points drawn");
    // The spike (5000 requests in an interval: the top of the axis) is still there.
    let top = first
        .split(' ')
        .filter_map(|xy| xy.split(',').nth(1)?.parse::<f64>().ok())
        .fold(f64::MAX, f64::min);
    assert!(top < 40.0, "the spike's y is {top}");
    eprintln!(
        "STATUS-PAGE a full day of 9 processes: {} bytes",
        html.len()
    );
    assert!(html.len() < 300_000, "a page of {} bytes", html.len());
}

#[test]
fn without_a_channel_the_front_doors_figures_are_shown_and_drawn() {
    // spec: DEC-46
    let mut p = process("tx1", "ready");
    p["requests"] = Value::Null;
    p["noChannel"] = json!(true);
    p["frontRequests"] = json!(12);
    p["latencyMs"] = json!({"count": 12, "median": 1.5, "p99": 20.0});
    p["cpuPercent"] = json!(3.25);
    let mut st = status(vec![p]);
    st["totals"]["requests"] = Value::Null;
    st["totals"]["frontRequests"] = json!(12);
    let front = |at: u64, n: u64| {
        let mut s = sample(at, n);
        s["front"] = json!(true);
        s
    };
    let h = history(vec![(
        "tx1",
        vec![front(NOW - 3000, 4), front(NOW - 2000, 8)],
    )]);
    let html = page(&st, &h, &Value::Null);
    assert!(
        html.contains(r#"Requests <b data-figure="requests">12</b>"#),
        "{html}"
    );
    assert!(html.contains(r#"<td data-figure="front-requests">12</td>"#));
    assert!(html.contains("1.5 / 20.0 ms"), "{html}");
    assert!(html.contains("3.2%") || html.contains("3.3%"), "{html}");
    for chart in ["requests", "memory", "inflight"] {
        let at = html
            .find(&format!(r#"data-graph="{chart}""#))
            .map(|i| &html[i..]);
        let polys = at.map_or(0, |s| {
            s[..s.find("</svg>").unwrap_or(s.len())]
                .matches(r#"data-code="tx1""#)
                .count()
        });
        assert!(polys >= 1, "{chart}: a line for tx1 in\n{html}");
    }
}

#[test]
fn a_place_with_its_replacement_beside_it_has_two_rows_and_counts_once() {
    // spec: DEC-92, DEC-93
    let mut new = process("tx1", "starting");
    new["beside"] = json!(true);
    new["replacement"] = json!(true);
    new["restarts"] = Value::Null;
    let mut tx2 = process("tx2", "ready");
    tx2["inputsWaiting"] = json!(true);
    let mut st = status(vec![
        process("m0", "ready"),
        process("tx1", "ready"),
        new,
        tx2,
    ]);
    let found = problems(&st, &Value::Null);
    assert_eq!(
        found.iter().map(|p| p.kind).collect::<Vec<_>>(),
        [Kind::InputsWaiting],
        "a replacement starting beside its place's process is planned: {found:#?}"
    );
    assert!(
        found[0].text.contains("New inputs wait for tx2"),
        "{found:#?}"
    );
    let html = page(&st, &Value::Null, &Value::Null);
    assert!(html.contains("· 3 processes"), "each place once: {html}");
    assert!(
        html.contains(r#"data-code="tx1" data-status="starting" data-overlap="replacement""#),
        "{html}"
    );
    assert!(html.contains("starting · replacement"), "{html}");
    assert!(html.contains("ready · new inputs waiting"), "{html}");

    // After the switch: the place's process is the replacement, the old one drains.
    st["processes"][1]["replacement"] = json!(true);
    st["processes"][2]["replacement"] = json!(false);
    st["processes"][2]["status"] = json!("draining");
    st["rollingRestart"] =
        json!({"state": "rolling restart stopped", "why": "tx1's replacement exited"});
    let html = page(&st, &Value::Null, &Value::Null);
    assert!(html.contains("ready · replacement"), "{html}");
    assert!(
        html.contains(r#"data-status="draining" data-overlap="old""#),
        "{html}"
    );
    assert!(
        html.contains("The last rolling restart stopped: tx1&#39;s replacement exited.")
            || html.contains("The last rolling restart stopped: tx1's replacement exited."),
        "{html}"
    );
}
