//! The fast-upstream table: for each of wrk's settings, each door's throughput, CPU per request,
//! p99, the upstream's CPU per request behind it and the errors, medians over the rounds, with
//! issue #27's targets checked: throughput at least HAProxy's, and nginx's (0.95× of it at 32
//! connections or fewer), CPU per request at most HAProxy's. Pure: rounds in, rows out.

use super::fast::{FastCell, FastRound};
use super::measure::Measured;
use super::table::{median, Door, Row, Target};

/// The cell of `round` with `like`'s wrk setting (rounds may order their cells differently).
pub(super) fn cell_of<'a>(round: &'a FastRound, like: &FastCell) -> Option<&'a FastCell> {
    round
        .cells
        .iter()
        .find(|c| c.connections == like.connections && c.wrk_threads == like.wrk_threads)
}

fn row(
    rounds: &[FastRound],
    like: &FastCell,
    label: &str,
    unit: &str,
    decimals: usize,
    f: fn(&Measured, Door) -> Option<f64>,
) -> Row {
    let title = format!(
        "fast upstream, wrk -t{} -c{}: {label}",
        like.wrk_threads, like.connections
    );
    Door::ALL
        .iter()
        .fold(Row::new(&title, unit, decimals), |r, &d| {
            let values: Vec<f64> = rounds
                .iter()
                .filter_map(|round| cell_of(round, like)?.doors[d.index()].as_ref())
                .filter_map(|m| f(m, d))
                .collect();
            r.set(d, median(&values))
        })
}

/// The rows, cell by cell in the first round's order.
pub fn rows(rounds: &[FastRound]) -> Vec<Row> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    first
        .cells
        .iter()
        .flat_map(|like| {
            [
                row(rounds, like, "throughput", "2xx/s", 0, |m, _| {
                    Some(m.wrk.ok_per_second())
                })
                .target(Target::AtLeastTimes(Door::Haproxy, 1.0))
                .target(Target::AtLeastTimes(
                    Door::Nginx,
                    if like.connections <= 32 { 0.95 } else { 1.0 },
                )),
                row(
                    rounds,
                    like,
                    "CPU per request (direct: the upstream's own)",
                    "µs",
                    1,
                    |m, d| {
                        if d == Door::Direct {
                            m.upstream_cpu_us_per_request
                        } else {
                            m.cpu_us_per_request
                        }
                    },
                )
                .target(Target::AtMostTimes(Door::Haproxy, 1.0)),
                row(rounds, like, "p99 latency", "ms", 2, |m, _| {
                    Some(m.wrk.p99_ms)
                }),
                row(
                    rounds,
                    like,
                    "the upstream's CPU per request",
                    "µs",
                    1,
                    |m, _| m.upstream_cpu_us_per_request,
                ),
                row(rounds, like, "non-2xx and socket errors", "", 0, |m, _| {
                    Some((m.wrk.non_2xx + m.wrk.socket_errors) as f64)
                }),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::measure::sample;
    use crate::compare::table::markdown;

    fn m(rps: f64, cpu: f64) -> Option<Measured> {
        let mut m = sample(rps, 2.0, Some(cpu), 10.0);
        m.wrk.socket_errors = 1;
        Some(m)
    }

    fn cell(connections: u32, fc: f64, fc_cpu: f64) -> FastCell {
        FastCell {
            connections,
            wrk_threads: 1,
            doors: [
                m(fc, fc_cpu),
                m(20_000.0, 27.0),
                m(18_000.0, 30.0),
                m(60_000.0, 99.0),
            ],
        }
    }

    #[test]
    fn medians_per_setting_and_the_targets_of_the_issue() {
        // Round order differs; cells are matched by their wrk setting.
        let rounds = [
            FastRound {
                cells: vec![cell(32, 21_000.0, 26.0), cell(256, 15_000.0, 40.0)],
            },
            FastRound {
                cells: vec![cell(256, 16_000.0, 36.0), cell(32, 19_000.0, 28.0)],
            },
            FastRound {
                cells: vec![cell(32, 22_000.0, 25.0), cell(256, 17_000.0, 38.0)],
            },
        ];
        let rows = rows(&rounds);
        assert_eq!(rows.len(), 10);
        let find = |prefix: &str| {
            rows.iter()
                .find(|r| r.label.starts_with(prefix))
                .unwrap_or_else(|| panic!("no row {prefix}"))
        };
        let t32 = find("fast upstream, wrk -t1 -c32: throughput");
        assert_eq!(t32.values[0], Some(21_000.0));
        // 21,000 ≥ HAProxy's 18,000 and nginx's 20,000; 0.35× direct is no target.
        assert_eq!(t32.verdict(), "met");
        assert_eq!(t32.ratio(Door::Direct), Some(0.35));
        let t256 = find("fast upstream, wrk -t1 -c256: throughput");
        assert_eq!(t256.values[0], Some(16_000.0));
        assert_eq!(t256.verdict(), "MISSED", "under HAProxy's 18,000");
        let cpu32 = find("fast upstream, wrk -t1 -c32: CPU");
        assert_eq!(
            cpu32.values,
            [Some(26.0), Some(27.0), Some(30.0), Some(10.0)]
        );
        assert_eq!(cpu32.verdict(), "met");
        let cpu256 = find("fast upstream, wrk -t1 -c256: CPU");
        assert_eq!(cpu256.values[0], Some(38.0));
        assert_eq!(cpu256.verdict(), "MISSED");
        let errors = find("fast upstream, wrk -t1 -c32: non-2xx");
        assert_eq!(errors.values[1], Some(1.0));
        let md = markdown(&rows);
        assert_eq!(md.lines().count(), 12, "{md}");
        assert!(super::rows(&[]).is_empty());
    }

    #[test]
    fn within_nginx_by_5_percent_is_met_at_32_connections_only() {
        // 19,500: ≥ HAProxy's 18,000, 0.975× nginx's 20,000.
        let rounds = [FastRound {
            cells: vec![cell(32, 19_500.0, 26.0), cell(256, 19_500.0, 26.0)],
        }];
        let rows = rows(&rounds);
        let verdict = |label: &str| {
            rows.iter()
                .find(|r| r.label == label)
                .map(|r| r.verdict())
                .unwrap_or_else(|| panic!("no row {label}"))
        };
        assert_eq!(verdict("fast upstream, wrk -t1 -c32: throughput"), "met");
        assert_eq!(
            verdict("fast upstream, wrk -t1 -c256: throughput"),
            "MISSED"
        );
    }
}
