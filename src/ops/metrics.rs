//! `/metrics` in the Prometheus text format: what the front door counted, its queue and slots,
//! and what the status snapshot knows about each process and the cgroup. Names follow the
//! Prometheus conventions (`fhircluster_..._total`, `_seconds`, `_bytes`).

use std::fmt::Write;

use serde_json::Value;

use crate::build_info;
use crate::exposition::histogram::Histogram;
use crate::exposition::text::{esc, family, histogram_series};
use crate::proxy::observed::Observed;

/// One process's live figures from the front door.
pub struct ProcessLoad {
    pub code: String,
    pub in_flight: u32,
    /// None: no limit.
    pub slots: Option<u32>,
    pub queued: usize,
    /// Its event loop is saturated: heavy requests held to the fewest that keep it busy.
    pub saturated: bool,
    /// The front door sends it requests (ready, not draining).
    pub ready: bool,
    /// In a cooldown after failures.
    pub cooling: bool,
}

/// The budget for bodies held for clients (`proxy::budget`).
#[derive(Clone, Copy, Debug, Default)]
pub struct BufferFigures {
    pub held: u64,
    /// 0: no limit.
    pub limit: u64,
    pub responses_streamed: u64,
    pub requests_streamed: u64,
}

/// Everything `/metrics` shows, gathered by the caller.
pub struct MetricsInput<'a> {
    /// (route, status class "2xx" ..., count)
    pub requests: Vec<(&'static str, &'static str, u64)>,
    /// (lane, count)
    pub lanes: Vec<(&'static str, u64)>,
    /// (reason, count)
    pub refusals: Vec<(&'static str, u64)>,
    /// (code, 502s, 504s)
    pub upstream_errors: Vec<(String, u64, u64)>,
    pub write_timeout_closes: u64,
    /// What the front door holds of bodies for clients (`bufferMaxMB`).
    pub buffer: BufferFigures,
    pub queued: usize,
    pub queue_wait: &'a Histogram,
    pub processes: Vec<ProcessLoad>,
    /// What the front door counted of each process present (code, figures).
    pub fronts: Vec<(String, crate::status::front::FrontFigures)>,
    /// The status snapshot (`processes[].restarts`, memory), when there is one.
    pub snapshot: Option<&'a Value>,
    /// Recycles per process code.
    pub recycles: Vec<(String, u64)>,
    /// (source "launcher"/"children", log lines dropped because the output was stuck)
    pub log_lines_dropped: Vec<(&'static str, u64)>,
    /// Request durations, retries, connections, reloads.
    pub observed: &'a Observed,
    /// Access log lines dropped because its queue was full.
    pub access_log_dropped: u64,
    /// When the launcher started, in Unix milliseconds.
    pub started_ms: u64,
}

fn histogram(out: &mut String, name: &str, help: &str, h: &Histogram) {
    family(out, name, "histogram", help);
    histogram_series(out, name, "", h);
}

pub fn render(m: &MetricsInput) -> String {
    let mut out = String::with_capacity(4096);
    family(
        &mut out,
        "fhircluster_requests_total",
        "counter",
        "Requests answered, by route (master or tx) and status class.",
    );
    for (route, class, n) in &m.requests {
        let _ = writeln!(
            out,
            "fhircluster_requests_total{{route=\"{route}\",status=\"{class}\"}} {n}"
        );
    }
    family(
        &mut out,
        "fhircluster_lane_requests_total",
        "counter",
        "Tx requests admitted, by lane (fast or normal).",
    );
    for (lane, n) in &m.lanes {
        let _ = writeln!(
            out,
            "fhircluster_lane_requests_total{{lane=\"{lane}\"}} {n}"
        );
    }
    family(
        &mut out,
        "fhircluster_refusals_total",
        "counter",
        "Requests the launcher answered itself, by reason.",
    );
    for (reason, n) in &m.refusals {
        let _ = writeln!(out, "fhircluster_refusals_total{{reason=\"{reason}\"}} {n}");
    }
    family(
        &mut out,
        "fhircluster_upstream_errors_total",
        "counter",
        "502s and 504s the launcher answered, by process.",
    );
    for (code, e502, e504) in &m.upstream_errors {
        let c = esc(code);
        let _ = writeln!(
            out,
            "fhircluster_upstream_errors_total{{process=\"{c}\",status=\"502\"}} {e502}"
        );
        let _ = writeln!(
            out,
            "fhircluster_upstream_errors_total{{process=\"{c}\",status=\"504\"}} {e504}"
        );
    }
    family(&mut out, "fhircluster_write_timeout_closes_total", "counter", "Client connections closed because the client took none of its response within writeTimeoutSeconds.");
    let _ = writeln!(
        out,
        "fhircluster_write_timeout_closes_total {}",
        m.write_timeout_closes
    );
    let b = &m.buffer;
    family(
        &mut out,
        "fhircluster_buffered_bytes",
        "gauge",
        "Bytes of bodies the launcher holds for clients now: tx responses read ahead, request bodies read before admission.",
    );
    let _ = writeln!(out, "fhircluster_buffered_bytes {}", b.held);
    family(
        &mut out,
        "fhircluster_buffer_limit_bytes",
        "gauge",
        "bufferMaxMB in bytes; 0: no limit.",
    );
    let _ = writeln!(out, "fhircluster_buffer_limit_bytes {}", b.limit);
    family(
        &mut out,
        "fhircluster_streamed_for_budget_total",
        "counter",
        "Bodies passed on as they came instead of held, because bufferMaxMB was reached: tx responses (their slot held until the client has them) and request bodies.",
    );
    let _ = writeln!(
        out,
        "fhircluster_streamed_for_budget_total{{body=\"response\"}} {}",
        b.responses_streamed
    );
    let _ = writeln!(
        out,
        "fhircluster_streamed_for_budget_total{{body=\"request\"}} {}",
        b.requests_streamed
    );
    family(
        &mut out,
        "fhircluster_queue_length",
        "gauge",
        "Tx requests waiting in the launcher for a slot.",
    );
    let _ = writeln!(out, "fhircluster_queue_length {}", m.queued);
    histogram(
        &mut out,
        "fhircluster_queue_wait_seconds",
        "Time tx requests waited in the launcher before being sent.",
        m.queue_wait,
    );
    family(
        &mut out,
        "fhircluster_in_flight",
        "gauge",
        "Tx requests in flight, by process.",
    );
    for p in &m.processes {
        let _ = writeln!(
            out,
            "fhircluster_in_flight{{process=\"{}\"}} {}",
            esc(&p.code),
            p.in_flight
        );
    }
    family(
        &mut out,
        "fhircluster_slots",
        "gauge",
        "Slots (maxOutstanding + fastLaneExtra) per process; absent with no limit.",
    );
    for p in &m.processes {
        if let Some(s) = p.slots {
            let _ = writeln!(out, "fhircluster_slots{{process=\"{}\"}} {s}", esc(&p.code));
        }
    }
    family(
        &mut out,
        "fhircluster_saturated",
        "gauge",
        "1 while a process's event loop is saturated and its heavy tx requests are held to the fewest that keep it busy (1 to normalMinSlots).",
    );
    for p in &m.processes {
        let _ = writeln!(
            out,
            "fhircluster_saturated{{process=\"{}\"}} {}",
            esc(&p.code),
            u8::from(p.saturated)
        );
    }
    family(
        &mut out,
        "fhircluster_process_queued",
        "gauge",
        "Requests waiting for one process only (by cache-id).",
    );
    for p in &m.processes {
        let _ = writeln!(
            out,
            "fhircluster_process_queued{{process=\"{}\"}} {}",
            esc(&p.code),
            p.queued
        );
    }
    family(
        &mut out,
        "fhircluster_recycles_total",
        "counter",
        "Memory recycles, by process.",
    );
    for (code, n) in &m.recycles {
        let _ = writeln!(
            out,
            "fhircluster_recycles_total{{process=\"{}\"}} {n}",
            esc(code)
        );
    }
    family(
        &mut out,
        "fhircluster_log_lines_dropped_total",
        "counter",
        "Log lines dropped because the launcher's stdout/stderr was stuck or too slow, by source (launcher, children).",
    );
    for (source, n) in &m.log_lines_dropped {
        let _ = writeln!(
            out,
            "fhircluster_log_lines_dropped_total{{source=\"{source}\"}} {n}"
        );
    }
    if let Some(s) = m.snapshot {
        write_snapshot(&mut out, s);
    }
    super::process_series::write(&mut out, &m.processes, m.snapshot);
    super::front_series::write(&mut out, &m.fronts, m.snapshot);
    family(
        &mut out,
        "fhircluster_access_log_lines_dropped_total",
        "counter",
        "Access log lines dropped because its queue was full (its file or stderr too slow).",
    );
    let _ = writeln!(
        out,
        "fhircluster_access_log_lines_dropped_total {}",
        m.access_log_dropped
    );
    m.observed.write(&mut out, m.started_ms);
    family(
        &mut out,
        "fhircluster_build_info",
        "gauge",
        "1, labelled with the version, the git commit and the compiler the launcher was built with.",
    );
    let _ = writeln!(
        out,
        "fhircluster_build_info{{version=\"{}\",commit=\"{}\",rustc=\"{}\"}} 1",
        esc(env!("CARGO_PKG_VERSION")),
        esc(build_info::COMMIT),
        esc(build_info::RUSTC)
    );
    crate::exposition::process_self::write(&mut out);
    out
}

fn write_snapshot(out: &mut String, s: &Value) {
    let w = &s["workers"];
    if let Some(n) = w["wanted"].as_u64() {
        family(out, "fhircluster_workers_wanted", "gauge", "The tx-workers wanted now: config.json's count, or the one set at run time (SIGTTIN, SIGTTOU, fhircluster scale).");
        let _ = writeln!(out, "fhircluster_workers_wanted {n}");
        family(out, "fhircluster_workers_set_at_run_time", "gauge", "1 while the worker count is one set at run time (until the next reload or start), else 0.");
        let _ = writeln!(
            out,
            "fhircluster_workers_set_at_run_time {}",
            u8::from(w["setAtRunTime"].is_object())
        );
    }
    if s.get("rollingRestart").is_some() {
        family(out, "fhircluster_rolling_restart_stopped", "gauge", "1 while the last rolling restart stopped before its end (a replacement that did not come, or a refused reload), until the next reload or restart, else 0.");
        let _ = writeln!(
            out,
            "fhircluster_rolling_restart_stopped {}",
            u8::from(s["rollingRestart"].is_object())
        );
    }
    let procs = s["processes"].as_array().cloned().unwrap_or_default();
    family(
        out,
        "fhircluster_process_memory_bytes",
        "gauge",
        "Private (RssAnon) and mapped (RssFile) memory, by process.",
    );
    let launcher = std::iter::once(&s["launcher"]);
    // One series per place: a replacement beside its place's process (DEC-92) is in the cgroup's.
    let places = procs.iter().filter(|p| p["beside"] != true);
    for p in places.chain(launcher) {
        let Some(code) = p["code"].as_str() else {
            continue;
        };
        for (kind, field) in [("private", "rssAnon"), ("mapped", "rssFile")] {
            if let Some(v) = p[field].as_u64() {
                let _ = writeln!(
                    out,
                    "fhircluster_process_memory_bytes{{process=\"{}\",kind=\"{kind}\"}} {v}",
                    esc(code)
                );
            }
        }
    }
    let mem = &s["memory"];
    family(out, "fhircluster_cgroup_memory_bytes", "gauge", "The service cgroup's private (anon) and page-cache (file) memory, when it has a limit of its own.");
    for kind in ["anon", "file"] {
        if let Some(v) = mem["cgroup"][kind].as_u64() {
            let _ = writeln!(
                out,
                "fhircluster_cgroup_memory_bytes{{kind=\"{kind}\"}} {v}"
            );
        }
    }
    // Three quantities, three names: a limit and the two thresholds derived from it.
    for (name, field, help) in [
        (
            "fhircluster_memory_limit_bytes",
            "limit",
            "The memory limit the meter measures against (the cgroup's, or the guard's).",
        ),
        (
            "fhircluster_memory_refuse_threshold_bytes",
            "rejectAt",
            "The memory at which processes refuse requests (rejectFraction of the limit).",
        ),
        (
            "fhircluster_memory_abort_threshold_bytes",
            "abortAt",
            "The memory at which processes abort (abortFraction of the limit).",
        ),
    ] {
        family(out, name, "gauge", help);
        if let Some(v) = mem[field].as_u64() {
            let _ = writeln!(out, "{name} {v}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn the_text_format_has_help_type_and_samples() {
        let h = Histogram::default();
        h.record(Duration::from_millis(3));
        h.record(Duration::from_secs(100));
        let snap = json!({"processes": [{"code": "tx1", "restarts": 2, "rssAnon": 10, "rssFile": 20}],
                          "launcher": {"code": "launcher", "rssAnon": 5},
                          "memory": {"cgroup": null, "limit": null}});
        let text = render(&MetricsInput {
            requests: vec![("tx", "2xx", 7)],
            lanes: vec![("fast", 3)],
            refusals: vec![("queue", 1)],
            upstream_errors: vec![("tx1".into(), 0, 1)],
            write_timeout_closes: 0,
            buffer: BufferFigures {
                held: 4096,
                limit: 1 << 20,
                responses_streamed: 3,
                requests_streamed: 0,
            },
            queued: 2,
            queue_wait: &h,
            processes: vec![ProcessLoad {
                code: "tx1".into(),
                in_flight: 1,
                slots: Some(20),
                queued: 0,
                saturated: true,
                ready: true,
                cooling: false,
            }],
            fronts: Vec::new(),
            snapshot: Some(&snap),
            recycles: vec![("tx1".into(), 1)],
            log_lines_dropped: vec![("launcher", 0), ("children", 12)],
            observed: &Observed::default(),
            access_log_dropped: 0,
            started_ms: 0,
        });
        assert!(text.contains("fhircluster_log_lines_dropped_total{source=\"children\"} 12"));
        assert!(text.contains("# TYPE fhircluster_requests_total counter"));
        assert!(text.contains("fhircluster_requests_total{route=\"tx\",status=\"2xx\"} 7"));
        assert!(text.contains("fhircluster_queue_wait_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("fhircluster_queue_wait_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("fhircluster_queue_wait_seconds_count 2"));
        assert!(text.contains("fhircluster_restarts_total{process=\"tx1\",reason=\"crash\"} 0"));
        assert!(text.contains("fhircluster_buffered_bytes 4096\n"));
        assert!(text.contains("fhircluster_streamed_for_budget_total{body=\"response\"} 3\n"));
        assert!(text
            .contains("fhircluster_process_memory_bytes{process=\"launcher\",kind=\"private\"} 5"));
        assert!(text.contains("fhircluster_slots{process=\"tx1\"} 20"));
        assert!(text.contains("fhircluster_saturated{process=\"tx1\"} 1"));
        assert!(text.contains("\nfhircluster_build_info{version=\""));
    }

    #[test]
    fn the_memory_limit_and_its_thresholds_are_series_of_their_own() {
        let mut out = String::new();
        let snap = json!({"memory": {"limit": 100, "rejectAt": 85, "abortAt": 92}});
        write_snapshot(&mut out, &snap);
        assert!(
            out.contains("\nfhircluster_memory_limit_bytes 100\n"),
            "{out}"
        );
        assert!(out.contains("\nfhircluster_memory_refuse_threshold_bytes 85\n"));
        assert!(out.contains("\nfhircluster_memory_abort_threshold_bytes 92\n"));
        assert!(!out.contains("kind=\"limit\""));
    }
}
