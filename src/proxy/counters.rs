//! What the front door counted of its own doing, for logs, events, metrics and the status: its
//! answers by route and class, its own answers by reason, losses per process, lanes and queue
//! waits. Atomics, so a request counts without taking the scheduler's lock. Indexed by the enums
//! the status keeper reads them by (`per_kind`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::answer::Answer;
use super::lane::Lane;
use super::master_paths::MasterPaths;
use super::observed::{Observed, RouteClass};
use super::process_counters::ProcessCounters;
use crate::exposition::histogram::Histogram;
use crate::per_kind::PerKind;
use crate::process::ProcessId;
use crate::status::events::{LostKind, RefusalKind};
use crate::status::tally::{Lost, Refused, Tally};

/// Status classes 1xx .. 5xx.
pub const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Counters of what the launcher did itself, for logs, events and metrics.
#[derive(Default, Debug)]
pub struct Counters {
    pub refused_queue: AtomicU64,
    /// Of those, refused as they came: they could not be admitted in time (DEC-50).
    pub refused_early: AtomicU64,
    pub refused_no_process: AtomicU64,
    pub refused_stopping: AtomicU64,
    pub refused_master_down: AtomicU64,
    pub cache_id_lost: AtomicU64,
    pub bad_gateway: AtomicU64,
    pub gateway_timeout: AtomicU64,
    pub write_timeout_closes: Arc<AtomicU64>,
    /// `408`s: a client's body had not all come in time (the client's doing, no process's).
    pub request_timeouts: AtomicU64,
    /// `431`s: a request line and headers over `headerMaxKB` (or over 100 headers).
    pub heads_too_large: AtomicU64,
    /// `400`s and `414`s: a request head hyper's parser refuses, answered by the lobby or by
    /// hyper.
    pub bad_heads: AtomicU64,
    /// Per process (index = `ProcessId`): the requests lost to it.
    pub lost: Vec<Lost<AtomicU64>>,
    /// Per process (index = `ProcessId`): its answers, bytes, refusals and latency.
    pub processes: Vec<ProcessCounters>,
    /// Answers by route class and status class (`CLASSES`); `/metrics` shows them by the
    /// coarser `RouteClass::way` (`answered_by_way`).
    pub answered: PerKind<RouteClass, [AtomicU64; 5], 5>,
    /// Tx requests admitted, by lane.
    pub lanes: PerKind<Lane, AtomicU64, 2>,
    /// How long tx requests waited in the launcher before being sent.
    pub queue_wait: Histogram,
    /// Tx-capable requests routed to the master, by path prefix (an unused tx endpoint).
    pub master_paths: MasterPaths,
    /// Request durations, retries, header timeouts, connections, reloads (`/metrics`).
    pub observed: Observed,
}

impl Counters {
    pub(super) fn new(processes: usize) -> Counters {
        Counters {
            lost: (0..processes).map(|_| Default::default()).collect(),
            processes: (0..processes).map(|_| Default::default()).collect(),
            ..Counters::default()
        }
    }

    /// Counts one of the launcher's own answers, and against `process` (the one it names) a
    /// request lost to it. Every answer is named here, so a new one must be placed.
    pub fn count(&self, answer: &Answer, process: Option<ProcessId>) {
        let (reason, lost) = match answer {
            Answer::QueueTimeout { .. } => (Some(&self.refused_queue), None),
            Answer::QueueForecast { early, .. } => {
                if *early {
                    self.refused_early.fetch_add(1, Ordering::Relaxed);
                }
                (Some(&self.refused_queue), None)
            }
            Answer::NoProcessReady => (Some(&self.refused_no_process), None),
            Answer::Stopping => (Some(&self.refused_stopping), None),
            Answer::MasterNotReady => (Some(&self.refused_master_down), None),
            Answer::CacheIdLost { .. } => (
                Some(&self.cache_id_lost),
                Some(LostKind::CacheIdWhileRestarting),
            ),
            Answer::BadGateway { .. } => (Some(&self.bad_gateway), Some(LostKind::BadGateway502)),
            Answer::GatewayTimeout { .. } => {
                (Some(&self.gateway_timeout), Some(LostKind::Timeout504))
            }
            Answer::RequestTimeout => (Some(&self.request_timeouts), None),
            Answer::HeadTooLarge { .. } | Answer::TooManyHeaders => {
                (Some(&self.heads_too_large), None)
            }
            Answer::BadHead(_) | Answer::TargetTooLong => (Some(&self.bad_heads), None),
            Answer::Unsupported
            | Answer::BadTarget(_)
            | Answer::BadRequestBody
            | Answer::BadHost(_) => (None, None),
        };
        if let Some(c) = reason {
            c.fetch_add(1, Ordering::Relaxed);
        }
        // The master's paths while it is not ready: a refusal of requests only it could take.
        if matches!(answer, Answer::MasterNotReady) {
            if let Some(m) = self.processes.get(ProcessId::MASTER.index()) {
                m.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
        let lost_to = process.and_then(|p| self.lost.get(p.index()));
        if let (Some(l), Some(kind)) = (lost_to, lost) {
            l[kind].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts an answer given to a client.
    pub fn answered(&self, route: RouteClass, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.answered[route][class].fetch_add(1, Ordering::Relaxed);
    }

    /// The answers by `RouteClass::way` (`master`, `tx`, in that order) and status class: the
    /// route classes of one way summed.
    pub fn answered_by_way(&self) -> Vec<(&'static str, [u64; 5])> {
        let mut out: Vec<(&'static str, [u64; 5])> = Vec::new();
        for (route, by_class) in self.answered.iter() {
            let Some(way) = route.way() else { continue };
            let at = match out.iter().position(|(w, _)| *w == way) {
                Some(at) => at,
                None => {
                    out.push((way, [0; 5]));
                    out.len() - 1
                }
            };
            for (sum, n) in out[at].1.iter_mut().zip(by_class) {
                *sum += n.load(Ordering::Relaxed);
            }
        }
        out
    }

    pub fn tally(&self) -> Tally {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Tally {
            lost: self.lost.iter().map(|l| l.map(get)).collect(),
            // The master's paths answered 503 while it is not ready are refusals with no
            // process ready, as the spec's report names them: for those paths the master is the
            // only process there is.
            refused: Refused::from_fn(|k| match k {
                RefusalKind::QueueWait => get(&self.refused_queue),
                RefusalKind::NoProcessReady => {
                    get(&self.refused_no_process) + get(&self.refused_master_down)
                }
                RefusalKind::Stopping => get(&self.refused_stopping),
            }),
            write_timeout_closes: get(&self.write_timeout_closes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::per_kind::assert_in_order;

    #[test]
    fn the_masters_503s_are_refusals_with_no_process_ready_in_the_report() {
        // spec: EVENT-10
        let c = Counters::new(2);
        c.count(&Answer::NoProcessReady, None);
        c.count(&Answer::NoProcessReady, None);
        for _ in 0..3 {
            c.count(&Answer::MasterNotReady, Some(ProcessId::MASTER));
        }
        let lost = || Answer::CacheIdLost {
            cache_id: "tx1.a".into(),
        };
        c.count(&lost(), Some(ProcessId(1)));
        c.count(&lost(), Some(ProcessId(9))); // not a process: counted, against nobody
        let t = c.tally();
        assert_eq!(t.refused[RefusalKind::NoProcessReady], 5);
        assert_eq!(
            c.processes[0].refused.load(Ordering::Relaxed),
            3,
            "refused for m0"
        );
        assert_eq!(c.processes[1].refused.load(Ordering::Relaxed), 0);
        assert_eq!(t.refused[RefusalKind::QueueWait], 0);
        assert_eq!(t.lost.len(), 2);
        assert_eq!(t.lost[0], Lost::default(), "the master lost nothing");
        assert_eq!(t.lost[1][LostKind::CacheIdWhileRestarting], 1);
        assert_eq!(c.cache_id_lost.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_502_and_a_504_are_counted_against_the_process_they_name() {
        // spec: EVENT-6, EVENT-7
        let c = Counters::new(3);
        let code = || "tx2".to_string();
        c.count(
            &Answer::BadGateway {
                code: code(),
                ended: None,
            },
            Some(ProcessId(2)),
        );
        let timeout = Answer::GatewayTimeout {
            code: code(),
            secs: 1.0,
        };
        c.count(&timeout, Some(ProcessId(2)));
        c.count(&timeout, Some(ProcessId(2)));
        let t = c.tally();
        assert_eq!(t.lost[2][LostKind::BadGateway502], 1);
        assert_eq!(t.lost[2][LostKind::Timeout504], 2);
        assert_eq!(t.lost[1], Lost::default());
    }

    #[test]
    fn answers_by_route_and_class() {
        assert_in_order::<RouteClass>();
        let c = Counters::new(1);
        c.answered(RouteClass::Tx, 200);
        c.answered(RouteClass::Tx, 503);
        c.answered(RouteClass::Master, 99); // below 1xx: counted as 1xx
        let get = |r: RouteClass, class: usize| c.answered[r][class].load(Ordering::Relaxed);
        assert_eq!((get(RouteClass::Tx, 1), get(RouteClass::Tx, 4)), (1, 1));
        assert_eq!(get(RouteClass::Master, 0), 1);
    }

    #[test]
    fn the_requests_counter_shows_the_master_and_every_tx_route_as_tx() {
        // The `route` label of fhircluster_requests_total keeps its two values (`master`, `tx`)
        // with the route classes merged: fast and owner requests are tx requests.
        let c = Counters::new(1);
        c.answered(RouteClass::Tx, 200);
        c.answered(RouteClass::Fast, 201);
        c.answered(RouteClass::Owner, 503);
        c.answered(RouteClass::Other, 400); // not routed: not a way
        let ways = c.answered_by_way();
        assert_eq!(
            ways,
            [("master", [0, 0, 0, 0, 0]), ("tx", [0, 2, 0, 0, 1])],
            "{ways:?}"
        );
    }
}
