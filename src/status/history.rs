//! The graph history (spec "Graphs", GRAPH-1..12): every process's samples, kept in the launcher
//! so the master can draw every process on `/` and `/dashboard` without polling anyone.
//!
//! Theory of operation: the shell feeds in what happens (a process starting, ready, exited, a
//! sample arriving with the `RssAnon` the launcher read for it, the master's memory Total) and
//! gets back a small JSON delta to pass on as it arrives; [`History::to_json`] is the whole
//! history, sent once each time the master becomes ready (DEC-17). Pure: wall-clock ms come in.
//!
//! * Samples keep the time the process took them (GRAPH-3). A restart leaves a gap marker and
//!   keeps what came before (GRAPH-4); a sample that comes more than 1.5 intervals after the
//!   last one leaves a gap too (GRAPH-5).
//! * Per process at most [`MAX_POINTS`] points, gaps included, and nothing older than 24 hours
//!   (GRAPH-6, GRAPH-7); a leading gap is dropped with the point before it.
//! * The memory panel's Total is one point per master sample: the cgroup's private memory, or
//!   without a cgroup of the service's own the processes' `RssAnon` summed (GRAPH-9,
//!   [`memory_total`]).
//! * Requests and Client Cache Totals are summed per sampling interval; with `sharedCache` the
//!   client-cache Total takes the one store's count once (GRAPH-11, GRAPH-12).

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::ipc::message::Sample;

pub use saved::SavedHistory;

/// Points kept per process, gaps included (GRAPH-7).
pub const MAX_POINTS: usize = 1440;
/// How long a point is kept (GRAPH-6).
pub const KEEP_MS: u64 = 24 * 60 * 60 * 1000;

/// One point of a process's history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Point {
    #[serde(rename_all = "camelCase")]
    Sample {
        at: u64,
        requests: u64,
        client_caches: Option<u64>,
        client_concepts: Option<u64>,
        refusals: u64,
        heap_used: Option<u64>,
        turnaround_ms: Option<f64>,
        /// The process's `RssAnon` as the launcher read it when the sample arrived.
        rss_anon: Option<u64>,
        /// Requests in flight in the process when the sample arrived, from its last `status`
        /// (the admin status page's In flight graph). Left out when not known, so a history
        /// without it (saved before, or from a process without a channel) reads the same.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_flight: Option<u64>,
        /// Taken by the launcher from the front door, for a process that samples nothing
        /// itself (no channel): `requests` are the answers it passed on in the interval,
        /// `refusals` its own refusals of requests for that process, `rssAnon` and `inFlight`
        /// its readings; nothing of the process's own (heap, caches, turnaround).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        front: bool,
    },
    /// No data from here until the next sample: a restart or a skipped interval.
    Gap { at: u64 },
}

impl Point {
    pub fn at(&self) -> u64 {
        match self {
            Point::Sample { at, .. } | Point::Gap { at } => *at,
        }
    }
}

/// A process's state for the graphs' legend (GRAPH-10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Legend {
    Live,
    Starting,
    Restarting,
    Unavailable,
    NoRecentSample,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Life {
    Starting,
    Ready { since: u64 },
    Restarting,
    Unavailable,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Series {
    code: String,
    role: String,
    life: Life,
    points: VecDeque<Point>,
}

/// One point of the memory panel's Total.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TotalPoint {
    pub at: u64,
    pub bytes: Option<u64>,
}

/// The history of every process, oldest point first.
#[derive(Clone, Debug, PartialEq)]
pub struct History {
    interval_ms: u64,
    shared_cache: bool,
    series: Vec<Series>,
    memory_total: VecDeque<TotalPoint>,
}

/// The memory panel's Total at a master sample (GRAPH-9): the cgroup's private memory when the
/// service has a cgroup limit of its own, else the processes' `RssAnon` summed (null when none
/// could be read).
pub fn memory_total(own_cgroup_anon: Option<u64>, rss_anon: &[Option<u64>]) -> Option<u64> {
    own_cgroup_anon.or_else(|| {
        rss_anon
            .iter()
            .flatten()
            .fold(None, |acc, v| Some(acc.unwrap_or(0) + v))
    })
}

impl History {
    /// An empty history: a launcher's first start, or none kept (a restart restores the kept
    /// one, DEC-26, where cluster.js starts with none, GRAPH-8). `sample_interval` is
    /// `stats.sampleSeconds` as the processes use it.
    pub fn new(sample_interval: Duration, shared_cache: bool) -> History {
        History {
            interval_ms: (sample_interval.as_millis() as u64).max(1),
            shared_cache,
            series: Vec::new(),
            memory_total: VecDeque::new(),
        }
    }

    /// The sampling interval, in milliseconds.
    pub fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    fn series_mut(&mut self, code: &str, role: &str) -> &mut Series {
        let i = match self.series.iter().position(|s| s.code == code) {
            Some(i) => i,
            None => {
                self.series.push(Series {
                    code: code.to_string(),
                    role: role.to_string(),
                    life: Life::Starting,
                    points: VecDeque::new(),
                });
                self.series.len() - 1
            }
        };
        &mut self.series[i]
    }

    /// A process (first start or replacement) has been started. Returns the delta for the master.
    pub fn process_starting(&mut self, code: &str, role: &str, now_ms: u64) -> Value {
        self.series_mut(code, role).life = Life::Starting;
        self.delta(code, Vec::new(), now_ms)
    }

    /// A process is ready.
    pub fn process_ready(&mut self, code: &str, role: &str, now_ms: u64) -> Value {
        self.series_mut(code, role).life = Life::Ready { since: now_ms };
        self.delta(code, Vec::new(), now_ms)
    }

    /// A process exited or is being recycled, and will be started again: a gap (GRAPH-4).
    pub fn process_restarting(&mut self, code: &str, role: &str, now_ms: u64) -> Value {
        let s = self.series_mut(code, role);
        s.life = Life::Restarting;
        let added = push_gap(s, now_ms);
        self.finish(code, added, now_ms)
    }

    /// A process is gone and not coming back for now (given up, stopped).
    pub fn process_unavailable(&mut self, code: &str, role: &str, now_ms: u64) -> Value {
        let s = self.series_mut(code, role);
        s.life = Life::Unavailable;
        let added = push_gap(s, now_ms);
        self.finish(code, added, now_ms)
    }

    /// A sample arrived from a process, with its `RssAnon` as the launcher just read it.
    /// A repeat (same time as the last sample) is ignored.
    #[cfg(test)]
    pub fn record_sample(
        &mut self,
        code: &str,
        role: &str,
        sample: &Sample,
        rss_anon: Option<u64>,
        now_ms: u64,
    ) -> Value {
        self.record_sample_with(code, role, sample, rss_anon, None, now_ms)
    }

    /// [`History::record_sample`], with the requests the process had in flight then.
    pub fn record_sample_with(
        &mut self,
        code: &str,
        role: &str,
        sample: &Sample,
        rss_anon: Option<u64>,
        in_flight: Option<u64>,
        now_ms: u64,
    ) -> Value {
        self.record(code, role, sample, (rss_anon, in_flight, false), now_ms)
    }

    /// A sample the launcher took of a process from the front door (`Point::Sample::front`).
    pub fn record_front_sample(
        &mut self,
        code: &str,
        role: &str,
        sample: &Sample,
        rss_anon: Option<u64>,
        in_flight: Option<u64>,
        now_ms: u64,
    ) -> Value {
        self.record(code, role, sample, (rss_anon, in_flight, true), now_ms)
    }

    /// `readings`: the `RssAnon` and in flight read with it, and whether the launcher took it.
    fn record(
        &mut self,
        code: &str,
        role: &str,
        sample: &Sample,
        readings: (Option<u64>, Option<u64>, bool),
        now_ms: u64,
    ) -> Value {
        let (rss_anon, in_flight, front) = readings;
        let interval = self.interval_ms;
        let s = self.series_mut(code, role);
        let last_sample = s.points.iter().rev().find_map(|p| match p {
            Point::Sample { at, .. } => Some(*at),
            Point::Gap { .. } => None,
        });
        let mut added = Vec::new();
        if last_sample == Some(sample.at) {
            return self.delta(code, added, now_ms);
        }
        if let Some(Point::Sample { at, .. }) = s.points.back() {
            // GRAPH-5: more than half an interval late means an interval was skipped.
            if sample.at.saturating_sub(*at) > interval + interval / 2 {
                added.push(Point::Gap {
                    at: at.saturating_add(interval),
                });
            }
        }
        added.push(Point::Sample {
            at: sample.at,
            requests: sample.requests,
            client_caches: sample.client_caches,
            client_concepts: sample.client_concepts,
            refusals: sample.refusals,
            heap_used: sample.heap_used,
            turnaround_ms: sample.turnaround_ms,
            rss_anon,
            in_flight,
            front,
        });
        s.points.extend(added.iter().cloned());
        self.finish(code, added, now_ms)
    }

    /// The memory panel's Total for the master's sample at `at` (see [`memory_total`]).
    pub fn record_memory_total(&mut self, at: u64, bytes: Option<u64>, now_ms: u64) -> Value {
        self.memory_total.push_back(TotalPoint { at, bytes });
        self.prune(now_ms);
        json!({
            "append": true,
            "sampleIntervalMs": self.interval_ms,
            "processes": [],
            "memoryTotal": [TotalPoint { at, bytes }],
        })
    }

    /// Drops what is older than 24 hours or beyond [`MAX_POINTS`].
    pub fn prune(&mut self, now_ms: u64) {
        let oldest = now_ms.saturating_sub(KEEP_MS);
        for s in &mut self.series {
            while s.points.len() > MAX_POINTS || s.points.front().is_some_and(|p| p.at() < oldest) {
                s.points.pop_front();
            }
            while matches!(s.points.front(), Some(Point::Gap { .. })) {
                s.points.pop_front();
            }
        }
        let t = &mut self.memory_total;
        while t.len() > MAX_POINTS || t.front().is_some_and(|p| p.at < oldest) {
            t.pop_front();
        }
    }

    /// The legend state of a process now (GRAPH-10): a ready process with no sample for more
    /// than two intervals (since it became ready, or since its last sample) has no recent one.
    #[cfg(test)]
    pub fn legend(&self, code: &str, now_ms: u64) -> Option<Legend> {
        let s = self.series.iter().find(|s| s.code == code)?;
        Some(self.legend_of(s, now_ms))
    }

    fn legend_of(&self, s: &Series, now_ms: u64) -> Legend {
        match s.life {
            Life::Starting => Legend::Starting,
            Life::Restarting => Legend::Restarting,
            Life::Unavailable => Legend::Unavailable,
            Life::Ready { since } => {
                let last = s.points.iter().rev().find_map(|p| match p {
                    Point::Sample { at, .. } => Some(*at),
                    Point::Gap { .. } => None,
                });
                let heard = last.map_or(since, |at| at.max(since));
                if now_ms.saturating_sub(heard) > 2 * self.interval_ms {
                    Legend::NoRecentSample
                } else {
                    Legend::Live
                }
            }
        }
    }

    fn finish(&mut self, code: &str, added: Vec<Point>, now_ms: u64) -> Value {
        self.prune(now_ms);
        self.delta(code, added, now_ms)
    }

    fn delta(&self, code: &str, points: Vec<Point>, now_ms: u64) -> Value {
        let processes: Vec<Value> = self
            .series
            .iter()
            .filter(|s| s.code == code)
            .map(|s| {
                json!({
                    "code": s.code,
                    "role": s.role,
                    "state": self.legend_of(s, now_ms),
                    "points": points,
                })
            })
            .collect();
        json!({
            "append": true,
            "sampleIntervalMs": self.interval_ms,
            "processes": processes,
            "memoryTotal": [],
        })
    }
}

/// Appends a gap unless the series is empty or already ends with one.
fn push_gap(s: &mut Series, at: u64) -> Vec<Point> {
    match s.points.back() {
        None | Some(Point::Gap { .. }) => Vec::new(),
        Some(_) => {
            s.points.push_back(Point::Gap { at });
            vec![Point::Gap { at }]
        }
    }
}

mod saved;
#[cfg(test)]
mod tests;
