//! The memory recycle on a real kernel (spec "Memory"): the launcher runs inside a child memory
//! cgroup with a 400 MB limit (v1 `memory.limit_in_bytes` or v2 `memory.max`, whichever the host
//! has); one worker allocates past the refusal threshold (0.85 × limit) and is recycled after
//! `recycleSeconds`, the master never, the other worker untouched. Needs root and a memory
//! controller: where they are missing the test fails saying so.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const MB: u64 = 1024 * 1024;
const LIMIT: u64 = 400 * MB;

fn events_of(c: &Cluster) -> Vec<Value> {
    c.direct(0, "GET", "/sim/received").json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_worker_over_the_cgroup_threshold_is_recycled_and_nothing_else() {
    // spec: RECYCLE-1, RECYCLE-4, RECYCLE-5, RECYCLE-6, RECYCLE-7, RECYCLE-13, RECYCLE-14,
    // spec: MEM-1, MEM-3, MEM-4, MEM-6, STATUS-3, STATUS-7, DEC-5, DEC-25, EVENT-3, EVENT-4
    let group = MemCgroup::for_test("recycle", Some(LIMIT));
    let mut c = cluster()
        .workers(2)
        .config(json!({"server": {"cluster": {"recycleSeconds": 2, "drainSeconds": 5}}}))
        .start_wrapped(&group.wrapper());

    // MEM-6: the launcher and every process it started are in the group.
    let launcher = c.child.id() as i32;
    let mut in_group = group.pids();
    in_group.sort();
    for pid in std::iter::once(launcher).chain(c.child_pids()) {
        assert!(
            in_group.contains(&pid),
            "pid {pid} not in {}: {in_group:?}",
            group.path.display()
        );
    }
    let pids: Vec<i32> = (0..3).map(|i| c.sim_pid(i).expect("sim pid")).collect();

    // The reader finds the group through /proc/self/cgroup and mountinfo, and its limit.
    let snap = poll(
        "a snapshot measuring the cgroup",
        Duration::from_secs(10),
        || {
            let s = c.get("/dashboard/status.json").json();
            (s["scope"] == "cluster" && !s["memory"]["cgroup"].is_null()).then_some(s)
        },
    );
    let mem = &snap["memory"];
    assert_eq!(mem["group"].as_str(), group.path.to_str(), "{mem}");
    assert_thresholds(mem, LIMIT);
    let anon = mem["cgroup"]["anon"].as_u64().unwrap_or(0);
    let kernel = group.private_memory().unwrap_or(0);
    assert!(
        anon.abs_diff(kernel) < 8 * MB,
        "snapshot anon {anon} vs memory.stat {} {kernel}",
        group.ctl.private_field()
    );
    assert!(
        !snap["missing"].to_string().contains("cgroup memory limit"),
        "the cgroup's limit is its own: {}",
        snap["missing"]
    );

    // tx1 grows past 0.85 × 400 MB = 340 MB of the cgroup.
    let r = c.direct(1, "POST", "/sim/alloc?mb=360");
    assert_eq!(r.status, 200, "alloc: {}", r.text());
    let over_at = Instant::now();
    let over = group.private_memory().unwrap_or(0);
    assert!(
        over > (LIMIT as f64 * 0.85) as u64,
        "the group is not over the threshold: {over}"
    );

    let line = c.wait_for("tx1: recycling", Duration::from_secs(15));
    let to_decision = over_at.elapsed();
    c.wait_for_nth("tx1: ready", 2, Duration::from_secs(15));
    let to_ready = over_at.elapsed();
    eprintln!(
        "recycle: decided {:.2} s after the group went over, replacement ready after {:.2} s; {line}",
        to_decision.as_secs_f64(),
        to_ready.as_secs_f64()
    );
    assert!(
        line.contains("over") || line.contains("threshold"),
        "the log says why: {line}"
    );
    // DEC-5: the clock runs recycleSeconds (2) from the first reading over; upkeep is every 1 s.
    assert!(
        to_decision >= Duration::from_millis(1900) && to_decision <= Duration::from_secs(5),
        "recycled after {to_decision:?}, recycleSeconds is 2"
    );

    // Only tx1 was replaced; its memory is gone from the group.
    let new_tx1 = poll("the new tx1", Duration::from_secs(5), || {
        c.sim_pid(1).filter(|p| *p != pids[1])
    });
    assert_ne!(new_tx1, pids[1]);
    assert_eq!(
        c.sim_pid(0),
        Some(pids[0]),
        "RECYCLE-6: the master is never recycled"
    );
    assert_eq!(c.sim_pid(2), Some(pids[2]), "tx2 is untouched");
    let after = poll(
        "the group back under the threshold",
        Duration::from_secs(5),
        || group.private_memory().filter(|r| *r < 100 * MB),
    );
    eprintln!(
        "group private memory: {} MB over, {} MB after",
        over / MB,
        after / MB
    );

    // Nothing else is recycled once the group is back under (one recycle in all), watched for
    // longer than recycleSeconds and an upkeep round.
    holds_for("one recycle in all", Duration::from_secs(3), || {
        c.count_lines(": recycling") == 1
    });

    // DEC-25, DEC-84: the recycle is counted by its reason, in the status and events; a planned
    // restart, it is not among the restarts the status counts as problems.
    let snap = poll(
        "a snapshot after the recycle",
        Duration::from_secs(5),
        || {
            let s = c.get("/dashboard/status.json").json();
            let row = s["processes"]
                .as_array()?
                .iter()
                .find(|p| p["code"] == "tx1")?
                .clone();
            (row["status"] == "ready" && row["pid"].as_i64() == Some(new_tx1 as i64)).then_some(s)
        },
    );
    let rows = snap["processes"].as_array().cloned().unwrap_or_default();
    let tx1 = rows
        .iter()
        .find(|p| p["code"] == "tx1")
        .cloned()
        .unwrap_or_default();
    assert_eq!(tx1["restartsBy"]["recycle"], 1, "{tx1}");
    assert_eq!(tx1["restarts"], 0, "{tx1}");
    assert!(
        tx1["lastRestart"].as_str().unwrap_or("").contains("recycl"),
        "the status gives the recycle's reason: {tx1}"
    );
    for code in ["m0", "tx2"] {
        let row = rows
            .iter()
            .find(|p| p["code"] == code)
            .cloned()
            .unwrap_or_default();
        assert_eq!(row["restarts"], 0, "{row}");
    }
    let events = poll(
        "the recycle and unavailable events",
        Duration::from_secs(5),
        || {
            let ev = events_of(&c);
            ev.iter()
                .any(|e| e["kind"] == "unavailable" && e["code"] == "tx1")
                .then_some(ev)
        },
    );
    let recycle: Vec<&Value> = events.iter().filter(|e| e["kind"] == "recycle").collect();
    assert_eq!(recycle.len(), 1, "{events:?}");
    assert_eq!(recycle[0]["code"], "tx1");
    assert!(
        !recycle[0]["reason"].as_str().unwrap_or("").is_empty(),
        "{events:?}"
    );
    let unavailable = events
        .iter()
        .find(|e| e["kind"] == "unavailable" && e["code"] == "tx1")
        .cloned()
        .unwrap_or_default();
    assert_eq!(unavailable["cause"], "recycle", "{unavailable}");
    assert!(unavailable["ms"].as_u64().is_some(), "{unavailable}");
    assert!(
        !events.iter().any(|e| e["kind"] == "exit"),
        "the recycle is reported as such, not also as an exit: {events:?}"
    );

    c.signal(15);
    assert!(c.wait_exit(Duration::from_secs(20)).success());
    drop(c);
    drop(group);
}

#[test]
fn a_recycled_worker_that_ignores_sigterm_gets_sigkill_after_kill_seconds_then_starts_again() {
    // spec: RECYCLE-4, RECYCLE-5, STOP-8
    // tx1 ignores SIGTERM: the recycle's SIGTERM changes nothing, and killSeconds (2) after it
    // comes SIGKILL, as at a stop; then tx1 starts again. Spans are by the launcher's clock.
    const KILL: Duration = Duration::from_secs(2);
    let group = MemCgroup::for_test("recycle-kill", Some(LIMIT));
    let mut c = cluster()
        .workers(1)
        .env("SIM_IGNORE_SIGTERM_tx1", "1")
        .config(json!({"server": {"cluster": {
            "recycleSeconds": 1, "drainSeconds": 0, "killSeconds": KILL.as_secs()
        }}}))
        .start_wrapped(&group.wrapper());
    let old = c.sim_pid(1).expect("tx1's pid");
    let r = c.direct(1, "POST", "/sim/alloc?mb=360");
    assert_eq!(r.status, 200, "alloc: {}", r.text());
    let recycling = c.wait_for("tx1: recycling", Duration::from_secs(15));
    let term = c.wait_for("tx1: stopping (SIGTERM)", Duration::from_secs(5));
    // Nothing at work on it: no drain to wait out.
    assert!(
        log_span(&recycling, &term) < Duration::from_millis(500),
        "{recycling}\n{term}"
    );
    let kill = c.wait_for("tx1: still running", KILL + Duration::from_secs(10));
    assert!(kill.contains("SIGKILL"), "{kill}");
    let waited = log_span(&term, &kill);
    assert!(
        waited >= KILL - Duration::from_millis(50) && waited < KILL + Duration::from_secs(2),
        "SIGKILL {waited:?} after the SIGTERM, killSeconds is {KILL:?}:\n{term}\n{kill}"
    );
    let exit = c.wait_for("tx1: exited", Duration::from_secs(5));
    assert!(exit.contains("signal SIGKILL"), "{exit}");
    assert!(wait_gone(&[old], Duration::from_secs(5)).is_empty());
    // RECYCLE-5: and it is started again.
    c.wait_for_nth("tx1: ready", 2, Duration::from_secs(15));
    assert_ne!(c.sim_pid(1), Some(old));
    c.signal(15);
    assert!(c.wait_exit(Duration::from_secs(20)).success());
    drop(c);
    drop(group);
}

#[test]
fn a_worker_that_has_not_grown_is_left_running_with_one_warning() {
    // spec: RECYCLE-12, DEC-4 (with a cgroup): the group is over the threshold because the
    // master grew, tx1 has not, so recycling it would not help: one WARNING line (the word in
    // it, for `grep WARNING`), and tx1 left running.
    let group = MemCgroup::for_test("recycle-12", Some(LIMIT));
    let mut c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"recycleSeconds": 2, "drainSeconds": 5}}}))
        .start_wrapped(&group.wrapper());
    let tx1 = c.pid_of("tx1");
    let r = c.direct(0, "POST", "/sim/alloc?mb=360");
    assert_eq!(r.status, 200, "alloc: {}", r.text());
    let needle = "would come back over the threshold, so it is left running";
    let line = c.wait_for(needle, Duration::from_secs(20));
    assert!(line.contains(" WARNING ") && line.contains("tx1"), "{line}");
    holds_for(
        "one warning, tx1 left running",
        Duration::from_secs(4),
        || c.count_lines(needle) == 1 && alive(tx1) && c.line_index("tx1: recycling").is_none(),
    );
}

#[test]
fn a_recycle_with_room_starts_the_replacement_beside_and_keeps_every_tx_place_ready() {
    // spec: DEC-94, DEC-78, RECYCLE-7
    // A cgroup without a limit of its own: each worker's memory against its guard's limit
    // (100 MB, refuse at 85 MB), and room for one more process (no cgroup threshold to fit
    // under). tx1 grows to 120 MB under a steady keep-alive client; replacements take 1.5 s.
    use crate::rolling_overlap::{Load, Sampler};
    let group = MemCgroup::for_test("recycle-beside", None);
    let admin = free_port();
    let mut c = cluster()
        .workers(2)
        .env("SIM_MEMORY_LIMIT_MB", "100")
        .env("SIM_READY_DELAY_MS", "1500")
        .env("SIM_COST_EXPAND_MS", "20")
        .arg("--admin-address")
        .arg(&admin.to_string())
        .config(json!({"server": {"cluster": {"recycleSeconds": 1, "drainSeconds": 5}}}))
        .start_wrapped(&group.wrapper());
    let old = c.pid_of("tx1");
    let load = Load::start(&c, 1);
    let r = c.direct(1, "POST", "/sim/alloc?mb=120");
    assert_eq!(r.status, 200, "alloc: {}", r.text());
    let sampler = Sampler::start(&c, admin);
    let line = c.wait_for("tx1: recycling", Duration::from_secs(60));
    assert!(
        line.contains("its replacement starts beside it on port"),
        "{line}"
    );
    c.wait_for("tx1: switched to its replacement", Duration::from_secs(30));
    assert!(wait_gone(&[old], Duration::from_secs(15)).is_empty());
    let s = sampler.end();
    let (sent, failed) = load.end();
    let log = c.log_lines().join("\n");
    eprintln!("measured: {s:?}, {sent} requests; {line}");
    assert!(s.samples > 10, "sampled {} times", s.samples);
    assert_eq!(
        s.least, 2,
        "the ready tx places dropped to {}:\n{log}",
        s.least
    );
    assert!(s.most_processes <= 4, "one process more at most: {s:?}");
    assert!(
        failed.is_empty(),
        "{} of {sent} failed: {failed:?}",
        failed.len()
    );
    assert_eq!(c.count_lines(": recycling"), 1, "{log}");
    let tx1 = admin_get(admin, "/status").json()["processes"][1].clone();
    assert_eq!(tx1["code"], "tx1", "{tx1}");
    assert_eq!(tx1["restartsBy"]["recycle"], 1, "{tx1}");
    assert_eq!(tx1["restarts"], 0, "{tx1}");
    report_figures(
        "recycle_beside",
        "a memory recycle of tx1 (120 MB over its guard's 85 MB), replacements 1.5 s to be \
         ready, 1 keep-alive client, /status sampled every 50 ms",
        1,
        sent as u64,
        failed.len() as u64,
        &s.figures(2, 3),
    );
}
