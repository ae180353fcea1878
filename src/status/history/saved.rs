//! The whole history as data, typed: what [`History::to_json`] writes (to the master, into the
//! outbox at a stop, in an in-place upgrade's state: `keeper.history`) and what
//! [`History::restore`] reads back. The fields are in the order the JSON has always had them
//! (alphabetical, as a `serde_json::Value` writes them), so the written bytes did not change
//! when it was typed. Reading is as lenient as it always was: only `sampleIntervalMs` and
//! `processes` (each with `code`, `role`, `points`) are read (`memoryTotal` too when there);
//! what is derived or taken from the reader's own settings is written and not read back.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{push_gap, History, Legend, Life, Point, Series, TotalPoint};

/// The whole history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedHistory {
    /// Always false here: the whole history (a delta, `append: true`, adds to it).
    #[serde(default, skip_deserializing)]
    pub append: bool,
    #[serde(default)]
    pub memory_total: VecDeque<TotalPoint>,
    pub processes: Vec<SavedSeries>,
    pub sample_interval_ms: u64,
    /// Written for the master; the program reading it back takes its own setting.
    #[serde(default, skip_deserializing)]
    pub shared_cache: bool,
    /// Derived from the points (GRAPH-11, 12): written for the master, not read back.
    #[serde(default, skip_deserializing)]
    pub totals: Vec<TotalsRow>,
}

/// One process's series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedSeries {
    pub code: String,
    pub points: VecDeque<Point>,
    pub role: String,
    /// Its legend state when written (GRAPH-10): for the master; a restored series is
    /// unavailable until its process starts whatever it says (one this program doesn't know
    /// reads as none).
    #[serde(
        default,
        deserialize_with = "any_legend",
        skip_serializing_if = "Option::is_none"
    )]
    pub state: Option<Legend>,
}

/// A legend state, or none for anything else (it is not what a restore goes by).
fn any_legend<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Legend>, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(Legend::deserialize(v).ok())
}

/// The Requests and Client Cache Totals of one sampling interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TotalsRow {
    pub at: u64,
    pub client_caches: Option<u64>,
    pub client_concepts: Option<u64>,
    pub requests: u64,
}

impl History {
    /// The whole history as data (see the module's notes).
    pub fn saved(&self, now_ms: u64) -> SavedHistory {
        SavedHistory {
            append: false,
            memory_total: self.memory_total.clone(),
            processes: self
                .series
                .iter()
                .map(|s| SavedSeries {
                    code: s.code.clone(),
                    points: s.points.clone(),
                    role: s.role.clone(),
                    state: Some(self.legend_of(s, now_ms)),
                })
                .collect(),
            sample_interval_ms: self.interval_ms,
            shared_cache: self.shared_cache,
            totals: self.totals(),
        }
    }

    /// The whole history, for the master (GRAPH-2, DEC-17): every process's points and legend
    /// state, the memory Total, and the Requests and Client Cache Totals per interval.
    pub fn to_json(&self, now_ms: u64) -> Value {
        serde_json::to_value(self.saved(now_ms)).unwrap_or(Value::Null)
    }

    /// Requests and client caches summed per sampling interval (GRAPH-11); with `sharedCache`
    /// every process samples the same store, so its count is taken once: the master's sample in
    /// that interval, else the largest (GRAPH-12).
    fn totals(&self) -> Vec<TotalsRow> {
        #[derive(Default)]
        struct Bucket {
            requests: u64,
            caches: Vec<(bool, u64)>,
            concepts: Vec<(bool, u64)>,
        }
        let mut buckets: BTreeMap<u64, Bucket> = BTreeMap::new();
        for s in &self.series {
            let master = s.role == "master";
            for p in &s.points {
                if let Point::Sample {
                    at,
                    requests,
                    client_caches,
                    client_concepts,
                    ..
                } = p
                {
                    let b = buckets.entry(at / self.interval_ms).or_default();
                    b.requests += requests;
                    b.caches.extend(client_caches.map(|c| (master, c)));
                    b.concepts.extend(client_concepts.map(|c| (master, c)));
                }
            }
        }
        let shared = self.shared_cache;
        let count = |v: &[(bool, u64)]| -> Option<u64> {
            if v.is_empty() {
                None
            } else if shared {
                v.iter()
                    .find(|(m, _)| *m)
                    .or_else(|| v.iter().max_by_key(|(_, c)| *c))
                    .map(|(_, c)| *c)
            } else {
                Some(v.iter().map(|(_, c)| c).sum())
            }
        };
        buckets
            .iter()
            .map(|(k, b)| TotalsRow {
                at: k * self.interval_ms,
                requests: b.requests,
                client_caches: count(&b.caches),
                client_concepts: count(&b.concepts),
            })
            .collect()
    }

    /// A history saved by [`History::saved`] (the outbox keeps it across a launcher restart, an
    /// upgrade hands it over). Every process of the old run is gone: each series ends with a gap
    /// and is unavailable until its new process starts.
    pub fn restore(saved: &SavedHistory, shared_cache: bool, now_ms: u64) -> History {
        let mut h = History {
            interval_ms: saved.sample_interval_ms.max(1),
            shared_cache,
            series: Vec::new(),
            memory_total: saved.memory_total.clone(),
        };
        for s in &saved.processes {
            let mut series = Series {
                code: s.code.clone(),
                role: s.role.clone(),
                life: Life::Unavailable,
                points: s.points.clone(),
            };
            push_gap(&mut series, now_ms);
            h.series.push(series);
        }
        h.prune(now_ms);
        h
    }

    /// [`History::restore`] from JSON (the outbox's); None if it isn't a saved history.
    pub fn restore_json(saved: &Value, shared_cache: bool, now_ms: u64) -> Option<History> {
        let saved = SavedHistory::deserialize(saved).ok()?;
        Some(History::restore(&saved, shared_cache, now_ms))
    }
}
