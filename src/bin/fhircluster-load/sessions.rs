//! `sessions`: IG-Publisher-like clients, each starting a cache with `POST /r4/$cache-control`
//! and then sending its requests with that `X-Cache-Id`, one at a time on its own connection.
//!
//! A `404` whose body says `cache-id-unknown` means the cache is gone (its process restarted);
//! the client counts it and starts a new cache, as the spec says clients do.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use super::client::{Answer, Failure, Pool};
use super::driver::Outcome;
use super::latency::LatencySummary;
use super::report::{latency_line, Counts};
use super::requests::{self, RequestSpec};
use super::target::Target;

/// A validated sessions run.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionsConfig {
    pub base: String,
    pub target: Target,
    pub clients: usize,
    /// Requests each client sends with its cache-id.
    pub requests: usize,
    pub timeout: Duration,
    /// The run stops sending when this has passed, whatever is left.
    pub max_duration: Duration,
}

/// The cache-id a `$cache-control` answer issued: the `X-Cache-Id` header, or the JSON body's
/// `cacheId` or `id`.
pub fn issued_cache_id(answer: &Answer) -> Option<String> {
    if let Some(id) = answer.cache_id.as_deref().filter(|id| !id.is_empty()) {
        return Some(id.to_string());
    }
    let body: serde_json::Value = serde_json::from_slice(&answer.body).ok()?;
    ["cacheId", "id"]
        .iter()
        .find_map(|k| {
            body.get(k)
                .and_then(|v| v.as_str())
                .filter(|s| !s.is_empty())
        })
        .map(str::to_string)
}

/// FHIR's answer to a cache-id the server does not have.
pub fn is_cache_id_unknown(answer: &Answer) -> bool {
    answer.status == 404
        && answer
            .body
            .windows(b"cache-id-unknown".len())
            .any(|w| w == b"cache-id-unknown")
}

/// The `i`th request a session sends: `$validate-code` and `$lookup` in turn.
fn session_request(i: usize) -> RequestSpec {
    if i % 2 == 0 {
        requests::validate_code(requests::small_validate_body())
    } else {
        requests::lookup("http://loinc.org", "8480-6")
    }
}

/// What one client saw.
#[derive(Debug, Default)]
struct ClientTally {
    cache_control: Counts,
    requests: Counts,
    latencies: Vec<Duration>,
    ok_latencies: Vec<Duration>,
    caches_started: u64,
    cache_id_unknown: u64,
    failed: bool,
    stopped_early: bool,
}

fn outcome_of(result: &Result<Answer, Failure>) -> Outcome {
    match result {
        Ok(a) => Outcome::Answered(a.status),
        Err(Failure::Timeout) => Outcome::Timeout,
        Err(Failure::Error) => Outcome::Error,
    }
}

async fn client(config: Arc<SessionsConfig>, deadline: Instant) -> ClientTally {
    let pool = Pool::new(Arc::new(config.target.clone()));
    let mut tally = ClientTally::default();
    let mut cache_id: Option<String> = None;
    let mut i = 0;
    while i < config.requests {
        if Instant::now() >= deadline {
            tally.stopped_early = true;
            break;
        }
        let Some(id) = cache_id.clone() else {
            let result = pool
                .exchange(&requests::cache_control(), config.timeout)
                .await;
            tally.cache_control.add(outcome_of(&result));
            match result
                .ok()
                .filter(|a| (200..300).contains(&a.status))
                .as_ref()
                .and_then(issued_cache_id)
            {
                Some(id) => {
                    tally.caches_started += 1;
                    cache_id = Some(id);
                    continue;
                }
                None => {
                    tally.failed = true;
                    break;
                }
            }
        };
        let sent_at = Instant::now();
        let result = pool
            .exchange(&session_request(i).with_cache_id(&id), config.timeout)
            .await;
        let latency = Instant::now().saturating_duration_since(sent_at);
        let outcome = outcome_of(&result);
        tally.requests.add(outcome);
        tally.latencies.push(latency);
        if matches!(outcome, Outcome::Answered(s) if (200..300).contains(&s)) {
            tally.ok_latencies.push(latency);
        }
        if result.as_ref().is_ok_and(is_cache_id_unknown) {
            tally.cache_id_unknown += 1;
            cache_id = None;
        }
        i += 1;
    }
    tally
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionsReport {
    pub mode: &'static str,
    pub base: String,
    pub config: SessionsEcho,
    pub elapsed_seconds: f64,
    pub stopped_early: bool,
    pub caches_started: u64,
    pub sessions_failed: u64,
    pub cache_id_unknown: u64,
    pub cache_control: Counts,
    pub requests: Counts,
    pub throughput_per_second: f64,
    pub latency_ms: LatencySummary,
    pub ok_latency_ms: LatencySummary,
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionsEcho {
    pub clients: usize,
    pub requests_per_client: usize,
    pub timeout_seconds: f64,
    pub max_seconds: f64,
}

/// Runs every client at once and reports on them together.
pub async fn run(config: &SessionsConfig) -> SessionsReport {
    let shared = Arc::new(config.clone());
    let start = Instant::now();
    let deadline = start + config.max_duration;
    let handles: Vec<_> = (0..config.clients)
        .map(|_| tokio::spawn(client(shared.clone(), deadline)))
        .collect();
    let mut tallies = Vec::with_capacity(handles.len());
    for handle in handles {
        // A client task that panicked is counted as a failed session.
        tallies.push(handle.await.unwrap_or_else(|_| ClientTally {
            failed: true,
            ..ClientTally::default()
        }));
    }
    let elapsed = Instant::now().saturating_duration_since(start);
    summarize(config, tallies, elapsed)
}

fn summarize(
    config: &SessionsConfig,
    tallies: Vec<ClientTally>,
    elapsed: Duration,
) -> SessionsReport {
    let mut cache_control = Counts::default();
    let mut reqs = Counts::default();
    let (mut latencies, mut ok_latencies) = (Vec::new(), Vec::new());
    let (mut started, mut failed, mut unknown, mut early) = (0, 0, 0, false);
    for t in tallies {
        cache_control.merge(&t.cache_control);
        reqs.merge(&t.requests);
        latencies.extend(t.latencies);
        ok_latencies.extend(t.ok_latencies);
        started += t.caches_started;
        failed += u64::from(t.failed);
        unknown += t.cache_id_unknown;
        early |= t.stopped_early;
    }
    let secs = elapsed.as_secs_f64();
    SessionsReport {
        mode: "sessions",
        base: config.base.clone(),
        config: SessionsEcho {
            clients: config.clients,
            requests_per_client: config.requests,
            timeout_seconds: config.timeout.as_secs_f64(),
            max_seconds: config.max_duration.as_secs_f64(),
        },
        elapsed_seconds: secs,
        stopped_early: early,
        caches_started: started,
        sessions_failed: failed,
        cache_id_unknown: unknown,
        cache_control,
        requests: reqs,
        throughput_per_second: if secs > 0.0 {
            reqs.sent as f64 / secs
        } else {
            0.0
        },
        latency_ms: LatencySummary::of(latencies),
        ok_latency_ms: LatencySummary::of(ok_latencies),
    }
}

/// The report as text for a person.
pub fn text(r: &SessionsReport) -> String {
    [
        format!(
            "sessions against {}: {} clients x {} requests, timeout {} s",
            r.base, r.config.clients, r.config.requests_per_client, r.config.timeout_seconds
        ),
        format!("$cache-control: {}", r.cache_control.line()),
        format!("requests with a cache-id: {}", r.requests.line()),
        format!(
            "caches started {}, cache-id-unknown {}, sessions failed {}{}",
            r.caches_started,
            r.cache_id_unknown,
            r.sessions_failed,
            if r.stopped_early {
                ", stopped early at the time limit"
            } else {
                ""
            }
        ),
        format!(
            "throughput {:.1}/s over {:.1} s",
            r.throughput_per_second, r.elapsed_seconds
        ),
        format!("latency (all sent): {}", latency_line(&r.latency_ms)),
        format!("latency (2xx): {}", latency_line(&r.ok_latency_ms)),
    ]
    .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn answer(status: u16, header: Option<&str>, body: &str) -> Answer {
        Answer {
            status,
            cache_id: header.map(str::to_string),
            body: Bytes::from(body.to_string()),
        }
    }

    #[test]
    fn the_cache_id_comes_from_the_header_or_the_body() {
        assert_eq!(
            issued_cache_id(&answer(200, Some("tx1.abc.1"), "{}")).as_deref(),
            Some("tx1.abc.1")
        );
        assert_eq!(
            issued_cache_id(&answer(200, None, r#"{"cacheId":"tx2.x.y"}"#)).as_deref(),
            Some("tx2.x.y")
        );
        assert_eq!(
            issued_cache_id(&answer(200, None, r#"{"id":"m0.q.r"}"#)).as_deref(),
            Some("m0.q.r")
        );
        assert_eq!(
            issued_cache_id(&answer(200, Some(""), r#"{"resourceType":"Parameters"}"#)),
            None
        );
        assert_eq!(issued_cache_id(&answer(200, None, "not json")), None);
    }

    #[test]
    fn cache_id_unknown_is_a_404_that_says_so() {
        let body = r#"{"resourceType":"OperationOutcome","issue":[{"code":"not-found","details":{"coding":[{"code":"cache-id-unknown"}]}}]}"#;
        assert!(is_cache_id_unknown(&answer(404, None, body)));
        assert!(!is_cache_id_unknown(&answer(404, None, "{}")));
        assert!(!is_cache_id_unknown(&answer(400, None, body)));
    }

    #[test]
    fn the_summary_adds_the_clients_up() {
        let mut a = ClientTally::default();
        a.cache_control.add(Outcome::Answered(200));
        a.requests.add(Outcome::Answered(200));
        a.requests.add(Outcome::Answered(404));
        a.latencies = vec![Duration::from_millis(2), Duration::from_millis(4)];
        a.ok_latencies = vec![Duration::from_millis(2)];
        a.caches_started = 1;
        a.cache_id_unknown = 1;
        let b = ClientTally {
            failed: true,
            ..ClientTally::default()
        };
        let config = SessionsConfig {
            base: "http://127.0.0.1:1".into(),
            target: crate::target::parse_base("http://127.0.0.1:1")
                .unwrap_or_else(|e| panic!("{e}")),
            clients: 2,
            requests: 2,
            timeout: Duration::from_secs(1),
            max_duration: Duration::from_secs(5),
        };
        let r = summarize(&config, vec![a, b], Duration::from_secs(2));
        assert_eq!(
            (r.requests.sent, r.requests.non_2xx, r.cache_control.sent),
            (2, 1, 1)
        );
        assert_eq!(
            (r.caches_started, r.cache_id_unknown, r.sessions_failed),
            (1, 1, 1)
        );
        assert_eq!(r.throughput_per_second, 1.0);
        assert_eq!(r.latency_ms.max_ms, Some(4.0));
        assert!(text(&r).contains("cache-id-unknown 1"));
    }
}
