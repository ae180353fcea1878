//! `fhircluster upgrade`: asks a running launcher, on its control socket (`upgrade`; never the
//! HTTP admin listener, which is read-only), to upgrade in place, as `kill -USR2` does, and
//! waits for the outcome: the launcher answering with another program (`upgrade-state`'s
//! `programStartedMs` changed) is success, exit 0; a refusal or a failure it reports is printed
//! with its reason, exit 1; no launcher (or no way to its socket), exit 2. The asking and the
//! waiting go through the control socket, which the upgrade keeps: while the new program
//! starts, the requests wait in its backlog.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::Value;

use super::control_client::ask;
use super::status_table::UNREACHABLE;

/// How long the outcome may take: the drain (`drainSeconds`, at most a few minutes) and the
/// new program's start.
const WAIT: Duration = Duration::from_secs(600);

fn state(path: &Path) -> Result<Value> {
    let v = ask(path, "upgrade-state")?;
    if let Some(why) = v["error"].as_str() {
        bail!("the launcher on {} answered: {why}", path.display());
    }
    Ok(v)
}

/// The outcome once known: `Ok(Some(..))` upgraded, `Err` refused or failed.
fn outcome(before: &Value, now: &Value) -> Result<Option<String>, String> {
    if now["programStartedMs"] != before["programStartedMs"] {
        return Ok(Some(format!(
            "upgraded in place: pid {} kept, the new program serves",
            now["pid"]
        )));
    }
    let last = &now["last"];
    if last.is_object() && last["seq"] != before["last"]["seq"] {
        return Err(last["reason"]
            .as_str()
            .unwrap_or("no reason given")
            .to_string());
    }
    Ok(None)
}

pub(crate) fn run(path: &Path) -> ExitCode {
    let before = match state(path) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fhircluster upgrade: {e:#}");
            return ExitCode::from(UNREACHABLE);
        }
    };
    match ask(path, "upgrade") {
        Ok(v) if v["upgrade"] == "asked" => {}
        Ok(v) => {
            let why = v["error"]
                .as_str()
                .map_or_else(|| v.to_string(), str::to_string);
            eprintln!("fhircluster upgrade: not started: {why}");
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("fhircluster upgrade: {e:#}");
            return ExitCode::from(UNREACHABLE);
        }
    }
    let deadline = Instant::now() + WAIT;
    // Polls the launcher's answer until it says how the upgrade ended, or `WAIT` runs out.
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        // Across the execve a connection may be cut, or wait in the backlog: ask again.
        let Ok(now) = state(path) else { continue };
        match outcome(&before, &now) {
            Ok(Some(line)) => {
                return super::stdout::emit_then(
                    "upgrade",
                    &format!("{line}\n"),
                    ExitCode::SUCCESS,
                );
            }
            Ok(None) => {}
            Err(why) => {
                eprintln!("fhircluster upgrade: {why}");
                return ExitCode::from(1);
            }
        }
    }
    eprintln!("fhircluster upgrade: no outcome after {} s", WAIT.as_secs());
    ExitCode::from(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_new_program_is_success_a_new_refusal_is_failure_and_an_old_one_is_neither() {
        let before = json!({"pid": 7, "programStartedMs": 1, "last": {"seq": 1, "reason": "old"}});
        assert!(outcome(&before, &before).expect("no outcome").is_none());
        let upgraded = json!({"pid": 7, "programStartedMs": 2, "last": null});
        assert!(outcome(&before, &upgraded)
            .expect("upgraded")
            .is_some_and(|l| l.contains("pid 7")));
        let refused = json!({"pid": 7, "programStartedMs": 1,
                             "last": {"seq": 2, "reason": "p0 is not ready"}});
        assert_eq!(
            outcome(&before, &refused),
            Err("p0 is not ready".to_string())
        );
    }
}
