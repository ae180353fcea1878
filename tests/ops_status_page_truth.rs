//! The status page tells the truth, in headless Chromium (DEC-91): its headline Uptime is the
//! launcher's and its Requests the front door's count, both across a restart of the master; a
//! worker `scale` removed leaves the legend; no value label of a chart is cut by the chart's
//! edge and the table fits the page (inside its own box on a phone) at 1280×800 and 390×844,
//! measured by the browser's own layout; a refused reload and a setting waiting for a restart
//! of the launcher are in `/status`, `fhircluster status` and the page's problems.

use crate::common;
use crate::ops_scale::client;
use crate::ops_status_page::{
    after_each, charts, chromium, chromium_at, codes, dump, out_dir, problem_lines,
    require_chromium, status,
};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const SIGHUP: i32 = 1;
const SIGKILL: i32 = 9;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A cluster of `workers` with the admin address, sampling every second.
fn with_admin(workers: u32) -> (Cluster, u16) {
    with_admin_from(cluster().workers(workers))
}

fn with_admin_from(b: ClusterBuilder) -> (Cluster, u16) {
    let admin = free_port();
    let c = b
        .config(json!({
            "stats": {"sampleSeconds": 1},
            "server": {"cluster": {"statusSeconds": 1, "recycleSeconds": 0, "drainSeconds": 1}},
        }))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    (c, admin)
}

/// The text of the headline figure `name` (`<b data-figure="name">`).
fn figure(dom: &str, name: &str) -> String {
    dom.split(&format!(r#"<b data-figure="{name}">"#))
        .nth(1)
        .and_then(|r| r.split("</b>").next())
        .unwrap_or("")
        .to_string()
}

/// The page's durations (`12 s`, `1 min 5 s`, `2 h 3 min`, `300 ms`) in whole seconds.
fn seconds(text: &str) -> Option<u64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut total = 0;
    for pair in words.chunks(2) {
        let [n, unit] = pair else { return None };
        let n: u64 = n.parse().ok()?;
        total += n * match *unit {
            "d" => 86_400,
            "h" => 3600,
            "min" => 60,
            "s" => 1,
            "ms" => 0,
            _ => return None,
        };
    }
    (!words.is_empty()).then_some(total)
}

fn take_screenshots(admin: u16, name: &str) {
    for (w, h) in [(1280, 800), (390, 844)] {
        let file = out_dir().join(format!("{name}-{w}x{h}.png"));
        chromium(
            admin,
            &[
                &format!("--screenshot={}", file.display()),
                &format!("--window-size={w},{h}"),
            ],
        );
    }
}

#[test]
fn the_headline_is_the_launchers_uptime_and_the_front_doors_count_across_a_master_restart() {
    // spec: DEC-91
    require_chromium();
    let (c, admin) = with_admin(1);
    wait_until("the launcher up 4 s", secs(20), || {
        status(admin)["launcher"]["uptimeMs"].as_u64() >= Some(4000)
    });
    const SENT: u64 = 30;
    for _ in 0..SENT {
        assert_eq!(c.get("/r4/metadata").status, 200);
    }
    unsafe_kill(c.pid_of("m0"), SIGKILL);
    c.wait_for_nth("m0: ready", 2, secs(30));
    let before = status(admin);
    let launcher_s = before["launcher"]["uptimeMs"].as_u64().unwrap_or(0) / 1000;
    let master_ms = before["processes"][0]["uptimeMs"].as_u64().unwrap_or(0);
    assert!(
        master_ms / 1000 + 2 < launcher_s,
        "the master ({master_ms} ms) restarted well after the launcher ({launcher_s} s)"
    );
    let dom = dump(admin);
    let requests = figure(&dom, "requests").replace('\u{2009}', "");
    assert!(
        requests.parse::<u64>().is_ok_and(|n| n >= SENT),
        "the headline requests {requests:?}: {SENT} sent, the processes' own count {}",
        before["totals"]["requests"]
    );
    let uptime = figure(&dom, "uptime");
    assert!(
        seconds(&uptime).is_some_and(|s| s >= launcher_s),
        "the headline uptime {uptime:?}: the launcher's is {launcher_s} s, the master's {master_ms} ms"
    );
    take_screenshots(admin, "truth-headline");
}

#[test]
fn a_worker_scale_removed_leaves_the_legend() {
    // spec: DEC-91, DEC-48
    require_chromium();
    let (c, admin) = with_admin(2);
    // tx2 has its lines first.
    let mut last = Vec::new();
    let drawn = eventually(secs(20), || {
        last = charts(&dump(admin));
        last.iter()
            .all(|(_, lines)| lines.iter().any(|l| l == "tx2"))
    });
    assert!(drawn, "no line for tx2: {last:?}");
    let out = client(&c.data_dir(), &["scale", "1"]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    wait_until("tx2 out of the plan", secs(30), || {
        codes(&status(admin)) == ["m0", "tx1"]
    });
    legend_without_tx2(admin);
    // After the launcher's restart in place, with the history it saved (tx2's points in it).
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    assert_eq!(codes(&status(admin)), ["m0", "tx1"]);
    legend_without_tx2(admin);
}

/// The page's legend has tx1 and not tx2, and no chart a line for tx2.
fn legend_without_tx2(admin: u16) {
    let dom = dump(admin);
    let legend = dom
        .split(r#"<div class="legend">"#)
        .nth(1)
        .and_then(|l| l.split("</div>").next())
        .unwrap_or("");
    assert!(legend.contains("tx1"), "{legend}");
    assert!(
        !legend.contains("tx2"),
        "tx2 is gone from the plan: {legend}"
    );
    for (id, lines) in charts(&dom) {
        assert!(!lines.iter().any(|l| l == "tx2"), "{id}: {lines:?}");
    }
}

/// What the browser measured of the page at `w`×`h`: how far the page is wider than the window,
/// how far the table is wider than its box, the box's `overflow-x`, and the value labels that
/// begin left of their chart's edge (cut).
struct Layout {
    page_over: i64,
    table_over: i64,
    table_scroll: String,
    cut: String,
}

/// The page as served, with a script before the page's own that measures its layout, loaded
/// from a file at `w`×`h`.
fn measure(admin: u16, w: u32, h: u32) -> Layout {
    const SCRIPT: &str = "<script>(function(){var d=document.documentElement,t=document.querySelector('.table-wrap');\
        d.dataset.pageOver=d.scrollWidth-d.clientWidth;\
        d.dataset.tableOver=t?t.scrollWidth-t.clientWidth:-1;\
        d.dataset.tableScroll=t?getComputedStyle(t).overflowX:'';\
        var cut=[];document.querySelectorAll('svg.chart text.tick').forEach(function(e){var b=e.getBBox();\
        if(b.x<0)cut.push(e.closest('svg').dataset.graph+': '+e.textContent+' from x '+b.x.toFixed(1));});\
        d.dataset.cut=cut.join(' | ');})();</script>";
    let page = admin_get(admin, "/").text();
    let dir = tempfile::tempdir().expect("a folder for the page");
    let file = dir.path().join("page.html");
    std::fs::write(
        &file,
        page.replacen("<script>", &format!("{SCRIPT}<script>"), 1),
    )
    .expect("the page's copy");
    let dom = chromium_at(
        &format!("file://{}", file.display()),
        &["--dump-dom", &format!("--window-size={w},{h}")],
    );
    let attr = |name: &str| {
        after_each(&dom, "<html", name)
            .first()
            .cloned()
            .unwrap_or_default()
    };
    let num = |name: &str| attr(name).parse().unwrap_or(i64::MAX);
    Layout {
        page_over: num("data-page-over"),
        table_over: num("data-table-over"),
        table_scroll: attr("data-table-scroll"),
        cut: attr("data-cut"),
    }
}

#[test]
fn the_value_labels_are_whole_and_the_table_fits_at_a_wall_screens_and_a_phones_size() {
    // spec: DEC-91, GRAPH-1, STATUS-16
    require_chromium();
    // Every column as wide as it gets: heaps with their limit, latencies, the memory guard's
    // threshold, which makes the memory chart's labels thousands of MB (`2.5k MB`).
    let (c, admin) = with_admin_from(
        cluster()
            .workers(3)
            .command(&[SIM, "--max-old-space-size=4096"])
            .env("SIM_MEMORY_LIMIT_MB", "4096"),
    );
    wait_until("the memory chart in thousands of MB", secs(30), || {
        let dom = dump(admin);
        dom.contains("k MB</text>")
            && charts(&dom)
                .iter()
                .any(|(id, lines)| id == "memory" && lines.iter().any(|l| l == "tx1"))
    });
    // Answers all along, for the latency column of every process.
    let stop = AtomicBool::new(false);
    let front = c.addr();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                for path in ["/r4/metadata", "/r4/ValueSet/$expand?url=x"] {
                    let _ = request(front, "GET", path, &[], b"");
                }
            }
        });
        // The latency cell is the one followed by another (the figures' age ends the row).
        wait_until("rows with their latency", secs(20), || {
            admin_get(admin, "/").text().matches(" ms</td><td>").count() >= 2
        });
        for (w, h) in [(1280, 800), (390, 844)] {
            let l = measure(admin, w, h);
            assert_eq!(
                l.cut, "",
                "at {w}×{h}, value labels cut by the chart's edge"
            );
            assert!(
                l.page_over <= 0,
                "at {w}×{h} the page is {} px wider than the window",
                l.page_over
            );
            if w >= 1280 {
                assert!(
                    l.table_over <= 0,
                    "at {w}×{h} the table is {} px wider than the page",
                    l.table_over
                );
            } else {
                assert!(
                    matches!(l.table_scroll.as_str(), "auto" | "scroll"),
                    "at {w}×{h} the table scrolls in its own box: {:?}",
                    l.table_scroll
                );
            }
        }
        take_screenshots(admin, "truth-layout");
        stop.store(true, Ordering::Relaxed);
    });
}

#[test]
fn a_refused_reload_and_a_setting_waiting_for_a_restart_are_in_status_and_the_problems() {
    // spec: DEC-91
    require_chromium();
    let (mut c, admin) = with_admin(1);
    let problem = |kind: &str| problem_lines(&dump(admin)).iter().any(|(k, _)| k == kind);
    std::fs::write(c.data_dir().join("config.json"), "{ not json").expect("config.json");
    c.signal(SIGHUP);
    c.wait_for("SIGHUP: the settings were refused", secs(10));
    let st = status(admin);
    let why = st["front"]["reload"]["refused"]["reason"]
        .as_str()
        .unwrap_or("");
    assert!(!why.is_empty(), "{}", st["front"]);
    let line = client(&c.data_dir(), &["status"]);
    assert!(
        line.stdout.contains("The last reload was refused"),
        "{}",
        line.all()
    );
    assert!(problem("reload-refused"), "no problem line for the refusal");
    take_screenshots(admin, "truth-reload-refused");

    let mut config: Value = c.config.clone();
    merge(
        &mut config,
        &json!({"server": {"cluster": {"hostPrefix": "h"}}}),
    );
    write_config(&c.data_dir(), &config);
    c.signal(SIGHUP);
    c.wait_for("needs a restart of the launcher", secs(10));
    let st = status(admin);
    assert_eq!(
        st["front"]["reload"]["refused"],
        Value::Null,
        "{}",
        st["front"]
    );
    assert_eq!(
        st["front"]["reload"]["restartPending"],
        json!(["server.cluster.hostPrefix"])
    );
    let line = client(&c.data_dir(), &["status"]);
    assert!(
        line.stdout.contains(
            "Waiting for a restart of the launcher (systemctl restart): server.cluster.hostPrefix"
        ),
        "{}",
        line.all()
    );
    assert!(
        problem("restart-pending"),
        "no problem line for the setting"
    );
    assert!(!problem("reload-refused"), "the refusal is over");
}
