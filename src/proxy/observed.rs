//! What `/metrics` shows of the launcher's own doing beyond the front door's counters: each
//! request's duration by route class and outcome class, retries of unsent requests, header
//! timeouts, client connections, and the reloads. Atomics and lock-free histograms: a request
//! records in a few atomic adds, with no lock and no allocation.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::exposition::histogram::Histogram;
use crate::exposition::text::{family, histogram_series};
use crate::per_kind::Kind;

/// How a request was routed, as the duration histogram labels it (`route`): the one vocabulary
/// for which way a request went (the answer counters are kept by it too, `Counters::answered`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteClass {
    /// The master's own paths.
    Master,
    /// A tx request in the normal lane.
    Tx,
    /// A tx request in the fast lane.
    Fast,
    /// A tx request routed by its cache-id (to its issuer, or with a prefix no process has).
    Owner,
    /// Answered before it was routed (a bad target, a bad `Host`, a method never proxied).
    Other,
}

impl RouteClass {
    pub const ALL: [RouteClass; 5] = [
        RouteClass::Master,
        RouteClass::Tx,
        RouteClass::Fast,
        RouteClass::Owner,
        RouteClass::Other,
    ];

    pub fn label(self) -> &'static str {
        match self {
            RouteClass::Master => "master",
            RouteClass::Tx => "tx",
            RouteClass::Fast => "fast",
            RouteClass::Owner => "owner",
            RouteClass::Other => "other",
        }
    }

    /// The `route` label of `fhircluster_requests_total`, coarser than the histogram's: the
    /// master's own paths, or a tx process (any lane, or by cache-id). `None`: answered before
    /// it was routed, which that counter has never counted (its labels stay `master`, `tx`).
    pub fn way(self) -> Option<&'static str> {
        match self {
            RouteClass::Master => Some(RouteClass::Master.label()),
            RouteClass::Tx | RouteClass::Fast | RouteClass::Owner => Some(RouteClass::Tx.label()),
            RouteClass::Other => None,
        }
    }
}

impl Kind for RouteClass {
    const ALL: &'static [RouteClass] = &RouteClass::ALL;
    fn index(self) -> usize {
        self as usize
    }
}

/// How a request ended, as the duration histogram labels it (`outcome`): the status class of a
/// process's answer (or of the launcher's `502`/`504` for a process that failed), or `refused`
/// when the launcher answered itself without asking a process (queue timeout, owner down, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeClass {
    Ok,
    Redirect,
    ClientError,
    ServerError,
    Refused,
}

impl OutcomeClass {
    pub const ALL: [OutcomeClass; 5] = [
        OutcomeClass::Ok,
        OutcomeClass::Redirect,
        OutcomeClass::ClientError,
        OutcomeClass::ServerError,
        OutcomeClass::Refused,
    ];

    /// `refused`: the launcher's own refusal; otherwise by status (1xx counted with 2xx).
    pub fn of(status: u16, refused: bool) -> OutcomeClass {
        match (refused, status) {
            (true, _) => OutcomeClass::Refused,
            (_, 300..=399) => OutcomeClass::Redirect,
            (_, 400..=499) => OutcomeClass::ClientError,
            (_, 500..) => OutcomeClass::ServerError,
            _ => OutcomeClass::Ok,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            OutcomeClass::Ok => "2xx",
            OutcomeClass::Redirect => "3xx",
            OutcomeClass::ClientError => "4xx",
            OutcomeClass::ServerError => "5xx",
            OutcomeClass::Refused => "refused",
        }
    }
}

const ROUTES: usize = RouteClass::ALL.len();
const OUTCOMES: usize = OutcomeClass::ALL.len();

/// The reloads (`SIGHUP`): how many, how the last ended, when the last good one was.
#[derive(Debug, Default)]
struct Reloads {
    ok: AtomicU64,
    failed: AtomicU64,
    last_failed: AtomicBool,
    /// Unix time in milliseconds of the last successful reload (0: none yet: the start's).
    last_ok_ms: AtomicU64,
}

#[derive(Debug, Default)]
pub struct Observed {
    durations: [[Histogram; OUTCOMES]; ROUTES],
    /// Requests sent again: tx requests offered to another process because the first refused
    /// the connection before anything was sent, or closed it without a byte of an answer to an
    /// idempotent request, and such requests sent again on a fresh connection (DEC-33). Shared
    /// with each process's pool.
    pub retries: Arc<AtomicU64>,
    /// Connections closed because no whole request head came within `headerTimeoutSeconds`.
    pub header_timeouts: AtomicU64,
    pub connections_accepted: AtomicU64,
    /// Connections accepted and served (nginx's `handled`): all of them, as the launcher closes
    /// none at once for a limit; what the system refuses to accept is `accept_errors`.
    pub connections_handled: AtomicU64,
    /// Accepts that failed (out of file descriptors, most often): connections never taken.
    pub accept_errors: AtomicU64,
    connections_open: Arc<AtomicUsize>,
    /// Connections served by hyper now; the rest of those open are outside it (idle and parked,
    /// or their next request read in the lobby).
    pub connections_served: Arc<AtomicUsize>,
    /// Connections outside hyper whose next request waits in the lobby for a process (queued).
    connections_waiting: AtomicUsize,
    reloads: Reloads,
    /// The last reload's refusal and the settings waiting for a restart, for `/status`.
    pub reload_note: super::reload_note::ReloadNote,
}

/// Counts a connection as waiting in the lobby while it lives.
pub struct WaitingConnection<'a>(&'a AtomicUsize);

impl Drop for WaitingConnection<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a client connection as open while it lives.
pub struct OpenConnection(Arc<AtomicUsize>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Observed {
    /// A request's answer was ready, `took` after its head arrived.
    pub fn record(&self, route: RouteClass, outcome: OutcomeClass, took: Duration) {
        self.durations[route as usize][outcome as usize].record(took);
    }

    /// Client connections open now.
    pub fn open(&self) -> usize {
        self.connections_open.load(Ordering::Relaxed)
    }

    /// A connection was accepted: counted, and open until the returned guard is dropped.
    pub fn accepted(&self) -> OpenConnection {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(self.connections_open.clone())
    }

    /// A connection's next request waits in the lobby for a process, until the returned guard
    /// is dropped.
    pub fn waiting(&self) -> WaitingConnection<'_> {
        self.connections_waiting.fetch_add(1, Ordering::Relaxed);
        WaitingConnection(&self.connections_waiting)
    }

    /// A reload ended, well or not, at `unix_ms`.
    pub fn reloaded(&self, ok: bool, unix_ms: u64) {
        let r = &self.reloads;
        if ok {
            r.ok.fetch_add(1, Ordering::Relaxed);
            r.last_ok_ms.store(unix_ms, Ordering::Relaxed);
        } else {
            r.failed.fetch_add(1, Ordering::Relaxed);
        }
        r.last_failed.store(!ok, Ordering::Relaxed);
    }

    /// The last reload, for the next program of an in-place upgrade: whether it was refused,
    /// and when the last good one was (Unix ms, 0: none).
    pub fn reload_state(&self) -> (bool, u64) {
        let r = &self.reloads;
        (
            r.last_failed.load(Ordering::Relaxed),
            r.last_ok_ms.load(Ordering::Relaxed),
        )
    }

    /// Takes over the program before's last reload (its counts are carried with `/metrics`').
    pub fn resume_reloads(&self, last_failed: bool, last_ok_ms: u64) {
        let r = &self.reloads;
        r.last_failed.store(last_failed, Ordering::Relaxed);
        r.last_ok_ms.store(last_ok_ms, Ordering::Relaxed);
    }

    /// The series, in the text format; `started_ms`: when the launcher started (the time of
    /// its settings while no reload has succeeded).
    pub fn write(&self, out: &mut String, started_ms: u64) {
        let name = "fhircluster_request_duration_seconds";
        family(
            out,
            name,
            "histogram",
            "Time from a request's head to its answer ready to send, by route class (master, tx, \
             fast lane, owner by cache-id, other) and outcome (status class, or refused by the \
             launcher).",
        );
        for route in RouteClass::ALL {
            for outcome in OutcomeClass::ALL {
                let labels = format!(
                    "route=\"{}\",outcome=\"{}\"",
                    route.label(),
                    outcome.label()
                );
                histogram_series(
                    out,
                    name,
                    &labels,
                    &self.durations[route as usize][outcome as usize],
                );
            }
        }
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let counters = [
            (
                "fhircluster_retries_total",
                "Requests sent again: to another process after the first refused the \
                 connection, or to a fresh connection or another process after it closed \
                 without answering an idempotent request (DEC-33).",
                get(&self.retries),
            ),
            (
                "fhircluster_header_timeouts_total",
                "Client connections closed because no whole request head came within \
                 headerTimeoutSeconds.",
                get(&self.header_timeouts),
            ),
            (
                "fhircluster_connections_accepted_total",
                "Client connections accepted.",
                get(&self.connections_accepted),
            ),
            (
                "fhircluster_connections_handled_total",
                "Client connections accepted and served, not closed at once for a limit (as \
                 nginx's handled): the launcher has no connection limit, so these are all \
                 that were accepted.",
                get(&self.connections_handled),
            ),
            (
                "fhircluster_accept_errors_total",
                "Accepts on the client listener that failed (the descriptor limit, most often).",
                get(&self.accept_errors),
            ),
        ];
        for (name, help, v) in counters {
            family(out, name, "counter", help);
            let _ = writeln!(out, "{name} {v}");
        }
        let open = self.connections_open.load(Ordering::Relaxed);
        let served = self.connections_served.load(Ordering::Relaxed).min(open);
        let waiting = self
            .connections_waiting
            .load(Ordering::Relaxed)
            .min(open - served);
        family(
            out,
            "fhircluster_connections",
            "gauge",
            "Client connections open, by state: served (hyper holds it), waiting (outside hyper, \
             its next request read and queued in the lobby for a process) or parked (outside \
             hyper, idle or its next request arriving).",
        );
        let _ = writeln!(
            out,
            "fhircluster_connections{{state=\"served\"}} {served}\n\
             fhircluster_connections{{state=\"waiting\"}} {waiting}\n\
             fhircluster_connections{{state=\"parked\"}} {}",
            open - served - waiting
        );
        let r = &self.reloads;
        family(
            out,
            "fhircluster_config_reloads_total",
            "counter",
            "Reloads (SIGHUP), by result: success, or failure (the settings refused, nothing \
             changed).",
        );
        let _ = writeln!(
            out,
            "fhircluster_config_reloads_total{{result=\"success\"}} {}\n\
             fhircluster_config_reloads_total{{result=\"failure\"}} {}",
            get(&r.ok),
            get(&r.failed)
        );
        family(
            out,
            "fhircluster_config_last_reload_successful",
            "gauge",
            "1 unless the last reload's settings were refused (1 before any reload).",
        );
        let _ = writeln!(
            out,
            "fhircluster_config_last_reload_successful {}",
            u8::from(!r.last_failed.load(Ordering::Relaxed))
        );
        family(
            out,
            "fhircluster_config_last_reload_success_timestamp_seconds",
            "gauge",
            "When the settings in force were read: the last successful reload, or the start.",
        );
        let ok_ms = match get(&r.last_ok_ms) {
            0 => started_ms,
            ms => ms,
        };
        let _ = writeln!(
            out,
            "fhircluster_config_last_reload_success_timestamp_seconds {}",
            ok_ms as f64 / 1e3
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_classes_split_the_launchers_refusals_from_status_classes() {
        assert_eq!(OutcomeClass::of(200, false), OutcomeClass::Ok);
        assert_eq!(OutcomeClass::of(101, false), OutcomeClass::Ok);
        assert_eq!(OutcomeClass::of(304, false), OutcomeClass::Redirect);
        assert_eq!(OutcomeClass::of(404, false), OutcomeClass::ClientError);
        assert_eq!(OutcomeClass::of(504, false), OutcomeClass::ServerError);
        assert_eq!(OutcomeClass::of(503, true), OutcomeClass::Refused);
    }

    #[test]
    fn durations_land_in_their_class_and_reloads_keep_the_last_result() {
        let o = Observed::default();
        o.record(
            RouteClass::Owner,
            OutcomeClass::Refused,
            Duration::from_millis(2),
        );
        let guard = o.accepted();
        o.reloaded(true, 5_000);
        o.reloaded(false, 6_000);
        let mut out = String::new();
        o.write(&mut out, 1_000);
        assert!(out.contains(
            "fhircluster_request_duration_seconds_count{route=\"owner\",outcome=\"refused\"} 1\n"
        ));
        assert!(out.contains(
            "fhircluster_request_duration_seconds_count{route=\"tx\",outcome=\"2xx\"} 0\n"
        ));
        assert!(out.contains("fhircluster_connections{state=\"parked\"} 1\n"));
        let waiting = o.waiting();
        let mut out = String::new();
        o.write(&mut out, 1_000);
        assert!(out.contains("fhircluster_connections{state=\"waiting\"} 1\n"));
        assert!(out.contains("fhircluster_connections{state=\"parked\"} 0\n"));
        drop(waiting);
        let mut out = String::new();
        o.write(&mut out, 1_000);
        assert!(out.contains("fhircluster_connections{state=\"waiting\"} 0\n"));
        assert!(out.contains("fhircluster_config_reloads_total{result=\"failure\"} 1\n"));
        assert!(out.contains("fhircluster_config_last_reload_successful 0\n"));
        assert!(out.contains("fhircluster_config_last_reload_success_timestamp_seconds 5\n"));
        drop(guard);
        let mut out = String::new();
        o.write(&mut out, 1_000);
        assert!(out.contains("fhircluster_connections{state=\"parked\"} 0\n"));
    }
}
