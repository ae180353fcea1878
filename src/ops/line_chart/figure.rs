//! A line chart as a standalone SVG document: its title, axes fitted to the data (linear, or log
//! for a 4 ms `$lookup` and one that waited seconds on the same chart), the axes' names and a
//! legend on the right. The load tool's comparison charts.

use std::fmt::Write as _;

use super::{body, esc, Axis, Frame, Line, Plot, Scale};

/// An axis asked for: its name and scale, and how its range is found from the data.
#[derive(Debug, Clone)]
pub struct AxisSpec {
    pub label: String,
    pub scale: Scale,
    /// Values the axis must reach, besides the data (0 for a linear axis from 0).
    pub span: Vec<f64>,
    /// Ticks at these values with these labels, the axis running a little past them; `None`:
    /// round steps (linear) or decades (log), the axis from one to the other.
    pub ticks: Option<Vec<(f64, String)>>,
    /// A tick's label, for ticks not given.
    pub format: fn(f64) -> String,
}

/// A standalone chart: title, axes, marks, whether every point gets a dot.
#[derive(Debug, Clone)]
pub struct Figure {
    pub title: String,
    pub x: AxisSpec,
    pub y: AxisSpec,
    /// Dashed vertical lines at these x values, labelled.
    pub x_marks: Vec<(f64, String)>,
    /// Dashed horizontal lines at these y values, labelled.
    pub y_marks: Vec<(f64, String)>,
    pub dots: bool,
}

const FRAME: Frame = Frame {
    width: 760.0,
    height: 380.0,
    left: 72.0,
    right: 170.0,
    top: 36.0,
    bottom: 46.0,
};

/// A round step for about `n` intervals over `range`: 1, 2, 2.5 or 5 times a power of ten.
fn nice_step(range: f64, n: f64) -> f64 {
    let raw = (range / n).max(f64::MIN_POSITIVE);
    let pow = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * pow)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * pow)
}

/// The axis `spec` asks for over `data`.
pub fn fit(spec: &AxisSpec, data: &[f64]) -> Axis {
    let usable = |v: &f64| v.is_finite() && (spec.scale == Scale::Linear || *v > 0.0);
    let values: Vec<f64> = data
        .iter()
        .chain(&spec.span)
        .chain(spec.ticks.iter().flatten().map(|(v, _)| v))
        .copied()
        .filter(usable)
        .collect();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let axis = |lo, hi, ticks| Axis {
        lo,
        hi,
        scale: spec.scale,
        ticks,
    };
    if let (Some(ticks), true) = (&spec.ticks, min.is_finite()) {
        // Given ticks (the values measured at): the axis runs a little past them, not to round
        // numbers, so the points use the width.
        let (lo, hi) = match spec.scale {
            Scale::Linear => {
                let pad = if max > min { (max - min) / 10.0 } else { 0.5 };
                (min - pad, max + pad)
            }
            Scale::Log => {
                let k = if max > min {
                    (max / min).powf(0.1)
                } else {
                    2.0
                };
                (min / k, max * k)
            }
        };
        return axis(lo, hi, ticks.clone());
    }
    match spec.scale {
        Scale::Linear => {
            let (min, max) = if min.is_finite() {
                (min, max)
            } else {
                (0.0, 1.0)
            };
            let step = nice_step((max - min).max(f64::MIN_POSITIVE), 6.0);
            let lo = (min / step).floor() * step;
            let hi = ((max / step).ceil() * step).max(lo + step);
            let auto = (0..)
                .map(|i| lo + step * i as f64)
                .take_while(|v| *v <= hi + step * 1e-9)
                .map(|v| (v, (spec.format)(v)))
                .collect();
            axis(lo, hi, spec.ticks.clone().unwrap_or(auto))
        }
        Scale::Log => {
            let (min, max) = if min.is_finite() {
                (min, max)
            } else {
                (1.0, 10.0)
            };
            let lo = min.log10().floor() as i32;
            let hi = (max.log10().ceil() as i32).max(lo + 1);
            let auto = (lo..=hi)
                .map(|e| (10f64.powi(e), (spec.format)(10f64.powi(e))))
                .collect();
            axis(
                10f64.powi(lo),
                10f64.powi(hi),
                spec.ticks.clone().unwrap_or(auto),
            )
        }
    }
}

/// The chart as an SVG document, a line per entry of `lines` and a legend entry for each.
pub fn document(fig: &Figure, lines: &[Line]) -> String {
    let points = || lines.iter().flat_map(|l| l.runs.iter().flatten());
    let xs: Vec<f64> = points()
        .map(|p| p.0)
        .chain(fig.x_marks.iter().map(|m| m.0))
        .collect();
    let ys: Vec<f64> = points()
        .map(|p| p.1)
        .chain(fig.y_marks.iter().map(|m| m.0))
        .collect();
    let plot = Plot {
        frame: FRAME,
        x: fit(&fig.x, &xs),
        y: fit(&fig.y, &ys),
        x_marks: fig.x_marks.clone(),
        y_marks: fig.y_marks.clone(),
        dots: fig.dots,
    };
    let Frame {
        width: w,
        height: h,
        left,
        top,
        ..
    } = FRAME;
    let (pw, ph) = (w - left - FRAME.right, h - top - FRAME.bottom);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="{w}" height="{h}" fill="white"/>"#
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="20" font-size="14" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        esc(&fig.title)
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        h - 8.0,
        esc(&fig.x.label),
        top + ph / 2.0,
        esc(&fig.y.label)
    );
    let _ = write!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##
    );
    body(&mut s, &plot, lines);
    for (i, l) in lines.iter().enumerate() {
        let (lx, ly) = (left + pw + 24.0, top + 20.0 + 20.0 * i as f64);
        let _ = write!(
            s,
            r#"<line class="key" x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 20.0,
            l.color,
            lx + 26.0,
            ly + 4.0,
            esc(&l.code)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
#[path = "figure_tests.rs"]
mod tests;
