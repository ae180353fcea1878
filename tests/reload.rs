//! Reload on SIGHUP through the real binaries: a bad config.json is refused and nothing changes;
//! a good one's live settings take effect; the worker count moves up and down with routing
//! following; and the rolling restart (of the processes whose inputs changed: here a change in
//! config.json outside `server.cluster`, which every process reads) replaces every process, the
//! master last, without a tx request lost under steady load.

use crate::common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const SIGHUP: i32 = 1;

/// The cluster's config with `patch` merged in, written back to its config.json.
pub(crate) fn rewrite(c: &Cluster, patch: Value) {
    let mut config = c.config.clone();
    merge(&mut config, &patch);
    write_config(&c.data_dir(), &config);
}

/// A change in config.json outside `server.cluster` (a setting of FHIRsmith's own, which
/// every process reads), so a reload restarts every process in turn.
fn touch_theirs(c: &Cluster, n: u32) {
    rewrite(c, json!({ "library": { "reloaded": n } }));
}

/// Who answers `n` tx requests sent one after another.
pub(crate) fn served_by(c: &Cluster, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let r = c.get("/r4/metadata");
            assert_eq!(r.status, 200, "{}", r.text());
            r.served_by().to_string()
        })
        .collect()
}

/// The `n`th refusal line, once it has been logged.
fn refusal(c: &Cluster, n: usize) -> String {
    let needle = "the settings were refused";
    c.wait_for_count(needle, n, Duration::from_secs(10));
    c.log_lines()
        .into_iter()
        .filter(|l| l.contains(needle))
        .nth(n - 1)
        .unwrap_or_default()
}

#[test]
fn a_bad_config_is_refused_and_the_cluster_carries_on() {
    let c = cluster().workers(2).start();
    let pids: Vec<i32> = ["m0", "tx1", "tx2"].iter().map(|p| c.pid_of(p)).collect();

    rewrite(
        &c,
        json!({ "server": { "cluster": { "maxOutstanding": "lots" } } }),
    );
    c.signal(SIGHUP);
    let line = refusal(&c, 1);
    assert!(line.contains("ERROR"), "{line}");
    // The level once, not again in the message (issue 14).
    assert_eq!(line.matches("ERROR").count(), 1, "{line}");
    assert!(line.contains("maxOutstanding"), "names the setting: {line}");

    // Not JSON at all: refused too, with the reason on the same one line.
    std::fs::write(c.data_dir().join("config.json"), "{ not json").expect("write");
    c.signal(SIGHUP);
    let line = refusal(&c, 2);
    assert!(line.contains("config.json"), "{line}");

    holds_for("nothing restarted", Duration::from_millis(1500), || {
        c.count_lines("rolling restart") == 0
    });
    let after: Vec<i32> = ["m0", "tx1", "tx2"].iter().map(|p| c.pid_of(p)).collect();
    assert_eq!(pids, after, "the same processes");
    assert!(pids.iter().all(|&p| alive(p)));
    let by = served_by(&c, 6);
    assert!(
        by.iter()
            .all(|b| ["m0", "tx1", "tx2"].contains(&b.as_str())),
        "{by:?}"
    );
    assert_eq!(c.get("/").status, 200, "the master's own paths too");
}

#[test]
fn a_reload_that_raises_workers_into_server_port_is_refused_and_the_count_stays() {
    // spec: DEC-21 (the internalPort range is checked again whenever the count changes), CONF-10
    // The processes' ports start below server.port: one worker fits (base, base + 1), a second
    // would take base + 2, server.port itself.
    let base = free_ports(4);
    let dir = tempfile::tempdir().expect("temp data dir");
    let config = json!({
        "server": { "port": base + 2, "cluster": {
            "internalPort": base, "workers": 1, "command": [SIM],
            "statusSeconds": 1, "killSeconds": 5
        } },
        "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } }
    });
    let mut c = launch(dir, config, &[], &[], &[]);
    c.wait_for("m0: ready", Duration::from_secs(20));
    c.wait_for("tx1: ready", Duration::from_secs(20));
    c.wait_until_listening(Duration::from_secs(10));
    let pids: Vec<i32> = ["m0", "tx1"].iter().map(|p| c.pid_of(p)).collect();

    rewrite(&c, json!({ "server": { "cluster": { "workers": 2 } } }));
    c.signal(SIGHUP);
    let line = refusal(&c, 1);
    for part in [
        "server.cluster.internalPort",
        &format!("{base}-{}", base + 2),
        &(base + 2).to_string(),
    ] {
        assert!(line.contains(part), "{part:?} in: {line}");
    }
    holds_for(
        "no worker more, nothing restarted",
        Duration::from_millis(1500),
        || c.line_index("tx2: started").is_none() && c.count_lines("reload: workers") == 0,
    );
    let after: Vec<i32> = ["m0", "tx1"].iter().map(|p| c.pid_of(p)).collect();
    assert_eq!(pids, after, "the same processes");
    let by = served_by(&c, 6);
    assert!(
        by.iter().all(|b| b == "m0" || b == "tx1"),
        "the launcher still serves on server.port: {by:?}"
    );
}

#[test]
fn changed_queue_settings_take_effect_and_those_needing_a_launcher_restart_are_kept() {
    // spec: QUEUE-4 (with the reloaded maxOutstanding and queueSeconds)
    let c = cluster()
        .workers(1)
        .env("SIM_COST_EXPAND_MS", "300")
        .config(json!({ "server": { "cluster": { "fastLaneExtra": 0, "normalMinSlots": 0 } } }))
        .start();
    let addr = c.addr();
    let surge = move || {
        in_parallel(8, move |_| {
            request(addr, "GET", "/r4/ValueSet/$expand?url=x", &[], b"").status
        })
    };
    let before = surge();
    assert!(
        before.iter().all(|&s| s == 200),
        "16 slots each: {before:?}"
    );

    let pids: Vec<i32> = ["m0", "tx1"].iter().map(|p| c.pid_of(p)).collect();
    rewrite(
        &c,
        json!({ "server": { "cluster": {
            "fastLaneExtra": 0, "normalMinSlots": 0, "maxOutstanding": 1, "queueSeconds": 0.2,
            "hostPrefix": "h"
        } } }),
    );
    c.signal(SIGHUP);
    c.wait_for_count("reload: no process restarts", 1, Duration::from_secs(60));
    let lines = c.log_lines().join("\n");
    assert!(
        lines.contains("reload: server.cluster.maxOutstanding 16 → 1: applied"),
        "{lines}"
    );
    assert!(
        lines.contains("reload: server.cluster.queueSeconds 1 → 0.2: applied"),
        "{lines}"
    );
    let kept = lines
        .lines()
        .find(|l| l.contains("reload: server.cluster.hostPrefix \"\" → \"h\""))
        .unwrap_or_default();
    assert!(
        kept.contains("WARN")
            && kept.contains("needs a restart of the launcher (systemctl restart)")
            && kept.contains("kept as it was"),
        "{lines}"
    );
    let after: Vec<i32> = ["m0", "tx1"].iter().map(|p| c.pid_of(p)).collect();
    assert_eq!(pids, after, "no process restarted, none renamed");
    // One slot per process and 0.2 s of waiting: most of 8 expands of 300 ms are refused.
    let after = surge();
    let refused = after.iter().filter(|&&s| s == 503).count();
    assert!(refused >= 3, "{after:?}");
    assert!(after.iter().all(|&s| s == 200 || s == 503), "{after:?}");
    let r = c.get("/r4/metadata");
    assert_eq!(r.status, 200);
    assert!(
        ["m0", "tx1"].contains(&r.served_by()),
        "the old codes: {}",
        r.served_by()
    );
}

#[test]
fn the_worker_count_moves_up_and_down_and_routing_follows() {
    let mut c = cluster().workers(2).start();
    rewrite(&c, json!({ "server": { "cluster": { "workers": 3 } } }));
    c.signal(SIGHUP);
    c.wait_for("reload: workers 2 → 3", Duration::from_secs(10));
    c.wait_for("tx3: ready", Duration::from_secs(20));
    c.wait_for(
        "reload: no process restarts: what they read is unchanged",
        Duration::from_secs(60),
    );
    let tx3 = c.pid_of("tx3");
    assert!(alive(tx3));
    let by = served_by(&c, 12);
    assert!(by.iter().any(|b| b == "tx3"), "tx3 takes requests: {by:?}");

    let (tx2, tx3) = (c.pid_of("tx2"), c.pid_of("tx3"));
    rewrite(&c, json!({ "server": { "cluster": { "workers": 1 } } }));
    c.signal(SIGHUP);
    c.wait_for("reload: workers 3 → 1", Duration::from_secs(10));
    c.wait_for("tx2: stopped for good", Duration::from_secs(20));
    c.wait_for("tx3: stopped for good", Duration::from_secs(20));
    c.wait_for_count("reload: no process restarts", 2, Duration::from_secs(60));
    assert!(wait_gone(&[tx2, tx3], Duration::from_secs(5)).is_empty());
    let by = served_by(&c, 12);
    assert!(by.iter().all(|b| b == "m0" || b == "tx1"), "{by:?}");
    assert!(by.iter().any(|b| b == "tx1"), "{by:?}");
    // A cache-id of a worker no longer in the cluster is an unknown prefix: a process answers.
    let r = c.request(
        "GET",
        "/r4/CodeSystem/$lookup",
        &[("X-Cache-Id", "tx3.a.b")],
        b"",
    );
    assert!(r.is_cache_id_unknown(), "{} {}", r.status, r.text());
    assert!(
        ["m0", "tx1"].contains(&r.served_by()),
        "{:?}",
        r.served_by()
    );
    assert_eq!(c.child_pids().len(), 2, "the master and tx1 alone");
}

#[test]
fn a_worker_retired_by_a_lower_count_is_unavailable_in_the_graphs_not_restarting() {
    // spec: GRAPH-10, STATUS-17
    // A worker the lower count retires is gone for good: its legend says unavailable, it is
    // not counted as a restart and has no exit event of its own (it was stopped, not crashed).
    let mut c = cluster().workers(2).start();
    rewrite(&c, json!({ "server": { "cluster": { "workers": 1 } } }));
    c.signal(SIGHUP);
    c.wait_for("reload: workers 2 → 1", Duration::from_secs(10));
    c.wait_for("tx2: stopped for good", Duration::from_secs(20));
    c.wait_for("reload: no process restarts", Duration::from_secs(60));
    let tx2 = poll(
        "tx2's legend state at the master",
        Duration::from_secs(10),
        || {
            let h = c.direct(0, "GET", "/sim/received").json()["history"].clone();
            let series = h["processes"]
                .as_array()?
                .iter()
                .find(|p| p["code"] == "tx2")?;
            // The master's history is sent on its own period: the first one after the stop
            // may still say live. Any state other than live is the settled one.
            Some(series["state"].clone()).filter(|s| s != "live")
        },
    );
    assert_eq!(tx2, json!("unavailable"));
    assert!(
        !c.log_lines()
            .iter()
            .any(|l| l.contains("tx2: starting again")),
        "a retired worker is not restarted"
    );
}

#[test]
fn a_rolling_restart_under_steady_load_loses_no_tx_request_and_ends_with_the_master() {
    // spec: DEC-15, RESTART-6, RESTART-11
    // Expands of 50 ms keep requests at work on each process as it is taken out of rotation.
    let c = cluster().workers(2).env("SIM_COST_EXPAND_MS", "50").start();
    let before: Vec<i32> = ["m0", "tx1", "tx2"].iter().map(|p| c.pid_of(p)).collect();
    let addr = c.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let answered = Arc::new(AtomicUsize::new(0));
    let answered2 = answered.clone();
    let load = std::thread::spawn(move || {
        in_parallel(4, move |i| {
            let mut statuses = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(90);
            while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
                let path = if i % 2 == 0 {
                    "/r4/metadata"
                } else {
                    "/r4/ValueSet/$expand?url=x"
                };
                let r = request(addr, "GET", path, &[], b"");
                statuses.push((r.status, r.served_by().to_string()));
                answered2.fetch_add(1, Ordering::Relaxed);
            }
            statuses
        })
    });
    // The load is under way before the restart begins and goes on after it ends.
    let under_way = |n: usize| {
        wait_until(
            &format!("{n} requests answered"),
            Duration::from_secs(20),
            || answered.load(Ordering::Relaxed) >= n,
        )
    };
    under_way(8);
    touch_theirs(&c, 1);
    c.signal(SIGHUP);
    c.wait_for_count("rolling restart done", 1, Duration::from_secs(60));
    // A roll not paced by a tick (DEC-83) may be over in well under a second: the load goes on
    // after it until there are enough requests to call it steady.
    under_way((answered.load(Ordering::Relaxed) + 8).max(60));
    stop.store(true, Ordering::Relaxed);
    let results: Vec<(u16, String)> = load.join().expect("load threads").concat();

    let failed: Vec<_> = results.iter().filter(|(s, _)| *s != 200).collect();
    assert!(
        results.len() > 50,
        "steady load: {} requests",
        results.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {} failed: {failed:?}",
        failed.len(),
        results.len()
    );
    let after: Vec<i32> = ["m0", "tx1", "tx2"].iter().map(|p| c.pid_of(p)).collect();
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(b, a, "every process was replaced: {before:?} → {after:?}");
    }
    // One at a time, workers first, the master last.
    let steps: Vec<usize> = ["1/3: tx1", "2/3: tx2", "3/3: m0"]
        .iter()
        .map(|s| c.must_index(&format!("rolling restart {s}")))
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    // tx2's replacement took its place (DEC-78) before the master's turn.
    let tx2_back = c.must_index("tx2: switched to its replacement");
    assert!(tx2_back < steps[2], "the master only once tx2 is back");
    let m0_started = c.line_indices("m0: started").last().copied().unwrap_or(0);
    assert!(m0_started > steps[2]);
    assert!(
        before.iter().all(|&p| !alive(p)),
        "the old processes are gone"
    );
}

#[test]
fn a_reload_ends_no_master_path_request_and_they_wait_for_a_master_back_in_time() {
    // spec: DEC-34 (#26.3: every reload cut the master's own paths: 503s while it restarted,
    // 502s for those in flight at its SIGTERM)
    let c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"queueSeconds": 20}}}))
        .start();
    let addr = c.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let answered = Arc::new(AtomicUsize::new(0));
    let answered2 = answered.clone();
    // Two clients on the master's own paths: quick pages, and responses that last 0.5 s, so one
    // is in flight on the master when it is drained.
    let load = std::thread::spawn(move || {
        in_parallel(2, move |i| {
            let mut bad = Vec::new();
            let mut n = 0;
            let deadline = Instant::now() + Duration::from_secs(90);
            while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
                let path = if i == 0 {
                    "/dashboard"
                } else {
                    "/dashboard?_sim_stream=0.5"
                };
                let r = request(addr, "GET", path, &[], b"");
                let whole = i == 0 || r.text().contains("tick 5");
                if r.status != 200 || !whole {
                    bad.push((r.status, r.text().chars().take(200).collect::<String>()));
                }
                n += 1;
                answered2.fetch_add(1, Ordering::Relaxed);
            }
            vec![(n, bad)]
        })
    });
    let under_way = |n: usize| {
        wait_until(
            &format!("{n} requests answered"),
            Duration::from_secs(30),
            || answered.load(Ordering::Relaxed) >= n,
        )
    };
    under_way(6);
    let m0 = c.pid_of("m0");
    touch_theirs(&c, 1);
    c.signal(SIGHUP);
    c.wait_for_count("rolling restart done", 1, Duration::from_secs(60));
    under_way(answered.load(Ordering::Relaxed) + 6);
    stop.store(true, Ordering::Relaxed);
    let results = load.join().expect("load threads").concat();
    assert_ne!(c.pid_of("m0"), m0, "the master was restarted");
    let total: usize = results.iter().map(|(n, _)| n).sum();
    let bad: Vec<_> = results.iter().flat_map(|(_, b)| b).collect();
    assert!(
        bad.is_empty(),
        "{} of {total} master-path requests failed across the reload: {bad:?}",
        bad.len()
    );
}

#[test]
fn every_kind_of_change_is_applied_or_waits_for_the_restart_it_needs() {
    // Issue 17: headerTimeoutSeconds and proxyThreads were ignored by a reload ("no setting
    // changed"); statusSeconds reached the status ticks but not /status's staleness and
    // interval; the processes restarted by the reload were told the start's sample period.
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    rewrite(
        &c,
        json!({
            "server": { "cluster": {
                "headerTimeoutSeconds": 2, "proxyThreads": 2, "statusSeconds": 2
            } },
            "stats": { "sampleSeconds": 7 }
        }),
    );
    c.signal(SIGHUP);
    c.wait_for("rolling restart done", Duration::from_secs(60));
    let mut wrong = Vec::new();

    // headerTimeoutSeconds, at once: a connection accepted now has 2 s to send its head.
    let mut conn = Conn::open(c.addr()).expect("connect");
    let accepted = Instant::now();
    conn.stream
        .write_all(b"GET /r4/metadata HTTP/1.1\r\nHost: x\r\n")
        .expect("send");
    let (_, ended) = conn.drain(Duration::from_secs(10));
    let t = accepted.elapsed();
    if !ended || t > Duration::from_secs(6) {
        wrong.push(format!(
            "a half-sent head was still open after {t:?} (cut off: {ended}); headerTimeoutSeconds is 2"
        ));
    }
    // statusSeconds, at once: /status counts staleness in the new interval.
    let interval = admin_get(admin, "/status").json()["intervalMs"].as_u64();
    if interval != Some(2000) {
        wrong.push(format!("/status intervalMs is {interval:?}, not 2000"));
    }
    // stats.sampleSeconds, as the servers restart: each was told the new period in its hello.
    for i in 0..2 {
        let hello = c.direct(i, "GET", "/sim/received").json()["hello"]["sampleSeconds"].as_f64();
        if hello != Some(7.0) {
            wrong.push(format!(
                "process {i} was told sampleSeconds {hello:?}, not 7"
            ));
        }
    }
    let lines = c.log_lines().join("\n");
    for needle in [
        "reload: server.cluster.headerTimeoutSeconds 30 → 2: applied\n",
        "reload: server.cluster.statusSeconds 1 → 2: applied\n",
        "reload: server.cluster.proxyThreads 1 → 2: taken by the in-place upgrade",
        "reload: stats.sampleSeconds (a minute, or intervalMinutes if shorter) → 7: the \
         processes take it as they restart in turn",
    ] {
        if !format!("{lines}\n").contains(needle) {
            wrong.push(format!("no line {needle:?}"));
        }
    }
    if lines.contains("no setting changed") {
        wrong.push("\"no setting changed\" logged".into());
    }
    assert!(wrong.is_empty(), "{wrong:#?}\n{lines}");
}

#[test]
fn the_log_level_is_taken_at_once() {
    // RUST_LOG empty counts as unset, so config.json's logLevel decides.
    let c = cluster().workers(0).env("RUST_LOG", "").start();
    rewrite(
        &c,
        json!({ "server": { "cluster": { "logLevel": "warn" } } }),
    );
    c.signal(SIGHUP);
    c.wait_for_count(
        "reload: server.cluster.logLevel \"info\" → \"warn\"",
        1,
        Duration::from_secs(10),
    );
    // A second reload, with a change the launcher logs as a WARNING: its INFO lines are gone.
    rewrite(
        &c,
        json!({ "server": { "cluster": { "logLevel": "warn", "hostPrefix": "h" } } }),
    );
    c.signal(SIGHUP);
    c.wait_for_count(
        "reload: server.cluster.hostPrefix \"\" → \"h\": needs a restart of the launcher",
        1,
        Duration::from_secs(10),
    );
    assert_eq!(
        c.count_lines("SIGHUP: reloading the settings"),
        1,
        "the second reload's INFO line was written at logLevel warn:\n{}",
        c.log_lines().join("\n")
    );
}
