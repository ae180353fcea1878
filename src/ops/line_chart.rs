//! Line charts as SVG, drawn on the server: the status page's graphs (inline in the page, styled
//! by its stylesheet) and the load tool's comparison charts (standalone documents, [`figure`]).
//! One writer for both: axes already placed in, the markup out; a polyline per unbroken run of a
//! line (a gap in a history is not joined up), a dot for a run of one point, dashed marks, a
//! point per pixel column at most. Each element carries a class for a stylesheet and the
//! presentation attributes a standalone document needs (a stylesheet's rules win over them).
//! Pure: no clock, no I/O.

pub mod figure;

use std::fmt::Write as _;

/// How an axis maps its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base 10; values at or below 0 are not drawn.
    Log,
}

/// An axis placed: the values at its two ends and its ticks (value, label).
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub scale: Scale,
    pub ticks: Vec<(f64, String)>,
}

impl Axis {
    /// Where `v` falls, from 0 (at `lo`) to 1 (at `hi`), held inside the axis.
    fn frac(&self, v: f64) -> f64 {
        let f = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10()),
        };
        if f.is_finite() {
            f.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// Whether the axis can show `v` (finite, and above 0 on a log axis).
    pub fn holds(&self, v: f64) -> bool {
        v.is_finite() && (self.scale == Scale::Linear || v > 0.0)
    }
}

/// One line of a chart: a process, a Total, a front door.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// What the line is (`tx1`, `total`, `nginx`): the polylines' `data-code`, the legend's text.
    pub code: String,
    pub color: &'static str,
    /// `stroke-dasharray`, empty for solid: the pattern tells lines apart without colour.
    pub dash: &'static str,
    pub width: f64,
    /// Unbroken runs of (x, y), x ascending.
    pub runs: Vec<Vec<(f64, f64)>>,
}

/// The drawing's size and the plot's margins inside it, in SVG units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

/// What a chart's body draws.
#[derive(Debug, Clone)]
pub struct Plot {
    pub frame: Frame,
    pub x: Axis,
    pub y: Axis,
    /// Dashed vertical lines at these x values, labelled at the top.
    pub x_marks: Vec<(f64, String)>,
    /// Dashed horizontal lines at these y values, labelled at the right end.
    pub y_marks: Vec<(f64, String)>,
    /// A dot on every point, not only on a run of one.
    pub dots: bool,
}

/// Text safe in SVG or HTML content and in a quoted attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The chart's grid, ticks, marks and lines, appended to `s` (inside an `<svg>` the caller
/// opens). A point the axes cannot show is left out.
pub fn body(s: &mut String, p: &Plot, lines: &[Line]) {
    let f = p.frame;
    let (x0, x1, y0, y1) = (f.left, f.width - f.right, f.height - f.bottom, f.top);
    let px = |v: f64| x0 + p.x.frac(v) * (x1 - x0);
    let py = |v: f64| y0 - p.y.frac(v) * (y0 - y1);
    for (v, label) in p.y.ticks.iter().filter(|t| p.y.holds(t.0)) {
        let y = py(*v);
        let _ = write!(
            s,
            r##"<line class="grid" x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#ddd"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 4.0,
            y + 4.0,
            esc(label)
        );
    }
    for (v, label) in p.x.ticks.iter().filter(|t| p.x.holds(t.0)) {
        // A tick at an end is written inward, so its label stays inside the drawing.
        let anchor = match p.x.frac(*v) {
            a if a <= 0.0 => "start",
            a if a >= 1.0 => "end",
            _ => "middle",
        };
        let _ = write!(
            s,
            r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            px(*v),
            y0 + 16.0,
            esc(label)
        );
    }
    for (v, label) in p.x_marks.iter().filter(|m| p.x.holds(m.0)) {
        let x = px(*v);
        let _ = write!(
            s,
            r##"<line class="mark" x1="{x:.1}" y1="{y1}" x2="{x:.1}" y2="{y0}" stroke="#444" stroke-dasharray="6 4"/><text class="mark-label" x="{:.1}" y="{:.1}">{}</text>"##,
            x + 4.0,
            y1 + 14.0,
            esc(label)
        );
    }
    for (v, label) in p.y_marks.iter().filter(|m| p.y.holds(m.0)) {
        let y = py(*v);
        let _ = write!(
            s,
            r##"<line class="mark" x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#444" stroke-dasharray="2 3"/><text class="mark-label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            x1 - 2.0,
            y - 3.0,
            esc(label)
        );
    }
    for l in lines {
        let code = esc(&l.code);
        let dash = if l.dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{}""#, l.dash)
        };
        for run in &l.runs {
            let pts: Vec<(f64, f64)> = run
                .iter()
                .filter(|(x, y)| p.x.holds(*x) && p.y.holds(*y))
                .map(|(x, y)| (px(*x), py(*y)))
                .collect();
            if pts.len() >= 2 {
                let mut points = String::new();
                for (x, y) in columns(pts.iter().copied()) {
                    let _ = write!(points, "{x:.1},{y:.1} ");
                }
                let _ = write!(
                    s,
                    r#"<polyline class="line" data-code="{code}" fill="none" stroke="{}" stroke-width="{}"{dash} points="{}"/>"#,
                    l.color,
                    l.width,
                    points.trim_end()
                );
            }
            if pts.len() == 1 || p.dots {
                for (x, y) in &pts {
                    let _ = write!(
                        s,
                        r#"<circle class="dot" data-code="{code}" cx="{x:.1}" cy="{y:.1}" r="2.5" fill="{}"/>"#,
                        l.color
                    );
                }
            }
        }
    }
}

/// One point per pixel column at most: 1,440 samples of a day on a 340-pixel chart would make a
/// status page many times the size for nothing seen, refreshed every interval. Within a column
/// the highest point (the least `y`) is kept, so a spike never disappears.
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
