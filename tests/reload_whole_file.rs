//! A reload takes the whole file (#26): one `SIGHUP` applies what the launcher can apply itself
//! (the access log's format), takes what needs its own restart by the in-place upgrade to the
//! same binary (`proxyThreads`: the pid kept), and restarts the processes in turn only when
//! something they read changed (the `command`): a reload of a live setting alone keeps every
//! pid. `fhircluster restart` restarts every process in turn (new server code, same settings).

use crate::common::*;
use crate::upgrade::Bin;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

const SIGHUP: i32 = 1;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The cluster's config with `patch` merged in, written back to its config.json.
fn rewrite(c: &Cluster, patch: Value) {
    let mut config = c.config.clone();
    merge(&mut config, &patch);
    write_config(&c.data_dir(), &config);
}

/// The runtime's worker threads in the launcher (`/proc/<pid>/task/*/comm`).
fn runtime_threads(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "fhc-proxy")
                })
                .count()
        })
        .unwrap_or(0)
}

fn environ_has(pid: i32, var: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|e| e.split(|&b| b == 0).any(|v| v == var.as_bytes()))
}

fn pids(c: &Cluster, codes: &[&str]) -> Vec<i32> {
    codes.iter().map(|p| c.pid_of(p)).collect()
}

fn last_line(path: &std::path::Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn one_hup_changing_command_access_log_and_proxy_threads_takes_all_three() {
    // spec: DEC-44, DEC-45
    let bin = Bin::new();
    let c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {
            "proxyThreads": 2, "accessLog": "text", "accessLogPath": "access.log"
        }}}))
        .start_wrapped(&bin.wrap());
    let launcher = c.child.id() as i32;
    let before = pids(&c, &["m0", "tx1"]);
    wait_until("2 runtime threads", secs(30), || {
        runtime_threads(launcher) == 2
    });
    let log = c.data_dir().join("access.log");
    assert_eq!(c.get("/r4/metadata").status, 200);
    wait_until("a text line", secs(10), || {
        last_line(&log).contains("path=\"/r4/metadata\"")
    });
    assert!(!last_line(&log).starts_with('{'), "{}", last_line(&log));
    // Steady tx load across the reload: the upgrade's pause and each process's restart.
    let stop = Arc::new(AtomicBool::new(false));
    let statuses = Arc::new(Mutex::new(Vec::<u16>::new()));
    let addr = c.addr();
    let load: Vec<_> = (0..2)
        .map(|_| {
            let (stop, statuses) = (stop.clone(), statuses.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let status = request(addr, "GET", "/r4/metadata", &[], b"").status;
                    statuses
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(status);
                }
            })
        })
        .collect();
    wait_until("the load under way", secs(10), || {
        statuses.lock().map_or(0, |s| s.len()) > 10
    });

    rewrite(
        &c,
        json!({"server": {"cluster": {
            "command": ["env", "FHIRCLUSTER_TEST_MARK=2", SIM],
            "accessLog": "json",
            "proxyThreads": 3
        }}}),
    );
    let mark = c.mark();
    c.signal(SIGHUP);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    c.wait_for_after(mark, "rolling restart done", secs(60));
    let lines = c.log_lines()[mark..].join("\n");
    for needle in [
        "reload: server.cluster.accessLog \"text\" → \"json\": applied",
        "reload: server.cluster.proxyThreads 2 → 3: taken by the in-place upgrade",
        ": the processes take it as they restart in turn",
        "reload: 3 settings changed: 1 applied, 1 taken by the in-place upgrade, 1 taken by the \
         processes as they restart in turn, 0 waiting for a restart of the launcher",
        "rolling restart of tx1, m0",
    ] {
        assert!(lines.contains(needle), "no {needle:?} in\n{lines}");
    }
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().expect("load thread");
    }
    let statuses = statuses.lock().map(|s| s.clone()).unwrap_or_default();
    let lost = statuses.iter().filter(|&&s| s != 200).count();
    report_figures(
        "reload_whole_file::one_hup_changing_command_access_log_and_proxy_threads_takes_all_three",
        "one SIGHUP: accessLog applied, proxyThreads by the in-place upgrade, command by the \
         rolling restart",
        1,
        statuses.len() as u64,
        lost as u64,
        "the launcher's pid; every process replaced; no tx request lost",
    );
    assert_eq!(lost, 0, "{lost} of {} tx requests failed", statuses.len());
    assert_eq!(c.child.id() as i32, launcher, "the launcher's pid is kept");
    let after = pids(&c, &["m0", "tx1"]);
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(b, a, "every process restarted: {before:?} → {after:?}");
        assert!(
            environ_has(*a, "FHIRCLUSTER_TEST_MARK=2"),
            "pid {a} runs the new command"
        );
    }
    wait_until("3 runtime threads", secs(30), || {
        runtime_threads(launcher) == 3
    });
    assert_eq!(c.get("/r4/metadata").status, 200);
    wait_until("a JSON line", secs(10), || {
        let l = last_line(&log);
        l.starts_with('{') && l.contains("/r4/metadata")
    });
}

#[test]
fn a_hup_with_config_json_removed_is_refused_and_changes_nothing() {
    // spec: DEC-44, DEC-70. A routine reload with a file of the data directory removed never
    // stops the service: config.json gone (an operator's slip, a deploy tool's window) is
    // refused as a broken file is, where the defaults used to replace every setting.
    let c = cluster().workers(1).start();
    let before = pids(&c, &["m0", "tx1"]);
    let config = c.data_dir().join("config.json");
    let kept = std::fs::read(&config).expect("config.json");
    std::fs::remove_file(&config).expect("remove config.json");
    let mark = c.mark();
    c.signal(SIGHUP);
    let line = c.wait_for_after(mark, "the settings were refused", secs(20));
    assert!(line.contains("config.json: no such file"), "{line}");
    holds_for("nothing restarted", Duration::from_millis(1500), || {
        c.count_lines("rolling restart") == 0
    });
    assert_eq!(pids(&c, &["m0", "tx1"]), before);
    assert_eq!(c.get("/r4/metadata").status, 200);
    // Put back, the next reload is taken.
    std::fs::write(&config, kept).expect("put config.json back");
    let mark = c.mark();
    c.signal(SIGHUP);
    c.wait_for_after(mark, "reload: no process restarts", secs(20));
    assert_eq!(pids(&c, &["m0", "tx1"]), before);
}

#[test]
fn a_hup_changing_only_live_settings_keeps_every_process() {
    // spec: DEC-44
    let mut c = cluster().workers(2).start();
    let before = pids(&c, &["m0", "tx1", "tx2"]);
    let children = c.child_pids();
    rewrite(
        &c,
        json!({"server": {"cluster": {"queueSeconds": 0.5, "accessLog": "text"}}}),
    );
    c.signal(SIGHUP);
    c.wait_for(
        "reload: no process restarts: what they read is unchanged",
        secs(20),
    );
    let lines = c.log_lines().join("\n");
    assert!(
        lines.contains("reload: server.cluster.queueSeconds 1 → 0.5: applied"),
        "{lines}"
    );
    holds_for("no process restarted", Duration::from_millis(1500), || {
        c.count_lines("rolling restart") == 0
    });
    assert_eq!(pids(&c, &["m0", "tx1", "tx2"]), before);
    assert_eq!(c.child_pids(), children);
    assert!(before.iter().all(|&p| alive(p)));

    // A setting of FHIRsmith's own (outside server.cluster) is read by every process.
    rewrite(
        &c,
        json!({"server": {"cluster": {"queueSeconds": 0.5, "accessLog": "text"}},
               "library": {"theirs": 1}}),
    );
    c.signal(SIGHUP);
    c.wait_for("rolling restart done", secs(60));
    let after = pids(&c, &["m0", "tx1", "tx2"]);
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(
            b, a,
            "config.json changed outside server.cluster: {before:?} → {after:?}"
        );
    }
}

#[test]
fn fhircluster_restart_restarts_every_process_in_turn_and_exits_0() {
    // spec: DEC-45
    let c = cluster().workers(2).start();
    let before = pids(&c, &["m0", "tx1", "tx2"]);
    let out = run_bounded(
        Command::new(LAUNCHER)
            .args(["restart", "--data-dir"])
            .arg(c.data_dir())
            .env_remove("FHIRSMITH_DATA_DIR"),
        secs(120),
    );
    assert_eq!(out.code, Some(0), "{out:?}\n{}", c.log_lines().join("\n"));
    assert!(out.stdout.contains("restarted"), "{out:?}");
    // The launcher's log reaches the test through a pipe and a reader thread: the last start
    // line may come a moment after the command's answer.
    wait_until("every process replaced", secs(20), || {
        let after = pids(&c, &["m0", "tx1", "tx2"]);
        before.iter().zip(&after).all(|(b, a)| b != a)
    });
    let steps: Vec<usize> = ["1/3: tx1", "2/3: tx2", "3/3: m0"]
        .iter()
        .map(|s| c.must_index(&format!("rolling restart {s}")))
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");

    // No launcher there: 2.
    let empty = tempfile::tempdir().expect("temp dir");
    let out = run_bounded(
        Command::new(LAUNCHER)
            .args(["restart", "--data-dir"])
            .arg(empty.path())
            .env_remove("FHIRSMITH_DATA_DIR"),
        secs(20),
    );
    assert_eq!(out.code, Some(2), "{out:?}");
}

#[test]
fn a_refused_upgrade_leaves_its_settings_waiting_and_the_rest_of_the_reload_applied() {
    // spec: DEC-44: the reload's upgrade refused (the new binary's --check fails): one line
    // naming what waits; the processes still restart in turn for the new command, the
    // launcher serves on, and the next reload reports the waiting setting again.
    let bin = Bin::new();
    let c = cluster().workers(1).start_wrapped(&bin.wrap());
    let launcher = c.child.id() as i32;
    let before = pids(&c, &["m0", "tx1"]);
    bin.replace_with_script(&format!(
        "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --check ] && {{ echo 'bad setting' >&2; exit 1; }}; done\nexec '{LAUNCHER}' \"$@\"\n"
    ));
    rewrite(
        &c,
        json!({"server": {"cluster": {
            "command": ["env", "FHIRCLUSTER_TEST_MARK=3", SIM],
            "proxyThreads": 2,
            "queueSeconds": 0.5
        }}}),
    );
    let mark = c.mark();
    c.signal(SIGHUP);
    let line = c.wait_for_after(mark, "upgrade refused", secs(60));
    assert!(
        line.contains("WARN")
            && line.contains("--check failed")
            && line.contains("server.cluster.proxyThreads wait for the next reload"),
        "{line}"
    );
    c.wait_for_after(mark, "rolling restart done", secs(60));
    assert_eq!(c.child.id() as i32, launcher);
    let after = pids(&c, &["m0", "tx1"]);
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(b, a, "the new command is taken: {before:?} → {after:?}");
        assert!(environ_has(*a, "FHIRCLUSTER_TEST_MARK=3"), "pid {a}");
    }
    assert_eq!(c.get("/r4/metadata").status, 200);
    let lines = c.log_lines()[mark..].join("\n");
    assert!(
        lines.contains("reload: server.cluster.queueSeconds 1 → 0.5: applied"),
        "{lines}"
    );

    // The next reload: proxyThreads is still a change (now taken: the binary is good again).
    bin.replace_with(std::path::Path::new(LAUNCHER));
    let mark = c.mark();
    c.signal(SIGHUP);
    c.wait_for_after(
        mark,
        "reload: server.cluster.proxyThreads 1 → 2: taken by the in-place upgrade",
        secs(20),
    );
    c.wait_for_after(mark, "upgraded in place", secs(60));
    c.wait_for_after(mark, "reload: no process restarts", secs(30));
    assert_eq!(c.child.id() as i32, launcher);
    assert_eq!(pids(&c, &["m0", "tx1"]), after, "nothing they read changed");
    wait_until("2 runtime threads", secs(30), || {
        runtime_threads(launcher) == 2
    });
}

#[test]
fn a_pid_file_moved_by_a_reload_is_at_its_new_path_only() {
    // spec: DEC-44: pidFile is taken by the in-place upgrade; the old file named the same
    // (running) launcher, so left behind it would hold a stale path to it.
    let bin = Bin::new();
    let c = cluster()
        .workers(0)
        .config(json!({"server": {"cluster": {"pidFile": "a.pid"}}}))
        .start_wrapped(&bin.wrap());
    let launcher = c.child.id() as i32;
    let (a, b) = (c.data_dir().join("a.pid"), c.data_dir().join("b.pid"));
    wait_until("a.pid written", secs(10), || a.exists());
    rewrite(&c, json!({"server": {"cluster": {"pidFile": "b.pid"}}}));
    let mark = c.mark();
    c.signal(SIGHUP);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    wait_until("b.pid written", secs(10), || {
        std::fs::read_to_string(&b).is_ok_and(|t| t.trim() == launcher.to_string())
    });
    assert!(!a.exists(), "the old pid file is gone");
}
