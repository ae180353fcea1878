//! The open-loop driver: sends each arrival of a fixed schedule at its time, on a free
//! connection or a new one, and measures its latency from the time it was *due*.
//!
//! Measuring from the due time means a driver that falls behind, or a server that is slow to
//! accept, shows up in the latencies instead of quietly lowering the rate (coordinated
//! omission). The client-side cap on requests in flight is what bounds the sockets: an arrival
//! due while the cap is reached is not sent, and is counted as unsent.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

use super::client::{Failure, Pool};
use super::requests::RequestSpec;

/// One arrival of the schedule: when it is due (from the start) and which request it carries
/// (an index into the run's request list).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    pub due: Duration,
    pub request: usize,
}

/// What happened to one arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Answered(u16),
    Timeout,
    Error,
    Unsent,
}

/// One arrival's result. `latency` runs from the due time to the end of the response (or the
/// timeout, or the error); an unsent arrival has none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub due: Duration,
    pub request: usize,
    pub outcome: Outcome,
    pub latency: Option<Duration>,
}

/// A run of one schedule over one pool of connections.
pub struct OpenLoop {
    pub pool: Pool,
    pub requests: Arc<Vec<RequestSpec>>,
    pub max_in_flight: usize,
    pub timeout: Duration,
}

impl OpenLoop {
    /// Sends every arrival of `schedule` (sorted by `due`) from `start`, and returns one sample
    /// per arrival, in schedule order. Ends at most `timeout` plus a little after the last
    /// arrival is due; a request still unanswered then is reported as a timeout.
    pub async fn run(&self, schedule: &[Arrival], start: Instant) -> Vec<Sample> {
        let slots = Arc::new(Semaphore::new(self.max_in_flight.max(1)));
        let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Outcome, Duration)>();
        let mut samples: Vec<Sample> = schedule
            .iter()
            .map(|a| Sample {
                due: a.due,
                request: a.request,
                outcome: Outcome::Unsent,
                latency: None,
            })
            .collect();
        let mut sent = vec![false; schedule.len()];

        for (i, arrival) in schedule.iter().enumerate() {
            let due = start + arrival.due;
            tokio::time::sleep_until(due).await;
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                continue;
            };
            let Some(spec) = self.requests.get(arrival.request).cloned() else {
                continue;
            };
            sent[i] = true;
            let (pool, timeout, tx) = (self.pool.clone(), self.timeout, tx.clone());
            tokio::spawn(async move {
                let outcome = match pool.exchange(&spec, timeout).await {
                    Ok(answer) => Outcome::Answered(answer.status),
                    Err(Failure::Timeout) => Outcome::Timeout,
                    Err(Failure::Error(_)) => Outcome::Error,
                };
                let latency = Instant::now().saturating_duration_since(due);
                let _ = tx.send((i, outcome, latency));
                drop(permit);
            });
        }
        drop(tx);

        // Every request ends within its own timeout; the grace only guards against a stuck task.
        let last_due = schedule.last().map_or(Duration::ZERO, |a| a.due);
        let hard_stop = start + last_due + self.timeout + Duration::from_secs(2);
        while let Ok(Some((i, outcome, latency))) =
            tokio::time::timeout_at(hard_stop, rx.recv()).await
        {
            if let Some(s) = samples.get_mut(i) {
                s.outcome = outcome;
                s.latency = Some(latency);
            }
        }
        let now = Instant::now();
        for (s, was_sent) in samples.iter_mut().zip(sent) {
            if was_sent && s.latency.is_none() {
                s.outcome = Outcome::Timeout;
                s.latency = Some(now.saturating_duration_since(start + s.due));
            }
        }
        samples
    }
}
