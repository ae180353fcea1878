//! The status page's line charts as inline SVG, drawn on the server: a polyline per unbroken
//! run of a line (a gap in the history, a restart or a skipped interval, starts a new one: the
//! spec's GRAPH-4/5 gaps are not joined up), a dot for a run of one sample, dashed level marks
//! (the refuse threshold), three value ticks and four time ticks; a point per pixel column at
//! most. Pure: the lines in, the markup out. No script, no font: the page's stylesheet sizes it.

use std::fmt::Write as _;

use super::fmt::{clock, esc, short};

/// One line of a chart: a process, or a Total.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Line {
    /// The process code (`tx1`) or `total`: the polylines' `data-code`.
    pub code: String,
    pub color: &'static str,
    /// `stroke-dasharray`, empty for solid: the pattern tells lines apart without colour.
    pub dash: &'static str,
    pub width: f64,
    /// Unbroken runs of (ms since the epoch, value), oldest first.
    pub runs: Vec<Vec<(u64, f64)>>,
}

/// A chart over `[from_ms, to_ms]`.
#[derive(Clone, Debug)]
pub(crate) struct Chart {
    /// The chart's `data-graph` (`requests`, `memory` ...).
    pub id: &'static str,
    pub title: String,
    pub lines: Vec<Line>,
    /// Dashed horizontal marks: (value, label).
    pub marks: Vec<(f64, String)>,
    /// How a value is written on the axis.
    pub format: fn(f64) -> String,
    pub from_ms: u64,
    pub to_ms: u64,
}

const W: f64 = 360.0;
const H: f64 = 200.0;
/// The left margin at least; wider when the value labels need it (`left_margin`).
const LEFT: f64 = 30.0;
/// A character of a tick label at its 12 px at most (`M` is about 10, a digit 7): the margin is
/// sized on the label's text, as the SVG clips what is left of its box.
const LABEL_CHAR: f64 = 7.5;
const RIGHT: f64 = 8.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 22.0;

/// A round top for the value axis at or above `max` (1, 2 or 5 × 10ⁿ, halved into ticks).
fn nice_top(max: f64) -> f64 {
    if !(max.is_finite() && max > 0.0) {
        return 1.0;
    }
    let e = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * e)
        .find(|t| *t >= max)
        .unwrap_or(10.0 * e)
}

/// Whether the chart has a line to draw: a run of two samples somewhere.
pub(crate) fn drawable(c: &Chart) -> bool {
    c.lines.iter().any(|l| l.runs.iter().any(|r| r.len() >= 2))
}

/// The chart as an `<svg>` element (with its title as `<title>` and `aria-label`).
pub(crate) fn render(c: &Chart) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" data-graph="{id}" viewBox="0 0 {W} {H}" role="img" aria-label="{t}"><title>{t}</title>"#,
        id = c.id,
        t = esc(&c.title)
    );
    if !drawable(c) {
        let _ = write!(
            s,
            r#"<text class="waiting" x="{}" y="{}" text-anchor="middle">waiting for two samples</text></svg>"#,
            W / 2.0,
            H / 2.0
        );
        return s;
    }
    let max = c
        .lines
        .iter()
        .flat_map(|l| l.runs.iter().flatten().map(|(_, v)| *v))
        .chain(c.marks.iter().map(|(v, _)| *v))
        .fold(0.0, f64::max);
    let top = nice_top(max);
    let values = [0.0, top / 2.0, top].map(|v| (v, (c.format)(v)));
    let (x0, x1, y0, y1) = (left_margin(&values), W - RIGHT, H - BOTTOM, TOP);
    let span = c.to_ms.saturating_sub(c.from_ms).max(1) as f64;
    let px = |at: u64| x0 + (at.saturating_sub(c.from_ms) as f64 / span).min(1.0) * (x1 - x0);
    let py = |v: f64| y0 - (v.max(0.0) / top).min(1.0) * (y0 - y1);
    // Value ticks: 0, half, top.
    for (v, label) in &values {
        let y = py(*v);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            x0 - 4.0,
            y + 4.0,
            esc(label)
        );
    }
    // Time ticks: four, the first and last at the ends.
    for i in 0..4u64 {
        let at = c.from_ms + (c.to_ms.saturating_sub(c.from_ms)) * i / 3;
        let anchor = match i {
            0 => "start",
            3 => "end",
            _ => "middle",
        };
        let _ = write!(
            s,
            r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            px(at),
            H - 6.0,
            clock(at, span < 600_000.0)
        );
    }
    for (v, label) in &c.marks {
        let y = py(*v);
        let _ = write!(
            s,
            r#"<line class="mark" x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}"/><text class="mark-label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            x1 - 2.0,
            y - 3.0,
            esc(label)
        );
    }
    for l in &c.lines {
        let dash = if l.dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{}""#, l.dash)
        };
        for run in &l.runs {
            match run.as_slice() {
                [] => {}
                [(at, v)] => {
                    let _ = write!(
                        s,
                        r#"<circle class="dot" data-code="{}" cx="{:.1}" cy="{:.1}" r="2.5" fill="{}"/>"#,
                        esc(&l.code),
                        px(*at),
                        py(*v),
                        l.color
                    );
                }
                run => {
                    let mut pts = String::new();
                    for (x, y) in columns(run.iter().map(|(at, v)| (px(*at), py(*v)))) {
                        let _ = write!(pts, "{x:.1},{y:.1} ");
                    }
                    let _ = write!(
                        s,
                        r#"<polyline class="line" data-code="{}" fill="none" stroke="{}" stroke-width="{}"{dash} points="{}"/>"#,
                        esc(&l.code),
                        l.color,
                        l.width,
                        pts.trim_end()
                    );
                }
            }
        }
    }
    s.push_str("</svg>");
    s
}

/// Room left of the plot for the longest value label and the gap before the axis.
fn left_margin(labels: &[(f64, String)]) -> f64 {
    let longest = labels
        .iter()
        .map(|(_, l)| l.chars().count())
        .max()
        .unwrap_or(0);
    (longest as f64 * LABEL_CHAR + 8.0).max(LEFT)
}

/// One point per pixel column at most: 1,440 samples on a 340-pixel chart would be a page of
/// 600 KB for nine processes, refreshed every interval. Within a column the highest point (the
/// least `y`) is kept, so a spike of refusals or requests never disappears.
fn columns(points: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (x, y) in points {
        match out.last_mut() {
            Some(last) if x.round() == last.0.round() => last.1 = last.1.min(y),
            _ => out.push((x, y)),
        }
    }
    out
}

/// A value axis label in the chart's own unit, for counts.
pub(crate) fn plain(v: f64) -> String {
    short(v)
}

/// A value axis label for bytes.
pub(crate) fn megabytes(v: f64) -> String {
    format!("{} MB", short(v / 1e6))
}
