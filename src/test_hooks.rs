//! The test hooks: the only places product code reads a `FHIRCLUSTER_TEST_*` variable, each a way
//! for the integration tests to make happen, at a moment of their choosing, what nothing else
//! makes happen reliably from outside the launcher (a panic, a failed fork or `execve`, a fault
//! at a given step of the upgrade's handover). Read only by `fhircluster`; each variable is read
//! by its own function here and nowhere else. Unset, each function does nothing and every step
//! passes at once: production behaviour is as if this module were not there.
//!
//! * `FHIRCLUSTER_TEST_PANIC=<path>` ([`panic_when_file`]): a launcher thread panics once a file
//!   exists at `<path>`. Used by `reliability_faults::a_panic_in_the_launcher_ends_it_promptly_*`
//!   (cluster.md names it for operators too).
//! * `FHIRCLUSTER_TEST_GUARDIAN_FAIL=<n>` ([`guardian_refusal`]): the first `n` guardian starts
//!   fail. Used by `reliability_orphans::a_guardian_that_cannot_be_started_is_an_error_each_try_*`.
//! * `FHIRCLUSTER_TEST_EXEC_FAIL` set ([`exec_refusal`]): the upgrade's `execve` fails, after all
//!   that comes before it was done. Used by `upgrade::a_failed_execve_leaves_the_old_program_*`,
//!   `upgrade_keepalive::an_upgrade_that_fails_serves_the_kept_connections_on` and
//!   `reliability_orphans::after_a_failed_execve_a_guardian_killed_is_replaced_*`.
//! * `FHIRCLUSTER_TEST_HANDOVER=<dir>` ([`step`], [`failing`], [`record_state`]): the upgrade's
//!   handover paused at a named step, or a step made to fail, so a test can prove that whatever
//!   happens at any step (a process killed, the binary removed, a step failing) leaves the old
//!   program serving as before. Used by `tests/upgrade_faults.rs`, `tests/upgrade_setup.rs` and
//!   `tests/upgrade_fixture.rs`.
//!
//! The handover's steps. At step `S`: a file `<dir>/fail-S` makes the step fail (the file is
//! removed: once); a file `<dir>/pause-S` makes the handover write `<dir>/at-S` and wait (at most
//! [`PAUSE_AT_MOST`]) until the test removes `pause-S`. The steps: `child-<code>` (before each
//! process is taken from its tasks; failing it loses that process's fds), `handed` (every process
//! taken), `state` (before the state is written), `memfd` (failing only: the state's memfd) and
//! `exec` (before the last look at the processes and the `execve`). After the `execve`, the new
//! program's setup steps (failing only; each must leave the service serving, DEC-70):
//! `setup-access-log`, `setup-pid-file`, `setup-preload`, `setup-admin` and `setup-listen` (a
//! listener for a changed address), `setup-control-file` (the control socket's file found not to
//! be the one made) and `setup-control-permit` (its group and mode). A file
//! `<dir>/record-state` makes the program write the state it hands over, as encoded, to
//! `<dir>/state.json` just before the `execve` (how `tests/fixtures/handover-format-1.json` was
//! captured from a real upgrade).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

const PANIC_ENV: &str = "FHIRCLUSTER_TEST_PANIC";
const GUARDIAN_FAIL_ENV: &str = "FHIRCLUSTER_TEST_GUARDIAN_FAIL";
const EXEC_FAIL_ENV: &str = "FHIRCLUSTER_TEST_EXEC_FAIL";
const HANDOVER_ENV: &str = "FHIRCLUSTER_TEST_HANDOVER";

/// A handover's pause never outlasts this, whatever the test does.
const PAUSE_AT_MOST: Duration = Duration::from_secs(60);

/// `FHIRCLUSTER_TEST_PANIC`: when it names a path, starts a thread that panics once a file
/// exists there.
pub fn panic_when_file() {
    let Some(path) = std::env::var_os(PANIC_ENV).map(PathBuf::from) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("test-panic".into())
        .spawn(move || loop {
            if path.exists() {
                panic!("test panic: {} exists ({PANIC_ENV})", path.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        });
}

/// `FHIRCLUSTER_TEST_GUARDIAN_FAIL=<n>`: the error a guardian start fails with, for the first
/// `n` starts of this program.
pub(crate) fn guardian_refusal() -> Option<io::Error> {
    static LEFT: OnceLock<AtomicU32> = OnceLock::new();
    let left = LEFT.get_or_init(|| {
        let n = std::env::var(GUARDIAN_FAIL_ENV)
            .ok()
            .and_then(|v| v.parse().ok());
        AtomicU32::new(n.unwrap_or(0))
    });
    left.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .ok()
        .map(|_| io::Error::other(format!("{GUARDIAN_FAIL_ENV} is set (a test hook)")))
}

/// `FHIRCLUSTER_TEST_EXEC_FAIL`: the error the upgrade's `execve` is to fail with, when set.
pub(crate) fn exec_refusal() -> Option<io::Error> {
    std::env::var_os(EXEC_FAIL_ENV)
        .map(|_| io::Error::other(format!("{EXEC_FAIL_ENV} is set (a test hook)")))
}

fn handover_dir() -> Option<PathBuf> {
    std::env::var_os(HANDOVER_ENV).map(PathBuf::from)
}

/// `FHIRCLUSTER_TEST_HANDOVER`: `Err` when the test made step `step` fail (without waiting).
pub(crate) fn failing(step: &str) -> Result<(), String> {
    let Some(dir) = handover_dir() else {
        return Ok(());
    };
    if std::fs::remove_file(dir.join(format!("fail-{step}"))).is_ok() {
        return Err(format!(
            "{HANDOVER_ENV}: the step {step} failed (a test hook)"
        ));
    }
    Ok(())
}

/// `FHIRCLUSTER_TEST_HANDOVER`: step `step`, paused while the test says so, then `Err` should
/// it make the step fail.
pub(crate) async fn step(step: &str) -> Result<(), String> {
    let Some(dir) = handover_dir() else {
        return Ok(());
    };
    let pause = dir.join(format!("pause-{step}"));
    if pause.exists() {
        let at = dir.join(format!("at-{step}"));
        let _ = std::fs::write(&at, b"");
        let deadline = tokio::time::Instant::now() + PAUSE_AT_MOST;
        while pause.exists() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = std::fs::remove_file(&at);
    }
    failing(step)
}

/// `FHIRCLUSTER_TEST_HANDOVER`: writes `state` (the encoded handover) to `<dir>/state.json` when
/// the test asked for it by a file `<dir>/record-state` (once: the request is removed).
pub(crate) fn record_state(state: &[u8]) {
    let Some(dir) = handover_dir() else { return };
    if std::fs::remove_file(dir.join("record-state")).is_ok() {
        let _ = std::fs::write(dir.join("state.json"), state);
    }
}
