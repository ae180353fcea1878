//! The per-process series operators page on: up, ready, state (one gauge per state), last start
//! time, and whether its memory guard is refusing; from the status snapshot (what the supervisor
//! knows) and the front door (what it routes to now).

use std::fmt::Write;

use serde_json::Value;

use super::metrics::ProcessLoad;
use crate::exposition::text::{esc, family};

/// The states `fhircluster_process_state` has a gauge for, one of them 1 per process.
pub const STATES: [&str; 6] = [
    "starting",
    "ready",
    "draining",
    "cooling_down",
    "restarting",
    "stopping",
];

/// A process's state: the supervisor's (`starting`, `restarting`, `stopping`), or, while it
/// runs ready, the front door's: not taken any more (`draining`, before a rolling restart or a
/// recycle) or in a cooldown after failures (`cooling_down`).
pub fn state(status: &str, load: &ProcessLoad) -> &'static str {
    match status {
        "starting" => "starting",
        "restarting" => "restarting",
        "stopping" => "stopping",
        _ if !load.ready => "draining",
        _ if load.cooling => "cooling_down",
        _ => "ready",
    }
}

/// The series, for the processes the front door has (`loads`) and the snapshot's rows of them.
pub fn write(out: &mut String, loads: &[ProcessLoad], snapshot: Option<&Value>) {
    let rows: Vec<&Value> = snapshot
        .and_then(|s| s["processes"].as_array())
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let row = |code: &str| rows.iter().find(|r| r["code"] == code).copied();
    family(
        out,
        "fhircluster_process_ready",
        "gauge",
        "1 while the launcher sends the process requests (ready, not draining), by process.",
    );
    for p in loads {
        let _ = writeln!(
            out,
            "fhircluster_process_ready{{process=\"{}\"}} {}",
            esc(&p.code),
            u8::from(p.ready)
        );
    }
    let Some(snapshot) = snapshot else {
        return;
    };
    family(
        out,
        "fhircluster_process_info",
        "gauge",
        "1 per process, labelled with its role (master, tx-worker): for joins \
         (`and on(process) fhircluster_process_info{role=\"master\"}`).",
    );
    for p in loads {
        if let Some(role) = row(&p.code).and_then(|r| r["role"].as_str()) {
            let _ = writeln!(
                out,
                "fhircluster_process_info{{process=\"{}\",role=\"{}\"}} 1",
                esc(&p.code),
                esc(role)
            );
        }
    }
    family(
        out,
        "fhircluster_process_up",
        "gauge",
        "1 while the process runs (starting, ready or stopping; not while it restarts), by process.",
    );
    for p in loads {
        if let Some(r) = row(&p.code) {
            let up = r["pid"].is_u64() && r["status"] != "restarting";
            let _ = writeln!(
                out,
                "fhircluster_process_up{{process=\"{}\"}} {}",
                esc(&p.code),
                u8::from(up)
            );
        }
    }
    family(
        out,
        "fhircluster_process_state",
        "gauge",
        "1 for the state each process is in (starting, ready, draining, cooling_down, \
         restarting, stopping), 0 for the others.",
    );
    for p in loads {
        let Some(status) = row(&p.code).and_then(|r| r["status"].as_str()) else {
            continue;
        };
        let now = state(status, p);
        for s in STATES {
            let _ = writeln!(
                out,
                "fhircluster_process_state{{process=\"{}\",state=\"{s}\"}} {}",
                esc(&p.code),
                u8::from(s == now)
            );
        }
    }
    family(
        out,
        "fhircluster_process_start_time_seconds",
        "gauge",
        "When the process now running was started, in seconds since the epoch, by process.",
    );
    let sampled = snapshot["sampledAt"].as_u64();
    for p in loads {
        let up_ms = row(&p.code).and_then(|r| r["uptimeMs"].as_u64());
        if let (Some(at), Some(up)) = (sampled, up_ms) {
            let _ = writeln!(
                out,
                "fhircluster_process_start_time_seconds{{process=\"{}\"}} {}",
                esc(&p.code),
                at.saturating_sub(up) as f64 / 1e3
            );
        }
    }
    family(
        out,
        "fhircluster_process_refusing",
        "gauge",
        "1 while the process's own memory guard refuses requests (its private memory over the \
         refuse threshold), as it last reported.",
    );
    let refusing: Vec<&str> = snapshot["refusing"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for p in loads {
        let _ = writeln!(
            out,
            "fhircluster_process_refusing{{process=\"{}\"}} {}",
            esc(&p.code),
            u8::from(refusing.contains(&p.code.as_str()))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load(code: &str, ready: bool, cooling: bool) -> ProcessLoad {
        ProcessLoad {
            code: code.into(),
            in_flight: 0,
            slots: None,
            queued: 0,
            saturated: false,
            ready,
            cooling,
        }
    }

    #[test]
    fn each_process_is_in_one_state_and_up_only_while_it_runs() {
        let snap = json!({"sampledAt": 10_000, "refusing": ["tx2"], "processes": [
            {"code": "m0", "role": "master", "pid": 10, "status": "ready", "uptimeMs": 4_000},
            {"code": "tx1", "pid": null, "status": "restarting", "uptimeMs": null},
            {"code": "tx2", "pid": 12, "status": "stale", "uptimeMs": 1_000},
        ]});
        let loads = [
            load("m0", true, false),
            load("tx1", false, false),
            load("tx2", true, true),
        ];
        let mut out = String::new();
        write(&mut out, &loads, Some(&snap));
        for line in [
            "fhircluster_process_up{process=\"m0\"} 1",
            "fhircluster_process_info{process=\"m0\",role=\"master\"} 1",
            "fhircluster_process_up{process=\"tx1\"} 0",
            "fhircluster_process_ready{process=\"tx1\"} 0",
            "fhircluster_process_state{process=\"tx1\",state=\"restarting\"} 1",
            "fhircluster_process_state{process=\"tx1\",state=\"ready\"} 0",
            "fhircluster_process_state{process=\"tx2\",state=\"cooling_down\"} 1",
            "fhircluster_process_start_time_seconds{process=\"m0\"} 6",
            "fhircluster_process_refusing{process=\"tx2\"} 1",
            "fhircluster_process_refusing{process=\"m0\"} 0",
        ] {
            assert!(out.contains(&format!("{line}\n")), "{line} in\n{out}");
        }
        assert!(!out.contains("start_time_seconds{process=\"tx1\"}"));
        assert_eq!(state("ready", &load("x", false, false)), "draining");
    }
}
