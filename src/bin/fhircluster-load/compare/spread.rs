//! The fast-upstream targets judged round by round: each round's fhircluster ÷ the other door,
//! the median of those ratios, and how far that median can be trusted. On a shared machine one
//! round's ratio moves by more than the differences being measured (0.81× to 1.33× of
//! HAProxy's throughput at `wrk -t1 -c256` over twelve rounds here), so a median of three
//! rounds can say "met" in one run and "MISSED" in the next. The spread is that of the median
//! itself: 90% of the medians of `RESAMPLES` resamplings of the rounds (with replacement, a
//! percentile bootstrap). A target is met, or missed, only when the whole spread is on one side
//! of it; otherwise it is within the spread. Pure: rounds in, Markdown out; the resampling is
//! seeded, so the same rounds always give the same figures.

use super::fast::{FastCell, FastRound};
use super::fast_rows::cell_of;
use super::measure::Measured;
use super::table::{median, Door};

/// Resamplings of the rounds per median.
pub const RESAMPLES: usize = 2_000;

/// A median and the middle 90% of its resampled medians.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    pub rounds: usize,
}

/// The spread of the median of `values` (NaN dropped); `None` if none is left.
pub fn of(values: &[f64]) -> Option<Spread> {
    let v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    let mid = median(&v)?;
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut medians: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let draw: Vec<f64> = (0..v.len())
                .map(|_| {
                    seed = splitmix64(seed);
                    v[(seed % v.len() as u64) as usize]
                })
                .collect();
            median(&draw)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let at = |q: usize| medians[(q * (medians.len() - 1)) / 100];
    Some(Spread {
        median: mid,
        low: at(5),
        high: at(95),
        rounds: v.len(),
    })
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Where a spread stands against a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    WithinSpread,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
            Verdict::WithinSpread => "within the spread",
        }
    }
}

/// Against "at least `k`".
pub fn at_least(s: &Spread, k: f64) -> Verdict {
    if s.low >= k {
        Verdict::Met
    } else if s.high < k {
        Verdict::Missed
    } else {
        Verdict::WithinSpread
    }
}

/// Against "at most `k`".
pub fn at_most(s: &Spread, k: f64) -> Verdict {
    if s.high <= k {
        Verdict::Met
    } else if s.low > k {
        Verdict::Missed
    } else {
        Verdict::WithinSpread
    }
}

/// One target of the issue, at one cell, judged on the rounds' ratios.
struct Judged {
    cell: String,
    measure: String,
    spread: Spread,
    on_target: usize,
    bound: String,
    verdict: Verdict,
}

/// Each round's fhircluster ÷ `other` for `f`, at the cell like `like`.
fn ratios(
    rounds: &[FastRound],
    like: &FastCell,
    other: Door,
    f: fn(&Measured) -> Option<f64>,
) -> Vec<f64> {
    rounds
        .iter()
        .filter_map(|round| {
            let c = cell_of(round, like)?;
            let fc = f(c.doors[Door::Fhircluster.index()].as_ref()?)?;
            let o = f(c.doors[other.index()].as_ref()?)?;
            (o > 0.0 && fc.is_finite() && o.is_finite()).then(|| fc / o)
        })
        .collect()
}

/// The targets of the fast table (throughput at least HAProxy's and nginx's, 0.95× nginx's at
/// 32 connections or fewer; CPU per request at most HAProxy's), round by round.
fn judged(rounds: &[FastRound]) -> Vec<Judged> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    let throughput: fn(&Measured) -> Option<f64> = |m| Some(m.wrk.ok_per_second());
    let cpu: fn(&Measured) -> Option<f64> = |m| m.cpu_us_per_request;
    let mut out = Vec::new();
    for like in &first.cells {
        let cell = format!("-t{} -c{}", like.wrk_threads, like.connections);
        let near_nginx = if like.connections <= 32 { 0.95 } else { 1.0 };
        let targets = [
            ("throughput ÷ HAProxy", Door::Haproxy, throughput, 1.0, true),
            ("CPU per request ÷ HAProxy", Door::Haproxy, cpu, 1.0, false),
            (
                "throughput ÷ nginx",
                Door::Nginx,
                throughput,
                near_nginx,
                true,
            ),
        ];
        for (measure, door, f, k, at_least_k) in targets {
            let values = ratios(rounds, like, door, f);
            let Some(spread) = of(&values) else {
                continue;
            };
            let on_target = values
                .iter()
                .filter(|&&x| if at_least_k { x >= k } else { x <= k })
                .count();
            let (bound, verdict) = if at_least_k {
                (format!("≥ {k}×"), at_least(&spread, k))
            } else {
                (format!("≤ {k}×"), at_most(&spread, k))
            };
            out.push(Judged {
                cell: cell.clone(),
                measure: measure.to_string(),
                spread,
                on_target,
                bound,
                verdict,
            });
        }
    }
    out
}

/// The round-by-round table as Markdown; empty without rounds.
pub fn markdown(rounds: &[FastRound]) -> String {
    let judged = judged(rounds);
    if judged.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| wrk | measure | median round | 90% of resampled medians | rounds on target | target | |\n\
         |---|---|--:|--:|--:|---|---|\n",
    );
    for j in judged {
        out.push_str(&format!(
            "| {} | {} | {:.2}× | {:.2}-{:.2}× | {} of {} | {} | {} |\n",
            j.cell,
            j.measure,
            j.spread.median,
            j.spread.low,
            j.spread.high,
            j.on_target,
            j.spread.rounds,
            j.bound,
            j.verdict.text()
        ));
    }
    out
}

#[cfg(test)]
#[path = "spread_tests.rs"]
mod tests;
