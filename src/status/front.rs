//! What the front door knows of each process without the process's help: the answers it passed
//! on by status class, its own refusals and `502`/`504`s naming the process, what it has at work
//! on it and waiting for it, the bytes each way, and the latency over the last status interval.
//! The status has these for every process, whether it speaks the IPC channel or not; where a
//! process also reports its own request count, its own stays the one the Requests tile sums and
//! this one is beside it (`frontRequests`), so nothing is counted twice. Plain figures: the
//! proxy's atomics are read into them, the status only reads these.

use serde_json::{json, Value};

/// The median and p99 of an interval's latencies, in milliseconds, and how many it had.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Latency {
    pub count: u64,
    /// None when the interval had none.
    pub median_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// Status classes 1xx .. 5xx, as the figures index them.
pub const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// One process's figures from the front door, counted since the launcher started (across the
/// process's restarts; the slot's, as `/metrics` counts them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrontFigures {
    /// The process's own answers, by status class (`CLASSES`).
    pub answered: [u64; 5],
    /// The launcher's own `503`s for requests only this process could take (its paths while it
    /// is not ready).
    pub refused: u64,
    /// The launcher's `502`s and `504`s for this process's failures.
    pub bad_gateway: u64,
    pub gateway_timeout: u64,
    /// At work on it now, and waiting for it alone (by cache-id).
    pub in_flight: u64,
    pub queued: u64,
    /// Request bodies sent to it, and its response bodies passed on.
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl FrontFigures {
    /// The answers it gave, every class.
    pub fn requests(&self) -> u64 {
        self.answered.iter().sum()
    }

    /// The status row's fields for them, `latency` the last interval's.
    pub fn row_fields(&self, latency: Option<&Latency>) -> Value {
        let by_class: serde_json::Map<String, Value> = CLASSES
            .iter()
            .zip(self.answered)
            .map(|(c, n)| (c.to_string(), json!(n)))
            .collect();
        json!({
            "frontRequests": self.requests(),
            "frontAnswers": by_class,
            "frontRefused": self.refused,
            "front502": self.bad_gateway,
            "front504": self.gateway_timeout,
            "frontInFlight": self.in_flight,
            "frontQueued": self.queued,
            "bytesIn": self.bytes_in,
            "bytesOut": self.bytes_out,
            "latencyMs": latency.map(|l| json!({
                "count": l.count,
                "median": l.median_ms.map(round3),
                "p99": l.p99_ms.map(round3),
            })),
        })
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// What the launcher read of a process's CPU: its seconds so far, and its share of one core
/// over the last status interval (100 = one core busy throughout).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cpu {
    pub seconds: f64,
    pub percent: Option<f64>,
}

/// The share of one core between two readings of a process's CPU seconds `wall` seconds apart:
/// None if the clock did not move or the counter went back (another process in the slot).
pub fn cpu_percent(before: f64, after: f64, wall: f64) -> Option<f64> {
    (wall > 0.0 && after >= before).then(|| ((after - before) / wall * 1000.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_names_the_front_doors_figures_apart_from_the_processs_own() {
        let f = FrontFigures {
            answered: [0, 7, 1, 2, 0],
            refused: 3,
            in_flight: 1,
            ..FrontFigures::default()
        };
        let l = Latency {
            count: 10,
            median_ms: Some(1.23456),
            p99_ms: Some(9.0),
        };
        let v = f.row_fields(Some(&l));
        assert_eq!(v["frontRequests"], 10);
        assert_eq!(v["frontAnswers"]["4xx"], 2);
        assert_eq!(v["latencyMs"]["median"], 1.235);
        assert!(v.get("requests").is_none(), "the process's own is not here");
        assert_eq!(f.row_fields(None)["latencyMs"], Value::Null);
    }

    #[test]
    fn cpu_percent_is_a_share_of_one_core_over_the_interval() {
        assert_eq!(cpu_percent(1.0, 1.5, 1.0), Some(50.0));
        assert_eq!(cpu_percent(1.0, 3.0, 1.0), Some(200.0), "two cores busy");
        assert_eq!(
            cpu_percent(5.0, 1.0, 1.0),
            None,
            "a new process in the slot"
        );
        assert_eq!(cpu_percent(1.0, 1.0, 0.0), None);
    }
}
