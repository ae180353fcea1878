//! One tx-worker more or fewer at run time, with the real binaries: `SIGTTIN` adds one, which
//! joins once ready; `SIGTTOU` takes the highest-numbered away, drained as a recycle is (its
//! cache-ids answer the launcher's 404 "lost to a server restart", DEC-15); never the last one;
//! a worker more than the ports after `internalPort` leave room for is refused naming the
//! setting and by how much (DEC-21); `fhircluster scale N` does the same through the control
//! socket and waits; the count set so is kept across an in-place upgrade and undone by a reload
//! (DEC-48); `SIGWINCH` (a terminal's resize) changes nothing. `fhircluster status --pid-file`
//! finds the launcher through its pid file, and says there is none (exit 2) once it is killed.
//! Under steady load, workers added and taken away lose no tx request (a `RELIABILITY` line);
//! a change during a rolling restart is refused with the reason (DEC-49).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

const SIGHUP: i32 = 1;
const SIGKILL: i32 = 9;
const SIGTTIN: i32 = 21;
const SIGTTOU: i32 = 22;
const SIGWINCH: i32 = 28;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// `fhircluster <args...> --data-dir DIR`, run to its end.
pub(crate) fn client(dir: &Path, args: &[&str]) -> RunOutput {
    let mut cmd = Command::new(LAUNCHER);
    cmd.args(args)
        .arg("--data-dir")
        .arg(dir)
        .current_dir(dir)
        .env_remove("FHIRSMITH_DATA_DIR");
    run_bounded(&mut cmd, secs(60))
}

/// The launcher's `/status`, through its control socket.
fn status(c: &Cluster) -> Value {
    let out = client(&c.data_dir(), &["status", "--json"]);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.all()))
}

/// The codes of the processes the status lists.
fn codes(s: &Value) -> Vec<String> {
    s["processes"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p["code"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The master's `workers` events (from, to, by), in order.
fn worker_events(c: &Cluster) -> Vec<(u64, u64, String)> {
    c.direct(0, "GET", "/sim/received").json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|e| e["kind"] == "workers")
        .map(|e| {
            (
                e["from"].as_u64().unwrap_or(0),
                e["to"].as_u64().unwrap_or(0),
                e["by"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn ttin_twice_then_ttou_once_and_pids_status_metrics_and_events_agree() {
    // spec: DEC-15 (the worker taken away drains as a recycle does), DEC-48
    let admin = free_port();
    let mut c = cluster()
        .workers(2)
        .config(json!({ "server": { "cluster": {
            "adminAddress": format!("127.0.0.1:{admin}"), "drainSeconds": 3
        } } }))
        .start();
    let before: Vec<i32> = ["m0", "tx1", "tx2"].iter().map(|p| c.pid_of(p)).collect();

    c.signal(SIGTTIN);
    c.wait_for("SIGTTIN: workers 2 → 3", secs(10));
    c.wait_for("tx3: ready", secs(20));
    c.signal(SIGTTIN);
    c.wait_for("SIGTTIN: workers 3 → 4", secs(10));
    c.wait_for("tx4: ready", secs(20));
    let (tx3, tx4) = (c.pid_of("tx3"), c.pid_of("tx4"));
    assert!(alive(tx3) && alive(tx4));
    let s = poll("4 workers settled", secs(10), || {
        let s = status(&c);
        (s["workers"]["settled"] == true).then_some(s)
    });
    assert_eq!(s["workers"]["wanted"], 4, "{}", s["workers"]);
    assert_eq!(s["workers"]["setAtRunTime"]["by"], "SIGTTIN");
    assert_eq!(codes(&s), ["m0", "tx1", "tx2", "tx3", "tx4"]);
    let m = scrape(admin);
    assert_eq!(m.value("fhircluster_workers_wanted", &[]), 4.0);
    assert_eq!(m.value("fhircluster_workers_set_at_run_time", &[]), 1.0);
    assert_eq!(
        m.value("fhircluster_process_ready", &[("process", "tx4")]),
        1.0
    );

    // A request of tx4's cache-id at work on it holds its drain open.
    let id = c.session_on("tx4");
    let mut held = Conn::open(c.addr()).expect("connect");
    held.send(
        "GET",
        "/r4/ValueSet/$expand?_sim_hang=1",
        &[("X-Cache-Id", &id)],
        b"",
        true,
    )
    .expect("send");
    wait_until("the held request at work on tx4", secs(10), || {
        in_flight_on(&c, "tx4") >= 1
    });
    c.signal(SIGTTOU);
    c.wait_for("SIGTTOU: workers 4 → 3", secs(10));
    let line = c.wait_for("tx4 out of rotation, draining", secs(10));
    assert!(line.contains("SIGTTOU"), "{line}");
    // spec: DEC-15 — while it drains, its cache-ids are lost, answered by the launcher at once.
    let r = c.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", &id)], b"");
    assert!(r.is_cache_id_unknown(), "{} {}", r.status, r.text());
    assert!(
        r.outcome_text().contains("lost to a server restart"),
        "{}",
        r.text()
    );
    c.wait_for("tx4: stopped for good", secs(20));
    assert!(wait_gone(&[tx4], secs(5)).is_empty(), "tx4 is gone");
    let after: Vec<i32> = ["m0", "tx1", "tx2", "tx3"]
        .iter()
        .map(|p| c.pid_of(p))
        .collect();
    assert_eq!(&after[..3], &before[..], "the others run on");
    assert_eq!(after[3], tx3);
    let s = poll("3 workers settled", secs(10), || {
        let s = status(&c);
        (s["workers"]["settled"] == true).then_some(s)
    });
    assert_eq!(s["workers"]["wanted"], 3);
    assert_eq!(s["workers"]["setAtRunTime"]["by"], "SIGTTOU");
    assert_eq!(codes(&s), ["m0", "tx1", "tx2", "tx3"]);
    let m = scrape(admin);
    assert_eq!(m.value("fhircluster_workers_wanted", &[]), 3.0);
    assert_eq!(c.child_pids().len(), 4, "the master and three workers");
    let ev = poll("the three changes at the master", secs(15), || {
        let ev = worker_events(&c);
        (ev.len() >= 3).then_some(ev)
    });
    assert_eq!(
        ev,
        [
            (2, 3, "SIGTTIN".to_string()),
            (3, 4, "SIGTTIN".to_string()),
            (4, 3, "SIGTTOU".to_string())
        ]
    );
}

#[test]
fn ttou_at_one_worker_is_refused_and_winch_changes_nothing() {
    let mut c = cluster().workers(1).start();
    let tx1 = c.pid_of("tx1");
    c.signal(SIGTTOU);
    let line = c.wait_for("SIGTTOU: refused", secs(10));
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains("the last worker") && line.contains("stays 1"),
        "{line}"
    );
    // A terminal's resize sends SIGWINCH: logged, nothing else.
    c.signal(SIGWINCH);
    c.wait_for("SIGWINCH: ignored", secs(10));
    holds_for("nothing stopped or started", secs(1), || {
        c.count_lines("tx1: stopping") == 0 && c.line_index("tx2: started").is_none()
    });
    assert_eq!(c.pid_of("tx1"), tx1);
    assert!(alive(tx1));
    let s = status(&c);
    assert_eq!(s["workers"]["wanted"], 1);
    assert!(s["workers"]["setAtRunTime"].is_null(), "{}", s["workers"]);
    assert_eq!(c.get("/r4/metadata").status, 200);
}

#[test]
fn a_worker_more_than_the_port_range_leaves_room_for_is_refused_naming_it_and_by_how_much() {
    // spec: DEC-21 — the processes' ports (internalPort + n) must not run into server.port:
    // with internalPort base and server.port base + 3, there is room for 2 workers.
    let base = free_ports(4);
    let dir = tempfile::tempdir().expect("temp data dir");
    let config = json!({
        "server": { "port": base + 3, "cluster": {
            "internalPort": base, "workers": 1, "command": [SIM],
            "statusSeconds": 1, "killSeconds": 5, "drainSeconds": 2
        } },
        "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } }
    });
    let mut c = launch(dir, config, &[], &[], &[]);
    c.wait_for("tx1: ready", secs(20));
    c.wait_until_listening(secs(10));
    c.signal(SIGTTIN);
    c.wait_for("tx2: ready", secs(20));
    c.signal(SIGTTIN);
    let line = c.wait_for("SIGTTIN: refused", secs(10));
    for part in [
        "internalPort",
        "room for 2",
        "1 too many",
        &(base + 3).to_string(),
        "stays 2",
    ] {
        assert!(line.contains(part), "{part:?} in: {line}");
    }
    holds_for("no third worker", secs(1), || {
        c.line_index("tx3: started").is_none()
    });
    // The same through the control socket: exit 1 with the reason.
    let out = client(&c.data_dir(), &["scale", "+2"]);
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(
        out.stderr.contains("internalPort") && out.stderr.contains("2 too many"),
        "{}",
        out.all()
    );
    assert_eq!(status(&c)["workers"]["wanted"], 2);
}

#[test]
fn scale_3_waits_until_it_holds_is_kept_across_an_upgrade_and_undone_by_a_reload() {
    // spec: DEC-48
    let mut c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "drainSeconds": 2 } } }))
        .start();
    let out = client(&c.data_dir(), &["scale", "3"]);
    assert_eq!(out.code, Some(0), "{}", out.all());
    assert!(out.stdout.contains("workers 1 → 3"), "{}", out.all());
    // Done means done: every worker ready when it returns.
    let s = status(&c);
    assert_eq!(codes(&s), ["m0", "tx1", "tx2", "tx3"]);
    assert!(
        s["processes"]
            .as_array()
            .is_some_and(|ps| ps.iter().all(|p| p["status"] == "ready")),
        "{s}"
    );
    assert_eq!(s["workers"]["setAtRunTime"]["by"], "fhircluster scale");
    let pids: Vec<i32> = ["tx2", "tx3"].iter().map(|p| c.pid_of(p)).collect();

    // An in-place upgrade is neither a reload nor a start: the count holds.
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    let s = status(&c);
    assert_eq!(s["workers"]["wanted"], 3, "{}", s["workers"]);
    assert_eq!(s["workers"]["setAtRunTime"]["by"], "fhircluster scale");
    assert_eq!(codes(&s), ["m0", "tx1", "tx2", "tx3"]);
    assert!(pids.iter().all(|&p| alive(p)), "the same workers");
    assert_eq!(c.count_lines("stopped for good"), 0);

    // A reload goes back to config.json's 1, though config.json did not change.
    c.signal(SIGHUP);
    c.wait_for("reload: workers 3 → 1", secs(10));
    c.wait_for("tx3: stopped for good", secs(20));
    c.wait_for("tx2: stopped for good", secs(20));
    assert!(wait_gone(&pids, secs(5)).is_empty());
    let s = poll("1 worker settled", secs(60), || {
        let s = status(&c);
        (s["workers"]["settled"] == true && s["workers"]["wanted"] == 1).then_some(s)
    });
    assert!(s["workers"]["setAtRunTime"].is_null(), "{}", s["workers"]);
}

#[test]
fn status_finds_the_launcher_through_its_pid_file_and_none_once_it_is_killed() {
    let run = tempfile::tempdir().expect("run dir");
    let file = run.path().join("fhircluster.pid");
    let file_arg = file.display().to_string();
    let mut c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "controlSocket": "launcher.sock" } } }))
        .arg("--pid-file")
        .arg(&file_arg)
        .start();
    let launcher = c.child.id();
    // An empty data directory: nothing there names the socket; the pid file alone finds it.
    let elsewhere = tempfile::tempdir().expect("another dir");
    let out = client(
        elsewhere.path(),
        &["status", "--json", "--pid-file", &file_arg],
    );
    assert_eq!(out.code, Some(0), "{}", out.all());
    let v: Value = serde_json::from_str(&out.stdout).expect("status JSON");
    assert_eq!(v["launcher"]["pid"].as_u64(), Some(u64::from(launcher)));

    c.signal(SIGKILL);
    c.wait_exit(secs(10));
    let out = client(elsewhere.path(), &["status", "--pid-file", &file_arg]);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(
        out.stderr.contains("no launcher")
            && out.stderr.contains(&launcher.to_string())
            && out.stderr.contains("not running"),
        "{}",
        out.all()
    );
}

#[test]
fn a_worker_more_than_fits_in_memory_is_refused_by_how_much() {
    // spec: MEM-7 (each worker counted as the master's private memory), DEC-48
    // 256 MB, its refusal threshold (0.85) under memoryHeadroomGB 2: nothing more fits.
    const LIMIT: u64 = 256 << 20;
    let group = MemCgroup::for_test("scale-memory", Some(LIMIT));
    let mut c = cluster().workers(1).spawn_wrapped(&group.wrapper());
    c.wait_for("tx1: ready", secs(20));
    c.wait_until_listening(secs(10));
    c.signal(SIGTTIN);
    let line = c.wait_for("SIGTTIN: refused", secs(10));
    for part in [
        "the memory fit",
        "1 more worker(s) need",
        "memoryHeadroomGB 2",
        "short",
        "stays 1",
    ] {
        assert!(line.contains(part), "{part:?} in: {line}");
    }
    holds_for("no second worker", secs(1), || {
        c.line_index("tx2: started").is_none()
    });
}

#[test]
fn ttin_and_ttou_under_steady_load_lose_no_tx_request() {
    // spec: DEC-15 (the worker taken away drains first: nothing at work on it is cut)
    // Expands of 50 ms keep requests at work on the highest worker as it is taken away.
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    const CYCLES: usize = 3;
    let c = cluster()
        .workers(1)
        .env("SIM_COST_EXPAND_MS", "50")
        .config(json!({ "server": { "cluster": { "drainSeconds": 5 } } }))
        .start();
    let addr = c.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let load = {
        let (stop, answered) = (stop.clone(), answered.clone());
        std::thread::spawn(move || {
            in_parallel(4, move |i| {
                let mut statuses = Vec::new();
                let deadline = std::time::Instant::now() + secs(120);
                while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
                    // A POST is never sent again (DEC-33): one cut short would show.
                    let r = if i % 2 == 0 {
                        request(addr, "GET", "/r4/CodeSystem/$lookup?code=1", &[], b"")
                    } else {
                        request(addr, "POST", "/r4/ValueSet/$expand", &[], b"{}")
                    };
                    statuses.push(r.status);
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                statuses
            })
        })
    };
    let under_way = |n: usize| {
        wait_until(&format!("{n} requests answered"), secs(20), || {
            answered.load(Ordering::Relaxed) >= n
        })
    };
    under_way(8);
    for cycle in 1..=CYCLES {
        c.signal(SIGTTIN);
        c.wait_for_count("SIGTTIN: workers 1 → 2", cycle, secs(10));
        c.wait_for_count("tx2: ready", cycle, secs(20));
        under_way(answered.load(Ordering::Relaxed) + 8);
        c.signal(SIGTTOU);
        c.wait_for_count("tx2: stopped for good", cycle, secs(20));
        under_way(answered.load(Ordering::Relaxed) + 8);
    }
    stop.store(true, Ordering::Relaxed);
    let statuses: Vec<u16> = load.join().expect("load threads").concat();
    let lost = statuses.iter().filter(|&&s| s != 200).count();
    report_figures(
        "ttin_and_ttou_under_steady_load_lose_no_tx_request",
        "SIGTTIN then SIGTTOU, 3 times, under 4 clients of GET $lookup and 50 ms POST $expand",
        (2 * CYCLES) as u64,
        statuses.len() as u64,
        lost as u64,
        "every tx request answered 200; the worker taken away drained first",
    );
    assert!(
        statuses.len() > 50,
        "steady load: {} requests",
        statuses.len()
    );
    assert_eq!(lost, 0, "of {}: {statuses:?}", statuses.len());
}

#[test]
fn a_worker_more_during_a_rolling_restart_is_refused_with_the_reason() {
    // DEC-49: refused, not queued; the count unchanged.
    let mut c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "drainSeconds": 30 } } }))
        .start();
    // A request that never answers holds tx1's drain: the rolling restart stays under way.
    let _held = c.hung_request();
    // A setting the processes read: the reload restarts them in turn.
    let mut config = c.config.clone();
    config["stats"] = json!({ "sampleSeconds": 7 });
    write_config(&c.data_dir(), &config);
    c.signal(SIGHUP);
    c.wait_for("rolling restart 1/2", secs(10));
    c.signal(SIGTTIN);
    let line = c.wait_for("SIGTTIN: refused", secs(10));
    assert!(
        line.contains("rolling restart") && line.contains("stays 1"),
        "{line}"
    );
    let out = client(&c.data_dir(), &["scale", "2"]);
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(out.stderr.contains("rolling restart"), "{}", out.all());
    assert!(c.line_index("tx2: started").is_none());
}
