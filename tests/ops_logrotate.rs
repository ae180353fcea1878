//! `fhircluster print logrotate`, run by a real logrotate: `logrotate -d` reads it without an
//! error, and `logrotate -f` rotates the access log of a running launcher while requests are
//! being logged, with no line lost or torn: every request sent is one whole line, in the rotated
//! file or the new one. The printed `postrotate` signals the launcher through systemd
//! (`systemctl kill --kill-whom=main`); the launcher here is no systemd unit, so that one command
//! becomes `kill -USR1 <its pid>`, the same signal to the same process.

use crate::common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;

fn logrotate(args: &[&str]) -> RunOutput {
    let ok = Command::new("logrotate").arg("--version").output().is_ok();
    assert!(
        ok,
        "logrotate is not installed: this test runs the printed config with it \
         (.ci/run installs it: apt-get install -y logrotate)"
    );
    run_bounded(
        Command::new("logrotate").args(args),
        Duration::from_secs(30),
    )
}

fn lines_of(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn logrotate_rotates_the_access_log_of_a_running_launcher_and_no_line_is_lost_or_torn() {
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "accessLog": "text", "accessLogPath": "access.log"
        } } }))
        .start();
    let data = c.data_dir();
    let d = data.to_string_lossy().to_string();
    let out = run_bounded(
        Command::new(LAUNCHER).args(["print", "logrotate", "--data-dir", &d, "--user", "root"]),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(0), "print logrotate: {}", out.all());
    let printed = out.stdout;
    let log = data.join("access.log");
    assert!(
        printed.contains(&format!("\n{} {{\n", log.display())),
        "the config names accessLogPath in the data directory:\n{printed}"
    );
    let systemd = "systemctl kill --kill-whom=main --signal=USR1 fhircluster.service";
    assert!(printed.contains(systemd), "{printed}");
    let conf = data.join("logrotate.conf");
    let pid = c.child.id();
    std::fs::write(
        &conf,
        printed.replace(systemd, &format!("kill -USR1 {pid}")),
    )
    .expect("conf");
    let state = data.join("logrotate.state");
    let state = state.to_string_lossy().to_string();
    let conf = conf.to_string_lossy().to_string();

    // Read and planned, nothing done.
    let dry = logrotate(&["-d", "-s", &state, &conf]);
    assert_eq!(dry.code, Some(0), "logrotate -d:\n{}", dry.all());
    assert!(!dry.all().contains("error"), "logrotate -d:\n{}", dry.all());

    // Requests all along, the rotation in the middle of them.
    let sent = Arc::new(AtomicUsize::new(0));
    let going = Arc::new(AtomicBool::new(true));
    let addr = c.addr();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (sent, going) = (sent.clone(), going.clone());
            std::thread::spawn(move || {
                for _ in 0..2000 {
                    if !going.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = request(addr, "GET", "/r4/metadata", &[], b"");
                    assert_eq!(r.status, 200);
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    wait_until("lines before the rotation", secs(20), || {
        lines_of(&log).len() >= 200
    });
    let mark = c.mark();
    let forced = logrotate(&["-f", "-s", &state, &conf]);
    assert_eq!(forced.code, Some(0), "logrotate -f:\n{}", forced.all());
    c.wait_for_after(mark, "SIGUSR1: reopening the access log", secs(10));
    let after = sent.load(Ordering::Relaxed);
    wait_until("lines in the new file", secs(20), || {
        sent.load(Ordering::Relaxed) >= after + 200 && !lines_of(&log).is_empty()
    });
    going.store(false, Ordering::Relaxed);
    for t in clients {
        t.join().expect("client");
    }
    let total = sent.load(Ordering::Relaxed);

    let rotated = data.join("access.log.1");
    let all = || [lines_of(&rotated), lines_of(&log)].concat();
    wait_until("every request's line written", secs(10), || {
        all().len() >= total
    });
    let (old, new) = (lines_of(&rotated), lines_of(&log));
    assert!(
        !old.is_empty() && !new.is_empty(),
        "{} and {} lines",
        old.len(),
        new.len()
    );
    let lines = all();
    assert_eq!(
        lines.len(),
        total,
        "one line per request, none lost, none twice"
    );
    for l in &lines {
        assert!(
            l.contains("method=GET") && l.contains("\"/r4/metadata\"") && l.contains("status=200"),
            "a torn or foreign line: {l:?}"
        );
    }
    report_figures(
        "logrotate_rotates_the_access_log",
        "logrotate's rename and USR1 under 4 clients",
        1,
        total as u64,
        (total - lines.len()) as u64,
        &format!(
            "{} lines in the old file, {} in the new, none torn",
            old.len(),
            new.len()
        ),
    );
}
