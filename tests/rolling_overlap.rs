//! The replacement before the retirement (DEC-78) and a bad build stopped at the first worker
//! (DEC-79, DEC-80), end to end with the real binary and the simulator: replacements that take
//! 1.5 s to be ready, a steady load of keep-alive clients, the launcher's own `/status` sampled
//! all along.

use crate::common::*;
use crate::overlap_status::assert_inputs_waiting;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub(crate) const SIGHUP: i32 = 1;
const SIGKILL: i32 = 9;
const READY_DELAY_MS: &str = "1500";

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A cluster of `workers` whose processes take 1.5 s to be ready, with the admin API.
pub(crate) fn slow_cluster(workers: u32) -> (Cluster, u16) {
    let admin = free_port();
    let c = cluster()
        .workers(workers)
        .env("SIM_READY_DELAY_MS", READY_DELAY_MS)
        .env("SIM_COST_EXPAND_MS", "20")
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    (c, admin)
}

/// config.json with `command` as the servers' command (the rest as the test started it).
pub(crate) fn set_command(c: &Cluster, command: Value) {
    let mut config = c.config.clone();
    merge(
        &mut config,
        &json!({"server": {"cluster": {"command": command}}}),
    );
    write_config(&c.data_dir(), &config);
}

/// Keep-alive clients sending tx requests until stopped: every status they got.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
    threads: JoinHandle<Vec<Vec<u16>>>,
}

impl Load {
    pub(crate) fn start(c: &Cluster, clients: usize) -> Load {
        let addr = c.addr();
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let (stop2, answered2) = (stop.clone(), answered.clone());
        let threads = std::thread::spawn(move || {
            in_parallel(clients, move |_| {
                let mut statuses = Vec::new();
                let deadline = Instant::now() + secs(120);
                let mut conn = Conn::open(addr).expect("a client connection");
                while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let sent = conn.send("GET", "/r4/ValueSet/$expand?url=x", &[], b"", true);
                    let status = if sent.is_ok() { conn.read().status } else { 0 };
                    statuses.push(status);
                    answered2.fetch_add(1, Ordering::Relaxed);
                    if status == 0 {
                        conn = Conn::open(addr).expect("a client connection");
                    }
                }
                statuses
            })
        });
        let load = Load {
            stop,
            answered,
            threads,
        };
        load.more(20);
        load
    }

    /// Waits until `n` more requests have been answered.
    pub(crate) fn more(&self, n: usize) {
        let from = self.answered.load(Ordering::Relaxed);
        wait_until(&format!("{n} more requests answered"), secs(30), || {
            self.answered.load(Ordering::Relaxed) >= from + n
        });
    }

    /// Stops the clients: how many requests went, and those not answered 200.
    pub(crate) fn end(self) -> (usize, Vec<u16>) {
        self.more(20);
        self.stop.store(true, Ordering::Relaxed);
        let all: Vec<u16> = self.threads.join().expect("load threads").concat();
        let failed = all.iter().copied().filter(|&s| s != 200).collect();
        (all.len(), failed)
    }
}

/// How many tx places `/status` shows ready, sampled every 50 ms until stopped, with the
/// launcher's processes (not its guardian) and their resident memory.
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Sampled>,
}

#[derive(Debug, Default)]
pub(crate) struct Sampled {
    /// The fewest tx places ready.
    pub(crate) least: usize,
    pub(crate) samples: usize,
    /// The most processes running at once.
    pub(crate) most_processes: usize,
    /// Their resident memory at the first sample, and at its highest.
    pub(crate) first_rss: u64,
    pub(crate) peak_rss: u64,
}

impl Sampled {
    /// The figures for `tests/reliability.md`, against `tx` places and `processes` wanted.
    pub(crate) fn figures(&self, tx: usize, processes: usize) -> String {
        format!(
            "ready tx-workers never below {} of {tx} ({} samples); at most {} processes for \
             {processes} wanted; RSS {:.1} → {:.1} MB at the peak",
            self.least,
            self.samples,
            self.most_processes,
            self.first_rss as f64 / 1e6,
            self.peak_rss as f64 / 1e6
        )
    }
}

fn ready_tx(admin: u16) -> Option<usize> {
    let v = admin_get(admin, "/status").json();
    let rows = v["processes"].as_array()?;
    Some(
        rows.iter()
            .filter(|p| p["code"].as_str().is_some_and(|c| c.starts_with("tx")))
            .filter(|p| p["status"] == "ready")
            .count(),
    )
}

impl Sampler {
    pub(crate) fn start(c: &Cluster, admin: u16) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let launcher = c.child.id() as i32;
        let thread = std::thread::spawn(move || {
            let mut s = Sampled {
                least: usize::MAX,
                ..Sampled::default()
            };
            while !stop2.load(Ordering::Relaxed) {
                if let Some(n) = ready_tx(admin) {
                    s.least = s.least.min(n);
                    s.samples += 1;
                }
                let procs: Vec<i32> = children_of(launcher)
                    .into_iter()
                    .filter(|&p| !is_guardian(p))
                    .collect();
                let rss: u64 = procs
                    .iter()
                    .filter_map(|&p| proc_status_bytes(p, "VmRSS"))
                    .sum();
                s.most_processes = s.most_processes.max(procs.len());
                if s.first_rss == 0 {
                    s.first_rss = rss;
                }
                s.peak_rss = s.peak_rss.max(rss);
                std::thread::sleep(Duration::from_millis(50));
            }
            s
        });
        Sampler { stop, thread }
    }

    pub(crate) fn end(self) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("sampler")
    }
}

pub(crate) fn restart(c: &Cluster) -> RunOutput {
    restart_at(&c.data_dir())
}

/// `fhircluster restart` of the launcher of `data_dir`.
pub(crate) fn restart_at(data_dir: &std::path::Path) -> RunOutput {
    run_bounded(
        Command::new(LAUNCHER)
            .args(["restart", "--data-dir"])
            .arg(data_dir)
            .env_remove("FHIRSMITH_DATA_DIR"),
        secs(120),
    )
}

/// The port the process of place `code` listens on, from its last switch line.
fn port_of(c: &Cluster, code: &str) -> u16 {
    let needle = format!("{code}: switched to its replacement");
    let line = c
        .log_lines()
        .into_iter()
        .rev()
        .find(|l| l.contains(&needle))
        .unwrap_or_else(|| panic!("no switch of {code}"));
    line.split(" on port ")
        .nth(1)
        .and_then(|r| r.split(|ch: char| !ch.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line}"))
}

fn pids(c: &Cluster, codes: &[&str]) -> Vec<i32> {
    codes.iter().map(|p| c.pid_of(p)).collect()
}

#[test]
fn a_restart_and_a_reload_keep_every_tx_place_ready_under_keep_alive_load() {
    // spec: DEC-78
    let (c, admin) = slow_cluster(3);
    let codes = ["m0", "tx1", "tx2", "tx3"];
    let before = pids(&c, &codes);
    let load = Load::start(&c, 4);
    let sampler = Sampler::start(&c, admin);

    let out = restart(&c);
    assert_eq!(out.code, Some(0), "{out:?}\n{}", c.log_lines().join("\n"));
    eprintln!(
        "measured: fhircluster restart of 3 workers and the master took {:?}",
        out.took
    );
    // Its last line may reach the test a moment after the command's answer.
    c.wait_for_count("rolling restart done", 1, secs(10));
    let mark = c.mark();
    set_command(&c, json!(["env", "FHIRCLUSTER_TEST_MARK=2", SIM]));
    c.signal(SIGHUP);
    c.wait_for_after(mark, "rolling restart done", secs(90));

    let s = sampler.end();
    let (sent, failed) = load.end();
    let log = c.log_lines().join("\n");
    // The figures cluster.md quotes (DEC-78).
    eprintln!("measured: {s:?}, {sent} requests");
    assert!(s.samples > 40, "sampled {} times", s.samples);
    assert_eq!(
        s.least, 3,
        "the ready tx places dropped to {}:\n{log}",
        s.least
    );
    assert!(
        s.most_processes <= 5,
        "one process more than wanted at most: {s:?}"
    );
    assert!(sent > 100, "steady load: {sent} requests");
    assert!(
        failed.is_empty(),
        "{} of {sent} failed: {failed:?}",
        failed.len()
    );
    let after = pids(&c, &codes);
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(b, a, "every process replaced: {before:?} → {after:?}");
    }
    assert!(
        before.iter().all(|&p| !alive(p)),
        "the old processes are gone"
    );
    assert_eq!(c.count_lines("switched to its replacement"), 6, "{log}");
    report_figures(
        "restart_and_reload_beside",
        "`fhircluster restart` of 3 workers and the master, then a reload changing `command`, \
         replacements 1.5 s to be ready, 4 keep-alive clients, /status sampled every 50 ms",
        2,
        sent as u64,
        failed.len() as u64,
        &s.figures(3, 4),
    );
}

/// A reload naming a broken `command` stops at tx1 and changes nothing; then a crash of a
/// process not reached restarts it with its last good inputs, and a good reload goes on.
fn a_broken_command_changes_nothing(test: &str, command: Value, how: &str) {
    // spec: DEC-79
    let (c, admin) = slow_cluster(2);
    let codes = ["m0", "tx1", "tx2"];
    let before = pids(&c, &codes);
    let load = Load::start(&c, 3);
    let mark = c.mark();
    set_command(&c, command);
    c.signal(SIGHUP);
    c.wait_for_after(mark, "rolling restart stopped: tx1's replacement", secs(60));
    load.more(20);
    let (sent, failed) = load.end();
    let log = c.log_lines().join("\n");
    assert!(
        failed.is_empty(),
        "{} of {sent} failed: {failed:?}\n{log}",
        failed.len()
    );
    assert_eq!(
        pids(&c, &codes),
        before,
        "every process keeps its pid:\n{log}"
    );
    assert!(before.iter().all(|&p| alive(p)));
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("rolling restart stopped"))
        .collect();
    assert_eq!(errors.len(), 1, "{log}");
    assert!(
        errors[0].contains("tx1's replacement") && errors[0].contains(how),
        "{}",
        errors[0]
    );
    assert_eq!(
        c.count_lines("rolling restart 2/"),
        0,
        "tx2 not reached:\n{log}"
    );
    report_figures(
        test,
        &format!("a reload whose `command` {how}, under 3 keep-alive clients"),
        1,
        sent as u64,
        failed.len() as u64,
        "the roll stopped at tx1: every pid kept, one ERROR with the replacement's stderr, \
         the status saying so; a later crash of tx2 restarted it on the old command; the next \
         good reload restarted every process",
    );
    let status = admin_get(admin, "/status").json();
    assert_eq!(
        status["rollingRestart"]["state"], "rolling restart stopped",
        "{status}"
    );
    let metrics = admin_get(admin, "/metrics").text();
    assert!(
        metrics.contains("\nfhircluster_rolling_restart_stopped 1\n"),
        "{metrics}"
    );
    // DEC-93: every place keeps its last good inputs, the new ones shown waiting.
    assert_inputs_waiting(&c, admin, &codes);
    // tx2 crashes: it starts again with what it ran before, not the broken command.
    let mark = c.mark();
    nix_kill(before[2], SIGKILL);
    c.wait_for_after(mark, "tx2: ready", secs(30));
    assert_inputs_waiting(&c, admin, &codes);
    // `fhircluster restart` with the broken command in force stops at tx1 too, and says so.
    let out = restart(&c);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        format!("{}{}", out.stdout, out.stderr).contains("rolling restart stopped"),
        "{out:?}"
    );
    assert_eq!(
        pids(&c, &["m0", "tx1"]),
        before[..2],
        "m0 and tx1 keep their pids"
    );
    // A good reload goes on: every process restarts in turn.
    let mark = c.mark();
    set_command(&c, json!(["env", "FHIRCLUSTER_TEST_MARK=3", SIM]));
    c.signal(SIGHUP);
    c.wait_for_after(mark, "rolling restart done", secs(90));
    let status = admin_get(admin, "/status").json();
    assert!(status["rollingRestart"].is_null(), "{status}");
    assert_inputs_waiting(&c, admin, &[]);
    let metrics = admin_get(admin, "/metrics").text();
    assert!(
        metrics.contains("\nfhircluster_rolling_restart_stopped 0\n"),
        "{metrics}"
    );
    let after = pids(&c, &codes);
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(b, a, "{before:?} → {after:?}");
    }
}

fn nix_kill(pid: i32, sig: i32) {
    // SAFETY: a signal to a child process of the test's cluster.
    unsafe {
        libc::kill(pid, sig);
    }
}

#[test]
fn a_reload_whose_command_exits_at_once_stops_at_the_first_worker_and_changes_nothing() {
    // spec: DEC-79
    a_broken_command_changes_nothing(
        "broken_command_exits",
        json!([
            "sh",
            "-c",
            "echo 'broken build: cannot load module x' >&2; exit 3"
        ]),
        "exited before it was ready (exit code 3)",
    );
}

#[test]
fn a_reload_whose_command_never_gets_ready_stops_at_the_first_worker_and_changes_nothing() {
    // spec: DEC-79, DEC-81
    a_broken_command_changes_nothing(
        "broken_command_never_ready",
        json!(["env", "SIM_READY_DELAY_MS=600000", SIM]),
        "was not ready within its start limit",
    );
}

#[test]
fn a_refused_reload_stops_a_rolling_restart_and_the_next_good_one_goes_on() {
    // spec: DEC-80
    let (c, admin) = slow_cluster(3);
    let mark = c.mark();
    set_command(&c, json!(["env", "FHIRCLUSTER_TEST_MARK=2", SIM]));
    c.signal(SIGHUP);
    c.wait_for_after(mark, "rolling restart 1/4: tx1", secs(30));
    std::fs::write(c.data_dir().join("config.json"), "{ not json").expect("config.json");
    c.signal(SIGHUP);
    let line = c.wait_for_after(
        mark,
        "rolling restart stopped: the reload was refused",
        secs(30),
    );
    assert!(line.contains("WARN") && line.contains("tx3"), "{line}");
    wait_until("the status says the roll stopped", secs(30), || {
        admin_get(admin, "/status").json()["rollingRestart"]["state"] == "rolling restart stopped"
    });
    assert_eq!(
        c.count_lines("rolling restart 3/"),
        0,
        "{}",
        c.log_lines().join("\n")
    );
    let tx3 = c.pid_of("tx3");
    let mark = c.mark();
    set_command(&c, json!(["env", "FHIRCLUSTER_TEST_MARK=3", SIM]));
    c.signal(SIGHUP);
    c.wait_for_after(mark, "rolling restart done", secs(90));
    assert_ne!(c.pid_of("tx3"), tx3, "the next good reload reached tx3");
}

#[test]
fn after_a_restart_with_ports_swapped_an_upgrade_keeps_routing_every_place_to_its_process() {
    // spec: DEC-78, DEC-41: a replacement's switch swaps two places' ports; the upgrade hands
    // the ports over, so every place is still reached, and the next restart finds a spare one.
    let (mut c, admin) = slow_cluster(2);
    let out = restart(&c);
    assert_eq!(out.code, Some(0), "{out:?}");
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    c.wait_until_listening(secs(10));
    let pids_now = pids(&c, &["tx1", "tx2"]);
    // A cache-id issued by each place's process, straight on the port it listens on, is
    // answered through the front door: the place still routes to its own process.
    for code in ["tx1", "tx2"] {
        let port = port_of(&c, code);
        let r = request(
            std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            "POST",
            "/r4/$cache-control",
            &[],
            b"{}",
        );
        let id = r.header("x-cache-id").unwrap_or("").to_string();
        assert!(
            id.starts_with(&format!("{code}.")),
            "{code} on {port}: {id:?}"
        );
        let r = c.request(
            "GET",
            "/r4/ValueSet/$expand?url=x",
            &[("x-cache-id", &id)],
            b"",
        );
        assert_eq!(
            r.status,
            200,
            "{code}'s cache-id through the front: {}",
            r.text()
        );
        assert_eq!(r.served_by(), code);
    }
    assert_eq!(
        admin_get(admin, "/status").json()["workers"]["settled"],
        true
    );
    let out = restart(&c);
    assert_eq!(out.code, Some(0), "{out:?}\n{}", c.log_lines().join("\n"));
    assert_eq!(c.count_lines("no room for its replacement"), 0);
    let after = pids(&c, &["tx1", "tx2"]);
    assert!(pids_now.iter().zip(&after).all(|(a, b)| a != b));
    c.wait_for("tx2: switched to its replacement", secs(1));
}

#[test]
fn without_a_spare_port_a_broken_replacement_in_place_starts_again_as_it_was() {
    // spec: DEC-78, DEC-79: no spare port (the admin API right after the workers' ports):
    // one WARNING saying so, tx1 replaced in place; its broken replacement stops the roll and
    // tx1 starts again with its last good inputs; tx2 and the master are untouched.
    let c = cluster().workers(2).admin_after_workers().start();
    let admin = c.internal + 3;
    let before = pids(&c, &["m0", "tx1", "tx2"]);
    let mark = c.mark();
    set_command(&c, json!(["sh", "-c", "echo 'broken build' >&2; exit 3"]));
    c.signal(SIGHUP);
    let line = c.wait_for_after(mark, "no room for its replacement beside it", secs(30));
    assert!(
        line.contains("WARN") && line.contains("no spare port"),
        "{line}"
    );
    let line = c.wait_for_after(mark, "rolling restart stopped: tx1's replacement", secs(30));
    assert!(
        line.contains("ERROR") && line.contains("broken build"),
        "{line}"
    );
    c.wait_for_after(mark, "tx1: ready", secs(30));
    assert_ne!(c.pid_of("tx1"), before[1], "tx1 was replaced in place");
    assert_eq!(pids(&c, &["m0", "tx2"]), [before[0], before[2]]);
    assert_eq!(
        admin_get(admin, "/status").json()["rollingRestart"]["state"],
        "rolling restart stopped"
    );
    let r = c.get("/r4/ValueSet/$expand?url=x");
    assert_eq!(r.status, 200);
}
