//! The worker count as the status shows it: how many are wanted, whether that count was set at
//! run time (`SIGTTIN`, `SIGTTOU`, `fhircluster scale`) and by what, a sequence number that each
//! change moves, and whether the cluster has settled on it (every wanted process ready, none
//! on its way out). Each change is also an event for the daily report. Handed over across an
//! in-place upgrade (`KeeperState::workers`), so a count set at run time stays one (DEC-48).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::Keeper;
use crate::status::snapshot::{Life, ProcessState};

/// The count wanted and where it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Wanted {
    pub workers: usize,
    /// Moved by each change.
    pub seq: u64,
    /// Set at run time: by what, and when (Unix ms). None: config.json's (or its sizing).
    pub set_by: Option<String>,
    pub set_at_ms: Option<u64>,
}

impl Keeper {
    /// The count wanted from now on. `by`: what changed it (`SIGTTIN`, `reload`; None for the
    /// start's sizing, which is no change); `run_time`: set at run time, not from config.json.
    pub(crate) fn set_workers(&mut self, workers: usize, by: Option<&str>, run_time: bool) {
        let from = self.wanted.workers;
        let ms = crate::clock::unix_ms();
        self.wanted.set_by = run_time.then(|| by.unwrap_or("").to_string());
        self.wanted.set_at_ms = run_time.then_some(ms);
        if from == workers {
            return;
        }
        self.wanted.workers = workers;
        self.wanted.seq += 1;
        if let Some(by) = by {
            let ev = self.events.workers(from, workers, by, ms);
            self.hold(Some(ev));
        }
    }

    /// The count the lifecycle runs, after an in-place upgrade from a program whose state did
    /// not say it (or whose config.json said another): the status follows the processes.
    pub(crate) fn align_workers(&mut self, workers: usize) {
        if self.wanted.workers != workers {
            self.wanted.workers = workers;
            self.wanted.seq += 1;
        }
    }

    /// Whether the count now was set at run time (a reload then goes back to config.json).
    pub(crate) fn workers_set_at_run_time(&self) -> bool {
        self.wanted.set_by.is_some()
    }

    /// The snapshot's `workers`.
    pub(super) fn workers_json(&self, lives: &[Life]) -> Value {
        let w = &self.wanted;
        let settled =
            lives.len() == w.workers + 1 && lives.iter().all(|l| l.state == ProcessState::Ready);
        json!({
            "wanted": w.workers,
            "seq": w.seq,
            "settled": settled,
            "setAtRunTime": w.set_by.as_ref().map(|by| json!({"by": by, "atMs": w.set_at_ms})),
        })
    }
}
