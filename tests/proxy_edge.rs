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
fn the_launchers_own_refusals_are_not_in_the_graphs_refusal_counts_the_guards_are() {
    // spec: QUEUE-18 (with a positive control: the memory guard's own refusals do count)
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
    // The positive control: tx1's own memory-guard refusals (the sim's knob) must show up in
    // the graphs, each once, and the launcher's refusals above must not.
    assert_eq!(c.direct(1, "POST", "/sim/refuse?on=1").status, 200);
    let mut guard_refused = 0u64;
    for _ in 0..6 {
        let r = c.get("/r4/CodeSystem/$lookup?system=x&code=y");
        assert_eq!(r.status, 503, "{r:?}");
        assert_eq!(r.served_by(), "tx1", "a refusal by tx1 itself: {r:?}");
        guard_refused += 1;
    }
    assert_eq!(c.direct(1, "POST", "/sim/refuse?on=0").status, 200);
    let graphs_refusals = |got: &serde_json::Value| -> u64 {
        let series = got["history"]["processes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        series
            .iter()
            .flat_map(|s| s["points"].as_array().cloned().unwrap_or_default())
            .filter(|p| p["kind"] == "sample")
            .map(|p| {
                p["refusals"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("a sample without refusals: {p}"))
            })
            .sum()
    };
    poll(
        "tx1's refusals in the graphs",
        Duration::from_secs(15),
        || {
            let got = c.get("/sim/received").json();
            (graphs_refusals(&got) >= guard_refused).then_some(())
        },
    );
    // One more sample, so anything counted late would show.
    std::thread::sleep(Duration::from_millis(1500));
    let got = c.get("/sim/received").json();
    assert_eq!(
        graphs_refusals(&got),
        guard_refused,
        "the graphs' refusals are the memory guard's {guard_refused}, without the launcher's \
         {refused}: {got}"
    );
}
