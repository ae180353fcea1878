//! `fhircluster upgrade`: asks a running launcher (its own endpoint, `POST /upgrade`) to
//! upgrade in place, as `kill -USR2` does, and waits for the outcome: the launcher answering
//! with another program (`GET /upgrade`'s `programStartedMs` changed) is success, exit 0; a
//! refusal or a failure it reports is printed with its reason, exit 1; no launcher, exit 2.
//! The asking and the waiting go through the admin listening socket, which the upgrade keeps:
//! while the new program starts, the requests wait in its backlog.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::status_table::{exchange, UNREACHABLE};

/// How long the outcome may take: the drain (`drainSeconds`, at most a few minutes) and the
/// new program's start.
const WAIT: Duration = Duration::from_secs(600);

fn state(addr: SocketAddr) -> Result<Value> {
    let (head, body) = exchange(addr, "GET", "/upgrade")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!(
            "the launcher on {addr} answered: {} (a launcher too old for `fhircluster upgrade`? \
             send it SIGUSR2)",
            head.lines().next().unwrap_or("")
        );
    }
    serde_json::from_str(&body).context("the launcher's /upgrade is not JSON")
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

pub fn run(addr: SocketAddr) -> ExitCode {
    let before = match state(addr) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fhircluster upgrade: {e:#}");
            return ExitCode::from(UNREACHABLE);
        }
    };
    match exchange(addr, "POST", "/upgrade") {
        Ok((head, _)) if head.starts_with("HTTP/1.1 202") => {}
        Ok((head, body)) => {
            let why = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| head.lines().next().unwrap_or("").to_string());
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
        // Between the programs the endpoint may not answer for a moment: ask again.
        let Ok(now) = state(addr) else { continue };
        match outcome(&before, &now) {
            Ok(Some(line)) => {
                println!("{line}");
                return ExitCode::SUCCESS;
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
