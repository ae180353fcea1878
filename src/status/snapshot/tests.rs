//! Tests of the cluster snapshot merge, by spec ID.

use super::*;
use crate::ipc::message::FromChild;
use crate::status::readings::NotRead;
use crate::system::unreadable::Unreadable;
use serde_json::json;

pub(super) const MB: u64 = 1 << 20;
pub(super) const GB: u64 = 1 << 30;

fn settings() -> SnapshotSettings {
    SnapshotSettings {
        status_interval: Duration::from_secs(15),
        reject_fraction: 0.85,
        abort_fraction: 0.92,
        shared_cache: false,
    }
}

fn figures(n: u64) -> StatusFigures {
    StatusFigures {
        heap_used: Some(100 * MB * n),
        heap_limit: Some(4 * GB),
        client_caches: Some(n),
        client_concepts: Some(10 * n),
        expansion_items: Some(100 * n),
        in_flight: n as u32,
        refusing: false,
        requests: 1000 * n,
        event_loop_delay_ms: None,
    }
}

/// A ready process started 100 s before `now`, its figures 5 s old.
pub(super) fn process(now: Instant, n: u16) -> ProcessInput {
    let k = u64::from(n) + 1;
    ProcessInput {
        code: if n == 0 {
            "m0".into()
        } else {
            format!("tx{n}")
        },
        role: if n == 0 { Role::Master } else { Role::TxWorker },
        pid: Some(1000 + u32::from(n)),
        state: ProcessState::Ready,
        started_at: Some(now - Duration::from_secs(100)),
        ready_at: Some(now - Duration::from_secs(90)),
        restarts: 0,
        restarts_by: Default::default(),
        last_restart: None,
        status: Some((figures(k), now - Duration::from_secs(5))),
        memory: Ok(ProcMemory {
            rss_anon: k * GB,
            rss_file: k * 10 * MB,
        }),
        guard_limit: Some(8 * GB),
        front: None,
        latency: None,
        cpu: None,
        beside: None,
        inputs_waiting: false,
    }
}

/// What a missing file gives: `<path>: No such file or directory`.
fn unreadable(path: &str) -> NotRead {
    NotRead::Unreadable(Unreadable::new(path, "No such file or directory"))
}

fn launcher() -> LauncherFigures {
    LauncherFigures {
        pid: 999,
        memory: Ok(ProcMemory {
            rss_anon: 20 * MB,
            rss_file: 5 * MB,
        }),
        uptime: Duration::from_secs(200),
        in_flight: Some(2),
    }
}

pub(super) fn own_cgroup() -> Reading<CgroupReading> {
    Ok(CgroupReading {
        anon: 7 * GB,
        file: 3 * GB,
        limit: CgroupLimit::Own(10 * GB),
        group: "/system.slice/fhir.service".into(),
    })
}

pub(super) fn run(
    processes: &[ProcessInput],
    cgroup: Reading<CgroupReading>,
    now: Instant,
) -> Value {
    let input = SnapshotInput {
        processes,
        cgroup,
        host: Ok(HostMemory {
            total: 32 * GB,
            available: 20 * GB,
        }),
        launcher: launcher(),
        settings: settings(),
    };
    snapshot(&input, now, 1_700_000_000_000)
}

#[test]
fn the_cluster_object_has_the_spec_fields() {
    // spec: STATUS-6, STATUS-7, STATUS-8, STATUS-10, STATUS-11, STATUS-12, STATUS-13, DEC-17
    let now = Instant::now();
    let mut ps = vec![process(now, 0), process(now, 1), process(now, 2)];
    if let Some((f, _)) = ps[2].status.as_mut() {
        f.refusing = true;
    }
    let v = run(&ps, own_cgroup(), now);
    assert_eq!(v["scope"], "cluster");
    assert_eq!(v["sampledAt"], 1_700_000_000_000u64);
    assert_eq!(v["intervalMs"], 15_000);
    assert_eq!(
        v["memory"],
        json!({
            "cgroup": {"anon": 7 * GB, "file": 3 * GB},
            "processAnon": 6 * GB,
            "limit": 10 * GB,
            "limitSource": "cgroup",
            "rejectAt": (10.0 * GB as f64 * 0.85) as u64,
            "abortAt": (10.0 * GB as f64 * 0.92) as u64,
            "rejectFraction": 0.85,
            "abortFraction": 0.92,
            "group": "/system.slice/fhir.service",
        })
    );
    assert_eq!(
        v["caches"],
        json!({"scope": "summed", "clientCaches": 6, "clientConcepts": 60, "expansionItems": 600})
    );
    assert_eq!(v["inFlight"], 6);
    assert_eq!(v["refusing"], json!(["tx2"]));
    assert_eq!(v["requests"], Value::Null);
    assert_eq!(v["host"], json!({"total": 32 * GB, "available": 20 * GB}));
    assert_eq!(v["missing"], json!([]));
    assert_eq!(
        v["processes"][1],
        json!({
            "code": "tx1", "role": "tx-worker", "pid": 1001, "status": "ready",
            "uptimeMs": 100_000, "restarts": 0, "lastRestart": null, "requests": 2000,
            "rssAnon": 2 * GB, "rssFile": 20 * MB, "heapUsed": 200 * MB, "heapLimit": 4 * GB,
            "clientCaches": 2, "clientConcepts": 20, "inFlight": 2, "eventLoopDelayMs": null,
            "figuresAgeMs": 5000, "noChannel": false, "cpuSeconds": null, "cpuPercent": null,
            "restartsBy": {"crash": 0, "rolling": 0, "recycle": 0, "scale": 0, "hung": 0},
            "beside": false, "replacement": false, "inputsWaiting": false,
        })
    );
    assert_eq!(v["processes"][0]["role"], "master");
}

#[test]
fn totals_requests_heap_restarts_uptime() {
    // spec: STATUS-16, STATUS-17, STATUS-18, STATUS-19, DEC-16, DEC-25
    let now = Instant::now();
    let mut ps = vec![process(now, 0), process(now, 1)];
    ps[0].started_at = Some(now - Duration::from_secs(500));
    ps[1].restarts = 2;
    ps[1].last_restart = Some("recycled: over the threshold".into());
    let v = run(&ps, own_cgroup(), now);
    let t = &v["totals"];
    assert_eq!(
        t["requests"], 3000,
        "the processes' own counts, no launcher"
    );
    assert_eq!(t["heapUsed"], 300 * MB);
    assert_eq!(t["heapCount"], 2, "the launcher has no heap");
    assert_eq!(t["restarts"], 2);
    assert_eq!(t["uptimeMs"], 500_000, "the master's");
    assert_eq!(
        v["processes"][1]["lastRestart"],
        "recycled: over the threshold"
    );
}

#[test]
fn the_launcher_row_has_no_requests_and_no_heap() {
    // spec: STATUS-14, DEC-16
    let now = Instant::now();
    let v = run(&[process(now, 0)], own_cgroup(), now);
    let l = &v["launcher"];
    assert_eq!(l["requests"], Value::Null);
    assert_eq!(l["heapUsed"], Value::Null);
    assert_eq!(l["heapLimit"], Value::Null);
    assert_eq!(l["rssAnon"], 20 * MB);
    assert_eq!(l["pid"], 999);
    assert_eq!(l["uptimeMs"], 200_000);
}

#[test]
fn shared_cache_counts_the_store_once() {
    // spec: STATUS-9
    let now = Instant::now();
    let ps = [process(now, 0), process(now, 1), process(now, 2)];
    let input = SnapshotInput {
        processes: &ps,
        cgroup: own_cgroup(),
        host: Err(unreadable("/proc/meminfo")),
        launcher: launcher(),
        settings: SnapshotSettings {
            shared_cache: true,
            ..settings()
        },
    };
    let v = snapshot(&input, now, 0);
    assert_eq!(
        v["caches"],
        json!({"scope": "shared", "clientCaches": 1, "clientConcepts": 10, "expansionItems": 600})
    );
}

#[test]
fn figures_older_than_three_intervals_are_stale_and_out_of_the_totals() {
    // spec: STATUS-21
    let now = Instant::now();
    let mut ps = vec![process(now, 0), process(now, 1)];
    ps[1].status = Some((figures(2), now - Duration::from_secs(46)));
    let v = run(&ps, own_cgroup(), now);
    assert_eq!(v["processes"][1]["status"], "stale");
    assert_eq!(v["processes"][1]["figuresAgeMs"], 46_000);
    assert_eq!(v["totals"]["requests"], 1000);
    assert_eq!(v["inFlight"], 1);
    assert_eq!(v["caches"]["clientCaches"], 1);
    // 45 s is three intervals exactly: not yet stale.
    ps[1].status = Some((figures(2), now - Duration::from_secs(45)));
    let v = run(&ps, own_cgroup(), now);
    assert_eq!(v["processes"][1]["status"], "ready");
    assert_eq!(v["processes"][1]["noChannel"], false);
    // Ready long ago and never sent any: it serves without a channel, not stale.
    ps[1].status = None;
    let v = run(&ps, own_cgroup(), now);
    assert_eq!(v["processes"][1]["status"], "ready");
    assert_eq!(v["processes"][1]["noChannel"], true);
    assert_eq!(v["processes"][1]["inFlight"], serde_json::Value::Null);
    // Ready within the last interval: its first figures may still be on the way.
    ps[1].ready_at = Some(now - Duration::from_secs(5));
    let v = run(&ps, own_cgroup(), now);
    assert_eq!(v["processes"][1]["status"], "ready");
    assert_eq!(v["processes"][1]["noChannel"], false);
}

#[test]
fn a_restarting_process_has_no_figures_until_its_replacement_sends_some() {
    // spec: STATUS-22, STATUS-20
    let now = Instant::now();
    let mut ps = vec![process(now, 0), process(now, 1)];
    ps[1].state = ProcessState::Restarting;
    let v = run(&ps, own_cgroup(), now);
    let row = &v["processes"][1];
    assert_eq!(row["status"], "restarting");
    for k in [
        "pid",
        "uptimeMs",
        "requests",
        "rssAnon",
        "heapUsed",
        "inFlight",
        "figuresAgeMs",
    ] {
        assert_eq!(row[k], Value::Null, "{k}");
    }
    assert_eq!(v["memory"]["processAnon"], GB);
    // The replacement is starting; the status it holds is its predecessor's.
    ps[1].state = ProcessState::Starting;
    ps[1].started_at = Some(now - Duration::from_secs(2));
    ps[1].ready_at = None;
    let v = run(&ps, own_cgroup(), now);
    assert_eq!(v["processes"][1]["status"], "starting");
    assert_eq!(v["processes"][1]["requests"], Value::Null);
    assert_eq!(v["totals"]["requests"], 1000);
    // Until it sends its own.
    ps[1].status = Some((figures(7), now - Duration::from_secs(1)));
    let v = run(&ps, own_cgroup(), now);
    assert_eq!(v["processes"][1]["requests"], 7000);
}

#[test]
fn without_proc_the_memory_figures_are_null_and_missing_says_why() {
    // spec: STATUS-23
    let now = Instant::now();
    let mut ps = vec![process(now, 0), process(now, 1)];
    for p in &mut ps {
        p.memory = Err(unreadable("/proc"));
    }
    let input = SnapshotInput {
        processes: &ps,
        cgroup: Err(unreadable("/proc/self/cgroup")),
        host: Err(unreadable("/proc/meminfo")),
        launcher: LauncherFigures {
            memory: Err(unreadable("/proc")),
            ..launcher()
        },
        settings: settings(),
    };
    let v = snapshot(&input, now, 0);
    assert_eq!(v["processes"][0]["rssAnon"], Value::Null);
    assert_eq!(v["launcher"]["rssFile"], Value::Null);
    assert_eq!(v["memory"]["processAnon"], Value::Null);
    assert_eq!(v["host"], json!({"total": null, "available": null}));
    let missing = v["missing"].as_array().cloned().unwrap_or_default();
    assert!(missing.contains(&json!({
        "what": "private and mapped memory of m0, tx1, launcher",
        "why": "/proc: No such file or directory",
    })));
    assert!(missing.contains(
        &json!({"what": "cgroup memory", "why": "/proc/self/cgroup: No such file or directory"})
    ));
    assert!(missing.contains(
        &json!({"what": "host memory", "why": "/proc/meminfo: No such file or directory"})
    ));
}

#[test]
fn without_a_limit_of_its_own_the_meter_is_the_processes_against_their_guards() {
    // spec: STATUS-24, MEM-5
    let now = Instant::now();
    let ps = [process(now, 0), process(now, 1)];
    for limit in [CgroupLimit::Enclosing(64 * GB), CgroupLimit::None] {
        let cg = Ok(CgroupReading {
            anon: 7 * GB,
            file: GB,
            limit,
            group: "/user.slice/x".into(),
        });
        let v = run(&ps, cg, now);
        let m = &v["memory"];
        assert_eq!(m["cgroup"], Value::Null);
        assert_eq!(m["processAnon"], 3 * GB);
        assert_eq!(m["limit"], 8 * GB);
        assert_eq!(m["limitSource"], "guard");
        assert_eq!(m["rejectAt"], (8.0 * GB as f64 * 0.85) as u64);
        assert_eq!(m["group"], "/user.slice/x");
        let missing = v["missing"].as_array().cloned().unwrap_or_default();
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0]["what"], "cgroup memory limit");
        assert!(missing[0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("/user.slice/x")));
    }
    // No guard has reported a limit either: nothing made up.
    let mut ps = ps.to_vec();
    for p in &mut ps {
        p.guard_limit = None;
    }
    let v = run(&ps, Err(unreadable("/proc/self/cgroup")), now);
    assert_eq!(v["memory"]["limit"], Value::Null);
    assert_eq!(v["memory"]["rejectAt"], Value::Null);
    assert_eq!(v["memory"]["limitSource"], Value::Null);
    assert_eq!(v["missing"].as_array().map(Vec::len), Some(2));
}

#[test]
fn status_message_figures() {
    // spec: STATUS-1
    let msg = FromChild::Status(StatusFigures {
        heap_used: Some(1),
        heap_limit: None,
        client_caches: Some(2),
        client_concepts: Some(3),
        expansion_items: Some(4),
        in_flight: 5,
        refusing: true,
        requests: 6,
        event_loop_delay_ms: None,
    });
    let f = StatusFigures::from_message(&msg);
    assert_eq!(f.as_ref().map(|f| f.requests), Some(6));
    assert_eq!(f.and_then(|f| f.heap_limit), None);
    assert_eq!(StatusFigures::from_message(&FromChild::Unknown), None);
}

#[test]
fn the_front_doors_count_is_beside_a_processs_own_never_added_to_it() {
    // spec: STATUS-16, DEC-46
    use crate::status::front::{Cpu, FrontFigures, Latency};
    let now = Instant::now();
    let front = |n: u64| FrontFigures {
        answered: [0, n, 0, 1, 0],
        bad_gateway: 2,
        in_flight: 1,
        ..FrontFigures::default()
    };
    let mut ps = vec![process(now, 0), process(now, 1)];
    ps[0].front = Some(front(9));
    // tx1 serves without the channel: nothing of its own, the front door's figures only.
    ps[1].status = None;
    ps[1].front = Some(front(4));
    ps[1].latency = Some(Latency {
        count: 5,
        median_ms: Some(2.0),
        p99_ms: Some(8.0),
    });
    ps[1].cpu = Some(Cpu {
        seconds: 1.5,
        percent: Some(12.5),
    });
    let v = run(&ps, own_cgroup(), now);
    let (m0, tx1) = (&v["processes"][0], &v["processes"][1]);
    assert_eq!(m0["requests"], 1000, "its own count");
    assert_eq!(m0["frontRequests"], 10, "the front door's, beside it");
    assert_eq!(tx1["requests"], Value::Null);
    assert_eq!(tx1["noChannel"], true);
    assert_eq!(tx1["frontRequests"], 5);
    assert_eq!(tx1["frontAnswers"]["4xx"], 1);
    assert_eq!(tx1["front502"], 2);
    assert_eq!(tx1["latencyMs"]["p99"], 8.0);
    assert_eq!(tx1["cpuPercent"], 12.5);
    assert_eq!(
        tx1["rssAnon"],
        2 * GB,
        "memory read without the process's help"
    );
    assert_eq!(m0["cpuSeconds"], Value::Null, "not read: not made up");
    assert_eq!(
        v["totals"]["requests"], 1000,
        "the processes' own counts only"
    );
    assert_eq!(v["totals"]["frontRequests"], 15);
}
