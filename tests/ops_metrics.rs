//! `/metrics` on the launcher's own endpoint, read the way Prometheus reads it (the strict parser
//! in `common/prometheus.rs`): the naming conventions, cumulative histogram buckets, and every
//! figure checked against the traffic the test itself sent: answers by route and status class,
//! lanes, queue waits, the launcher's refusals after a surge, and `504`s after a hang, each
//! counted against the process that hung.

use crate::common;

use common::*;
use serde_json::json;

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
            after.value("fhircluster_restarts_total", &[("process", p)]),
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
    let admin = free_port();
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "queueSeconds": 0, "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
            "upstreamTimeoutSeconds": 1
        } } }))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
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
