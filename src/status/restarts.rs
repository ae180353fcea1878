//! Why processes were started again, counted apart (`fhircluster_restarts_total{reason}`, the
//! status rows' `restartsBy`): a process that ended on its own (`crash`) is not a planned
//! restart. The lifecycle counts; the status and `/metrics` show.

use serde::{Deserialize, Serialize};

/// Why a process was started again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartReason {
    /// It ended (or failed to start) on its own, and was started again after its backoff.
    Crash,
    /// A rolling restart (a reload's) stopped it and started it again.
    Rolling,
    /// A memory recycle drained it and started it again.
    Recycle,
    /// A worker stopped for a lowered worker count, wanted again by a later reload.
    Scale,
}

impl RestartReason {
    pub const ALL: [RestartReason; 4] = [
        RestartReason::Crash,
        RestartReason::Rolling,
        RestartReason::Recycle,
        RestartReason::Scale,
    ];

    /// The `reason` label, and the key in `restartsBy`.
    pub fn label(self) -> &'static str {
        match self {
            RestartReason::Crash => "crash",
            RestartReason::Rolling => "rolling",
            RestartReason::Recycle => "recycle",
            RestartReason::Scale => "scale",
        }
    }
}

/// Restarts since the launcher started, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartCounts(pub [u32; 4]);

impl RestartCounts {
    pub fn add(&mut self, why: RestartReason) {
        let n = &mut self.0[why as usize];
        *n = n.saturating_add(1);
    }

    pub fn get(&self, why: RestartReason) -> u32 {
        self.0[why as usize]
    }

    /// `{"crash": n, "rolling": n, ...}`.
    pub fn to_json(self) -> serde_json::Value {
        RestartReason::ALL
            .iter()
            .map(|r| (r.label().to_string(), self.get(*r).into()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}
