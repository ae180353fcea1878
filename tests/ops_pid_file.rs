//! `--pid-file` with the real binary: written before the master is ready, refused when it names
//! a running launcher, removed at a clean stop, kept across an in-place upgrade, and taken over
//! after a launcher was SIGKILLed (its file names a dead pid).

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn pid_in(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn the_pid_file_is_written_before_the_master_is_ready_and_removed_at_a_clean_stop() {
    // spec: issue 29 (a pid file)
    let run = tempfile::tempdir().expect("run dir");
    let file = run.path().join("fhircluster.pid");
    let mut c = cluster()
        .workers(1)
        .env("SIM_START_DELAY_MS_m0", "1500")
        .arg("--pid-file")
        .arg(&file.display().to_string())
        .spawn();
    let launcher = c.child.id();
    // The master is still loading: the pid can be told already.
    c.wait_for("m0: started", secs(10));
    assert!(
        eventually(secs(5), || pid_in(&file) == Some(launcher)),
        "no pid file naming {launcher} while the master loads"
    );
    assert!(
        c.line_index("m0: ready").is_none(),
        "the master was ready too soon for this test to mean anything"
    );
    c.wait_for("tx1: ready", secs(20));

    // A second launcher on the same data directory (other ports) is refused, naming the pid.
    let other = free_ports(3);
    let mut cmd = launcher_command(&c.data_dir());
    cmd.args(["--port", &other.to_string(), "--internal-port"])
        .arg((other + 1).to_string())
        .arg("--pid-file")
        .arg(&file);
    let out = run_bounded(&mut cmd, secs(20));
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(
        out.stderr
            .contains(&format!("names a running launcher (pid {launcher})")),
        "{}",
        out.all()
    );
    assert_eq!(
        pid_in(&file),
        Some(launcher),
        "the refused start took it over"
    );

    c.signal(SIGTERM);
    let status = c.wait_exit(secs(30));
    assert_eq!(status.code(), Some(0));
    assert!(!file.exists(), "the pid file is left after a clean stop");
}

#[test]
fn after_a_sigkill_the_next_launcher_takes_the_stale_pid_file_over() {
    let run = tempfile::tempdir().expect("run dir");
    let file = run.path().join("f.pid");
    let file_arg = file.display().to_string();
    let mut c = cluster()
        .workers(1)
        .arg("--pid-file")
        .arg(&file_arg)
        .start();
    let first = c.child.id();
    assert_eq!(pid_in(&file), Some(first));
    c.signal(SIGKILL);
    c.wait_exit(secs(10));
    assert_eq!(
        pid_in(&file),
        Some(first),
        "the dead launcher's file is there"
    );
    // Its processes see their channel close and go: the ports come free.
    let ports: Vec<u16> = std::iter::once(c.port)
        .chain(c.internal..c.internal + 2)
        .collect();
    assert!(
        eventually(secs(20), || ports.iter().all(|&p| !accepting(p))),
        "ports {ports:?} still taken after the launcher's SIGKILL"
    );

    let args = ["--pid-file".to_string(), file_arg];
    let mut again = launch(
        tempfile::tempdir().expect("data dir"),
        c.config.clone(),
        &[],
        &args,
        &[],
    );
    again.wait_for("tx1: ready", secs(20));
    assert_eq!(
        pid_in(&file),
        Some(again.child.id()),
        "the stale file was not taken over"
    );
    again.signal(SIGTERM);
    assert_eq!(again.wait_exit(secs(30)).code(), Some(0));
    assert!(!file.exists());
}

#[test]
fn an_in_place_upgrade_keeps_the_pid_file() {
    let run = tempfile::tempdir().expect("run dir");
    let file = run.path().join("f.pid");
    let mut c = cluster()
        .workers(1)
        .arg("--pid-file")
        .arg(&file.display().to_string())
        .start();
    let launcher = c.child.id();
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    assert_eq!(pid_in(&file), Some(launcher));
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
    assert!(!file.exists());
}
