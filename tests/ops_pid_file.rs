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

/// How many pids after the last one given out get a link planted at their name.
const PLANTED: u32 = 5000;

#[test]
fn the_pid_files_temporary_file_never_follows_a_link_planted_at_its_name() {
    // spec: issue 39 (the pid file's temporary file followed a symlink)
    let run = tempfile::tempdir().expect("run dir");
    let elsewhere = tempfile::tempdir().expect("another dir");
    let target = elsewhere.path().join("precious");
    std::fs::write(&target, "precious\n").expect("write the target");
    let file = run.path().join("fhircluster.pid");
    // The launcher's pid is not known before it starts: a link at the temporary name each of the
    // next pids would give it (`.<name>.<pid>.tmp`), from the pid a process just started got.
    let mut probe = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let last = probe.id();
    let _ = probe.wait();
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(32768);
    let planted = |pid: u32| (1..=PLANTED).any(|i| (last + i) % pid_max == pid);
    for i in 1..=PLANTED {
        let name = format!(".fhircluster.pid.{}.tmp", (last + i) % pid_max);
        std::os::unix::fs::symlink(&target, run.path().join(name)).expect("plant a link");
    }
    let mut c = cluster()
        .workers(1)
        .arg("--pid-file")
        .arg(&file.display().to_string())
        .start();
    let launcher = c.child.id();
    assert!(
        planted(launcher),
        "the launcher's pid {launcher} is past the {PLANTED} planted after {last}"
    );
    assert_eq!(pid_in(&file), Some(launcher));
    assert!(
        !std::fs::symlink_metadata(&file)
            .expect("the pid file")
            .file_type()
            .is_symlink(),
        "the pid file is a link"
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("the target"),
        "precious\n",
        "the link's target was written"
    );
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
    assert!(!file.exists());
    assert_eq!(
        std::fs::read_to_string(&target).expect("the target"),
        "precious\n"
    );
    report_figures(
        "pid_file_planted_links",
        &format!(
            "a symlink to a file elsewhere planted at the pid file's temporary name for each of \
             the next {PLANTED} pids, then the launcher started with --pid-file and stopped"
        ),
        1,
        0,
        0,
        "the target untouched; the pid file a regular file naming the launcher (pid within the \
         planted range), removed at the stop",
    );
}
