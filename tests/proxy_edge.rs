//! The front door's edges that the other proxy tests don't reach: it imposes no limits of its
//! own on what clients send (EDGE-5), and its own refusals stay out of the graphs' refusal
//! counts, which are the memory guard's alone (QUEUE-18).

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

#[test]
fn a_large_body_passes_whole_with_no_limit_of_the_launchers_own() {
    // spec: EDGE-5 (nginx in front sets client_max_body_size; the launcher passes what comes)
    let c = cluster().workers(1).start();
    let body = vec![b'x'; 24 * 1024 * 1024];
    let r = c.request(
        "POST",
        "/r4/ValueSet/$expand",
        &[("Content-Type", "application/fhir+json")],
        &body,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("x-sim-body-length"),
        Some(body.len().to_string().as_str()),
        "the process got the whole body"
    );
    // A long header line too (well under hyper's own parse limits).
    let long = "a".repeat(8 * 1024);
    let r = c.request("GET", "/r4/metadata", &[("X-Long", &long)], b"");
    assert_eq!(r.status, 200);
}

#[test]
fn the_launchers_own_refusals_are_not_in_the_graphs_refusal_counts() {
    // spec: QUEUE-18
    let c = cluster()
        .workers(1)
        .env("SIM_COST_EXPAND_MS", "300")
        .config(json!({
            "server": { "cluster": {
                "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0, "queueSeconds": 0,
                "masterServesTx": false
            } },
            "stats": { "sampleSeconds": 1 }
        }))
        .start();
    let addr = c.addr();
    let statuses = in_parallel(12, move |_| {
        request(addr, "GET", "/r4/ValueSet/$expand?url=x", &[], b"").status
    });
    let refused = statuses.iter().filter(|&&s| s == 503).count();
    assert!(refused >= 5, "the launcher refused too few: {statuses:?}");
    // Samples taken over the next seconds reach the master; none counts a launcher refusal.
    std::thread::sleep(Duration::from_millis(3500));
    let got = c.get("/sim/received").json();
    let series = got["history"]["processes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let points: Vec<serde_json::Value> = series
        .iter()
        .flat_map(|s| s["points"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["kind"] == "sample")
        .collect();
    assert!(points.len() >= 2, "too few samples: {got}");
    let guard_refusals: u64 = points.iter().filter_map(|p| p["refusals"].as_u64()).sum();
    assert_eq!(
        guard_refusals, 0,
        "launcher refusals leaked into the graphs: {got}"
    );
}
