//! Tests of a place's second row in the snapshot (DEC-92, DEC-93).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::super::tests::{own_cgroup, process, run, GB, MB};
use super::super::{ProcMemory, Reading};
use super::{Beside, BesideState};

#[test]
fn a_place_with_a_replacement_beside_its_process_has_two_rows_counted_once() {
    // spec: DEC-92, DEC-93
    let now = Instant::now();
    let mut ps = vec![process(now, 0), process(now, 1), process(now, 2)];
    ps[1].restarts = 2;
    let beside = Beside {
        state: BesideState::Starting,
        pid: Some(2001),
        started_at: Some(now - Duration::from_secs(3)),
        replacement: true,
    };
    let memory: Reading<ProcMemory> = Ok(ProcMemory {
        rss_anon: GB,
        rss_file: MB,
    });
    ps[1].beside = Some((beside, memory.clone()));
    ps[2].inputs_waiting = true;
    let v = run(&ps, own_cgroup(), now);
    let rows = v["processes"].as_array().expect("rows");
    let codes: Vec<&str> = rows.iter().filter_map(|r| r["code"].as_str()).collect();
    assert_eq!(codes, ["m0", "tx1", "tx1", "tx2"], "{v:#}");
    let (old, new) = (&rows[1], &rows[2]);
    assert_eq!(
        (
            &old["status"],
            &old["pid"],
            &old["beside"],
            &old["replacement"]
        ),
        (&json!("ready"), &json!(1001), &json!(false), &json!(false))
    );
    assert_eq!(
        (
            &new["status"],
            &new["pid"],
            &new["beside"],
            &new["replacement"]
        ),
        (&json!("starting"), &json!(2001), &json!(true), &json!(true))
    );
    assert_eq!(new["uptimeMs"], 3000);
    assert_eq!(new["rssAnon"], GB);
    // Every spec field on the beside row too, null where it doesn't apply.
    for key in old.as_object().expect("a row").keys() {
        assert!(new.get(key).is_some(), "{key} missing: {new}");
    }
    assert_eq!(
        new["restarts"],
        Value::Null,
        "the place's restarts on its row only"
    );
    assert_eq!(v["totals"]["restarts"], 2, "{v:#}");
    assert_eq!(
        v["totals"]["heapCount"], 3,
        "its figures are not counted: {v:#}"
    );
    assert_eq!(
        v["memory"]["processAnon"],
        7 * GB,
        "the memory both processes hold is there: {v:#}"
    );
    assert_eq!(rows[3]["inputsWaiting"], true);
    assert_eq!(rows[0]["inputsWaiting"], false);

    // After the switch: the place's process is the replacement, the old one drains beside it.
    ps[1].beside = Some((
        Beside {
            state: BesideState::Draining,
            replacement: false,
            ..beside
        },
        memory,
    ));
    let v = run(&ps, own_cgroup(), now);
    let rows = &v["processes"];
    assert_eq!(
        (
            &rows[1]["replacement"],
            &rows[2]["status"],
            &rows[2]["replacement"]
        ),
        (&json!(true), &json!("draining"), &json!(false))
    );
}
