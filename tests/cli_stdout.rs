//! What the commands write on stdout, when nobody reads it or it cannot be written: a reader
//! gone early (`fhircluster status | head -1`, `print ... | grep -q`) is no failure and no panic,
//! and the exit status keeps its meaning (ready is 0, as README's health check reads it); a full
//! disk behind `>` (`/dev/full`) is one line on stderr and exit status 1, so `print systemd-unit
//! > /etc/...` is never cut short in silence. Every command that writes stdout is tried.
// spec: DEC-12

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

const SIGTERM: i32 = 15;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The write end of a pipe whose read end is already closed: every write is `EPIPE`.
fn closed_pipe() -> OwnedFd {
    let (read, write) = nix::unistd::pipe().expect("pipe");
    drop(read);
    write
}

/// `args` run with stdout on `out`: the exit status and what it said on stderr.
fn run_with_stdout(args: &[&str], cwd: &std::path::Path, out: Stdio) -> (Option<i32>, String) {
    let mut child = Command::new(LAUNCHER)
        .args(args)
        .current_dir(cwd)
        .env_remove("FHIRSMITH_DATA_DIR")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    let deadline = std::time::Instant::now() + secs(20);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return (status.code(), stderr);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            return (None, stderr);
        }
        std::thread::sleep(Duration::from_millis(20)); // polling the child's exit, bounded
    }
}

#[test]
fn a_reader_gone_early_is_no_failure_and_a_full_disk_is_one_line_and_exit_1() {
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .spawn();
    c.wait_for("tx1: ready", secs(20));
    c.wait_until_listening(secs(10));
    let cwd = tempfile::tempdir().expect("cwd");
    let admin = admin.to_string();
    let data_dir = c.data_dir();
    let data_dir = data_dir.to_str().expect("a UTF-8 path");
    let commands: [&[&str]; 10] = [
        &["status", "--admin-address", &admin],
        &["status", "--json", "--admin-address", &admin],
        &["status", "--data-dir", data_dir],
        &["scale", "1", "--data-dir", data_dir],
        &["restart", "--data-dir", data_dir],
        &["print", "systemd-unit"],
        &["print", "dashboard"],
        &["print", "alerts"],
        &["--upgrade-formats"],
        &["--check", "--workers", "1", "--command", SIM],
    ];
    for args in commands {
        let (code, stderr) = run_with_stdout(args, cwd.path(), Stdio::from(closed_pipe()));
        assert_eq!(code, Some(0), "{args:?} with its reader gone: {stderr}");
        assert!(!stderr.contains("panic"), "{args:?}: {stderr}");
        let full = std::fs::File::create("/dev/full").expect("/dev/full");
        let (code, stderr) = run_with_stdout(args, cwd.path(), Stdio::from(full));
        assert_eq!(code, Some(1), "{args:?} onto a full disk: {stderr}");
        assert!(
            stderr.contains("writing to stdout") && !stderr.contains("panic"),
            "{args:?}: one line naming the failure: {stderr}"
        );
    }
    c.signal(SIGTERM);
    c.wait_exit(secs(20));
}
