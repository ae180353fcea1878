//! Faults injected into a running cluster's processes, through the real binaries: workers
//! SIGKILLed under a steady mixed load, SIGTERM under load, a SIGSTOPped worker, a server command
//! that crashes at once, the master down under load. (Faults in what the launcher depends on are
//! in `reliability_resources.rs`.) Each is bounded in time and loopback only; each prints its
//! figures on a `RELIABILITY` line (tests/reliability.md).

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// A small pseudo-random number from the clock (no dependency for a test's coin flips).
fn coin(n: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    (t / 1000) % n
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    bad_gateway: AtomicU64,
    cache_lost: AtomicU64,
    refused: AtomicU64,
    other: Mutex<Vec<String>>,
    slowest_ms: AtomicU64,
}

impl Tally {
    fn total(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
            + self.bad_gateway.load(Ordering::Relaxed)
            + self.cache_lost.load(Ordering::Relaxed)
            + self.refused.load(Ordering::Relaxed)
            + self.other.lock().map_or(0, |o| o.len() as u64)
    }
}

#[test]
fn workers_killed_under_load_lose_only_their_in_flight_requests_and_leak_nothing() {
    // spec: LAUNCH-9, ROUTE-3b, RESTART-1
    const WORKERS: u32 = 3;
    const MAX_OUTSTANDING: u64 = 4;
    const RUN: Duration = Duration::from_secs(21);
    const KILL_EVERY: Duration = Duration::from_secs(3);
    let admin = admin_addr();
    let mut c = cluster()
        .workers(WORKERS)
        .config(json!({ "server": { "cluster": {
            "maxOutstanding": MAX_OUTSTANDING, "queueSeconds": 5, "ownerQueueSeconds": 5,
            "upstreamTimeoutSeconds": 10, "adminAddress": admin.to_string()
        } } }))
        .env("SIM_COST_EXPAND_MS", "50")
        .env("SIM_COST_LOOKUP_MS", "5")
        .start();
    let addr = c.addr();
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    // Warm up, then the launcher's RSS before the faults.
    for _ in 0..20 {
        assert_eq!(c.get(LOOKUP).status, 200);
    }
    let rss_before = rss_kib(c.pid()).unwrap_or(0);
    let clients: Vec<_> = (0..6)
        .map(|i| {
            let (tally, stop) = (tally.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut session = String::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let r = match i % 3 {
                        0 => request(addr, "GET", LOOKUP, &[], b""),
                        1 => request(addr, "GET", EXPAND, &[], b""),
                        _ => {
                            if session.is_empty() {
                                let r = request(addr, "POST", "/r4/$cache-control", &[], b"{}");
                                session = r.header("x-cache-id").unwrap_or("").to_string();
                                r
                            } else {
                                request(addr, "GET", LOOKUP, &[("X-Cache-Id", &session)], b"")
                            }
                        }
                    };
                    let ms = t.elapsed().as_millis() as u64;
                    tally.slowest_ms.fetch_max(ms, Ordering::Relaxed);
                    match r.status {
                        200 => tally.ok.fetch_add(1, Ordering::Relaxed),
                        502 => tally.bad_gateway.fetch_add(1, Ordering::Relaxed),
                        404 if r.is_cache_id_unknown() => {
                            let text = r.outcome_text();
                            if !text.contains("restart") {
                                tally
                                    .other
                                    .lock()
                                    .map(|mut o| o.push(format!("404 {text}")))
                                    .ok();
                            }
                            session.clear();
                            tally.cache_lost.fetch_add(1, Ordering::Relaxed)
                        }
                        503 => tally.refused.fetch_add(1, Ordering::Relaxed),
                        s => {
                            tally
                                .other
                                .lock()
                                .map(|mut o| o.push(format!("{s} {}", r.text())))
                                .ok();
                            0
                        }
                    };
                }
            })
        })
        .collect();
    let began = Instant::now();
    let mut kills = 0u64;
    while began.elapsed() < RUN {
        // The pace of the kills is the scenario.
        std::thread::sleep(KILL_EVERY);
        let code = format!("tx{}", 1 + coin(WORKERS as u64));
        // Only a worker that is up (a killed one may still be restarting).
        if c.line_index(&format!("{code}: started")).is_some() {
            let pid = c.pid_of(&code);
            if alive(pid) {
                unsafe_kill(pid, 9);
                kills += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in clients {
        t.join().expect("client thread");
    }
    // Every worker back, and the front door holds no slot and no queue.
    let deadline = Instant::now() + secs(20);
    let settled = loop {
        let s = admin_status(admin);
        let procs = s["processes"].as_array().cloned().unwrap_or_default();
        let idle = procs.len() == WORKERS as usize + 1
            && procs.iter().all(|p| {
                p["frontInFlight"].as_u64() == Some(0)
                    && p["queued"].as_u64() == Some(0)
                    && p["routable"] == json!(true)
            });
        if idle || Instant::now() > deadline {
            break (idle, s);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(settled.0, "slots or queue not back: {:#}", settled.1);
    // Each process takes its whole maxOutstanding again: that many slow requests at once on
    // one owner, none queued behind another.
    let session = c.session_on("tx1");
    let at_once = std::thread::spawn(move || {
        in_parallel(MAX_OUTSTANDING as usize, move |_| {
            let path = format!("{EXPAND}&_sim_stream=3");
            request(addr, "GET", &path, &[("X-Cache-Id", &session)], b"").status
        })
    });
    wait_until(
        "all of tx1's slots taken at once, none waiting",
        secs(10),
        || {
            let s = admin_status(admin);
            s["processes"].as_array().is_some_and(|ps| {
                ps.iter().any(|p| {
                    p["code"] == "tx1"
                        && p["frontInFlight"].as_u64() == Some(MAX_OUTSTANDING)
                        && p["queued"].as_u64() == Some(0)
                })
            })
        },
    );
    let statuses = at_once.join().expect("the requests at once");
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let rss_after = rss_kib(c.pid()).unwrap_or(0);
    let t = &tally;
    let other = t.other.lock().map(|o| o.clone()).unwrap_or_default();
    let (ok, lost502, lost_cache, refused) = (
        t.ok.load(Ordering::Relaxed),
        t.bad_gateway.load(Ordering::Relaxed),
        t.cache_lost.load(Ordering::Relaxed),
        t.refused.load(Ordering::Relaxed),
    );
    assert!(other.is_empty(), "unexpected answers: {other:?}");
    assert!(kills >= 5, "only {kills} kills");
    // Only what was in flight on a killed process fails: at most its slots.
    assert!(
        lost502 <= kills * MAX_OUTSTANDING,
        "{lost502} 502s for {kills} kills"
    );
    assert!(
        lost_cache <= kills + 2,
        "{lost_cache} sessions lost for {kills} kills"
    );
    // Nothing hung past its timeouts (queue 5 s + upstream 10 s).
    let slowest = t.slowest_ms.load(Ordering::Relaxed);
    assert!(slowest < 15_500, "a request took {slowest} ms");
    assert!(
        rss_after < rss_before * 2 + 16 * 1024,
        "launcher RSS {rss_before} KiB -> {rss_after} KiB"
    );
    assert!(ok > 100, "only {ok} requests served");
    c.wait_for("tx1: ready", secs(1));
    report_figures(
        "crashes_under_load",
        &format!("{kills} workers SIGKILLed every 3 s for 21 s under 6 clients ($lookup, $expand, cache-id sessions)"),
        kills,
        t.total(),
        lost502,
        &format!(
            "{ok} ok, {lost502} 502 (in flight on a killed worker), {lost_cache} cache-id-unknown (lost to a restart), {refused} 503; slowest {slowest} ms; slots back; launcher RSS {rss_before}->{rss_after} KiB"
        ),
    );
}

#[test]
fn sigterm_under_load_completes_every_accepted_request_accepts_no_new_and_exits_0() {
    // spec: STOP-1, STOP-2, STOP-3
    let mut c = cluster()
        .workers(2)
        .config(json!({ "server": { "cluster": { "drainSeconds": 10 } } }))
        .env("SIM_COST_EXPAND_MS", "300")
        .start();
    let addr = c.addr();
    let sent_at: Arc<Mutex<Vec<(Instant, u16, bool)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..6)
        .map(|i| {
            let (sent_at, stop) = (sent_at.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let path = if i % 2 == 0 { EXPAND } else { LOOKUP };
                    let Ok(mut s) = TcpStream::connect(addr) else {
                        // Refused: the listener is closed; a client retries after a pause.
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    };
                    let t = Instant::now();
                    let _ = s.set_read_timeout(Some(secs(20)));
                    let head =
                        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                    let wrote = s.write_all(head.as_bytes()).is_ok();
                    let mut reader = std::io::BufReader::new(s);
                    let status = read_response(&mut reader).map_or(0, |r| r.status);
                    sent_at.lock().map(|mut v| v.push((t, status, wrote))).ok();
                }
            })
        })
        .collect();
    // Under load when the SIGTERM comes: a dozen answered, the rest in flight.
    wait_until("a dozen requests answered", secs(20), || {
        sent_at.lock().map_or(0, |v| v.len()) >= 12
    });
    let term = Instant::now();
    c.signal(15);
    // `kill` has run when `signal` returns: the signal was delivered by then.
    let delivered = Instant::now();
    let status = c.wait_exit(secs(30));
    stop.store(true, Ordering::Relaxed);
    for t in clients {
        t.join().expect("client");
    }
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    let all = sent_at.lock().map(|v| v.clone()).unwrap_or_default();
    let before: Vec<_> = all
        .iter()
        .filter(|(t, _, _)| *t + Duration::from_millis(50) < term)
        .collect();
    let bad: Vec<_> = before.iter().filter(|(_, s, _)| *s != 200).collect();
    assert!(
        bad.is_empty(),
        "requests sent before SIGTERM not completed: {bad:?}"
    );
    // Anything after the SIGTERM got no answer of a process: refused, or reset unanswered.
    let late_answered = all
        .iter()
        .filter(|(t, s, _)| *t > delivered + Duration::from_millis(100) && *s == 200)
        .count();
    assert_eq!(
        late_answered, 0,
        "a connection made after SIGTERM was served"
    );
    assert!(!accepting(c.port));
    assert!(before.len() > 10, "only {} requests", before.len());
    report_figures(
        "stop_under_load",
        "SIGTERM under 6 clients ($expand 300 ms, $lookup)",
        1,
        all.len() as u64,
        0,
        &format!(
            "{} requests begun before SIGTERM all 200; none served after; exit 0",
            before.len()
        ),
    );
}

#[test]
fn a_sigstopped_worker_gets_504s_naming_it_a_cooldown_and_its_slots_back() {
    // spec: TIMEOUT-1, TIMEOUT-2, COOL-4
    let admin = admin_addr();
    let c = cluster()
        .workers(2)
        .config(json!({ "server": { "cluster": {
            "upstreamTimeoutSeconds": 1, "cooldownSeconds": 3, "maxOutstanding": 3,
            "ownerQueueSeconds": 2, "fastLaneExtra": 0, "normalMinSlots": 0,
            // Stopped for a few seconds, then let go: not long enough to be taken for hung
            // (DEC-82; the watchdog's own test is tests/hang_watchdog.rs).
            "hangTimeoutSeconds": 60,
            "adminAddress": admin.to_string()
        } } }))
        .start();
    let session = c.session_on("tx1");
    let pid = c.pid_of("tx1");
    unsafe_kill(pid, 19); // SIGSTOP
    let addr = c.addr();
    let wedged = {
        let session = session.clone();
        in_parallel(3, move |_| {
            request(addr, "GET", LOOKUP, &[("X-Cache-Id", &session)], b"")
        })
    };
    for r in &wedged {
        assert_eq!(r.status, 504, "{}", r.text());
        assert!(r.outcome_text().contains("tx1"), "{}", r.text());
    }
    // In its cooldown, and meanwhile the others serve everything else.
    let mut served = 0;
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(1500) {
        let r = c.get(LOOKUP);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_ne!(r.served_by(), "tx1");
        served += 1;
    }
    unsafe_kill(pid, 18); // SIGCONT
    wait_until("every slot back", secs(10), || {
        admin_status(admin)["processes"]
            .as_array()
            .is_some_and(|ps| ps.iter().all(|p| p["frontInFlight"] == json!(0)))
    });
    let back = c.request("GET", LOOKUP, &[("X-Cache-Id", &session)], b"");
    assert_eq!(
        (back.status, back.served_by()),
        (200, "tx1"),
        "{}",
        back.text()
    );
    assert!(alive(pid), "the stopped worker was killed");
    report_figures(
        "wedged_worker",
        "a worker SIGSTOPped with 3 requests on it, then SIGCONT",
        1,
        3 + served + 1,
        0,
        &format!("3 x 504 naming tx1, cooldown, {served} others served meanwhile, slots back, tx1 serves again"),
    );
}

#[test]
fn a_worker_that_crashes_at_once_is_restarted_with_backoff_never_a_hot_loop() {
    // spec: RESTART-2, RESTART-3
    let mut c = cluster()
        .workers(2)
        .env("SIM_FAIL_AT_START_tx2", "1")
        .spawn();
    c.wait_for("tx1: ready", secs(20));
    let began = Instant::now();
    let mut served = 0;
    while began.elapsed() < secs(8) {
        let r = c.get(LOOKUP);
        assert_eq!(r.status, 200, "{}", r.text());
        served += 1;
        // Steady requests over the 8 s watched (the scenario).
        std::thread::sleep(Duration::from_millis(50));
    }
    let starts = c.count_lines("tx2: started");
    // Waits of 1, 2, 4 s: about four starts in 8 s, never dozens.
    assert!((2..=6).contains(&starts), "{starts} starts of tx2 in 8 s");
    assert!(c.line_index("tx2: exited (exit code 1)").is_some());
    c.signal(15);
    assert_eq!(c.wait_exit(secs(20)).code(), Some(0));
    report_figures(
        "crash_at_start",
        "a worker exiting 1 at every start, for 8 s",
        starts as u64,
        served,
        0,
        &format!("{starts} starts in 8 s (backoff 1, 2, 4 s), others served all {served}"),
    );
}

#[test]
fn with_the_master_down_tx_requests_carry_on_and_master_paths_get_503() {
    // spec: LIMIT-1, LIMIT-2, DEC-24
    // Each start of the master takes 2 s, so it stays down a while after it is killed.
    let mut c = cluster()
        .workers(2)
        .env("SIM_START_DELAY_MS_m0", "2000")
        .start();
    unsafe_kill(c.pid_of("m0"), 9);
    c.wait_for("m0: exited", secs(10));
    let (mut tx_ok, mut master_503) = (0u64, 0u64);
    let began = Instant::now();
    while began.elapsed() < Duration::from_millis(1500) {
        let r = c.get(LOOKUP);
        assert_eq!(r.status, 200, "{}", r.text());
        tx_ok += 1;
        let r = c.get("/dashboard");
        assert_eq!(r.status, 503, "{}", r.text());
        assert_eq!(r.json()["resourceType"], "OperationOutcome");
        master_503 += 1;
    }
    c.wait_for_count("m0: ready", 2, secs(15));
    assert_eq!(c.get("/dashboard").status, 200);
    report_figures(
        "master_down",
        "the master SIGKILLed and slow to restart",
        1,
        tx_ok + master_503 + 1,
        0,
        &format!("{tx_ok} tx requests 200 meanwhile; {master_503} master-path requests 503 with an OperationOutcome; back after"),
    );
}

#[test]
fn events_queued_for_a_master_not_reading_survive_a_launcher_sigkill_and_arrive_once() {
    // spec: EVENT-13, EVENT-15, EVENT-17, DEC-26 (issue 20 item 4: an event leaves the outbox
    // only once delivered, not when it is queued for the master's channel)
    let c = cluster().workers(2).start();
    let events_at_master = |c: &Cluster| -> Vec<serde_json::Value> {
        c.direct(0, "GET", "/sim/received").json()["events"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    poll("launcherStarted at the master", secs(10), || {
        (!events_at_master(&c).is_empty()).then_some(())
    });
    // The master stops reading; workers exit meanwhile: their events are queued for it.
    assert_eq!(c.direct(0, "POST", "/sim/channel?pause=600").status, 200);
    let mut killed = Vec::new();
    for n in 0..4 {
        let code = if n % 2 == 0 { "tx1" } else { "tx2" };
        let pid = c.pid_of(code);
        unsafe_kill(pid, 9);
        killed.push((code, pid));
        c.wait_for_count(&format!("{code}: ready"), 2 + n / 2, secs(30));
    }
    let exit_of = |ev: &[serde_json::Value], code: &str, pid: i32| {
        ev.iter()
            .filter(|e| {
                e["kind"] == "exit" && e["code"] == code && e["pid"].as_i64() == Some(pid as i64)
            })
            .count()
    };
    assert!(
        killed
            .iter()
            .all(|(code, pid)| exit_of(&events_at_master(&c), code, *pid) == 0),
        "the paused master took events: the test proves nothing"
    );
    let children: Vec<i32> = ["m0", "tx1", "tx2"]
        .iter()
        .map(|code| c.pid_of(code))
        .collect();
    // The launcher is killed with everything still queued.
    unsafe_kill(c.child.id() as i32, 9);
    let left = wait_gone(&children, secs(15));
    assert!(left.is_empty(), "children outlived the launcher: {left:?}");
    let mut c = c.relaunch(&[]);
    c.wait_for("m0: ready", secs(30));
    let got = poll("every exit at the new master", secs(20), || {
        let ev = events_at_master(&c);
        killed
            .iter()
            .all(|(code, pid)| exit_of(&ev, code, *pid) >= 1)
            .then_some(ev)
    });
    std::thread::sleep(Duration::from_millis(500));
    let ev = events_at_master(&c);
    assert!(ev.len() >= got.len());
    let mut ids = std::collections::BTreeSet::new();
    for id in ev.iter().filter_map(|e| e["id"].as_u64()) {
        assert!(ids.insert(id), "event {id} arrived twice: {ev:?}");
    }
    let mut lost = 0;
    for (code, pid) in &killed {
        let n = exit_of(&ev, code, *pid);
        assert_eq!(n, 1, "{code}'s exit (pid {pid}) arrived {n} times: {ev:?}");
        lost += 1 - n as u64;
    }
    report_figures(
        "events_launcher_sigkill",
        "4 worker exits queued for a master not reading its channel, then the launcher SIGKILLed and started again",
        5,
        killed.len() as u64,
        lost,
        &format!("all {} exit events arrived at the next master, once each", killed.len()),
    );
    c.signal(15);
    assert!(c.wait_exit(secs(30)).success());
}

#[test]
fn a_panic_in_the_launcher_ends_it_promptly_with_its_processes_and_frees_the_port() {
    // Issue 20 item 7: a panic in a task or thread left a half-dead launcher holding the port.
    // The panic comes from the launcher's test hook (FHIRCLUSTER_TEST_PANIC, cluster.md).
    let hook = tempfile::tempdir().expect("temp dir");
    let trigger = hook.path().join("panic-now");
    let mut c = cluster()
        .workers(2)
        .env("FHIRCLUSTER_TEST_PANIC", &trigger.display().to_string())
        .start();
    let mut served = 0;
    for _ in 0..10 {
        assert_eq!(c.get(LOOKUP).status, 200);
        served += 1;
    }
    let children = c.child_pids();
    assert_eq!(children.len(), 3, "the master and two workers");
    let began = Instant::now();
    std::fs::write(&trigger, b"").expect("pull the trigger");
    let status = c.wait_exit(secs(10));
    let took = began.elapsed();
    assert_eq!(status.code(), Some(101), "{}", c.log_lines().join("\n"));
    let line = c.wait_for("fhircluster: panic at ", secs(5));
    assert!(
        line.contains("test panic") && line.ends_with("the launcher exits (status 101)"),
        "{line}"
    );
    let left = wait_gone(&children, secs(10));
    assert!(left.is_empty(), "processes left after the panic: {left:?}");
    let port = c.port;
    assert!(
        eventually(secs(5), || std::net::TcpListener::bind(("0.0.0.0", port))
            .is_ok()),
        "port {port} still held after the launcher's panic"
    );
    report_figures(
        "launcher_panic",
        "a launcher thread panics while it serves (test hook)",
        1,
        served,
        0,
        &format!(
            "exit status 101 in {} ms with the panic's line; 3 processes gone, port free",
            took.as_millis()
        ),
    );
}

#[test]
fn the_largest_allowed_settings_serve_and_stop_cleanly() {
    // Issue 20 item 7: every duration at its bound (a year), counts at a million, a multi-thread
    // front door: no deadline overflows while it serves, drains and stops. (1e19 s is refused
    // at start: tests/check_settings.rs.)
    const YEAR: u64 = 31_536_000;
    let mut c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "drainSeconds": YEAR, "queueSeconds": YEAR, "ownerQueueSeconds": YEAR,
            "cooldownSeconds": YEAR, "upstreamTimeoutSeconds": YEAR, "writeTimeoutSeconds": YEAR,
            "headerTimeoutSeconds": YEAR, "recycleSeconds": YEAR, "killSeconds": YEAR,
            "maxOutstanding": 1_000_000, "fastLaneExtra": 1_000_000, "normalMinSlots": 1_000_000,
            "maxStartFailures": 1_000_000, "proxyThreads": 8
        } }, "stats": { "sampleSeconds": YEAR, "intervalMinutes": 525_600 } }))
        .start();
    let mut served = 0;
    for path in [LOOKUP, EXPAND, "/dashboard"].iter().cycle().take(30) {
        assert_eq!(c.get(path).status, 200, "{path}");
        served += 1;
    }
    let began = Instant::now();
    c.signal(15);
    let status = c.wait_exit(secs(30));
    let log = c.log_lines().join("\n");
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(!log.contains("panic"), "{log}");
    report_figures(
        "largest_settings",
        "every duration at a year, counts at a million, 8 front-door threads",
        0,
        served,
        0,
        &format!(
            "served all {served}; stopped with status 0 in {} ms, no panic",
            began.elapsed().as_millis()
        ),
    );
}
