//! `fhircluster scale N|+N|-N`: asks a running launcher, on its control socket (`scale`; never
//! the HTTP admin listener, which is read-only), for a tx-worker count from now on, as
//! `SIGTTIN` and `SIGTTOU` do a worker at a time, and waits until it holds: the snapshot's
//! `workers` says the count wanted is this one and the cluster has settled on it (every wanted
//! process ready, the workers taken away gone). Exit 0 done; 1 refused (the launcher's reason:
//! the internalPort range, the memory fit, the last worker, a restart or an upgrade under way),
//! changed again meanwhile, or not settled in time; 2 no launcher.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::control_client::ask;
use super::status_table::UNREACHABLE;

/// How long the change may take: a worker fewer drains for up to `drainSeconds`, one more
/// starts as at launch.
const WAIT: Duration = Duration::from_secs(600);

/// Where the snapshot's `workers` says the cluster is, for `to` workers.
#[derive(Debug, PartialEq, Eq)]
enum Progress {
    Done,
    Waiting,
    /// Another change came meanwhile: the count wanted is now this.
    Changed(u64),
    /// A worker it started exited before it was ready (it is started again after a backoff).
    Failed(String),
}

/// How far the change from `from` to `to` workers is, by the snapshot.
fn progress(status: &Value, from: u64, to: u64) -> Progress {
    let w = &status["workers"];
    let failed = status["processes"].as_array().and_then(|ps| {
        ps.iter().find_map(|p| {
            let n: u64 = p["code"].as_str()?.strip_prefix("tx")?.parse().ok()?;
            (n > from && n <= to && p["status"] == "restarting").then(|| format!("tx{n}"))
        })
    });
    match w["wanted"].as_u64() {
        Some(n) if n != to => Progress::Changed(n),
        Some(_) if w["settled"] == true => Progress::Done,
        _ => failed.map_or(Progress::Waiting, Progress::Failed),
    }
}

pub(crate) fn run(path: &Path, count: &str) -> ExitCode {
    let (from, to) = match ask(path, &format!("scale {count}")) {
        Ok(v) => match (v["scale"]["from"].as_u64(), v["scale"]["to"].as_u64()) {
            (Some(from), Some(to)) => (from, to),
            _ => {
                let why = v["error"]
                    .as_str()
                    .map_or_else(|| v.to_string(), str::to_string);
                eprintln!("fhircluster scale: refused: {why}");
                return ExitCode::from(1);
            }
        },
        Err(e) => {
            eprintln!("fhircluster scale: {e:#}");
            return ExitCode::from(UNREACHABLE);
        }
    };
    let deadline = Instant::now() + WAIT;
    loop {
        match super::control_client::status(&super::control_client::Target::Socket(
            path.to_path_buf(),
        )) {
            Ok(v) => match progress(&v, from, to) {
                Progress::Done => {
                    let line = if from == to {
                        format!("the worker count is already {to}\n")
                    } else if to > from {
                        format!("workers {from} → {to}: every worker ready\n")
                    } else {
                        format!("workers {from} → {to}: the workers taken away are stopped\n")
                    };
                    return super::stdout::emit_then("scale", &line, ExitCode::SUCCESS);
                }
                Progress::Changed(n) => {
                    eprintln!(
                        "fhircluster scale: the count was changed again meanwhile (a reload, a \
                         signal or another scale): {n} wanted now"
                    );
                    return ExitCode::from(1);
                }
                Progress::Failed(code) => {
                    eprintln!(
                        "fhircluster scale: {code} exited before it was ready (it is started \
                         again after its backoff; its log lines say why): {to} workers wanted, \
                         not every one ready"
                    );
                    return ExitCode::from(1);
                }
                Progress::Waiting => {}
            },
            Err(e) => {
                eprintln!("fhircluster scale: {e:#}");
                return ExitCode::from(UNREACHABLE);
            }
        }
        if Instant::now() >= deadline {
            eprintln!(
                "fhircluster scale: {to} workers asked for, not every one ready after {} s \
                 (see fhircluster status)",
                WAIT.as_secs()
            );
            return ExitCode::from(1);
        }
        // Polls the launcher's snapshot until it says the count holds, or `WAIT` runs out.
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn done_once_the_count_is_wanted_and_settled_changed_when_another_is_wanted() {
        let s =
            |wanted: u64, settled: bool| json!({"workers": {"wanted": wanted, "settled": settled}});
        assert_eq!(progress(&s(3, false), 1, 3), Progress::Waiting);
        assert_eq!(progress(&s(3, true), 1, 3), Progress::Done);
        assert_eq!(progress(&s(2, true), 1, 3), Progress::Changed(2));
        assert_eq!(
            progress(&json!({}), 1, 3),
            Progress::Waiting,
            "an older launcher's"
        );
        let mut failing = s(3, false);
        failing["processes"] = json!([
            {"code": "tx1", "status": "restarting"},
            {"code": "tx3", "status": "restarting"}
        ]);
        assert_eq!(progress(&failing, 1, 3), Progress::Failed("tx3".into()));
        let mut others = s(4, false);
        others["processes"] = failing["processes"].clone();
        assert_eq!(
            progress(&others, 3, 4),
            Progress::Waiting,
            "tx1 and tx3 were there before"
        );
    }
}
