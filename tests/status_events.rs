//! Cluster events across a master restart and a launcher restart (spec "The daily report"):
//! an event that happens while the master is down waits and arrives when it is ready again; the
//! events still waiting when the launcher stops with the master down are kept in the outbox
//! (`databases/fhircluster.db`) and arrive at the next launcher's master; no event arrives twice.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

fn events(c: &Cluster) -> Vec<Value> {
    c.direct(0, "GET", "/sim/received").json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn count(c: &Cluster, needle: &str) -> usize {
    c.log_lines().iter().filter(|l| l.contains(needle)).count()
}

fn wait_count(c: &Cluster, needle: &str, n: usize) {
    poll(
        &format!("{n} lines with {needle:?}"),
        Duration::from_secs(15),
        || (count(c, needle) >= n).then_some(()),
    );
}

fn has_exit(ev: &[Value], code: &str, pid: i32) -> bool {
    ev.iter()
        .any(|e| e["kind"] == "exit" && e["code"] == code && e["pid"].as_i64() == Some(pid as i64))
}

#[test]
fn held_events_arrive_after_a_master_and_a_launcher_restart_and_none_twice() {
    // spec: EVENT-1, EVENT-2, EVENT-4, EVENT-5, EVENT-13, EVENT-15, EVENT-17, EVENT-18, DEC-18
    let c = cluster()
        .workers(2)
        .config(json!({"server": {"cluster": {"recycleSeconds": 0}}}))
        .start();
    let launcher1 = c.child.id() as i64;
    let master_a = c.sim_pid(0).expect("m0 pid");
    let tx1 = c.sim_pid(1).expect("tx1 pid");
    let tx2 = c.sim_pid(2).expect("tx2 pid");
    let a = poll(
        "launcherStarted at the first master",
        Duration::from_secs(5),
        || {
            let ev = events(&c);
            ev.iter()
                .any(|e| e["kind"] == "launcherStarted")
                .then_some(ev)
        },
    );
    assert_eq!(a[0]["pid"].as_i64(), Some(launcher1), "{a:?}");

    // The master dies, and tx1 exits while it is down: both exits wait for the next master.
    unsafe_kill(master_a, 9);
    unsafe_kill(tx1, 9);
    wait_count(&c, "m0: ready", 2);
    wait_count(&c, "tx1: ready", 2);
    let b = poll(
        "the held exits at the second master",
        Duration::from_secs(10),
        || {
            let ev = events(&c);
            let unavailable = |code: &str| {
                ev.iter()
                    .any(|e| e["kind"] == "unavailable" && e["code"] == code)
            };
            (has_exit(&ev, "m0", master_a)
                && has_exit(&ev, "tx1", tx1)
                && unavailable("m0")
                && unavailable("tx1"))
            .then_some(ev)
        },
    );
    let master_b = c.sim_pid(0).expect("m0 pid");
    assert_ne!(master_b, master_a);

    // The second master dies, tx2 exits, and the launcher stops before the master is back.
    unsafe_kill(master_b, 9);
    wait_count(&c, "m0: exited", 2);
    unsafe_kill(tx2, 9);
    wait_count(&c, "tx2: exited", 1);
    c.signal(15);
    let mut c = c;
    let st = c.wait_exit(Duration::from_secs(20));
    assert!(st.success(), "{st:?}");
    assert_eq!(
        count(&c, "m0: started"),
        2,
        "the launcher started the master again before it stopped; the test needs it down:\n{}",
        c.log_lines().join("\n")
    );
    assert!(c.data_dir().join("databases/fhircluster.db").exists());

    // A new launcher on the same data directory: the held events reach its master.
    let mut c = c.relaunch(&[]);
    c.wait_for("m0: ready", Duration::from_secs(20));
    let launcher2 = c.child.id() as i64;
    let held = |ev: &[Value]| has_exit(ev, "m0", master_b) && has_exit(ev, "tx2", tx2);
    let started = |ev: &[Value]| {
        ev.iter()
            .any(|e| e["kind"] == "launcherStarted" && e["pid"].as_i64() == Some(launcher2))
    };
    let mut cc = Vec::new();
    assert!(
        eventually(Duration::from_secs(10), || {
            cc = events(&c);
            held(&cc) && started(&cc)
        }),
        "the exits of m0 (pid {master_b}) and tx2 (pid {tx2}) held by the launcher before never \
         arrived: {cc:?}\nfirst run's events: {a:?} {b:?}"
    );
    assert!(started(&cc), "EVENT-1 for the new launcher: {cc:?}");

    // No event arrives twice, within a master or across the three; ids keep increasing.
    let mut seen = BTreeSet::new();
    for (name, ev) in [("first", &a), ("second", &b), ("third", &cc)] {
        let ids: Vec<u64> = ev.iter().filter_map(|e| e["id"].as_u64()).collect();
        assert_eq!(ids.len(), ev.len(), "every event has an id: {ev:?}");
        for w in ids.windows(2) {
            assert!(w[0] < w[1], "{name} master: ids out of order {ids:?}");
        }
        for id in ids {
            assert!(
                seen.insert(id),
                "event {id} arrived twice (again at the {name} master)"
            );
        }
    }
    assert_eq!(
        [&a, &b, &cc]
            .iter()
            .map(|ev| ev.iter().filter(|e| e["kind"] == "launcherStarted").count())
            .sum::<usize>(),
        2,
        "one launcherStarted per launcher"
    );

    c.signal(15);
    assert!(c.wait_exit(Duration::from_secs(20)).success());
}
