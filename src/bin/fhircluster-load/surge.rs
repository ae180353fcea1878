//! `surge`: a heavy open-loop load at a chosen rate, plus a cheap `$lookup` probe at a fixed
//! rate on its own connections, kept up after the surge ends to see how long the line takes to
//! drain (the spec's figures: "a 4 ms `$lookup` waited 16 s in a 3x surge"; with `queueSeconds`
//! 1, "under 10 ms after 2 s").

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use super::client::Pool;
use super::driver::{Arrival, OpenLoop, Outcome, Sample};
use super::latency::{millis, LatencySummary};
use super::recovery::{back_under, ProbePoint};
use super::report::{latency_line, outcome_json, Counts};
use super::requests::{self, HeavyKind, RequestSpec};
use super::schedule::{arrivals, weighted_sequence};
use super::target::Target;

/// A validated surge run.
#[derive(Debug, Clone, PartialEq)]
pub struct SurgeConfig {
    pub base: String,
    pub target: Target,
    pub seconds: Duration,
    /// Heavy arrivals per second.
    pub rate: f64,
    /// Most heavy requests in flight (and so connections) at once.
    pub concurrency: usize,
    pub probe_rate: f64,
    pub probe_concurrency: usize,
    /// How long the probe goes on after the surge ends.
    pub after: Duration,
    pub timeout: Duration,
    /// Weights of `HeavyKind::ALL`: expand, small validate-code, large validate-code.
    pub weights: [u32; 3],
    pub expand_url: String,
    pub probe_system: String,
    pub probe_code: String,
    /// A probe under this (and 2xx) counts as fast for the recovery figure.
    pub fast_threshold: Duration,
}

impl SurgeConfig {
    /// The heavy requests, one per kind, indexed as `HeavyKind::ALL`.
    pub fn heavy_requests(&self) -> Vec<RequestSpec> {
        HeavyKind::ALL
            .iter()
            .map(|&k| requests::heavy(k, &self.expand_url))
            .collect()
    }

    /// The heavy arrivals: evenly spaced over the surge, kinds in the mix.
    pub fn heavy_schedule(&self) -> Vec<Arrival> {
        let due = arrivals(self.rate, self.seconds);
        let kinds = weighted_sequence(&self.weights, due.len());
        due.into_iter()
            .zip(kinds)
            .map(|(due, request)| Arrival { due, request })
            .collect()
    }

    /// The probe's arrivals, from the start through the surge and `after` it.
    pub fn probe_schedule(&self) -> Vec<Arrival> {
        arrivals(self.probe_rate, self.seconds + self.after)
            .into_iter()
            .map(|due| Arrival { due, request: 0 })
            .collect()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SurgeReport {
    pub mode: &'static str,
    pub base: String,
    pub config: ConfigEcho,
    pub elapsed_seconds: f64,
    pub heavy: HeavyReport,
    pub probe: ProbeReport,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConfigEcho {
    pub seconds: f64,
    pub rate: f64,
    pub concurrency: usize,
    pub probe_rate: f64,
    pub probe_concurrency: usize,
    pub after_seconds: f64,
    pub timeout_seconds: f64,
    pub mix: Mix,
    pub fast_threshold_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Mix {
    pub expand: u32,
    pub validate_small: u32,
    pub validate_large: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeavyReport {
    pub scheduled: u64,
    #[serde(flatten)]
    pub counts: Counts,
    pub goodput_per_second: f64,
    /// 2xx answers that came before the surge ended; the rest of the 2xx were work a queue only
    /// put off until after it.
    pub completed_within_surge: u64,
    pub latency_ms: LatencySummary,
    pub ok_latency_ms: LatencySummary,
    /// How long a client refused with `503` waited for it (a queue's wait, or none when the
    /// refusal came at once).
    pub refused_latency_ms: LatencySummary,
    /// Of those `503`s, the ones answered within 100 ms: refused as they came, not after a
    /// queue's wait.
    pub refused_at_once: u64,
    pub by_kind: ByKind,
}

#[derive(Debug, Clone, Serialize)]
pub struct ByKind {
    pub expand: Counts,
    pub validate_small: Counts,
    pub validate_large: Counts,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    pub scheduled: u64,
    pub during_surge: ProbePhase,
    pub after_surge: ProbePhase,
    /// Milliseconds after the surge ended until every later probe was fast; `null` if never.
    pub back_under_threshold_after_ms: Option<f64>,
    pub series: Vec<SeriesPoint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProbePhase {
    #[serde(flatten)]
    pub counts: Counts,
    pub latency_ms: LatencySummary,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesPoint {
    pub t_ms: f64,
    pub latency_ms: Option<f64>,
    pub status: serde_json::Value,
}

/// A `503` this soon was refused as it came (a queue's wait is `queueSeconds`, 1 s by default).
const AT_ONCE: Duration = Duration::from_millis(100);

/// Runs the surge and the probe together and reports on them.
pub async fn run(config: &SurgeConfig) -> SurgeReport {
    let target = Arc::new(config.target.clone());
    let heavy = OpenLoop {
        pool: Pool::new(target.clone()),
        requests: Arc::new(config.heavy_requests()),
        max_in_flight: config.concurrency,
        timeout: config.timeout,
    };
    let probe = OpenLoop {
        pool: Pool::new(target),
        requests: Arc::new(vec![requests::lookup(
            &config.probe_system,
            &config.probe_code,
        )]),
        max_in_flight: config.probe_concurrency,
        timeout: config.timeout,
    };
    let (heavy_schedule, probe_schedule) = (config.heavy_schedule(), config.probe_schedule());
    // A short lead so the first arrivals are not late because of set-up.
    let start = Instant::now() + Duration::from_millis(20);
    let (heavy_samples, probe_samples) = tokio::join!(
        heavy.run(&heavy_schedule, start),
        probe.run(&probe_schedule, start)
    );
    let elapsed = Instant::now().saturating_duration_since(start);
    report(config, &heavy_samples, &probe_samples, elapsed)
}

fn sent_latencies<'a>(samples: impl Iterator<Item = &'a Sample>) -> LatencySummary {
    LatencySummary::of(samples.filter_map(|s| s.latency))
}

fn is_2xx(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::Answered(s) if (200..300).contains(&s))
}

/// The report for a run's samples (pure: the samples and the elapsed time come in).
pub fn report(
    config: &SurgeConfig,
    heavy: &[Sample],
    probe: &[Sample],
    elapsed: Duration,
) -> SurgeReport {
    let counts = Counts::of(heavy.iter().map(|s| s.outcome));
    let kind_counts =
        |k: usize| Counts::of(heavy.iter().filter(|s| s.request == k).map(|s| s.outcome));
    let secs = config.seconds.as_secs_f64();
    let heavy_report = HeavyReport {
        scheduled: heavy.len() as u64,
        counts,
        goodput_per_second: if secs > 0.0 {
            counts.status_2xx as f64 / secs
        } else {
            0.0
        },
        completed_within_surge: heavy
            .iter()
            .filter(|s| is_2xx(s.outcome) && s.latency.is_some_and(|l| s.due + l <= config.seconds))
            .count() as u64,
        latency_ms: sent_latencies(heavy.iter()),
        ok_latency_ms: sent_latencies(heavy.iter().filter(|s| is_2xx(s.outcome))),
        refused_latency_ms: sent_latencies(
            heavy.iter().filter(|s| s.outcome == Outcome::Answered(503)),
        ),
        refused_at_once: heavy
            .iter()
            .filter(|s| s.outcome == Outcome::Answered(503))
            .filter(|s| s.latency.is_some_and(|l| l < AT_ONCE))
            .count() as u64,
        by_kind: ByKind {
            expand: kind_counts(0),
            validate_small: kind_counts(1),
            validate_large: kind_counts(2),
        },
    };
    let phase = |during: bool| {
        let picked = || {
            probe
                .iter()
                .filter(move |s| (s.due < config.seconds) == during)
        };
        ProbePhase {
            counts: Counts::of(picked().map(|s| s.outcome)),
            latency_ms: sent_latencies(picked()),
        }
    };
    let points: Vec<ProbePoint> = probe
        .iter()
        .map(|s| ProbePoint {
            offset: s.due,
            fast: is_2xx(s.outcome) && s.latency.is_some_and(|l| l < config.fast_threshold),
        })
        .collect();
    let probe_report = ProbeReport {
        scheduled: probe.len() as u64,
        during_surge: phase(true),
        after_surge: phase(false),
        back_under_threshold_after_ms: back_under(&points, config.seconds).map(millis),
        series: probe
            .iter()
            .map(|s| SeriesPoint {
                t_ms: millis(s.due),
                latency_ms: s.latency.map(millis),
                status: outcome_json(s.outcome),
            })
            .collect(),
    };
    SurgeReport {
        mode: "surge",
        base: config.base.clone(),
        config: ConfigEcho {
            seconds: secs,
            rate: config.rate,
            concurrency: config.concurrency,
            probe_rate: config.probe_rate,
            probe_concurrency: config.probe_concurrency,
            after_seconds: config.after.as_secs_f64(),
            timeout_seconds: config.timeout.as_secs_f64(),
            mix: Mix {
                expand: config.weights[0],
                validate_small: config.weights[1],
                validate_large: config.weights[2],
            },
            fast_threshold_ms: millis(config.fast_threshold),
        },
        elapsed_seconds: elapsed.as_secs_f64(),
        heavy: heavy_report,
        probe: probe_report,
    }
}

/// The report as text for a person.
pub fn text(r: &SurgeReport) -> String {
    let c = &r.config;
    let back = r.probe.back_under_threshold_after_ms.map_or_else(
        || "not within the run".to_string(),
        |ms| format!("{:.1} s after the surge", ms / 1000.0),
    );
    [
        format!(
            "surge against {}: {} s at {:.1}/s (mix expand {}, small validate {}, large validate {}), \
             at most {} in flight, timeout {} s",
            r.base, c.seconds, c.rate, c.mix.expand, c.mix.validate_small, c.mix.validate_large, c.concurrency,
            c.timeout_seconds
        ),
        format!("heavy: {} scheduled; {}", r.heavy.scheduled, r.heavy.counts.line()),
        format!("heavy goodput: {:.1} 2xx/s", r.heavy.goodput_per_second),
        format!("heavy 2xx completed within the surge: {}", r.heavy.completed_within_surge),
        format!("heavy latency (all sent): {}", latency_line(&r.heavy.latency_ms)),
        format!("heavy latency (2xx): {}", latency_line(&r.heavy.ok_latency_ms)),
        format!(
            "heavy 503s waited: {}; {} within 100 ms",
            latency_line(&r.heavy.refused_latency_ms),
            r.heavy.refused_at_once
        ),
        format!("probe at {}/s during the surge: {}", c.probe_rate, r.probe.during_surge.counts.line()),
        format!("probe latency during the surge: {}", latency_line(&r.probe.during_surge.latency_ms)),
        format!("probe for {} s after the surge: {}", c.after_seconds, r.probe.after_surge.counts.line()),
        format!("probe latency after the surge: {}", latency_line(&r.probe.after_surge.latency_ms)),
        format!("probe back under {} ms for good: {}", c.fast_threshold_ms, back),
        format!("elapsed {:.1} s", r.elapsed_seconds),
    ]
    .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::parse_base;

    fn config() -> Option<SurgeConfig> {
        Some(SurgeConfig {
            base: "http://127.0.0.1:1".into(),
            target: parse_base("http://127.0.0.1:1").ok()?,
            seconds: Duration::from_secs(2),
            rate: 4.0,
            concurrency: 8,
            probe_rate: 2.0,
            probe_concurrency: 4,
            after: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            weights: [1, 2, 1],
            expand_url: "http://example.org/vs".into(),
            probe_system: "http://loinc.org".into(),
            probe_code: "8480-6".into(),
            fast_threshold: Duration::from_millis(10),
        })
    }

    fn sample(due_ms: u64, request: usize, outcome: Outcome, latency_ms: Option<u64>) -> Sample {
        Sample {
            due: Duration::from_millis(due_ms),
            request,
            outcome,
            latency: latency_ms.map(Duration::from_millis),
        }
    }

    #[test]
    fn schedules_cover_the_surge_and_the_probe_goes_on_after_it() {
        let Some(c) = config() else {
            panic!("test config")
        };
        let heavy = c.heavy_schedule();
        assert_eq!(heavy.len(), 8);
        assert_eq!(heavy.iter().filter(|a| a.request == 1).count(), 4);
        assert!(heavy.iter().all(|a| a.due < c.seconds));
        let probe = c.probe_schedule();
        assert_eq!(probe.len(), 6);
        assert_eq!(
            probe.last().map(|a| a.due),
            Some(Duration::from_millis(2500))
        );
    }

    #[test]
    fn the_report_splits_the_probe_at_the_surge_end_and_finds_the_recovery() {
        let Some(c) = config() else {
            panic!("test config")
        };
        let heavy = [
            sample(0, 0, Outcome::Answered(200), Some(300)),
            sample(250, 1, Outcome::Answered(503), Some(5)),
            sample(500, 1, Outcome::Timeout, Some(1000)),
            sample(750, 2, Outcome::Unsent, None),
            // Due in the surge, answered after it ended (at 2.1 s): put off, not within.
            sample(1900, 2, Outcome::Answered(200), Some(200)),
            sample(1800, 2, Outcome::Answered(200), Some(200)),
        ];
        let probe = [
            sample(0, 0, Outcome::Answered(200), Some(3)),
            sample(1000, 0, Outcome::Answered(200), Some(900)),
            sample(2000, 0, Outcome::Answered(200), Some(40)),
            sample(2500, 0, Outcome::Answered(200), Some(2)),
        ];
        let r = report(&c, &heavy, &probe, Duration::from_secs(3));
        assert_eq!(
            (
                r.heavy.counts.sent,
                r.heavy.counts.status_2xx,
                r.heavy.counts.unsent
            ),
            (5, 3, 1)
        );
        assert_eq!(r.heavy.goodput_per_second, 1.5);
        assert_eq!(
            r.heavy.completed_within_surge, 2,
            "the one ending at 2.0 s is within"
        );
        assert_eq!(r.heavy.ok_latency_ms.count, 3);
        // How long the refused client waited: its 503's latency.
        assert_eq!(r.heavy.refused_latency_ms.count, 1);
        assert_eq!(r.heavy.refused_latency_ms.p50_ms, Some(5.0));
        assert_eq!(r.heavy.refused_at_once, 1);
        assert!(text(&r).contains("heavy 503s waited: n 1, p50 5.0 ms"));
        assert!(text(&r).contains("; 1 within 100 ms"));
        assert_eq!(r.heavy.by_kind.validate_small.sent, 2);
        assert_eq!(r.probe.during_surge.counts.sent, 2);
        assert_eq!(r.probe.during_surge.latency_ms.max_ms, Some(900.0));
        assert_eq!(r.probe.after_surge.counts.sent, 2);
        assert_eq!(r.probe.back_under_threshold_after_ms, Some(500.0));
        assert_eq!(r.probe.series.len(), 4);
        let json = serde_json::to_value(&r).unwrap_or_default();
        assert_eq!(json["heavy"]["status_503"], 1);
        assert_eq!(json["probe"]["series"][1]["latency_ms"], 900.0);
        assert!(text(&r).contains("heavy goodput: 1.5 2xx/s"));
        assert!(text(&r).contains("within the surge: 2"));
        assert_eq!(json["heavy"]["completed_within_surge"], 2);
    }
}
