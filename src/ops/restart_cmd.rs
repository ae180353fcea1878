//! `fhircluster restart`: asks a running launcher, on its control socket (`restart`), to
//! restart every FHIRsmith process in turn, the master last, as a reload's rolling restart
//! does, and waits for the answer, which comes once it is over: done, exit 0; refused (the
//! cluster starting or stopping) or stopped (a process that did not come back), exit 1 with the
//! reason; no launcher (or no way to its socket), exit 2. How new server code is taken now that
//! a `SIGHUP` restarts only the processes whose inputs changed.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use super::control_client::ask_waiting;
use super::status_table::UNREACHABLE;

/// How long the rolling restart may take: each process's drain (`drainSeconds`) and start (a
/// FHIRsmith master loads for minutes).
const WAIT: Duration = Duration::from_secs(3600);

/// The exit status and line for the launcher's answer.
fn outcome(v: &Value) -> (u8, String) {
    match v["error"].as_str() {
        Some(why) => (1, format!("fhircluster restart: {why}")),
        None if v["restart"] == "done" => (0, "restarted: every process in turn".to_string()),
        None => (
            1,
            format!("fhircluster restart: an answer not understood: {v}"),
        ),
    }
}

pub(crate) fn run(path: &Path) -> ExitCode {
    match ask_waiting(path, "restart", WAIT) {
        Ok(v) => {
            let (code, line) = outcome(&v);
            if code == 0 {
                return super::stdout::emit_then(
                    "restart",
                    &format!("{line}\n"),
                    ExitCode::SUCCESS,
                );
            }
            eprintln!("{line}");
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("fhircluster restart: {e:#}");
            ExitCode::from(UNREACHABLE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn done_is_success_and_an_error_is_failure_with_its_reason() {
        assert_eq!(outcome(&json!({"restart": "done"})).0, 0);
        let (code, line) = outcome(&json!({"error": "tx1 exited before it was ready again"}));
        assert_eq!(code, 1);
        assert!(line.contains("tx1 exited"), "{line}");
        assert_eq!(outcome(&json!({"what": 1})).0, 1);
    }
}
