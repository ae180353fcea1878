use proptest::prelude::*;

use super::*;
use crate::compare::measure::sample;

/// A round at one cell: fhircluster's and HAProxy's throughput and CPU per request (nginx at
/// HAProxy's figures).
fn round(connections: u32, fc: (f64, f64), hp: (f64, f64)) -> FastRound {
    let m = |(rps, cpu): (f64, f64)| Some(sample(rps, 2.0, Some(cpu), 10.0));
    FastRound {
        cells: vec![FastCell {
            connections,
            wrk_threads: 1,
            doors: [m(fc), m(hp), m(hp), m((90_000.0, 9.0))],
        }],
    }
}

/// Rounds at one cell in which fhircluster serves `k` times HAProxy's 20,000 req/s, at
/// `cpu(k)` µs a request against HAProxy's 20, one round for each `k`.
fn rounds_at(connections: u32, ks: &[f64], cpu: fn(f64) -> f64) -> Vec<FastRound> {
    ks.iter()
        .map(|&k| round(connections, (20_000.0 * k, cpu(k)), (20_000.0, 20.0)))
        .collect()
}

fn line<'a>(md: &'a str, measure: &str) -> &'a str {
    md.lines()
        .find(|l| l.contains(measure))
        .unwrap_or_else(|| panic!("no line for {measure} in\n{md}"))
}

#[test]
fn the_same_rounds_give_the_same_spread_and_one_value_none_at_all() {
    let v = [1.0, 0.9, 1.2, 1.05, 0.95];
    assert_eq!(of(&v), of(&v), "seeded");
    let one = of(&[1.1]).expect("a spread");
    assert_eq!(
        (one.median, one.low, one.high, one.rounds),
        (1.1, 1.1, 1.1, 1)
    );
    assert_eq!(of(&[]), None);
    assert_eq!(of(&[f64::NAN]), None);
}

#[test]
fn a_bound_inside_the_spread_is_neither_met_nor_missed() {
    let s = Spread {
        median: 1.02,
        low: 0.95,
        high: 1.10,
        rounds: 6,
    };
    assert_eq!(at_least(&s, 1.0), Verdict::WithinSpread);
    assert_eq!(at_most(&s, 1.0), Verdict::WithinSpread);
    assert_eq!(at_least(&s, 0.95), Verdict::Met);
    assert_eq!(at_least(&s, 1.11), Verdict::Missed);
    assert_eq!(at_most(&s, 1.10), Verdict::Met);
    assert_eq!(at_most(&s, 0.94), Verdict::Missed);
}

#[test]
fn rounds_all_ahead_are_met_and_rounds_either_side_within_the_spread() {
    // Ahead of HAProxy in every round, by 5-10%, at lower CPU: met.
    let ahead = rounds_at(32, &[1.05, 1.10, 1.07], |_| 18.0);
    let md = markdown(&ahead);
    assert!(
        line(&md, "throughput ÷ HAProxy").ends_with("| 3 of 3 | ≥ 1× | met |"),
        "{md}"
    );
    assert!(
        line(&md, "| 1.07× |").contains("throughput ÷ HAProxy"),
        "{md}"
    );
    assert!(
        line(&md, "CPU per request").ends_with("| 3 of 3 | ≤ 1× | met |"),
        "{md}"
    );
    // The same median, its rounds either side of HAProxy's: a median of 1.07× says nothing.
    let mixed = rounds_at(32, &[0.85, 1.07, 1.30], |k| 21.0 / k);
    let md = markdown(&mixed);
    let t = line(&md, "throughput ÷ HAProxy");
    assert!(t.contains("| 1.07× | 0.85-1.30× | 2 of 3 |"), "{md}");
    assert!(t.ends_with("| within the spread |"), "{md}");
    // Behind in every round: missed.
    let behind = rounds_at(256, &[0.90, 0.93, 0.88], |_| 22.0);
    let md = markdown(&behind);
    assert!(
        line(&md, "throughput ÷ HAProxy").ends_with("| MISSED |"),
        "{md}"
    );
    assert!(line(&md, "CPU per request").ends_with("| MISSED |"), "{md}");
    assert!(
        md.lines().skip(2).all(|l| l.starts_with("| -t1 -c256 |")),
        "{md}"
    );
}

#[test]
fn nginx_is_held_to_095_at_32_connections_and_to_1_above() {
    // 0.97× nginx in every round.
    let at = |connections| {
        let r: Vec<FastRound> = (0..3)
            .map(|_| round(connections, (19_400.0, 18.0), (20_000.0, 20.0)))
            .collect();
        line(&markdown(&r), "throughput ÷ nginx").to_string()
    };
    assert!(at(32).ends_with("| ≥ 0.95× | met |"), "{}", at(32));
    assert!(at(256).ends_with("| ≥ 1× | MISSED |"), "{}", at(256));
}

#[test]
fn no_rounds_no_table() {
    assert_eq!(markdown(&[]), "");
}

proptest! {
    #[test]
    fn the_spread_holds_the_median_within_the_rounds(
        v in proptest::collection::vec(0.5f64..2.0, 1..20)
    ) {
        let s = of(&v).expect("a spread");
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        prop_assert!(lo <= s.low && s.low <= s.median && s.median <= s.high && s.high <= hi,
            "{s:?} of {v:?}");
        prop_assert_eq!(s.rounds, v.len());
    }
}

#[test]
fn twelve_rounds_measured_here_give_python_s_percentile_bootstrap() {
    // fhircluster ÷ HAProxy at `wrk -t2 -c32`, twelve rounds of `compare --only fast`; Python's
    // `statistics.median` over 20,000 `random.choices` resamplings (three seeds) gives a median
    // of 0.9835 and 0.901-1.119 for the middle 90%. Neither end is a round's extreme.
    let v = [
        1.026, 0.901, 0.863, 0.975, 0.867, 0.863, 1.147, 0.908, 1.165, 1.119, 1.151, 0.992,
    ];
    let s = of(&v).expect("a spread");
    assert!((s.median - 0.9835).abs() < 1e-9, "{s:?}");
    assert!(
        (s.low - 0.901).abs() < 0.01 && (s.high - 1.119).abs() < 0.01,
        "{s:?}"
    );
    assert_eq!(at_least(&s, 1.0), Verdict::WithinSpread);
}
