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
    /// The hang watchdog killed it (silent past `hangTimeoutSeconds` while it owed an answer,
    /// DEC-82), and it was started again as after a crash.
    Hung,
}

impl RestartReason {
    pub const ALL: [RestartReason; 5] = [
        RestartReason::Crash,
        RestartReason::Rolling,
        RestartReason::Recycle,
        RestartReason::Scale,
        RestartReason::Hung,
    ];

    /// The `reason` label, and the key in `restartsBy`.
    pub fn label(self) -> &'static str {
        match self {
            RestartReason::Crash => "crash",
            RestartReason::Rolling => "rolling",
            RestartReason::Recycle => "recycle",
            RestartReason::Scale => "scale",
            RestartReason::Hung => "hung",
        }
    }

    /// Whether the launcher did not plan it: it ended on its own, or the watchdog found it hung
    /// (DEC-84). Only these are the status's `restarts` and a problem on the status page.
    pub fn unplanned(self) -> bool {
        matches!(self, RestartReason::Crash | RestartReason::Hung)
    }
}

/// Restarts since the launcher started, by reason (in `RestartReason::ALL`'s order: an in-place
/// upgrade's state carries them so, and one from a program that knew fewer reasons reads the
/// missing ones as 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RestartCounts(pub [u32; 5]);

impl<'de> Deserialize<'de> for RestartCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let read: Vec<u32> = Vec::deserialize(d)?;
        let mut counts = [0; 5];
        for (c, n) in counts.iter_mut().zip(read) {
            *c = n;
        }
        Ok(RestartCounts(counts))
    }
}

impl RestartCounts {
    pub fn add(&mut self, why: RestartReason) {
        let n = &mut self.0[why as usize];
        *n = n.saturating_add(1);
    }

    pub fn get(&self, why: RestartReason) -> u32 {
        self.0[why as usize]
    }

    /// The restarts the launcher did not plan (crashes and hang kills, DEC-84): the spec's
    /// Restarts.
    pub fn unplanned(&self) -> u32 {
        RestartReason::ALL
            .iter()
            .filter(|r| r.unplanned())
            .fold(0u32, |n, r| n.saturating_add(self.get(*r)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_crashes_and_hang_kills_are_unplanned_and_fewer_reasons_read_as_zero() {
        // spec: DEC-84
        let mut c = RestartCounts::default();
        for why in RestartReason::ALL {
            c.add(why);
        }
        c.add(RestartReason::Hung);
        assert_eq!(c.unplanned(), 3);
        let old: RestartCounts = serde_json::from_str("[1, 2, 3, 4]").expect("four");
        assert_eq!(old.0, [1, 2, 3, 4, 0]);
        let back: RestartCounts =
            serde_json::from_value(serde_json::to_value(c).expect("json")).expect("read back");
        assert_eq!(back, c);
    }
}
