//! Tests of the graph history, by spec ID.

use super::*;
use serde_json::json;

const MIN: u64 = 60_000;
const T0: u64 = 1_700_000_000_000;

fn history() -> History {
    History::new(Duration::from_secs(60), false)
}

fn sample(at: u64, requests: u64, caches: Option<u64>) -> Sample {
    Sample {
        at,
        requests,
        client_caches: caches,
        client_concepts: caches.map(|c| c * 10),
        refusals: 0,
        heap_used: Some(5),
        turnaround_ms: Some(4.5),
    }
}

fn points(h: &History, code: &str) -> Vec<Value> {
    let v = h.to_json(T0);
    v["processes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["code"] == code))
        .and_then(|p| p["points"].as_array().cloned())
        .unwrap_or_default()
}

fn kinds(h: &History, code: &str) -> Vec<String> {
    points(h, code)
        .iter()
        .map(|p| p["kind"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[test]
fn a_history_with_nothing_kept_starts_empty() {
    // spec: DEC-26 (empty only with nothing kept: a first start, or no database; a restart
    // restores the kept history, below, where the spec's GRAPH-8 starts with none)
    let v = history().to_json(T0);
    assert_eq!(v["processes"], json!([]));
    assert_eq!(v["memoryTotal"], json!([]));
    assert_eq!(v["append"], false);
}

#[test]
fn samples_keep_their_own_time_and_the_rss_read_with_them() {
    // spec: GRAPH-1, GRAPH-2, GRAPH-3
    let mut h = history();
    h.process_ready("m0", "master", T0);
    h.process_ready("tx1", "tx-worker", T0);
    let d = h.record_sample(
        "tx1",
        "tx-worker",
        &sample(T0 + 1234, 7, Some(2)),
        Some(99),
        T0,
    );
    assert_eq!(d["append"], true);
    assert_eq!(d["processes"][0]["points"][0]["at"], T0 + 1234);
    h.record_sample("m0", "master", &sample(T0 + 5, 3, None), None, T0);
    let p = points(&h, "tx1");
    assert_eq!(
        p[0],
        json!({"kind": "sample", "at": T0 + 1234, "requests": 7, "clientCaches": 2,
               "clientConcepts": 20, "refusals": 0, "heapUsed": 5, "turnaroundMs": 4.5,
               "rssAnon": 99})
    );
    assert_eq!(points(&h, "m0").len(), 1);
    // A repeat of the same sample is not a new point.
    h.record_sample(
        "tx1",
        "tx-worker",
        &sample(T0 + 1234, 7, Some(2)),
        Some(99),
        T0,
    );
    assert_eq!(points(&h, "tx1").len(), 1);
}

#[test]
fn a_restart_leaves_a_gap_and_keeps_the_earlier_history() {
    // spec: GRAPH-4
    let mut h = history();
    h.process_ready("tx1", "tx-worker", T0);
    h.record_sample("tx1", "tx-worker", &sample(T0, 1, None), None, T0);
    h.record_sample(
        "tx1",
        "tx-worker",
        &sample(T0 + MIN, 1, None),
        None,
        T0 + MIN,
    );
    let d = h.process_restarting("tx1", "tx-worker", T0 + MIN + 10);
    assert_eq!(
        d["processes"][0]["points"],
        json!([{"kind": "gap", "at": T0 + MIN + 10}])
    );
    assert_eq!(d["processes"][0]["state"], "restarting");
    // A second exit before it was ready again adds no second gap.
    h.process_restarting("tx1", "tx-worker", T0 + MIN + 20);
    h.process_starting("tx1", "tx-worker", T0 + MIN + 30);
    h.process_ready("tx1", "tx-worker", T0 + MIN + 40);
    h.record_sample(
        "tx1",
        "tx-worker",
        &sample(T0 + 5 * MIN, 1, None),
        None,
        T0 + 5 * MIN,
    );
    assert_eq!(kinds(&h, "tx1"), ["sample", "sample", "gap", "sample"]);
}

#[test]
fn a_skipped_interval_leaves_a_gap() {
    // spec: GRAPH-5
    let mut h = history();
    h.record_sample("tx1", "tx-worker", &sample(T0, 1, None), None, T0);
    // A little late is not a skip.
    h.record_sample(
        "tx1",
        "tx-worker",
        &sample(T0 + MIN + 20_000, 1, None),
        None,
        T0,
    );
    assert_eq!(kinds(&h, "tx1"), ["sample", "sample"]);
    let d = h.record_sample("tx1", "tx-worker", &sample(T0 + 3 * MIN, 1, None), None, T0);
    assert_eq!(kinds(&h, "tx1"), ["sample", "sample", "gap", "sample"]);
    assert_eq!(d["processes"][0]["points"][0]["kind"], "gap");
    assert_eq!(d["processes"][0]["points"][1]["kind"], "sample");
}

#[test]
fn keeps_twenty_four_hours() {
    // spec: GRAPH-6
    let mut h = history();
    for i in 0..30 {
        h.record_sample(
            "m0",
            "master",
            &sample(T0 + i * MIN, 1, None),
            None,
            T0 + i * MIN,
        );
    }
    let day_later = T0 + KEEP_MS + 10 * MIN;
    h.prune(day_later);
    let p = points(&h, "m0");
    assert_eq!(p.len(), 20);
    assert_eq!(p[0]["at"], T0 + 10 * MIN);
}

#[test]
fn at_most_1440_points_gaps_included() {
    // spec: GRAPH-7
    let mut h = History::new(Duration::from_secs(10), false);
    let step = 10_000;
    for i in 0..2000u64 {
        let at = T0 + i * step;
        h.record_sample("tx1", "tx-worker", &sample(at, 1, None), None, at);
        if i % 100 == 50 {
            h.process_restarting("tx1", "tx-worker", at + 1);
        }
    }
    let p = points(&h, "tx1");
    assert_eq!(p.len(), MAX_POINTS);
    assert!(p.iter().any(|p| p["kind"] == "gap"));
    assert_ne!(p[0]["kind"], "gap", "a leading gap means nothing");
    // 1,440 ten-second samples cover 4 hours, not 24.
    let last = p.last().map(|p| p["at"].as_u64().unwrap_or(0)).unwrap_or(0);
    assert_eq!(last, T0 + 1999 * step);
}

#[test]
fn the_memory_total_is_the_cgroup_or_the_processes_summed() {
    // spec: GRAPH-9
    assert_eq!(memory_total(Some(7), &[Some(1), Some(2)]), Some(7));
    assert_eq!(memory_total(None, &[Some(1), None, Some(2)]), Some(3));
    assert_eq!(memory_total(None, &[None]), None);
    let mut h = history();
    let d = h.record_memory_total(T0, Some(42), T0);
    assert_eq!(d["memoryTotal"], json!([{"at": T0, "bytes": 42}]));
    assert_eq!(
        h.to_json(T0)["memoryTotal"],
        json!([{"at": T0, "bytes": 42}])
    );
}

#[test]
fn legend_states() {
    // spec: GRAPH-10
    let mut h = history();
    h.process_starting("tx1", "tx-worker", T0);
    assert_eq!(h.legend("tx1", T0), Some(Legend::Starting));
    h.process_ready("tx1", "tx-worker", T0);
    assert_eq!(h.legend("tx1", T0 + MIN), Some(Legend::Live));
    assert_eq!(h.legend("tx1", T0 + 3 * MIN), Some(Legend::NoRecentSample));
    h.record_sample("tx1", "tx-worker", &sample(T0 + 3 * MIN, 1, None), None, T0);
    assert_eq!(h.legend("tx1", T0 + 4 * MIN), Some(Legend::Live));
    h.process_restarting("tx1", "tx-worker", T0 + 4 * MIN);
    assert_eq!(h.legend("tx1", T0 + 4 * MIN), Some(Legend::Restarting));
    h.process_unavailable("tx1", "tx-worker", T0 + 5 * MIN);
    assert_eq!(h.legend("tx1", T0 + 5 * MIN), Some(Legend::Unavailable));
    assert_eq!(
        h.to_json(T0 + 5 * MIN)["processes"][0]["state"],
        "unavailable"
    );
    assert_eq!(h.legend("tx9", T0), None);
}

#[test]
fn totals_are_summed_per_interval() {
    // spec: GRAPH-11
    let mut h = history();
    h.record_sample("m0", "master", &sample(T0 + 1_000, 3, Some(2)), None, T0);
    h.record_sample(
        "tx1",
        "tx-worker",
        &sample(T0 + 9_000, 4, Some(5)),
        None,
        T0,
    );
    h.record_sample(
        "tx1",
        "tx-worker",
        &sample(T0 + MIN + 9_000, 6, None),
        None,
        T0,
    );
    let t = &h.to_json(T0)["totals"];
    let base = T0 - T0 % MIN;
    assert_eq!(
        t,
        &json!([
            {"at": base, "requests": 7, "clientCaches": 7, "clientConcepts": 70},
            {"at": base + MIN, "requests": 6, "clientCaches": null, "clientConcepts": null},
        ])
    );
}

#[test]
fn with_a_shared_cache_the_client_cache_total_counts_it_once() {
    // spec: GRAPH-12
    let mut h = History::new(Duration::from_secs(60), true);
    h.record_sample("m0", "master", &sample(T0, 3, Some(9)), None, T0);
    h.record_sample("tx1", "tx-worker", &sample(T0 + 1, 4, Some(10)), None, T0);
    let t = &h.to_json(T0)["totals"][0];
    assert_eq!(t["requests"], 7);
    assert_eq!(t["clientCaches"], 9, "the master's count of the one store");
    assert_eq!(h.to_json(T0)["sharedCache"], true);
}

#[test]
fn a_saved_history_comes_back_with_a_gap() {
    // spec: DEC-26 (history kept across a launcher restart)
    let mut h = history();
    h.process_ready("tx1", "tx-worker", T0);
    h.record_sample("tx1", "tx-worker", &sample(T0, 1, None), Some(5), T0);
    h.record_memory_total(T0, Some(8), T0);
    let saved = h.to_json(T0);
    let back = History::restore_json(&saved, false, T0 + MIN);
    let back = back.map(|b| b.to_json(T0 + MIN)).unwrap_or_default();
    assert_eq!(
        back["processes"][0]["points"][1],
        json!({"kind": "gap", "at": T0 + MIN})
    );
    assert_eq!(back["processes"][0]["state"], "unavailable");
    assert_eq!(back["memoryTotal"], json!([{"at": T0, "bytes": 8}]));
    assert!(History::restore_json(&json!({"x": 1}), false, T0).is_none());
}

#[test]
fn a_sample_keeps_the_in_flight_it_came_with_and_leaves_it_out_when_not_known() {
    // The admin status page's In flight graph; a saved history without it reads the same.
    let mut h = history();
    h.record_sample_with(
        "tx1",
        "tx-worker",
        &sample(T0 - 2 * MIN, 1, None),
        None,
        Some(3),
        T0,
    );
    h.record_sample_with(
        "tx1",
        "tx-worker",
        &sample(T0 - MIN, 1, None),
        None,
        None,
        T0,
    );
    let p = points(&h, "tx1");
    assert_eq!(p[0]["inFlight"], 3, "{p:?}");
    assert!(p[1].get("inFlight").is_none(), "{p:?}");
    let back = History::restore_json(&h.to_json(T0), false, T0).expect("restored");
    assert_eq!(points(&back, "tx1")[..2], p[..], "read back the same");
}

#[test]
fn the_typed_saved_history_writes_what_the_json_did_and_reads_as_leniently() {
    // #28: the history is typed (`saved.rs`) for the upgrade's state; the master's JSON is the
    // same, and what a restore doesn't go by (the legend, the totals, sharedCache, append) may
    // be anything a later program writes.
    let mut h = history();
    h.process_ready("tx1", "tx-worker", T0);
    h.record_sample("tx1", "tx-worker", &sample(T0, 1, Some(4)), Some(5), T0);
    let v = h.to_json(T0);
    assert_eq!(
        serde_json::to_value(h.saved(T0)).expect("json"),
        v,
        "typed and JSON the same"
    );
    let keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "append",
            "memoryTotal",
            "processes",
            "sampleIntervalMs",
            "sharedCache",
            "totals"
        ]
    );
    let mut later = v.clone();
    later["processes"][0]["state"] = json!("hibernating");
    later["totals"] = json!("not a list");
    later["append"] = json!(null);
    later["somethingNew"] = json!({"a": 1});
    let back = History::restore_json(&later, false, T0 + MIN).expect("restored");
    assert_eq!(points(&back, "tx1")[0], points(&h, "tx1")[0]);
}
