//! Faults injected into a running cluster, through the real binaries: workers SIGKILLed under a
//! steady mixed load, SIGTERM under load, a SIGSTOPped worker, a server command that crashes at
//! once, the launcher out of file descriptors, a child flooding its IPC channel with garbage,
//! and an events database that can't be opened. Each is bounded in time and loopback only;
//! each prints its figures on a `RELIABILITY` line (README, Reliability).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const LOOKUP: &str = "/r4/CodeSystem/$lookup?system=http://loinc.org&code=1234-5";
const EXPAND: &str = "/r4/ValueSet/$expand?url=http://hl7.org/fhir/ValueSet/x";

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The launcher's `/status` on its own endpoint.
fn admin_status(admin: SocketAddr) -> Value {
    request(admin, "GET", "/status", &[], b"").json()
}

/// A free loopback port for `adminAddress`.
fn admin_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let a = l.local_addr().expect("addr");
    drop(l);
    a
}

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
    let session = loop {
        let r = c.request("POST", "/r4/$cache-control", &[], b"{}");
        if r.served_by() == "tx1" {
            break r.header("x-cache-id").unwrap_or("").to_string();
        }
    };
    let took = in_parallel(MAX_OUTSTANDING as usize, move |_| {
        let t = Instant::now();
        let r = request(
            addr,
            "GET",
            &format!("{EXPAND}&_sim_stream=1"),
            &[("X-Cache-Id", &session)],
            b"",
        );
        (r.status, t.elapsed())
    });
    for (status, t) in &took {
        assert_eq!(*status, 200);
        assert!(
            *t < Duration::from_millis(1900),
            "one queued behind another: {took:?}"
        );
    }
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
                        // Refused: the listener is closed.
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
    std::thread::sleep(secs(2));
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
            "adminAddress": admin.to_string()
        } } }))
        .start();
    let session = loop {
        let r = c.request("POST", "/r4/$cache-control", &[], b"{}");
        if r.served_by() == "tx1" {
            break r.header("x-cache-id").unwrap_or("").to_string();
        }
    };
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
    std::thread::sleep(secs(3));
    let s = admin_status(admin);
    for p in s["processes"].as_array().cloned().unwrap_or_default() {
        assert_eq!(p["frontInFlight"], json!(0), "{p}");
    }
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
fn out_of_file_descriptors_the_listener_logs_once_recovers_and_serves() {
    let mut c = cluster().workers(1).start();
    let pid = c.pid();
    let open_fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    let limit = open_fds + 16;
    let set = std::process::Command::new("prlimit")
        .arg(format!("--pid={pid}"))
        .arg(format!("--nofile={limit}:{limit}"))
        .status();
    assert!(set.is_ok_and(|s| s.success()), "prlimit failed");
    // Far more connections than it has descriptors for, held open.
    let held: Vec<TcpStream> = (0..64)
        .filter_map(|_| TcpStream::connect(c.addr()).ok())
        .collect();
    c.wait_for("accepting connections failed", secs(10));
    std::thread::sleep(secs(1));
    let logged = c.count_lines("accepting connections failed");
    // Still alive, not spinning: its CPU over a second stays low.
    let cpu = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                let rest = s.rsplit_once(')')?.1.to_string();
                let f: Vec<u64> = rest
                    .split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect();
                Some(f.get(10)? + f.get(11)?)
            })
            .unwrap_or(0)
    };
    let (c0, t0) = (cpu(), Instant::now());
    std::thread::sleep(secs(1));
    let ticks = cpu() - c0;
    assert!(
        ticks < 30,
        "{ticks} ticks in {:?}: a hot loop",
        t0.elapsed()
    );
    assert!(alive(pid));
    drop(held);
    // Served again once they are gone.
    let deadline = Instant::now() + secs(10);
    let r = loop {
        let r = c.get(LOOKUP);
        if r.status == 200 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r.status, 200, "{}", c.log_lines().join("\n"));
    assert_eq!(logged, 1, "logged more than once per run of failures");
    report_figures(
        "fd_exhaustion",
        &format!("launcher's RLIMIT_NOFILE cut to {limit}, 64 connections held"),
        1,
        65,
        0,
        &format!("logged once, {ticks} CPU ticks/s while out, served again after"),
    );
}

const FLOOD_SERVER: &str = r#"
import http.server, os, sys, threading, signal
port = int(os.environ["PORT"])
code = os.environ.get("FHIRSMITH_INSTANCE_CODE", "?")
def flood():
    try:
        ch = os.fdopen(3, "wb", buffering=0)
        junk = b"not json at all \xff\xfe {\"type\": \n" * 2000
        huge = b"{\"type\":\"status\",\"x\":\"" + b"a" * (4 << 20)
        for _ in range(200):
            ch.write(junk)
            ch.write(huge)
    except Exception:
        pass
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = code.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Served-By", code)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
threading.Thread(target=flood, daemon=True).start()
srv.serve_forever()
"#;

#[test]
fn a_child_flooding_its_channel_with_garbage_is_contained() {
    let dir = tempfile::tempdir().expect("dir");
    let script = dir.path().join("flood.py");
    std::fs::write(&script, FLOOD_SERVER).expect("write");
    let mut c = cluster()
        .workers(1)
        .command(&["python3", &script.display().to_string()])
        .start();
    let rss0 = rss_kib(c.pid()).unwrap_or(0);
    // About 0.8 GB of garbage and 4 MiB lines per child; it keeps serving meanwhile.
    let began = Instant::now();
    let mut served = 0u64;
    let mut rss_max = rss0;
    while began.elapsed() < secs(6) {
        let r = c.get("/r4/metadata");
        assert_eq!(r.status, 200, "{}", r.text());
        served += 1;
        rss_max = rss_max.max(rss_kib(c.pid()).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(50));
    }
    let warnings = c.count_lines("skipped a bad IPC line");
    assert!(warnings >= 1, "{}", c.log_lines().join("\n"));
    // One line per child per 10 s, however much garbage.
    assert!(warnings <= 4, "{warnings} bad-line warnings");
    assert!(
        rss_max < rss0 + 64 * 1024,
        "launcher RSS {rss0} KiB -> {rss_max} KiB"
    );
    c.signal(15);
    assert_eq!(c.wait_exit(secs(20)).code(), Some(0));
    report_figures(
        "ipc_flood",
        "both children writing garbage and 4 MiB lines to the IPC channel",
        2,
        served,
        0,
        &format!(
            "{served} served meanwhile, {warnings} log lines, launcher RSS {rss0}->{rss_max} KiB"
        ),
    );
}

#[test]
fn an_events_database_that_cannot_be_opened_is_logged_and_events_stay_in_memory() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("databases"), b"not a folder").expect("write");
    let base = free_ports(3);
    let config = json!({
        "server": { "port": base, "cluster": {
            "workers": 1, "internalPort": base + 1, "command": [SIM], "statusSeconds": 1
        } },
        "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } }
    });
    write_config(dir.path(), &config);
    let mut child = launcher_command(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start");
    let mut err = child.stderr.take().expect("stderr");
    let addr = SocketAddr::from(([127, 0, 0, 1], base));
    let deadline = Instant::now() + secs(20);
    let served = loop {
        let r = request(addr, "GET", LOOKUP, &[], b"");
        if r.status == 200 || Instant::now() > deadline {
            break r.status == 200;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    unsafe_kill(child.id() as i32, 15);
    let _ = child.wait();
    let mut log = String::new();
    let _ = err.read_to_string(&mut log);
    assert!(served, "{log}");
    assert!(log.contains("kept in memory only"), "{log}");
    report_figures(
        "events_db_unusable",
        "`databases` is a file: the events database can't be opened",
        1,
        1,
        0,
        "logged, events kept in memory, served",
    );
}

#[test]
fn every_startup_failure_is_one_line_naming_the_cause_exit_1_and_no_child_left() {
    // spec: DEC-12
    let base = free_ports(3);
    let good = json!({
        "server": { "port": base, "cluster": {
            "workers": 1, "internalPort": base + 1, "command": [SIM]
        } },
        "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } }
    });
    let mut cases = 0;
    let mut run = |name: &str, prepare: &dyn Fn(&std::path::Path), needle: &str| {
        let dir = tempfile::tempdir().expect("dir");
        prepare(dir.path());
        let out = run_bounded(&mut launcher_command(dir.path()), secs(20));
        assert_eq!(out.code, Some(1), "{name}: {}", out.all());
        let errors: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("fhircluster:") || l.contains("ERROR"))
            .collect();
        assert_eq!(errors.len(), 1, "{name}: not one error line: {}", out.all());
        assert!(
            errors[0].contains(needle),
            "{name}: {:?} lacks {needle:?}",
            errors[0]
        );
        // Every process it started (if any) is gone.
        let pids: Vec<i32> = out
            .stderr
            .lines()
            .filter_map(|l| l.split("(pid ").nth(1)?.split(')').next()?.parse().ok())
            .collect();
        assert!(
            wait_gone(&pids, secs(5)).is_empty(),
            "{name}: children left {pids:?}"
        );
        eprintln!("{name}: {} ({} processes started)", errors[0], pids.len());
        cases += 1;
    };
    run(
        "missing data directory",
        &|d| {
            let _ = std::fs::remove_dir(d);
        },
        "does not exist",
    );
    run(
        "config.json unreadable (a directory)",
        &|d| std::fs::create_dir(d.join("config.json")).expect("mkdir"),
        "config.json",
    );
    run(
        "config.json invalid",
        &|d| std::fs::write(d.join("config.json"), "{ \"server\": { \"port\": 1, }").expect("w"),
        "config.json",
    );
    run(
        "a setting out of range",
        &|d| {
            let mut c = good.clone();
            c["server"]["cluster"]["workers"] = json!(-2);
            write_config(d, &c);
        },
        "server.cluster.workers",
    );
    run(
        "a server command that does not exist",
        &|d| {
            let mut c = good.clone();
            c["server"]["cluster"]["command"] = json!(["/nonexistent/server"]);
            write_config(d, &c);
        },
        "/nonexistent/server",
    );
    // The client port in use: found only once the master is ready, so the processes started
    // must all be stopped again.
    let blocker = std::net::TcpListener::bind(("0.0.0.0", base)).expect("hold the port");
    run(
        "the port in use",
        &|d| write_config(d, &good),
        &base.to_string(),
    );
    drop(blocker);
    report_figures(
        "startup_failures",
        "missing data dir, unreadable/invalid config, bad setting, missing command, port in use",
        cases,
        cases,
        0,
        "each one error line naming the cause, exit 1, no child left",
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
