//! What one round of the comparison measured, and the table rows made from several rounds
//! (the median of each figure over the rounds, with the targets of design.md, "Benchmarks").
//! Pure: rounds in, rows out.

use serde::Serialize;

use super::measure::Measured;
use super::memory::MemoryPoint;
use super::table::{group, median, Door, Row, Target};
use crate::surge::SurgeReport;

/// The surge doors, in the order `Round::surge` holds them.
pub const SURGE_DOORS: [Door; 3] = [Door::Fhircluster, Door::Nginx, Door::Haproxy];

/// What a surge through one front door measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SurgeFigures {
    pub goodput_per_second: f64,
    /// Heavy 2xx that came before the surge ended.
    pub heavy_within_surge: u64,
    pub heavy_503: u64,
    pub heavy_timeouts: u64,
    pub heavy_errors: u64,
    pub probe_p50_ms: Option<f64>,
    pub probe_p99_ms: Option<f64>,
    pub probe_503: u64,
    pub probe_timeouts: u64,
    /// Of the probes due during the surge, the share answered 2xx (%).
    pub probe_answered_percent: Option<f64>,
    /// ms after the surge until the probe was fast for good; infinite when never within the run.
    pub back_under_ms: f64,
    /// The probe over the whole run: (seconds from the start, latency ms if answered).
    pub series: Vec<(f64, Option<f64>)>,
}

impl SurgeFigures {
    pub fn of(r: &SurgeReport) -> SurgeFigures {
        SurgeFigures {
            goodput_per_second: r.heavy.goodput_per_second,
            heavy_within_surge: r.heavy.completed_within_surge,
            heavy_503: r.heavy.counts.status_503,
            heavy_timeouts: r.heavy.counts.timeouts,
            heavy_errors: r.heavy.counts.errors,
            probe_p50_ms: r.probe.during_surge.latency_ms.p50_ms,
            probe_p99_ms: r.probe.during_surge.latency_ms.p99_ms,
            probe_503: r.probe.during_surge.counts.status_503,
            probe_timeouts: r.probe.during_surge.counts.timeouts,
            probe_answered_percent: {
                let c = &r.probe.during_surge.counts;
                let due = c.sent + c.unsent;
                (due > 0).then(|| 100.0 * c.status_2xx as f64 / due as f64)
            },
            back_under_ms: r
                .probe
                .back_under_threshold_after_ms
                .unwrap_or(f64::INFINITY),
            series: r
                .probe
                .series
                .iter()
                .map(|p| (p.t_ms / 1000.0, p.latency_ms))
                .collect(),
        }
    }
}

/// Everything one round measured; `None` where a step did not run or failed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Round {
    /// Indexed by `Door`.
    pub raw: [Option<Measured>; 4],
    /// Indexed as `SURGE_DOORS`.
    pub surge: [Option<SurgeFigures>; 3],
    pub sessions_cache_id_unknown: Option<u64>,
    pub sessions_requests_2xx: Option<u64>,
    pub rss_idle_mb: Option<f64>,
    pub rss_after_surge_mb: Option<f64>,
    /// RSS with idle keep-alive clients, at each count.
    pub idle_clients: Vec<MemoryPoint>,
    /// RSS with requests left waiting, at each count.
    pub waiting: Vec<MemoryPoint>,
    pub scheduler_decisions_per_second: Option<f64>,
}

/// How many rounds and what the table calls them.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels {
    pub wrk: String,
    pub multiple: f64,
    pub fast_ms: f64,
}

fn med(rounds: &[Round], f: impl Fn(&Round) -> Option<f64>) -> Option<f64> {
    median(&rounds.iter().filter_map(f).collect::<Vec<_>>())
}

fn per_door(
    label: &str,
    unit: &str,
    decimals: usize,
    rounds: &[Round],
    doors: &[Door],
    f: impl Fn(&Round, Door) -> Option<f64>,
) -> Row {
    doors
        .iter()
        .fold(Row::new(label, unit, decimals), |row, &d| {
            row.set(d, med(rounds, |r| f(r, d)))
        })
}

fn surge_of(r: &Round, d: Door) -> Option<&SurgeFigures> {
    let i = SURGE_DOORS.iter().position(|&s| s == d)?;
    r.surge[i].as_ref()
}

fn fc_only(label: &str, unit: &str, decimals: usize, value: Option<f64>) -> Row {
    Row::new(label, unit, decimals).set(Door::Fhircluster, value)
}

/// One row per count measured, the median of each over the rounds; at most `target_mb` at the
/// count `target_at`.
fn memory_rows(
    rounds: &[Round],
    what: &str,
    points: fn(&Round) -> &[MemoryPoint],
    (target_at, target_mb): (usize, f64),
) -> Vec<Row> {
    let mut counts: Vec<usize> = rounds
        .iter()
        .flat_map(|r| points(r).iter().map(|p| p.count))
        .collect();
    counts.sort_unstable();
    counts.dedup();
    counts
        .into_iter()
        .map(|c| {
            let row = fc_only(
                &format!("RSS with {} {what}", group(c as f64, 0)),
                "MB",
                1,
                med(rounds, |r| {
                    points(r)
                        .iter()
                        .find(|p| p.count == c)
                        .and_then(|p| p.rss_mb)
                }),
            );
            if c == target_at {
                row.target(Target::AtMost(target_mb))
            } else {
                row
            }
        })
        .collect()
}

/// The table's rows, medians over `rounds`.
pub fn rows(rounds: &[Round], l: &Labels) -> Vec<Row> {
    let raw = |r: &Round, d: Door| r.raw[d.index()].as_ref().map(|m| m.wrk);
    let proxies = [Door::Fhircluster, Door::Nginx, Door::Haproxy];
    let surge = |label: &str, unit: &str, dec: usize, f: fn(&SurgeFigures) -> Option<f64>| {
        per_door(label, unit, dec, rounds, &SURGE_DOORS, |r, d| {
            surge_of(r, d).and_then(f)
        })
    };
    let m = l.multiple;
    let mut rows = vec![
        per_door(
            &format!("raw throughput, {}", l.wrk),
            "req/s",
            0,
            rounds,
            &Door::ALL,
            |r, d| raw(r, d).map(|w| w.ok_per_second()),
        )
        .target(Target::AtLeastTimes(Door::Nginx, 1.0))
        .target(Target::AtLeastTimes(Door::Direct, 0.6)),
        per_door("raw p99 latency", "ms", 2, rounds, &Door::ALL, |r, d| {
            raw(r, d).map(|w| w.p99_ms)
        }),
        per_door(
            "added p99 over direct",
            "ms",
            2,
            rounds,
            &proxies,
            |r, d| Some(raw(r, d)?.p99_ms - raw(r, Door::Direct)?.p99_ms),
        )
        .target(Target::AtMostTimes(Door::Nginx, 1.0)),
        per_door(
            "raw CPU per request (direct: the sim's own)",
            "µs",
            1,
            rounds,
            &Door::ALL,
            |r, d| raw_cpu(r.raw[d.index()].as_ref(), d),
        ),
        surge(&format!("{m}× surge: heavy goodput"), "2xx/s", 1, |s| {
            Some(s.goodput_per_second)
        })
        .target(Target::AtLeastTimes(Door::Haproxy, 0.95))
        .target(Target::AtLeastTimes(Door::Nginx, 1.0)),
        surge(
            &format!("{m}× surge: heavy 2xx completed within the surge"),
            "",
            0,
            |s| Some(s.heavy_within_surge as f64),
        )
        .target(Target::AtLeastTimes(Door::Haproxy, 0.95)),
        surge(
            &format!("{m}× surge: $lookup probe median"),
            "ms",
            1,
            |s| s.probe_p50_ms,
        )
        .target(Target::AtMost(100.0))
        .target(Target::AtMostTimes(Door::Nginx, 0.1)),
        surge(&format!("{m}× surge: $lookup probe p99"), "ms", 1, |s| {
            s.probe_p99_ms
        }),
        surge(
            &format!("{m}× surge: probes answered 2xx during it"),
            "%",
            1,
            |s| s.probe_answered_percent,
        )
        .target(Target::AtLeast(100.0)),
        surge(&format!("{m}× surge: heavy 503s"), "", 0, |s| {
            Some(s.heavy_503 as f64)
        }),
        surge(
            &format!("{m}× surge: heavy timeouts and errors"),
            "",
            0,
            |s| Some((s.heavy_timeouts + s.heavy_errors) as f64),
        ),
        surge(
            &format!("{m}× surge: probe 503s and timeouts"),
            "",
            0,
            |s| Some((s.probe_503 + s.probe_timeouts) as f64),
        ),
        surge(
            &format!("probe back under {} ms after the surge", l.fast_ms),
            "s",
            1,
            |s| Some(s.back_under_ms / 1000.0),
        )
        .target(Target::AtMost(2.0)),
        surge(
            &format!("stretch: {m}× surge $lookup probe median"),
            "ms",
            1,
            |s| s.probe_p50_ms,
        )
        .target(Target::AtMost(40.0)),
        surge(
            &format!("stretch: {m}× surge heavy 2xx completed within it"),
            "",
            0,
            |s| Some(s.heavy_within_surge as f64),
        )
        .target(Target::AtLeastTimes(Door::Haproxy, 1.0)),
        fc_only(
            "sessions: cache-id-unknown",
            "",
            0,
            med(rounds, |r| r.sessions_cache_id_unknown.map(|v| v as f64)),
        )
        .target(Target::AtMost(0.0)),
        fc_only("RSS idle", "MB", 1, med(rounds, |r| r.rss_idle_mb)).target(Target::AtMost(15.0)),
        fc_only(
            "RSS idle after the surges",
            "MB",
            1,
            med(rounds, |r| r.rss_after_surge_mb),
        ),
        fc_only(
            if cfg!(debug_assertions) {
                "scheduler (a debug build: not the figure)"
            } else {
                "scheduler (release, one core)"
            },
            "decisions/s",
            0,
            med(rounds, |r| r.scheduler_decisions_per_second),
        )
        .target(Target::AtLeast(1_000_000.0)),
    ];
    let scheduler = rows.pop();
    rows.extend(memory_rows(
        rounds,
        "idle keep-alive clients",
        |r| &r.idle_clients,
        // Issue #27's bounds: 10,000 idle clients in 40 MB, 5,000 queued requests in 20 MB.
        (10_000, 40.0),
    ));
    rows.extend(memory_rows(
        rounds,
        "queued requests",
        |r| &r.waiting,
        (5_000, 20.0),
    ));
    rows.extend(scheduler);
    // A part that did not run leaves no row.
    rows.retain(|r| r.values.iter().any(Option::is_some));
    rows
}

/// A raw run's CPU per request: the door's, or for direct the upstream's own.
fn raw_cpu(m: Option<&Measured>, d: Door) -> Option<f64> {
    let m = m?;
    if d == Door::Direct {
        m.upstream_cpu_us_per_request
    } else {
        m.cpu_us_per_request
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::measure::sample;
    use crate::compare::table::markdown;

    fn wrk(rps: f64, p99: f64) -> Option<Measured> {
        Some(sample(rps, p99, Some(30.0), 12.0))
    }

    fn surge(goodput: f64, p50: f64, back_ms: f64) -> Option<SurgeFigures> {
        Some(SurgeFigures {
            goodput_per_second: goodput,
            heavy_within_surge: (goodput * 18.0) as u64,
            heavy_503: 10,
            heavy_timeouts: 1,
            heavy_errors: 0,
            probe_p50_ms: Some(p50),
            probe_p99_ms: Some(p50 * 3.0),
            probe_503: 0,
            probe_timeouts: 0,
            probe_answered_percent: Some(100.0),
            back_under_ms: back_ms,
            series: vec![(0.0, Some(p50))],
        })
    }

    fn round(fc_rps: f64, nginx_probe: f64) -> Round {
        Round {
            raw: [
                wrk(fc_rps, 5.0),
                wrk(10_000.0, 6.0),
                wrk(9_000.0, 4.0),
                wrk(15_000.0, 2.0),
            ],
            surge: [
                surge(35.0, 40.0, 500.0),
                surge(30.0, nginx_probe, f64::INFINITY),
                surge(36.0, 900.0, 1500.0),
            ],
            sessions_cache_id_unknown: Some(0),
            sessions_requests_2xx: Some(800),
            rss_idle_mb: Some(6.0),
            rss_after_surge_mb: Some(8.0),
            idle_clients: vec![point(1_000, 10.0), point(10_000, 40.0)],
            waiting: vec![point(5_000, 30.0)],
            scheduler_decisions_per_second: Some(3e6),
        }
    }

    fn point(count: usize, mb: f64) -> MemoryPoint {
        MemoryPoint {
            count,
            rss_mb: Some(mb),
            answered: None,
        }
    }

    fn labels() -> Labels {
        Labels {
            wrk: "GET /r4/metadata".into(),
            multiple: 3.0,
            fast_ms: 10.0,
        }
    }

    #[test]
    fn medians_over_rounds_and_the_targets_checked() {
        let rounds = [
            round(11_000.0, 5000.0),
            round(12_500.0, 8000.0),
            round(9_000.0, 300.0),
        ];
        let rows = rows(&rounds, &labels());
        let find = |prefix: &str| {
            rows.iter()
                .find(|r| r.label.starts_with(prefix))
                .unwrap_or_else(|| panic!("no row {prefix}"))
        };
        let rps = find("raw throughput");
        assert_eq!(rps.values[0], Some(11_000.0));
        assert_eq!(rps.verdict(), "met");
        let added = find("added p99");
        assert_eq!(added.values, [Some(3.0), Some(4.0), Some(2.0), None]);
        assert_eq!(added.verdict(), "met");
        let probe = find("3× surge: $lookup probe median");
        assert_eq!(probe.values[1], Some(5000.0));
        assert_eq!(probe.verdict(), "met");
        let good = find("3× surge: heavy goodput");
        assert_eq!(good.verdict(), "met", "35 ≥ 0.95 × 36 and ≥ 30");
        let back = find("probe back under");
        assert_eq!(back.values[0], Some(0.5));
        assert_eq!(back.values[1], Some(f64::INFINITY));
        let cpu = find("raw CPU per request");
        assert_eq!(cpu.values, [Some(30.0), Some(30.0), Some(30.0), Some(12.0)]);
        let within = find("3× surge: heavy 2xx completed within the surge");
        assert_eq!(within.values[0], Some(630.0));
        assert_eq!(within.verdict(), "met", "630 ≥ 0.95 × 648");
        assert_eq!(find("3× surge: probes answered").verdict(), "met");
        assert_eq!(
            find("stretch: 3× surge $lookup probe median").verdict(),
            "met"
        );
        assert_eq!(
            find("stretch: 3× surge heavy").verdict(),
            "MISSED",
            "630 < 648"
        );
        assert_eq!(find("RSS with 1,000 idle").targets, []);
        assert_eq!(find("RSS with 10,000 idle").verdict(), "met", "40 ≤ 40 MB");
        assert_eq!(find("RSS with 5,000 queued").values[0], Some(30.0));
        assert_eq!(
            find("RSS with 5,000 queued").verdict(),
            "MISSED",
            "30 > 20 MB"
        );
        assert!(rows
            .last()
            .is_some_and(|r| r.label.starts_with("scheduler")));
        let md = markdown(&rows);
        assert!(md.contains("| never |"), "{md}");
        assert_eq!(md.matches("MISSED").count(), 2, "{md}");
    }

    #[test]
    fn a_missing_door_or_a_missed_target_shows() {
        let mut r = round(5_000.0, 300.0);
        r.surge[2] = None;
        r.rss_idle_mb = Some(20.0);
        let rows = rows(&[r], &labels());
        let md = markdown(&rows);
        let line = |prefix: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| {prefix}")))
                .unwrap_or_default()
                .to_string()
        };
        assert!(line("raw throughput").ends_with("MISSED |"));
        assert!(line("3× surge: heavy goodput").ends_with("| ? |"));
        assert!(
            line("3× surge: $lookup probe median").ends_with("MISSED |"),
            "40 > 0.1 × 300"
        );
        assert!(line("RSS idle (MB)").ends_with("MISSED |"));
    }

    #[test]
    fn a_part_that_did_not_run_leaves_no_row() {
        let r = Round {
            rss_idle_mb: Some(7.0),
            ..Round::default()
        };
        let rows = rows(&[r], &labels());
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].label, "RSS idle");
    }
}
