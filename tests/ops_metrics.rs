//! `/metrics` on the launcher's own endpoint, read the way Prometheus reads it (the strict parser
//! in `common/prometheus.rs`): the naming conventions, cumulative histogram buckets, and every
//! figure checked against the traffic the test itself sent: answers by route and status class,
//! lanes, queue waits, the launcher's refusals after a surge, and `504`s after a hang, each
//! counted against the process that hung.

use crate::common;

use common::*;
use serde_json::json;

/// A cluster of the master and one worker with `cluster` settings and the launcher's own
/// endpoint, and that endpoint's port.
fn with_admin(cluster_settings: serde_json::Value) -> (Cluster, u16) {
    let admin = free_port();
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": cluster_settings } }))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    (c, admin)
}

#[test]
fn the_parser_rejects_what_prometheus_would() {
    // Every test must be able to fail: the parser and the conventions catch each of these.
    let ok = "# HELP fhircluster_x_total X.\n# TYPE fhircluster_x_total counter\nfhircluster_x_total{a=\"1\"} 3\n";
    assert!(parse(ok).is_ok_and(|e| check_conventions(&e).is_ok()));
    for bad in [
        "fhircluster_x_total 1\n", // no family
        "# TYPE fhircluster_x_total counter\nfhircluster_x_total{a=\"1} 1\n", // open quote
        "# TYPE fhircluster_x_total counter\nfhircluster_x_total one\n", // no number
        "# TYPE fhircluster_x_total counter\nfhircluster_x_total 1\nfhircluster_x_total 2\n",
        "# TYPE fhircluster_x_total counter\n# TYPE fhircluster_x_total counter\n",
        "# TYPE fhircluster_x_total counter\nfhircluster_x_total 1", // no final newline
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
    for bad in [
        "# HELP fhircluster_x X.\n# TYPE fhircluster_x counter\nfhircluster_x 1\n",
        "# HELP fhircluster_memory X.\n# TYPE fhircluster_memory gauge\nfhircluster_memory 1\n",
        "# TYPE fhircluster_y gauge\nfhircluster_y 1\n", // no HELP
        "# HELP fhircluster_h_seconds H.\n# TYPE fhircluster_h_seconds histogram\n\
         fhircluster_h_seconds_bucket{le=\"1\"} 2\nfhircluster_h_seconds_bucket{le=\"+Inf\"} 1\n\
         fhircluster_h_seconds_sum 1\nfhircluster_h_seconds_count 1\n", // not cumulative
    ] {
        let e = parse(bad).unwrap_or_else(|m| panic!("{m}"));
        assert!(check_conventions(&e).is_err(), "accepted {bad:?}");
    }
}

#[test]
fn metrics_are_well_formed_and_count_the_requests_sent() {
    let admin = free_port();
    let c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let before = scrape(admin);
    for (route, class) in [("tx", "2xx"), ("master", "2xx"), ("tx", "4xx")] {
        assert_eq!(before.requests(route, class), 0.0, "nothing sent yet");
    }
    const TX: usize = 7;
    const MASTER: usize = 3;
    for _ in 0..TX {
        let r = c.get("/r4/CodeSystem/$lookup");
        assert_eq!(r.status, 200, "{}", r.text());
    }
    for _ in 0..MASTER {
        let r = c.get("/dashboard");
        assert!(r.status < 300, "{} {}", r.status, r.text());
    }
    // An id no process issued: the process answers 404 cache-id-unknown (ROUTE-3c).
    let r = c.request(
        "GET",
        "/r4/CodeSystem/$lookup",
        &[("X-Cache-Id", "tx1.nope.nope")],
        b"",
    );
    assert!(r.is_cache_id_unknown(), "{}", r.text());
    // The launcher's own endpoints are not counted as requests.
    for _ in 0..3 {
        admin_get(admin, "/readyz");
    }

    let after = scrape(admin);
    assert_eq!(after.requests("tx", "2xx"), TX as f64);
    assert_eq!(after.requests("tx", "4xx"), 1.0);
    assert_eq!(after.requests("master", "2xx"), MASTER as f64);
    for class in ["1xx", "3xx", "5xx"] {
        assert_eq!(after.requests("tx", class), 0.0, "{class}");
        assert_eq!(after.requests("master", class), 0.0, "{class}");
    }
    let lanes = after.value("fhircluster_lane_requests_total", &[("lane", "fast")])
        + after.value("fhircluster_lane_requests_total", &[("lane", "normal")]);
    assert_eq!(lanes, (TX + 1) as f64, "every tx request took a lane");
    assert_eq!(
        after.value("fhircluster_queue_wait_seconds_count", &[]),
        (TX + 1) as f64,
        "every tx request's wait recorded"
    );
    for reason in [
        "queue_wait",
        "no_process_ready",
        "stopping",
        "master_not_ready",
        "cache_id_lost",
    ] {
        assert_eq!(
            after.value("fhircluster_refusals_total", &[("reason", reason)]),
            0.0,
            "{reason}"
        );
    }
    assert_eq!(after.value("fhircluster_queue_length", &[]), 0.0);
    for p in ["m0", "tx1"] {
        assert_eq!(after.value("fhircluster_in_flight", &[("process", p)]), 0.0);
        assert_eq!(
            after.sum("fhircluster_restarts_total", &[("process", p)]),
            0.0
        );
        assert!(
            after.value(
                "fhircluster_process_memory_bytes",
                &[("process", p), ("kind", "private")]
            ) > 0.0,
            "{p}'s memory"
        );
    }
}

#[test]
fn refusals_after_a_surge_and_504s_after_a_hang_are_counted_where_they_happened() {
    // spec: QUEUE-17 (the launcher's 503s), TIMEOUT-1 (504 naming the process)
    let (c, admin) = with_admin(json!({
        "queueSeconds": 0, "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
        "upstreamTimeoutSeconds": 1
    }));
    let addr = c.addr();

    // A surge of 8 requests that each hold their slot for 1 s (a response that begins at once,
    // so no 504) at 2 processes with one slot each and no queue: the rest refused.
    let answers = in_parallel(8, move |_| {
        request(
            addr,
            "GET",
            "/r4/CodeSystem/$lookup?_sim_stream=1",
            &[],
            b"",
        )
    });
    let served = answers.iter().filter(|r| r.status == 200).count();
    let refused = answers
        .iter()
        .filter(|r| r.status == 503 && r.served_by().is_empty())
        .count();
    assert_eq!(
        served + refused,
        8,
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(
        refused >= 1 && served >= 1,
        "served {served}, refused {refused}"
    );
    let m = scrape(admin);
    assert_eq!(
        m.value("fhircluster_refusals_total", &[("reason", "queue_wait")]),
        refused as f64
    );
    assert_eq!(m.requests("tx", "5xx"), refused as f64);
    assert_eq!(m.requests("tx", "2xx"), served as f64);

    // A hang on tx1 (by its cache-id) and one on the master: 504 each, after 1 s.
    let id = (0..20)
        .map(|_| c.request("POST", "/r4/$cache-control", &[], b"{}"))
        .find(|r| r.served_by() == "tx1")
        .and_then(|r| r.header("x-cache-id").map(String::from))
        .expect("a session on tx1 within 20 tries");
    let r = c.request(
        "GET",
        "/r4/CodeSystem/$lookup?_sim_hang=1",
        &[("X-Cache-Id", &id)],
        b"",
    );
    assert_eq!(r.status, 504, "{}", r.text());
    let r = c.get("/sim/hang");
    assert_eq!(r.status, 504, "{}", r.text());

    let m = scrape(admin);
    let errors = |p: &str, s: &str| {
        m.value(
            "fhircluster_upstream_errors_total",
            &[("process", p), ("status", s)],
        )
    };
    assert_eq!(errors("tx1", "504"), 1.0, "tx1's hang");
    assert_eq!(errors("m0", "504"), 1.0, "the master's hang");
    assert_eq!(errors("tx1", "502") + errors("m0", "502"), 0.0);
    assert_eq!(m.requests("tx", "5xx"), (refused + 1) as f64);
    assert_eq!(m.requests("master", "5xx"), 1.0);
}

/// The sum of the request duration histogram's `_count` over the tx route classes.
fn tx_durations(m: &Exposition, outcome: &str) -> f64 {
    ["tx", "fast", "owner"]
        .iter()
        .map(|r| {
            m.value(
                "fhircluster_request_duration_seconds_count",
                &[("route", r), ("outcome", outcome)],
            )
        })
        .sum()
}

#[test]
fn the_series_operators_page_on_follow_traffic_a_killed_worker_and_reloads() {
    // spec: QUEUE-4 (a queued request's wait), ROUTE-3b (the owner's cache-ids while it restarts)
    let (c, admin) = with_admin(json!({
        "queueSeconds": 10, "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
        "headerTimeoutSeconds": 1
    }));
    let addr = c.addr();
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();

    let m = scrape(admin);
    for p in ["m0", "tx1"] {
        let l = [("process", p)];
        assert_eq!(m.value("fhircluster_process_up", &l), 1.0, "{p}");
        assert_eq!(m.value("fhircluster_process_ready", &l), 1.0, "{p}");
        let st = |s: &str| m.value("fhircluster_process_state", &[("process", p), ("state", s)]);
        assert_eq!(st("ready"), 1.0, "{p}");
        assert_eq!(
            st("restarting") + st("starting") + st("draining"),
            0.0,
            "{p}"
        );
        let t = m.value("fhircluster_process_start_time_seconds", &l);
        assert!(
            t > started - 120.0 && t < started + 5.0,
            "{p} started at {t}"
        );
    }
    assert_eq!(
        m.value(
            "fhircluster_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("commit", fhircluster::build_info::COMMIT),
                ("rustc", fhircluster::build_info::RUSTC),
            ]
        ),
        1.0
    );
    let t = m.value("process_start_time_seconds", &[]);
    assert!(
        t > started - 120.0 && t < started + 5.0,
        "the launcher started at {t}"
    );
    assert!(m.value("process_resident_memory_bytes", &[]) > 1e6);
    let fds = m.value("process_open_fds", &[]);
    assert!(fds > 3.0 && fds <= m.value("process_max_fds", &[]), "{fds}");
    assert!(m.value("process_cpu_seconds_total", &[]) >= 0.0);
    assert_eq!(
        m.value("fhircluster_config_last_reload_successful", &[]),
        1.0
    );
    assert_eq!(
        m.sum("fhircluster_config_reloads_total", &[]),
        0.0,
        "no reload yet"
    );

    // Three requests that each hold a slot for 1 s, at two processes with one slot each: one
    // waits in the queue about a second, on a new connection: in the lobby.
    let waiting = |admin| scrape(admin).value("fhircluster_connections", &[("state", "waiting")]);
    assert_eq!(waiting(admin), 0.0);
    let clients = std::thread::spawn(move || {
        in_parallel(3, move |_| {
            request(
                addr,
                "GET",
                "/r4/CodeSystem/$lookup?_sim_stream=1",
                &[],
                b"",
            )
            .status
        })
    });
    poll("a connection waiting in the lobby", secs(5), || {
        (waiting(admin) == 1.0).then_some(())
    });
    let answers = clients.join().expect("the clients");
    assert_eq!(answers, [200, 200, 200]);
    let m = scrape(admin);
    assert_eq!(
        m.value("fhircluster_connections", &[("state", "waiting")]),
        0.0
    );
    let waited = m.value("fhircluster_queue_wait_seconds_count", &[])
        - m.value("fhircluster_queue_wait_seconds_bucket", &[("le", "0.5")]);
    assert!(waited >= 1.0, "a request waited over 0.5 s: {waited}");
    assert_eq!(tx_durations(&m, "2xx"), m.requests("tx", "2xx"));
    assert_eq!(tx_durations(&m, "2xx"), 3.0);

    // A client that sends half a head: closed after headerTimeoutSeconds, and counted; open
    // meanwhile, outside hyper.
    let accepted = m.value("fhircluster_connections_accepted_total", &[]);
    let mut half = std::net::TcpStream::connect(addr).expect("connect");
    std::io::Write::write_all(&mut half, b"GET /r4/metadata HTTP/1.1\r\n").expect("write");
    let m = poll("the half head's connection counted", secs(5), || {
        let m = scrape(admin);
        (m.value("fhircluster_connections_accepted_total", &[]) > accepted).then_some(m)
    });
    assert!(m.value("fhircluster_connections", &[("state", "parked")]) >= 1.0);
    wait_until("the header timeout counted", secs(10), || {
        scrape(admin).value("fhircluster_header_timeouts_total", &[]) == 1.0
    });
    drop(half);

    // tx1 killed: not ready (restarting) at once, its cache-ids refused as lost meanwhile, then
    // back, its restart counted and its start time moved on.
    let id = (0..20)
        .map(|_| c.request("POST", "/r4/$cache-control", &[], b"{}"))
        .find(|r| r.served_by() == "tx1")
        .and_then(|r| r.header("x-cache-id").map(String::from))
        .expect("a session on tx1 within 20 tries");
    let before = scrape(admin);
    let t1 = before.value(
        "fhircluster_process_start_time_seconds",
        &[("process", "tx1")],
    );
    unsafe_kill(c.pid_of("tx1"), 9);
    poll("tx1 down and restarting", secs(5), || {
        let m = scrape(admin);
        let l = [("process", "tx1")];
        (m.value("fhircluster_process_ready", &l) == 0.0
            && m.get("fhircluster_process_up", &l) == Some(0.0)
            && m.get(
                "fhircluster_process_state",
                &[("process", "tx1"), ("state", "restarting")],
            ) == Some(1.0))
        .then_some(())
    });
    let r = c.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", &id)], b"");
    assert!(r.is_cache_id_unknown(), "{} {}", r.status, r.text());
    let m = poll("tx1 back", secs(30), || {
        let m = scrape(admin);
        let l = [("process", "tx1")];
        (m.value("fhircluster_process_ready", &l) == 1.0
            && m.get("fhircluster_process_up", &l) == Some(1.0)
            && m.get("fhircluster_process_start_time_seconds", &l) > Some(t1))
        .then_some(m)
    });
    let crash = [("process", "tx1"), ("reason", "crash")];
    assert_eq!(
        m.value("fhircluster_restarts_total", &crash),
        before.value("fhircluster_restarts_total", &crash) + 1.0,
        "a killed worker is a crash"
    );
    assert_eq!(
        m.value("fhircluster_refusals_total", &[("reason", "cache_id_lost")]),
        1.0
    );
    assert_eq!(
        m.value(
            "fhircluster_request_duration_seconds_count",
            &[("route", "owner"), ("outcome", "refused")]
        ),
        1.0
    );

    // A reload that takes, then one refused: the last result, the time, the counts.
    write_config(&c.data_dir(), &c.config);
    c.signal(1);
    let m = poll("the reload counted", secs(10), || {
        let m = scrape(admin);
        (m.value("fhircluster_config_reloads_total", &[("result", "success")]) == 1.0).then_some(m)
    });
    assert_eq!(
        m.value("fhircluster_config_last_reload_successful", &[]),
        1.0
    );
    let at = m.value(
        "fhircluster_config_last_reload_success_timestamp_seconds",
        &[],
    );
    assert!(at >= started, "reloaded at {at}, after {started}");
    std::fs::write(c.data_dir().join("config.json"), "{ not json").expect("write");
    c.signal(1);
    let (text, m) = poll("the refused reload counted", secs(10), || {
        let (text, m) = scrape_text(admin);
        (m.value("fhircluster_config_reloads_total", &[("result", "failure")]) == 1.0)
            .then_some((text, m))
    });
    assert_eq!(
        m.value("fhircluster_config_last_reload_successful", &[]),
        0.0
    );
    assert_eq!(
        m.value(
            "fhircluster_config_last_reload_success_timestamp_seconds",
            &[]
        ),
        at,
        "the settings in force are still those of the reload that took"
    );
    // Prometheus's own linter, on a scrape taken after traffic, a fault and reloads.
    promtool_check_metrics(&text);
}
