//! The status page's line charts, inline in the page: over the last hours, time across and a
//! value axis from 0 to a round top, the refuse threshold as a mark, three value ticks and four
//! time ticks, drawn by the crate's line-chart writer. A gap in a line's history (a restart, a
//! skipped interval) starts a new run, not joined up (the spec's GRAPH-4/5). Pure: the lines
//! in, the markup out. No script, no font: the page's stylesheet sizes and styles it.

use std::fmt::Write as _;

use super::fmt::{clock, esc, short};
use crate::ops::line_chart::{body, Axis, Frame, Plot, Scale};

pub(crate) use crate::ops::line_chart::Line;

/// A chart over `[from_ms, to_ms]`; its lines' x is ms since the epoch.
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
    body(&mut s, &plot(c), &c.lines);
    s.push_str("</svg>");
    s
}

/// The axes and marks of `c`: time from `from_ms` to `to_ms`, values from 0 to a round top over
/// the lines and marks.
fn plot(c: &Chart) -> Plot {
    let max = c
        .lines
        .iter()
        .flat_map(|l| l.runs.iter().flatten().map(|(_, v)| *v))
        .chain(c.marks.iter().map(|(v, _)| *v))
        .fold(0.0, f64::max);
    let top = nice_top(max);
    let values: Vec<(f64, String)> = [0.0, top / 2.0, top]
        .into_iter()
        .map(|v| (v, (c.format)(v)))
        .collect();
    let span = c.to_ms.saturating_sub(c.from_ms);
    // Time ticks: four, the first and last at the ends; seconds on a chart under ten minutes.
    let times = (0..4u64)
        .map(|i| {
            let at = c.from_ms + span * i / 3;
            (at as f64, clock(at, span < 600_000))
        })
        .collect();
    Plot {
        frame: Frame {
            width: W,
            height: H,
            left: left_margin(&values),
            right: 8.0,
            top: 10.0,
            bottom: 22.0,
        },
        x: Axis {
            lo: c.from_ms as f64,
            hi: c.from_ms.saturating_add(span.max(1)) as f64,
            scale: Scale::Linear,
            ticks: times,
        },
        y: Axis {
            lo: 0.0,
            hi: top,
            scale: Scale::Linear,
            ticks: values,
        },
        x_marks: Vec::new(),
        y_marks: c.marks.clone(),
        dots: false,
    }
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

/// A value axis label in the chart's own unit, for counts.
pub(crate) fn plain(v: f64) -> String {
    short(v)
}

/// A value axis label for bytes.
pub(crate) fn megabytes(v: f64) -> String {
    format!("{} MB", short(v / 1e6))
}
