//! Counting outcomes, and the shared pieces of the reports both subcommands print.

use serde::Serialize;

use super::driver::Outcome;

/// Requests by how they ended. `sent = status_2xx + non_2xx + timeouts + errors`, and
/// `non_2xx = status_503 + status_504 + status_other`; `unsent` arrivals are not in `sent`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub sent: u64,
    pub status_2xx: u64,
    pub non_2xx: u64,
    pub status_503: u64,
    pub status_504: u64,
    pub status_other: u64,
    pub timeouts: u64,
    pub errors: u64,
    pub unsent: u64,
}

impl Counts {
    pub fn add(&mut self, outcome: Outcome) {
        if outcome != Outcome::Unsent {
            self.sent += 1;
        }
        match outcome {
            Outcome::Answered(s) if (200..300).contains(&s) => self.status_2xx += 1,
            Outcome::Answered(s) => {
                self.non_2xx += 1;
                match s {
                    503 => self.status_503 += 1,
                    504 => self.status_504 += 1,
                    _ => self.status_other += 1,
                }
            }
            Outcome::Timeout => self.timeouts += 1,
            Outcome::Error => self.errors += 1,
            Outcome::Unsent => self.unsent += 1,
        }
    }

    pub fn of(outcomes: impl IntoIterator<Item = Outcome>) -> Self {
        let mut c = Counts::default();
        for o in outcomes {
            c.add(o);
        }
        c
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &Counts) {
        self.sent += other.sent;
        self.status_2xx += other.status_2xx;
        self.non_2xx += other.non_2xx;
        self.status_503 += other.status_503;
        self.status_504 += other.status_504;
        self.status_other += other.status_other;
        self.timeouts += other.timeouts;
        self.errors += other.errors;
        self.unsent += other.unsent;
    }

    /// One line for the text report.
    pub fn line(&self) -> String {
        format!(
            "sent {}, 2xx {}, 503 {}, 504 {}, other {}, timeouts {}, errors {}, unsent {}",
            self.sent,
            self.status_2xx,
            self.status_503,
            self.status_504,
            self.status_other,
            self.timeouts,
            self.errors,
            self.unsent
        )
    }
}

/// A latency summary as one line of text.
pub fn latency_line(s: &super::latency::LatencySummary) -> String {
    let f = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |ms| format!("{ms:.1} ms"));
    format!(
        "n {}, p50 {}, p90 {}, p99 {}, max {}",
        s.count,
        f(s.p50_ms),
        f(s.p90_ms),
        f(s.p99_ms),
        f(s.max_ms)
    )
}

/// How an outcome appears in a JSON time series: the status number, or a word.
pub fn outcome_json(outcome: Outcome) -> serde_json::Value {
    match outcome {
        Outcome::Answered(s) => serde_json::Value::from(s),
        Outcome::Timeout => "timeout".into(),
        Outcome::Error => "error".into(),
        Outcome::Unsent => "unsent".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up() {
        let c = Counts::of([
            Outcome::Answered(200),
            Outcome::Answered(204),
            Outcome::Answered(503),
            Outcome::Answered(504),
            Outcome::Answered(404),
            Outcome::Timeout,
            Outcome::Error,
            Outcome::Unsent,
        ]);
        assert_eq!(
            (
                c.sent,
                c.status_2xx,
                c.non_2xx,
                c.timeouts,
                c.errors,
                c.unsent
            ),
            (7, 2, 3, 1, 1, 1)
        );
        assert_eq!((c.status_503, c.status_504, c.status_other), (1, 1, 1));
        assert_eq!(c.sent, c.status_2xx + c.non_2xx + c.timeouts + c.errors);
        assert_eq!(outcome_json(Outcome::Answered(503)), serde_json::json!(503));
        assert_eq!(outcome_json(Outcome::Unsent), serde_json::json!("unsent"));
    }
}
