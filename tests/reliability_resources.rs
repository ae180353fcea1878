//! Faults in what the launcher depends on, through the real binaries: the launcher out of file
//! descriptors, a child flooding its IPC channel with garbage, an events database that can't be
//! opened, and every way a start can fail. Each is bounded in time and loopback only; each prints
//! its figures on a `RELIABILITY` line (tests/reliability.md).

use crate::common;

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
    let mut run = |name: &str, prepare: &dyn Fn(&std::path::Path), needles: &[&str]| {
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
        for needle in needles {
            assert!(
                errors[0].contains(needle),
                "{name}: {:?} lacks {needle:?}",
                errors[0]
            );
        }
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
        &["does not exist"],
    );
    run(
        "config.json unreadable (a directory)",
        &|d| std::fs::create_dir(d.join("config.json")).expect("mkdir"),
        &["config.json"],
    );
    run(
        "config.json invalid",
        &|d| std::fs::write(d.join("config.json"), "{ \"server\": { \"port\": 1, }").expect("w"),
        &["config.json"],
    );
    run(
        "a setting out of range",
        &|d| {
            let mut c = good.clone();
            c["server"]["cluster"]["workers"] = json!(-2);
            write_config(d, &c);
        },
        &["server.cluster.workers"],
    );
    run(
        "a server command that does not exist",
        &|d| {
            let mut c = good.clone();
            c["server"]["cluster"]["command"] = json!(["/nonexistent/server"]);
            write_config(d, &c);
        },
        &["/nonexistent/server"],
    );
    // The client port in use: found before any process is started (held_ports.rs).
    let blocker = std::net::TcpListener::bind(("0.0.0.0", base)).expect("hold the port");
    run(
        "the port in use",
        &|d| write_config(d, &good),
        &[&base.to_string()],
    );
    drop(blocker);
    // spec: RESTART-7. A master that dies at once, saying why on its stderr: the give-up error
    // names its exit status and repeats its last words (issue 14).
    run(
        "a master that exits at once",
        &|d| {
            let mut c = good.clone();
            c["server"]["cluster"]["maxStartFailures"] = json!(2);
            c["server"]["cluster"]["command"] = json!([
                "sh",
                "-c",
                "echo 'starting'; echo 'fatal: the terminology cache is corrupt' >&2; exit 3"
            ]);
            write_config(d, &c);
        },
        &[
            "maxStartFailures 2",
            "exit code 3",
            "fatal: the terminology cache is corrupt",
        ],
    );
    report_figures(
        "startup_failures",
        "missing data dir, unreadable/invalid config, bad setting, missing command, port in use, \
         a master that exits at once",
        cases,
        cases,
        0,
        "each one error line naming the cause, exit 1, no child left",
    );
}

/// A pipe the test holds the read end of without reading it: the launcher's stdout and stderr
/// stuck, as under a stalled journald or `fhircluster 2>&1 | sleep 40`.
fn stuck_pipe() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`, each then owned by one File.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just created and are owned by nothing else.
    unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}

/// The launcher started in `dir` with both its stdout and stderr on `out`; killed (with its
/// children, by their parent-death signal) if the test ends before it does.
struct Stuck {
    child: std::process::Child,
}

impl Stuck {
    fn start(dir: &std::path::Path, out: &std::fs::File, args: &[&str]) -> Stuck {
        let child = launcher_command(dir)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone().expect("dup"))
            .stderr(out.try_clone().expect("dup"))
            .spawn()
            .expect("start fhircluster");
        Stuck { child }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits for the launcher's exit; None when it is still running after `timeout`.
    fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Stuck {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A launcher whose processes (the master and `workers` workers) each first write `flood` to
/// their stderr, with its stdout and stderr on a pipe nobody reads yet and its own endpoints on.
struct StuckRun {
    launcher: Stuck,
    /// The pipe's read end, for when the test reads the output at last.
    output: std::fs::File,
    front: SocketAddr,
    admin: u16,
    _dir: tempfile::TempDir,
}

fn start_stuck(workers: u16, flood: &str) -> StuckRun {
    let dir = tempfile::tempdir().expect("dir");
    let base = free_ports(workers + 3);
    let admin = base + workers + 2;
    write_config(
        dir.path(),
        &json!({ "server": { "port": base, "cluster": {
            "workers": workers, "internalPort": base + 1, "killSeconds": 5,
            "command": flooding_command(flood)
        } }, "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } } }),
    );
    let (output, write_end) = stuck_pipe();
    let launcher = Stuck::start(
        dir.path(),
        &write_end,
        &["--admin-address", &admin.to_string()],
    );
    StuckRun {
        launcher,
        output,
        front: SocketAddr::from(([127, 0, 0, 1], base)),
        admin,
        _dir: dir,
    }
}

/// GET `path` with an answer expected within `timeout`; status 0 when none came.
fn get_within(addr: SocketAddr, path: &str, timeout: Duration) -> u16 {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    raw_request(addr, raw.as_bytes(), timeout).status
}

/// A server command: `sh -c` writing `flood` (a shell pipeline) to its stderr, then the sim,
/// whose own output is discarded (so the flood is all the launcher gets from it).
fn flooding_command(flood: &str) -> serde_json::Value {
    json!([
        "sh",
        "-c",
        format!("{flood} >&2; exec \"$0\" \"$@\" >/dev/null 2>&1"),
        SIM
    ])
}

#[test]
fn a_stuck_stdout_and_stderr_never_stop_the_proxy_the_endpoints_or_a_stop() {
    // Issue 20, item 1: a child writes 400 KB to its stderr while the launcher's own output is a
    // pipe nobody reads (`2>&1 | sleep 40`).
    let StuckRun {
        launcher: mut l,
        output: read_end,
        front,
        admin,
        _dir,
    } = start_stuck(1, "yes padding-padding-padding | head -c 400000");
    let admin_at = SocketAddr::from(([127, 0, 0, 1], admin));
    // The master, the worker and the listener come up with nobody reading the output.
    let began = Instant::now();
    let served = eventually(secs(30), || {
        get_within(front, "/r4/metadata", secs(3)) == 200
    });
    assert!(served, "no answer on the front door with the output stuck");
    let mut answered = 0;
    for path in ["/r4/metadata", LOOKUP] {
        assert_eq!(get_within(front, path, secs(3)), 200, "{path}");
        answered += 1;
    }
    assert_eq!(get_within(admin_at, "/livez", secs(3)), 200, "/livez");
    assert_eq!(get_within(admin_at, "/metrics", secs(3)), 200, "/metrics");
    let children: Vec<i32> = children_of(l.pid())
        .into_iter()
        .filter(|&p| !is_guardian(p))
        .collect();
    assert_eq!(children.len(), 2, "master and worker: {children:?}");
    // SIGTERM stops it (drain, processes in order) with the output still stuck.
    let stop = Instant::now();
    unsafe_kill(l.pid(), 15);
    let status = l.wait_exit(secs(15));
    let took = stop.elapsed();
    assert!(status.is_some(), "still running {took:?} after SIGTERM");
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    assert!(
        wait_gone(&children, secs(5)).is_empty(),
        "children left: {children:?}"
    );
    drop(read_end);
    report_figures(
        "stuck_output",
        "stdout and stderr a pipe nobody reads; a child writes 400 KB to its stderr",
        1,
        answered + 2,
        0,
        &format!(
            "served after {:.1} s, /livez and /metrics answered, SIGTERM stopped it in {:.1} s, \
             no child left",
            (stop - began).as_secs_f64(),
            took.as_secs_f64()
        ),
    );
}

/// The figure `N` of a `N log lines dropped ...` line, if `line` is one.
fn dropped_reported(line: &str) -> Option<u64> {
    let (before, _) = line.split_once(" log lines dropped")?;
    before.rsplit(' ').next()?.parse().ok()
}

#[test]
fn a_flooding_child_with_the_output_stuck_has_every_dropped_line_counted_and_reported() {
    // Issue 20, item 1: 1,000,000 lines from the master while nobody reads the launcher's
    // output; every line is either written or counted, and the count is logged once the output
    // moves again and shown in /metrics.
    const LINES: u64 = 1_000_000;
    let StuckRun {
        launcher: mut l,
        output: read_end,
        admin,
        _dir,
        ..
    } = start_stuck(0, &format!("seq 1 {LINES}"));
    let admin_at = SocketAddr::from(([127, 0, 0, 1], admin));
    let ready = eventually(secs(30), || get_within(admin_at, "/readyz", secs(3)) == 200);
    assert!(ready, "the launcher never got ready with the output stuck");
    let dropped = |source: &str| {
        scrape(admin).value("fhircluster_log_lines_dropped_total", &[("source", source)]) as u64
    };
    let while_stuck = dropped("children");
    assert!(
        while_stuck > 0,
        "no child line counted as dropped while stuck"
    );
    // The output moves again: every line is read from here on.
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(read_end).lines() {
                let Ok(line) = line else { break };
                lines.lock().expect("lines").push(line);
            }
        })
    };
    let seen = || -> (u64, u64) {
        let l = lines.lock().expect("lines");
        let flood = l
            .iter()
            .filter(|x| {
                x.strip_prefix("[m0] ")
                    .is_some_and(|n| n.parse::<u64>().is_ok())
            })
            .count() as u64;
        let reported = l.iter().filter_map(|x| dropped_reported(x)).sum();
        (flood, reported)
    };
    // Every line of the flood is accounted for: written, or counted as dropped; and every drop
    // is reported in the log.
    let mut last = (0, 0, 0, 0);
    let balanced = eventually(secs(30), || {
        let (children, launcher) = (dropped("children"), dropped("launcher"));
        let (flood, reported) = seen();
        last = (flood, children, launcher, reported);
        flood + children == LINES && reported == children + launcher
    });
    let (flood, children, launcher, reported) = last;
    assert!(
        balanced,
        "{flood} lines written + {children} dropped != {LINES}, or {reported} reported != \
         {children} + {launcher} dropped:\n{}",
        lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|x| !x.starts_with("[m0] ") || x.len() > 14)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    unsafe_kill(l.pid(), 15);
    let status = l.wait_exit(secs(15));
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    let _ = reader.join();
    let all = lines.lock().expect("lines").clone();
    assert!(
        all.iter().any(|x| x.contains("stopped")),
        "the last lines written at the stop"
    );
    report_figures(
        "stuck_output_flood",
        "the master writes 1,000,000 lines to stderr while nobody reads the launcher's output",
        1,
        LINES,
        0,
        &format!(
            "{flood} written, {children} dropped and counted ({launcher} of the launcher's own), \
             all reported in the log and /metrics"
        ),
    );
}

/// One request on a kept-alive connection: its status, 0 when nothing came back.
fn status_on(s: &mut TcpStream, path: &str) -> u16 {
    use std::io::Write;
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return 0;
    }
    let _ = s.set_read_timeout(Some(secs(10)));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Up to the end of the head and the body its Content-Length names.
    loop {
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                return text
                    .split_whitespace()
                    .nth(1)
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
            }
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return 0,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn a_crowd_past_the_open_file_limit_waits_while_requests_in_hand_and_restarts_go_on() {
    // spec: DEC-54 — with 512 descriptors, 600 idle clients: before, the launcher ran out
    // (every request in hand a 502, the admin endpoint and a worker's restart failing); now
    // it holds client connections to its limit (64 here) and the rest wait in the backlog.
    let admin = free_port();
    let wrap: Vec<String> = ["prlimit", "--nofile=512:512", "--"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start_wrapped(&wrap);
    // Clients served before the crowd, kept alive.
    let mut served: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(c.addr()).expect("connect"))
        .collect();
    for s in &mut served {
        assert_eq!(status_on(s, LOOKUP), 200);
    }
    let crowd: Vec<TcpStream> = (0..600)
        .filter_map(|_| TcpStream::connect(c.addr()).ok())
        .collect();
    c.wait_for(
        "client connections: at the limit of 64 open at once",
        secs(10),
    );
    // Each client in hand is answered, all at once, through new connections to the processes.
    let answers: Vec<u16> = std::thread::scope(|scope| {
        let asked: Vec<_> = served
            .iter_mut()
            .enumerate()
            .map(|(i, s)| {
                let path = if i % 2 == 0 {
                    LOOKUP
                } else {
                    "/dashboard/status.json"
                };
                scope.spawn(move || status_on(s, path))
            })
            .collect();
        asked.into_iter().map(|h| h.join().unwrap_or(0)).collect()
    });
    assert!(answers.iter().all(|&s| s == 200), "{answers:?}");
    assert_eq!(admin_get(admin, "/readyz").status, 200);
    // A worker that dies is started again.
    let tx1 = c.pid_of("tx1");
    let mark = c.mark();
    unsafe_kill(tx1, 9);
    c.wait_for_after(mark, "tx1: ready", secs(20));
    // The crowd gone, a new client is served.
    drop(crowd);
    let mut fresh = TcpStream::connect(c.addr()).expect("connect");
    assert_eq!(status_on(&mut fresh, LOOKUP), 200);
    assert!(
        !c.log_lines()
            .iter()
            .any(|l| l.contains("Too many open files")),
        "{}",
        c.log_lines().join("\n")
    );
    report_figures(
        "open_file_limit",
        "RLIMIT_NOFILE 512, 600 idle clients, 8 clients in hand, a worker killed",
        2,
        17,
        0,
        "64 connections held, the rest waited in the backlog; every request answered 200, \
         the worker restarted",
    );
}

#[test]
fn the_soft_open_file_limit_is_raised_to_the_hard_one_at_start() {
    // spec: DEC-54 — systemd's 1024 soft limit would run out at a thousand clients.
    let wrap: Vec<String> = ["prlimit", "--nofile=300:4096", "--"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut c = cluster().workers(1).start_wrapped(&wrap);
    c.wait_for("the soft limit raised from 300 to 4096", secs(10));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", c.pid())).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files");
    let soft: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(soft.get(3..5), Some(&["4096", "4096"][..]), "{line}");
}
