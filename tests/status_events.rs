//! Cluster events across a master restart and a launcher restart (spec "The daily report"):
//! an event that happens while the master is down waits and arrives when it is ready again; the
//! events still waiting when the launcher stops with the master down are kept in the outbox
//! (`databases/fhircluster.db`) and arrive at the next launcher's master (DEC-26: the spec's
//! EVENT-18 states the opposite as a limit of cluster.js); no event arrives twice. A master
//! alive but not reading its channel loses nothing either: events and worker counts wait until
//! it reads again (issue 20 item 4, DEC-18).

use crate::common;

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
    // spec: EVENT-1, EVENT-2, EVENT-4, EVENT-5, EVENT-13, EVENT-15, EVENT-17, DEC-18, DEC-26
    // (DEC-26: kept across the launcher's stop, where the spec's EVENT-18 loses them)
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

/// The events' ids, each once, or the first id seen twice.
fn unique_ids(ev: &[Value]) -> Result<BTreeSet<u64>, u64> {
    let mut seen = BTreeSet::new();
    for id in ev.iter().filter_map(|e| e["id"].as_u64()) {
        if !seen.insert(id) {
            return Err(id);
        }
    }
    Ok(seen)
}

/// A master that stops reading its channel while workers exit and send counts fast enough to
/// fill its queue, then reads again: every event arrives once, and every request tx1 answered
/// is in the counts the master got.
fn a_master_not_reading_loses_nothing(master_protocol: &str) {
    let mut c = cluster()
        .workers(2)
        .env("SIM_COUNTS_SECONDS", "0.01")
        .env("SIM_PROTOCOL_m0", master_protocol)
        .config(json!({"server": {"cluster": {"recycleSeconds": 0}}}))
        .start();
    poll(
        "launcherStarted at the master",
        Duration::from_secs(10),
        || {
            events(&c)
                .iter()
                .any(|e| e["kind"] == "launcherStarted")
                .then_some(())
        },
    );
    assert_eq!(
        c.direct(0, "POST", "/sim/channel?pause=120").status,
        200,
        "the sim's pause knob"
    );
    // Its queue fills (worker counts, ~200 a second), then tx2 is killed three times and tx1
    // answers requests: all of it must wait for the master, none of it dropped.
    poll(
        "the launcher finding the master's queue full",
        Duration::from_secs(60),
        || (count(&c, "queue is full") > 0).then_some(()),
    );
    let mut killed = Vec::new();
    for n in 1..=3 {
        let pid = c.sim_pid(2).expect("tx2 pid");
        unsafe_kill(pid, 9);
        killed.push(pid);
        c.wait_for_nth("tx2: ready", n + 1, Duration::from_secs(30));
        for _ in 0..20 {
            assert_eq!(c.get("/r4/CodeSystem/$lookup?system=x&code=y").status, 200);
        }
    }
    let exits_seen = |ev: &[Value]| {
        killed
            .iter()
            .filter(|pid| has_exit(ev, "tx2", **pid))
            .count()
    };
    assert_eq!(
        exits_seen(&events(&c)),
        0,
        "the paused master took events: the test proves nothing"
    );
    assert_eq!(c.direct(0, "POST", "/sim/channel?pause=0").status, 200);
    let tx1_answered = answered_by(&c, "tx1");
    assert!(tx1_answered > 0, "tx1 answered nothing");
    let got = poll(
        "every exit and every tx1 request at the master",
        Duration::from_secs(60),
        || {
            let received = c.direct(0, "GET", "/sim/received").json();
            let counted = received["workerCounts"]["tx1"].as_u64().unwrap_or(0);
            let ev = events(&c);
            (exits_seen(&ev) == killed.len() && counted >= tx1_answered).then_some((ev, counted))
        },
    );
    // Once more, so a repeat still on its way would show.
    std::thread::sleep(Duration::from_millis(500));
    let (ev, counted) = got;
    let later = events(&c);
    assert!(later.len() >= ev.len());
    if let Err(id) = unique_ids(&later) {
        panic!("event {id} arrived twice: {later:?}");
    }
    for pid in &killed {
        let n = later
            .iter()
            .filter(|e| e["kind"] == "exit" && e["pid"].as_i64() == Some(*pid as i64))
            .count();
        assert_eq!(n, 1, "tx2's exit (pid {pid}) arrived {n} times: {later:?}");
    }
    let final_count = c.direct(0, "GET", "/sim/received").json()["workerCounts"]["tx1"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(
        final_count,
        answered_by(&c, "tx1"),
        "tx1's requests counted at the master (first seen {counted})"
    );
    c.signal(15);
    assert!(c.wait_exit(Duration::from_secs(30)).success());
}

#[test]
fn a_master_that_stops_reading_then_reads_again_gets_every_event_once_and_every_count() {
    // spec: EVENT-13, EVENT-15, EVENT-17, COUNT-3, DEC-18 (a master that acknowledges events,
    // protocol 1.1: they are deleted on its eventsReceived)
    a_master_not_reading_loses_nothing("1.1");
}

#[test]
fn a_master_that_does_not_acknowledge_loses_nothing_either() {
    // spec: EVENT-13, EVENT-15, EVENT-17, DEC-18 (protocol 1.0: deleted once the write succeeded)
    a_master_not_reading_loses_nothing("1.0");
}

/// The `counts` events kept in the outbox (`databases/fhircluster.db`), as the launcher left it.
fn counts_in_outbox(dir: &std::path::Path) -> Vec<Value> {
    let db = rusqlite::Connection::open(dir.join("databases/fhircluster.db")).expect("the outbox");
    let mut stmt = db
        .prepare("SELECT body FROM events ORDER BY id")
        .expect("events table");
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .expect("events rows");
    rows.filter_map(Result::ok)
        .filter_map(|b| serde_json::from_str::<Value>(&b).ok())
        .filter(|e| e["kind"] == "counts")
        .collect()
}

#[test]
fn what_the_front_door_counted_becomes_a_counts_event_for_the_master() {
    // spec: EVENT-6, EVENT-9, EVENT-12, EVENT-14 (the tally of the real listener into the
    // counts event the master gets; the stop closes the last minute, STOP-7)
    let mut c = cluster()
        .workers(1)
        .env("SIM_COST_EXPAND_MS", "600")
        .config(json!({ "server": { "cluster": {
            "upstreamTimeoutSeconds": 1, "writeTimeoutSeconds": 1, "maxOutstanding": 2,
            "fastLaneExtra": 0, "normalMinSlots": 0, "queueSeconds": 0.3, "recycleSeconds": 0
        } } }))
        .start();
    // The master keeps nothing from now on, so every counts event stays in the outbox for the
    // test to read (a minute tick included, should one fall in the test).
    assert_eq!(c.direct(0, "POST", "/sim/channel?pause=120").status, 200);
    // EVENT-6: two 504s.
    let mut timeouts = 0u64;
    for _ in 0..2 {
        let r = c.get("/r4/CodeSystem/$lookup?system=x&code=y&_sim_hang=1");
        assert_eq!(r.status, 504, "{r:?}");
        timeouts += 1;
    }
    // EVENT-9: a surge past 4 slots of 600 ms requests; some wait longer than queueSeconds.
    // (Statuses are only 200, 503 and 504, counted below.)
    let addr = c.addr();
    let statuses = in_parallel(12, move |_| {
        request(addr, "GET", "/r4/ValueSet/$expand?url=x", &[], b"")
    });
    let queue_refusals = statuses
        .iter()
        .filter(|r| r.status == 503 && r.served_by().is_empty())
        .count() as u64;
    assert!(
        queue_refusals >= 2,
        "too few refusals to count: {statuses:?}"
    );
    assert!(
        statuses.iter().all(|r| [200, 503, 504].contains(&r.status)),
        "{statuses:?}"
    );
    // Requests that got a slot but ran past upstreamTimeoutSeconds count as 504s too.
    timeouts += statuses.iter().filter(|r| r.status == 504).count() as u64;
    // EVENT-12: a client that takes none of a large tx response.
    let mut conn = Conn::open(c.addr()).expect("connect");
    conn.send("GET", "/r4/metadata?_sim_large_mb=32", &[], b"", false)
        .expect("send");
    let needle = "closed: the client took none of its response";
    c.wait_for_count(needle, 1, Duration::from_secs(10));
    drop(conn);
    // The stop closes the minute: the counts event goes to the master, which keeps nothing, so
    // it waits in the outbox.
    c.signal(15);
    assert!(c.wait_exit(Duration::from_secs(30)).success());
    let counts = counts_in_outbox(&c.data_dir());
    assert!(!counts.is_empty(), "no counts event in the outbox");
    let sum = |f: &dyn Fn(&Value) -> u64| counts.iter().map(f).sum::<u64>();
    let lost_504 = sum(&|e| {
        e["lost"].as_object().map_or(0, |m| {
            m.values().filter_map(|l| l["timeout504"].as_u64()).sum()
        })
    });
    assert_eq!(lost_504, timeouts, "504s lost to processes: {counts:?}");
    assert_eq!(
        sum(&|e| e["refused"]["queueWait"].as_u64().unwrap_or(0)),
        queue_refusals,
        "the launcher's queue-wait 503s: {counts:?}"
    );
    assert_eq!(
        sum(&|e| e["writeTimeoutCloses"].as_u64().unwrap_or(0)),
        1,
        "{counts:?}"
    );
    for e in &counts {
        assert!(e["from"].as_u64() < e["to"].as_u64(), "an interval: {e}");
    }
}
