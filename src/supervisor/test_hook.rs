//! Test hook for the upgrade's handover: `FHIRCLUSTER_TEST_HANDOVER=<dir>` lets a test pause the
//! handover at a named step, or make a step fail, so it can prove that whatever happens at any
//! step (a process killed, the binary removed, a step failing) leaves the old program serving as
//! before. Read only by `fhircluster`, only this variable; unset, every step passes at once.
//!
//! At step `S`: a file `<dir>/fail-S` makes the step fail (the file is removed: once); a file
//! `<dir>/pause-S` makes the handover write `<dir>/at-S` and wait (at most [`PAUSE_AT_MOST`])
//! until the test removes `pause-S`. The steps: `child-<code>` (before each process is taken
//! from its tasks; failing it loses that process's fds), `handed` (every process taken),
//! `state` (before the state is written), `memfd` (failing only: the state's memfd) and `exec`
//! (before the last look at the processes and the `execve`). After the `execve`, the new
//! program's setup steps (failing only; each must leave the service serving, DEC-70):
//! `setup-access-log`, `setup-pid-file`, `setup-preload`, `setup-admin` and `setup-listen` (a
//! listener for a changed address), `setup-control-file` (the control socket's file found not to
//! be the one made) and `setup-control-permit` (its group and mode).
//!
//! A file `<dir>/record-state` makes the program write the state it hands over, as encoded, to
//! `<dir>/state.json` just before the `execve` (how `tests/fixtures/handover-format-1.json` was
//! captured from a real upgrade).

use std::path::PathBuf;
use std::time::Duration;

/// The test hook's environment variable (see the module's notes).
pub(crate) const TEST_HANDOVER_ENV: &str = "FHIRCLUSTER_TEST_HANDOVER";

/// A pause never outlasts this, whatever the test does.
const PAUSE_AT_MOST: Duration = Duration::from_secs(60);

fn dir() -> Option<PathBuf> {
    std::env::var_os(TEST_HANDOVER_ENV).map(PathBuf::from)
}

/// `Err` when the test made step `step` fail (without waiting).
pub(crate) fn failing(step: &str) -> Result<(), String> {
    let Some(dir) = dir() else { return Ok(()) };
    if std::fs::remove_file(dir.join(format!("fail-{step}"))).is_ok() {
        return Err(format!(
            "{TEST_HANDOVER_ENV}: the step {step} failed (a test hook)"
        ));
    }
    Ok(())
}

/// Step `step`: paused while the test says so, then `Err` should it make the step fail.
pub(crate) async fn step(step: &str) -> Result<(), String> {
    let Some(dir) = dir() else { return Ok(()) };
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

/// Writes `state` (the encoded handover) to `<dir>/state.json` when the test asked for it by a
/// file `<dir>/record-state` (once: the request is removed).
pub(crate) fn record_state(state: &[u8]) {
    let Some(dir) = dir() else { return };
    if std::fs::remove_file(dir.join("record-state")).is_ok() {
        let _ = std::fs::write(dir.join("state.json"), state);
    }
}
