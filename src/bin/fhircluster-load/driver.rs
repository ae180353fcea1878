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
                    Err(Failure::Error) => Outcome::Error,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests;
    use crate::target::Target;

    fn open_loop(port: u16, max_in_flight: usize, timeout: Duration) -> OpenLoop {
        let target = Target {
            addr: ([127, 0, 0, 1], port).into(),
            host_header: "127.0.0.1".into(),
            prefix: String::new(),
        };
        OpenLoop {
            pool: Pool::new(Arc::new(target)),
            requests: Arc::new(vec![requests::lookup("http://loinc.org", "8480-6")]),
            max_in_flight,
            timeout,
        }
    }

    fn at(ms: u64) -> Arrival {
        Arrival {
            due: Duration::from_millis(ms),
            request: 0,
        }
    }

    #[tokio::test]
    async fn latency_runs_from_the_due_time_not_the_send_time() {
        // A port nobody listens on: each request fails at once, so all of its latency is lateness.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port());
        let Ok(port) = port else {
            panic!("no free port")
        };
        let start = Instant::now() - Duration::from_millis(500);
        let samples = open_loop(port, 4, Duration::from_secs(1))
            .run(&[at(0), at(10)], start)
            .await;
        assert_eq!(samples.len(), 2);
        for s in samples {
            assert_eq!(s.outcome, Outcome::Error);
            assert!(
                s.latency.is_some_and(|l| l >= Duration::from_millis(480)),
                "{s:?}"
            );
        }
    }

    #[tokio::test]
    async fn arrivals_past_the_cap_are_unsent_and_a_silent_server_times_out() {
        // Bound but never accepted: the kernel completes the connect, and nothing ever answers.
        let Ok(silent) = std::net::TcpListener::bind("127.0.0.1:0") else {
            panic!("bind")
        };
        let Ok(port) = silent.local_addr().map(|a| a.port()) else {
            panic!("addr")
        };
        let timeout = Duration::from_millis(200);
        let samples = open_loop(port, 1, timeout)
            .run(&[at(0), at(20), at(40)], Instant::now())
            .await;
        let outcomes: Vec<Outcome> = samples.iter().map(|s| s.outcome).collect();
        assert_eq!(
            outcomes,
            [Outcome::Timeout, Outcome::Unsent, Outcome::Unsent]
        );
        assert!(samples[0].latency.is_some_and(|l| l >= timeout));
        assert_eq!(samples[1].latency, None);
        drop(silent);
    }
}
