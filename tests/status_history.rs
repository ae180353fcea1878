//! The graph history the master receives (spec "Graphs"): samples every `stats.sampleSeconds`
//! with their own timestamps, a gap marker where a worker restarted with its earlier points kept,
//! and the memory Total; the whole history again when the master itself comes back.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

fn history(c: &Cluster) -> Value {
    c.direct(0, "GET", "/sim/received").json()["history"].clone()
}

fn points(h: &Value, code: &str) -> Vec<Value> {
    h["processes"]
        .as_array()
        .and_then(|s| s.iter().find(|p| p["code"] == code))
        .and_then(|p| p["points"].as_array().cloned())
        .unwrap_or_default()
}

fn samples(points: &[Value]) -> usize {
    points.iter().filter(|p| p["kind"] == "sample").count()
}

#[test]
fn a_restarted_worker_leaves_a_gap_and_keeps_its_earlier_points() {
    // spec: GRAPH-1, GRAPH-2, GRAPH-3, GRAPH-4, GRAPH-9, GRAPH-10, DEC-17
    let mut c = cluster()
        .workers(2)
        .config(
            json!({"stats": {"sampleSeconds": 1}, "server": {"cluster": {"recycleSeconds": 0}}}),
        )
        .start();
    let before = poll("three samples from tx1", Duration::from_secs(10), || {
        let p = points(&history(&c), "tx1");
        (samples(&p) >= 3).then_some(p)
    });
    let h = history(&c);
    assert_eq!(h["sampleIntervalMs"], 1000, "{h}");
    // GRAPH-3: each sample keeps the time the process took it, a second apart.
    let ats: Vec<u64> = before.iter().filter_map(|p| p["at"].as_u64()).collect();
    for w in ats.windows(2) {
        assert!(
            (500..=1600).contains(&(w[1] - w[0])),
            "sample times {ats:?}"
        );
    }
    assert!(
        before
            .iter()
            .all(|p| p["rssAnon"].as_u64().is_some_and(|r| r > 0)),
        "{before:?}"
    );

    let old_pid = c.sim_pid(1).expect("tx1 pid");
    unsafe_kill(old_pid, 9);
    c.wait_for_nth("tx1: ready", 2, Duration::from_secs(15));
    let after = poll(
        "two samples from the new tx1",
        Duration::from_secs(10),
        || {
            let p = points(&history(&c), "tx1");
            let gap = p.iter().position(|x| x["kind"] == "gap")?;
            (samples(&p[gap..]) >= 2).then_some(p)
        },
    );
    // GRAPH-4: the earlier points are all still there, then one gap, then the new process's.
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "the earlier points are kept"
    );
    let gaps: Vec<usize> = after
        .iter()
        .enumerate()
        .filter(|(_, p)| p["kind"] == "gap")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(gaps.len(), 1, "{after:?}");
    let gap_at = after[gaps[0]]["at"].as_u64().unwrap_or(0);
    let last_before = after[..gaps[0]]
        .iter()
        .filter_map(|p| p["at"].as_u64())
        .max()
        .unwrap_or(0);
    let first_after = after[gaps[0] + 1]["at"].as_u64().unwrap_or(0);
    assert!(last_before <= gap_at && gap_at <= first_after, "{after:?}");

    // GRAPH-10: the legend state is live again; GRAPH-9: the memory Total has points.
    let h = history(&c);
    let tx1 = h["processes"]
        .as_array()
        .and_then(|s| s.iter().find(|p| p["code"] == "tx1"))
        .cloned();
    assert_eq!(tx1.map(|t| t["state"].clone()), Some(json!("live")));
    let totals = h["memoryTotal"].as_array().cloned().unwrap_or_default();
    assert!(
        totals.len() >= 2
            && totals
                .iter()
                .all(|t| t["bytes"].as_u64().is_some_and(|b| b > 0)),
        "{totals:?}"
    );

    // DEC-17: a master that comes back gets the whole history once, the gap included.
    let m0 = c.sim_pid(0).expect("m0 pid");
    unsafe_kill(m0, 9);
    c.wait_for_nth("m0: ready", 2, Duration::from_secs(15));
    let h = poll(
        "the whole history at the new master",
        Duration::from_secs(10),
        || {
            let h = history(&c);
            (h["append"] == false).then_some(h)
        },
    );
    let whole = points(&h, "tx1");
    assert_eq!(&whole[..after.len()], &after[..], "{h}");
    assert!(
        h["totals"].as_array().is_some_and(|t| !t.is_empty()),
        "GRAPH-11 totals: {h}"
    );

    c.signal(15);
    assert!(c.wait_exit(Duration::from_secs(20)).success());
}
