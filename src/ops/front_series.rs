//! The per-process series of what the front door counted, as HAProxy's exporter has them per
//! server: answers by status class, the launcher's refusals, bytes each way; and what the
//! launcher measured of each process over the last status interval (latency median and p99,
//! CPU). For every process, whether it speaks the IPC channel or not. Labels are the process
//! code and a closed set of classes: a few series per process, never per path or client.

use std::fmt::Write;

use serde_json::Value;

use crate::exposition::text::{esc, family};
use crate::status::front::{FrontFigures, CLASSES};
use crate::status::restarts::RestartReason;

/// One of a process's counts, from its figures.
type Figure = fn(&FrontFigures) -> u64;

/// The series for `fronts` (code, figures; the processes present), and the snapshot's rows for
/// the interval's figures.
pub fn write(out: &mut String, fronts: &[(String, FrontFigures)], snapshot: Option<&Value>) {
    family(
        out,
        "fhircluster_process_requests_total",
        "counter",
        "Answers each process gave that the launcher passed on, by process and status class, \
         counted at the front door (beside what a process reports itself).",
    );
    for (code, f) in fronts {
        for (class, n) in CLASSES.iter().zip(f.answered) {
            let _ = writeln!(
                out,
                "fhircluster_process_requests_total{{process=\"{}\",class=\"{class}\"}} {n}",
                esc(code)
            );
        }
    }
    let counters: [(&str, &str, Figure); 3] = [
        (
            "fhircluster_process_refusals_total",
            "The launcher's own 503s for requests only this process could take (the master's \
             paths while it is not ready), by process.",
            |f| f.refused,
        ),
        (
            "fhircluster_process_request_bytes_total",
            "Request body bytes sent to each process (a chunked body by what had come when it \
             was sent).",
            |f| f.bytes_in,
        ),
        (
            "fhircluster_process_response_bytes_total",
            "Response body bytes of each process passed on to clients.",
            |f| f.bytes_out,
        ),
    ];
    for (name, help, get) in counters {
        family(out, name, "counter", help);
        for (code, f) in fronts {
            let _ = writeln!(out, "{name}{{process=\"{}\"}} {}", esc(code), get(f));
        }
    }
    let rows: Vec<&Value> = snapshot
        .and_then(|s| s["processes"].as_array())
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    // Two gauges, not a summary: the figures are the last interval's, with no running count.
    for (name, key, which) in [
        (
            "fhircluster_process_latency_median_seconds",
            "median",
            "median",
        ),
        (
            "fhircluster_process_latency_p99_seconds",
            "p99",
            "99th percentile",
        ),
    ] {
        family(
            out,
            name,
            "gauge",
            &format!(
                "The {which} of each process's latency at the front door over the last status \
                 interval (from sending a request to its answer ready to pass on); absent for \
                 an interval without requests."
            ),
        );
        for r in &rows {
            if let (Some(code), Some(ms)) = (r["code"].as_str(), r["latencyMs"][key].as_f64()) {
                let _ = writeln!(out, "{name}{{process=\"{}\"}} {}", esc(code), ms / 1e3);
            }
        }
    }
    family(
        out,
        "fhircluster_process_cpu_seconds_total",
        "counter",
        "User and system CPU seconds of each process now running, from /proc/<pid>/stat \
         (starts again with each new process).",
    );
    for r in &rows {
        if let (Some(code), Some(s)) = (r["code"].as_str(), r["cpuSeconds"].as_f64()) {
            let _ = writeln!(
                out,
                "fhircluster_process_cpu_seconds_total{{process=\"{}\"}} {s}",
                esc(code)
            );
        }
    }
    family(
        out,
        "fhircluster_restarts_total",
        "counter",
        "Restarts since the launcher started, by process and reason: crash (it ended on its \
         own) and hung (killed by the hang watchdog), the unplanned ones; rolling (a reload's or \
         fhircluster restart's rolling restart), recycle (memory), scale (a worker wanted again \
         by a higher count), the planned ones.",
    );
    for r in &rows {
        let Some(code) = r["code"].as_str() else {
            continue;
        };
        for why in RestartReason::ALL {
            let n = r["restartsBy"][why.label()].as_u64().unwrap_or(0);
            let _ = writeln!(
                out,
                "fhircluster_restarts_total{{process=\"{}\",reason=\"{}\"}} {n}",
                esc(code),
                why.label()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_process_has_its_classes_bytes_latency_and_restarts_by_reason() {
        // spec: DEC-46, DEC-47
        let f = FrontFigures {
            answered: [0, 5, 0, 2, 1],
            bytes_in: 10,
            bytes_out: 300,
            ..FrontFigures::default()
        };
        let snap = json!({"processes": [{
            "code": "tx1", "latencyMs": {"median": 2.0, "p99": 40.0}, "cpuSeconds": 1.25,
            "restartsBy": {"crash": 1, "rolling": 2, "recycle": 0, "scale": 0},
        }]});
        let mut out = String::new();
        write(&mut out, &[("tx1".into(), f)], Some(&snap));
        for line in [
            "fhircluster_process_requests_total{process=\"tx1\",class=\"2xx\"} 5",
            "fhircluster_process_requests_total{process=\"tx1\",class=\"4xx\"} 2",
            "fhircluster_process_requests_total{process=\"tx1\",class=\"1xx\"} 0",
            "fhircluster_process_response_bytes_total{process=\"tx1\"} 300",
            "fhircluster_process_latency_p99_seconds{process=\"tx1\"} 0.04",
            "fhircluster_process_cpu_seconds_total{process=\"tx1\"} 1.25",
            "fhircluster_restarts_total{process=\"tx1\",reason=\"crash\"} 1",
            "fhircluster_restarts_total{process=\"tx1\",reason=\"rolling\"} 2",
        ] {
            assert!(out.contains(&format!("{line}\n")), "{line} in\n{out}");
        }
    }
}
