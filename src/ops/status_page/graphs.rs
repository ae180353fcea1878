//! The page's 24 h graphs from the graph history the launcher keeps (`History::to_json`, spec
//! "Graphs"): Requests per minute (with the Total per interval), private memory (`RssAnon`, with
//! the memory Total and the refuse threshold), the memory guard's refusals per interval, and
//! the requests in flight in each process when its sample came. One line per process, up to
//! eight (colour, pattern and width tell them apart; the legend says how many are left out); a
//! gap in a process's points breaks its line. Pure.

use serde_json::Value;

use super::fmt::esc;
use super::svg::{megabytes, plain, Chart, Line};
use crate::status::history::KEEP_MS;

/// Lines drawn per chart at most (spec "Graphs": up to eight).
pub(crate) const MAX_LINES: usize = 8;

/// Eight colours apart by lightness as well as hue, readable on the page's dark background.
const COLORS: [&str; MAX_LINES] = [
    "#4fc3f7", "#ffb74d", "#81c784", "#e57373", "#ba68c8", "#fff176", "#90a4ae", "#f06292",
];
const DASHES: [&str; 4] = ["", "6 3", "2 3", "8 3 2 3"];
const TOTAL_COLOR: &str = "#eeeeee";

/// A process's series from the history: its code and its points.
struct Series<'a> {
    code: &'a str,
    state: &'a str,
    points: &'a [Value],
}

/// The processes the plan has now (`/status`'s), when it came: a process `scale` removed keeps
/// its points in the history, but is no line or legend entry of the cluster as it is.
pub(crate) type Plan<'a> = Option<&'a [&'a str]>;

/// The history's processes in `plan` (all of them when the plan is not known).
fn in_plan<'a, 'p>(
    history: &'a Value,
    plan: Plan<'p>,
) -> impl Iterator<Item = &'a Value> + use<'a, 'p> {
    history["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |p| {
            plan.is_none_or(|codes| codes.contains(&p["code"].as_str().unwrap_or("?")))
        })
}

fn series<'a>(history: &'a Value, plan: Plan) -> Vec<Series<'a>> {
    in_plan(history, plan)
        .map(|p| Series {
            code: p["code"].as_str().unwrap_or("?"),
            state: p["state"].as_str().unwrap_or(""),
            points: p["points"].as_array().map(Vec::as_slice).unwrap_or(&[]),
        })
        .take(MAX_LINES)
        .collect()
}

/// The unbroken runs of `get` over a process's points: a gap, or a sample without the figure,
/// ends a run.
fn runs(
    points: &[Value],
    from_ms: u64,
    get: &dyn Fn(&Value) -> Option<f64>,
) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur = Vec::new();
    for p in points {
        let at = p["at"].as_u64().unwrap_or(0);
        let v = (p["kind"] == "sample").then(|| get(p)).flatten();
        match v {
            Some(v) if at >= from_ms => cur.push((at as f64, v)),
            Some(_) => {}
            None => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn process_lines(ss: &[Series], from_ms: u64, get: &dyn Fn(&Value) -> Option<f64>) -> Vec<Line> {
    ss.iter()
        .enumerate()
        .map(|(i, s)| Line {
            code: s.code.to_string(),
            color: COLORS[i % COLORS.len()],
            dash: DASHES[i % DASHES.len()],
            width: 1.6,
            runs: runs(s.points, from_ms, get),
        })
        .collect()
}

/// A Total line: one run of the points with a figure, broken where one is missing.
fn total_line(points: &[Value], from_ms: u64, get: &dyn Fn(&Value) -> Option<f64>) -> Line {
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for p in points {
        let at = p["at"].as_u64().unwrap_or(0);
        match get(p) {
            Some(v) if at >= from_ms => runs
                .last_mut()
                .into_iter()
                .for_each(|r| r.push((at as f64, v))),
            Some(_) => {}
            None => runs.push(Vec::new()),
        }
    }
    runs.retain(|r| !r.is_empty());
    Line {
        code: "total".into(),
        color: TOTAL_COLOR,
        dash: "",
        width: 2.6,
        runs,
    }
}

/// The four charts, over the last 24 hours up to `now_ms` (from the oldest point kept when that
/// is later). `reject_at` is the memory guard's refuse threshold, when known.
pub(crate) fn charts(
    history: &Value,
    plan: Plan,
    reject_at: Option<u64>,
    now_ms: u64,
) -> Vec<Chart> {
    let ss = series(history, plan);
    let floor = now_ms.saturating_sub(KEEP_MS);
    let oldest = ss
        .iter()
        .filter_map(|s| s.points.first()?["at"].as_u64())
        .min()
        .unwrap_or(floor);
    // At least ten seconds across, so a first sample or two isn't drawn over the whole width.
    let from_ms = oldest.max(floor).min(now_ms.saturating_sub(10_000));
    let interval = history["sampleIntervalMs"]
        .as_u64()
        .unwrap_or(60_000)
        .max(1) as f64;
    let per_minute = 60_000.0 / interval;
    let num = |key: &'static str| move |p: &Value| p[key].as_f64();

    let mut requests = process_lines(&ss, from_ms, &|p| {
        p["requests"].as_f64().map(|r| r * per_minute)
    });
    let totals = history["totals"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    requests.push(total_line(totals, from_ms, &|p| {
        p["requests"].as_f64().map(|r| r * per_minute)
    }));
    let mut memory = process_lines(&ss, from_ms, &num("rssAnon"));
    let mem_total = history["memoryTotal"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    memory.push(total_line(mem_total, from_ms, &|p| p["bytes"].as_f64()));
    let marks = reject_at
        .map(|r| vec![(r as f64, format!("refuse at {}", megabytes(r as f64)))])
        .unwrap_or_default();
    let chart = |id, title: &str, lines, marks, format: fn(f64) -> String| Chart {
        id,
        title: title.to_string(),
        lines,
        marks,
        format,
        from_ms,
        to_ms: now_ms,
    };
    vec![
        chart(
            "requests",
            "Requests per minute",
            requests,
            Vec::new(),
            plain,
        ),
        chart(
            "memory",
            "Private memory (RssAnon)",
            memory,
            marks,
            megabytes,
        ),
        chart(
            "refusals",
            "Memory-guard refusals per interval",
            process_lines(&ss, from_ms, &num("refusals")),
            Vec::new(),
            plain,
        ),
        chart(
            "inflight",
            "In flight (at each sample)",
            process_lines(&ss, from_ms, &num("inFlight")),
            Vec::new(),
            plain,
        ),
    ]
}

/// The one legend above the graphs: a swatch per process of the plan (its state when not
/// live), the Total, and how many processes are left out past eight.
pub(crate) fn legend(history: &Value, plan: Plan) -> String {
    let ss = series(history, plan);
    let all = in_plan(history, plan).count();
    let mut s = String::from(r#"<div class="legend">"#);
    for (i, p) in ss.iter().enumerate() {
        let state = match p.state {
            "" | "live" => String::new(),
            "noRecentSample" => " (no recent sample)".into(),
            other => format!(" ({})", esc(other)),
        };
        let dash = DASHES[i % DASHES.len()];
        s.push_str(&format!(
            r#"<span class="key"><svg viewBox="0 0 24 8" class="swatch"><line x1="0" y1="4" x2="24" y2="4" stroke="{}" stroke-width="2.5" stroke-dasharray="{dash}"/></svg>{}{state}</span>"#,
            COLORS[i % COLORS.len()],
            esc(p.code)
        ));
    }
    s.push_str(&format!(
        r#"<span class="key"><svg viewBox="0 0 24 8" class="swatch"><line x1="0" y1="4" x2="24" y2="4" stroke="{TOTAL_COLOR}" stroke-width="4"/></svg>Total</span>"#
    ));
    if all > ss.len() {
        s.push_str(&format!(
            r#"<span class="key">{} more not drawn</span>"#,
            all - ss.len()
        ));
    }
    s.push_str("</div>");
    s
}
