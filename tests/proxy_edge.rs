//! The front door's edges that the other proxy tests don't reach: the few limits of its own it
//! keeps on clients, DEC-31 (it departs from EDGE-5 there and nowhere
//! else), and its own refusals stay out of the graphs' refusal counts, which are the memory
//! guard's alone (QUEUE-18).

use crate::common;

use std::io::Write;
use std::time::Duration;

use common::*;
use serde_json::json;

#[test]
fn the_launchers_own_limits_on_clients_are_only_those_it_decided_on() {
    // spec: DEC-31 (the launcher's own limits on clients; the departure from EDGE-5)
    // What a request carries passes whole (nginx in front sets client_max_body_size)...
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "headerTimeoutSeconds": 1 } } }))
        .start();
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
    // A long header line too (well under the head cap).
    let long = "a".repeat(8 * 1024);
    let r = c.request("GET", "/r4/metadata", &[("X-Long", &long)], b"");
    assert_eq!(r.status, 200);

    // ... and the limits it keeps are these: a head over its cap, or with too many headers, is
    // 431 from the launcher itself;
    let huge = "a".repeat(1 << 20);
    let r = c.request("GET", "/r4/metadata", &[("X-Long", &huge)], b"");
    assert_eq!((r.status, r.served_by()), (431, ""), "a 1 MB head");
    let many: Vec<(String, String)> = (0..150)
        .map(|i| (format!("X-H{i}"), "a".to_string()))
        .collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let r = c.request("GET", "/r4/metadata", &many, b"");
    assert_eq!((r.status, r.served_by()), (431, ""), "150 headers");
    // a target it can't route is 400, not a guess;
    let r = c.get("/r4/CodeSystem/%zz");
    assert_eq!((r.status, r.served_by()), (400, ""), "bad percent-encoding");
    // a head not whole within headerTimeoutSeconds (1) is cut off.
    let mut slow = Conn::open(c.addr()).expect("connect");
    slow.stream
        .write_all(b"GET /r4/metadata HTTP/1.1\r\n")
        .expect("send");
    let (_, ended) = slow.drain(Duration::from_secs(8));
    assert!(ended, "a head left unfinished was never cut off");
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
