//! Faults in what the launcher depends on, through the real binaries: the launcher out of file
//! descriptors, a child flooding its IPC channel with garbage, an events database that can't be
//! opened, and every way a start can fail. Each is bounded in time and loopback only; each prints
//! its figures on a `RELIABILITY` line (README, Reliability).

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

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
    // Accepts keep failing meanwhile: still the one line.
    holds_for("one line about failing accepts", secs(1), || {
        c.count_lines("accepting connections failed") == 1
    });
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
    // The second measured is the check (CPU used over a span), not a wait for a state.
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
    assert_eq!(logged, 1, "logged more than once a minute");
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
        // Requests paced over the 6 s of the flood (the scenario).
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
