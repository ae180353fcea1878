//! What the front door counted of its own doing, for logs, events, metrics and the status: its
//! answers by route and class, refusals, losses per process, lanes and queue waits. Atomics, so
//! a request counts without taking the scheduler's lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::ops::metrics::Histogram;
use crate::process::ProcessId;
use crate::status::keeper::Tally;

/// Counters of what the launcher did itself, for logs, events and metrics.
#[derive(Default, Debug)]
pub struct Counters {
    pub refused_queue: AtomicU64,
    pub refused_no_process: AtomicU64,
    pub refused_stopping: AtomicU64,
    pub refused_master_down: AtomicU64,
    pub cache_id_lost: AtomicU64,
    pub bad_gateway: AtomicU64,
    pub gateway_timeout: AtomicU64,
    pub write_timeout_closes: Arc<AtomicU64>,
    /// `408`s: a client's body had not all come in time (the client's doing, no process's).
    pub request_timeouts: AtomicU64,
    /// `431`s: a request line and headers over `headerMaxKB`, answered in the lobby.
    pub heads_too_large: AtomicU64,
    /// Per process (index = `ProcessId`): 504s, 502s, cache-ids that came while it restarted.
    pub lost: Vec<[AtomicU64; 3]>,
    /// Answers by route (0 master, 1 tx) and status class (1xx .. 5xx).
    pub answered: [[AtomicU64; 5]; 2],
    /// Tx requests admitted by lane (0 fast, 1 normal).
    pub lanes: [AtomicU64; 2],
    /// How long tx requests waited in the launcher before being sent.
    pub queue_wait: Histogram,
    /// Tx-capable requests routed to the master, by path prefix (an unused tx endpoint).
    pub master_paths: crate::ops::tx_usage::MasterPaths,
    /// Request durations, retries, header timeouts, connections, reloads (`/metrics`).
    pub observed: crate::ops::observed::Observed,
}

impl Counters {
    pub(super) fn new(processes: usize) -> Counters {
        Counters {
            lost: (0..processes).map(|_| Default::default()).collect(),
            ..Counters::default()
        }
    }

    /// Counts a request lost to a process: 0 = 504, 1 = 502, 2 = cache-id while restarting.
    pub fn lose(&self, id: ProcessId, kind: usize) {
        if let Some(c) = self.lost.get(id.index()).and_then(|l| l.get(kind)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts an answer given to a client.
    pub fn answered(&self, tx: bool, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.answered[usize::from(tx)][class].fetch_add(1, Ordering::Relaxed);
    }

    pub fn tally(&self) -> Tally {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Tally {
            lost: self
                .lost
                .iter()
                .map(|l| [get(&l[0]), get(&l[1]), get(&l[2])])
                .collect(),
            // The master's paths answered 503 while it is not ready are refusals with no
            // process ready, as the spec's report names them: for those paths the master is the
            // only process there is.
            refused: [
                get(&self.refused_queue),
                get(&self.refused_no_process) + get(&self.refused_master_down),
                get(&self.refused_stopping),
            ],
            write_timeout_closes: get(&self.write_timeout_closes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_masters_503s_are_refusals_with_no_process_ready_in_the_report() {
        // spec: EVENT-10
        let c = Counters::new(2);
        c.refused_no_process.fetch_add(2, Ordering::Relaxed);
        c.refused_master_down.fetch_add(3, Ordering::Relaxed);
        c.lose(ProcessId(1), 2);
        c.lose(ProcessId(9), 2); // not a process: ignored
        let t = c.tally();
        assert_eq!(t.refused, [0, 5, 0]);
        assert_eq!(t.lost, [[0, 0, 0], [0, 0, 1]]);
    }
}
