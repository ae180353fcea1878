//! Line charts as small hand-written SVG documents: one line per series, linear or log axes,
//! dashed and dotted marker lines, a legend on the right. Used for the probe's latency during the
//! surge (log scale: a 4 ms `$lookup` and one that waited seconds on the same chart) and for the
//! curves of how cost grows. Pure: the series in, the document out.

use std::fmt::Write as _;

/// One line: its points as (x, y).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub color: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base 10; points at or below 0 are left out.
    Log,
}

/// One axis.
#[derive(Debug, Clone)]
pub struct Axis {
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

/// A chart: title, axes, marker lines, whether each point gets a dot.
#[derive(Debug, Clone)]
pub struct Plot {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    /// Dashed vertical lines at these x values, labelled.
    pub x_marks: Vec<(f64, String)>,
    /// Dotted horizontal lines at these y values, labelled at the right.
    pub y_marks: Vec<(f64, String)>,
    pub dots: bool,
}

const W: f64 = 760.0;
const H: f64 = 380.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 46.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

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

/// Where an axis runs, and its ticks.
struct Range {
    lo: f64,
    hi: f64,
    scale: Scale,
    ticks: Vec<(f64, String)>,
}

impl Range {
    fn of(axis: &Axis, data: &[f64]) -> Range {
        let usable = |v: &f64| v.is_finite() && (axis.scale == Scale::Linear || *v > 0.0);
        let values: Vec<f64> = data
            .iter()
            .chain(&axis.span)
            .chain(axis.ticks.iter().flatten().map(|(v, _)| v))
            .copied()
            .filter(usable)
            .collect();
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if let (Some(ticks), true) = (&axis.ticks, min.is_finite()) {
            // Given ticks (the values measured at): the axis runs a little past them, not to
            // round numbers, so the points use the width.
            let (lo, hi) = match axis.scale {
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
            return Range {
                lo,
                hi,
                scale: axis.scale,
                ticks: ticks.clone(),
            };
        }
        match axis.scale {
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
                    .map(|v| (v, (axis.format)(v)))
                    .collect();
                Range {
                    lo,
                    hi,
                    scale: Scale::Linear,
                    ticks: axis.ticks.clone().unwrap_or(auto),
                }
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
                    .map(|e| (10f64.powi(e), (axis.format)(10f64.powi(e))))
                    .collect();
                Range {
                    lo: 10f64.powi(lo),
                    hi: 10f64.powi(hi),
                    scale: Scale::Log,
                    ticks: axis.ticks.clone().unwrap_or(auto),
                }
            }
        }
    }

    /// Where `v` falls, from 0 (at `lo`) to 1 (at `hi`).
    fn frac(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10()),
        }
    }

    fn holds(&self, v: f64) -> bool {
        v.is_finite() && (self.scale == Scale::Linear || v > 0.0)
    }
}

/// The chart as an SVG document. Points an axis cannot show (not finite, or not above 0 on a
/// log axis) are left out.
pub fn render(plot: &Plot, series: &[Series]) -> String {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let xs: Vec<f64> = points()
        .map(|p| p.0)
        .chain(plot.x_marks.iter().map(|m| m.0))
        .collect();
    let ys: Vec<f64> = points()
        .map(|p| p.1)
        .chain(plot.y_marks.iter().map(|m| m.0))
        .collect();
    let (rx, ry) = (Range::of(&plot.x, &xs), Range::of(&plot.y, &ys));
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |v: f64| LEFT + pw * rx.frac(v);
    let y = |v: f64| TOP + ph * (1.0 - ry.frac(v));

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="20" font-size="14" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        escape(&plot.title)
    );
    for (v, label) in ry.ticks.iter().filter(|t| ry.holds(t.0)) {
        let yy = y(*v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            yy + 4.0,
            escape(label)
        );
    }
    for (v, label) in rx.ticks.iter().filter(|t| rx.holds(t.0)) {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x(*v),
            TOP + ph + 16.0,
            escape(label)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        H - 8.0,
        escape(&plot.x.label)
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + ph / 2.0,
        escape(&plot.y.label)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##
    );
    for (v, label) in plot.x_marks.iter().filter(|m| rx.holds(m.0)) {
        let xx = x(*v);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{:.1}" stroke="#444" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}">{}</text>"##,
            TOP + ph,
            xx + 4.0,
            TOP + 14.0,
            escape(label)
        );
    }
    for (v, label) in plot.y_marks.iter().filter(|m| ry.holds(m.0)) {
        let yy = y(*v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#444" stroke-dasharray="2 3"/><text x="{:.1}" y="{:.1}">{}</text>"##,
            LEFT + pw,
            LEFT + pw + 4.0,
            yy + 4.0,
            escape(label)
        );
    }
    for (i, ser) in series.iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = ser
            .points
            .iter()
            .copied()
            .filter(|&(a, b)| rx.holds(a) && ry.holds(b))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let coords: Vec<String> = pts
            .iter()
            .map(|&(a, b)| format!("{:.1},{:.1}", x(a), y(b)))
            .collect();
        let color = escape(&ser.color);
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
            coords.join(" ")
        );
        if plot.dots {
            for &(a, b) in &pts {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                    x(a),
                    y(b)
                );
            }
        }
        let ly = TOP + 20.0 + 20.0 * i as f64;
        let lx = LEFT + pw + 24.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            escape(&ser.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> String {
        if v >= 1000.0 {
            format!("{} s", v / 1000.0)
        } else {
            format!("{v} ms")
        }
    }

    fn plain(v: f64) -> String {
        format!("{v}")
    }

    fn probe_plot() -> Plot {
        Plot {
            title: "3× surge <probe>".into(),
            x: Axis {
                label: "seconds".into(),
                scale: Scale::Linear,
                span: vec![0.0],
                ticks: None,
                format: plain,
            },
            y: Axis {
                label: "latency".into(),
                scale: Scale::Log,
                span: vec![1.0],
                ticks: None,
                format: ms,
            },
            x_marks: vec![(20.0, "surge ends".into())],
            y_marks: vec![(10.0, "10 ms".into())],
            dots: false,
        }
    }

    fn numbers_in(attr: &str, svg: &str) -> Vec<f64> {
        svg.split(&format!("{attr}=\""))
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .flat_map(|v| v.split([' ', ',']).map(str::to_string).collect::<Vec<_>>())
            .filter_map(|n| n.parse().ok())
            .collect()
    }

    #[test]
    fn one_line_per_series_inside_the_frame_on_a_log_scale() {
        let series = vec![
            Series {
                label: "fhircluster".into(),
                color: "#1f77b4".into(),
                points: vec![(0.0, 4.0), (10.0, 80.0), (21.0, 5.0), (25.0, f64::NAN)],
            },
            Series {
                label: "nginx".into(),
                color: "#d62728".into(),
                points: vec![(0.5, 5.0), (10.0, 9000.0), (24.0, 300.0), (24.5, 0.0)],
            },
        ];
        let svg = render(&probe_plot(), &series);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("3× surge &lt;probe&gt;"));
        // Decades from 1 ms to 10 s; seconds in steps of 5 to 25.
        assert!(svg.contains(">1 ms<") && svg.contains(">10 s<"), "{svg}");
        assert!(svg.contains(">25<") && !svg.contains(">30<"), "{svg}");
        assert!(svg.contains(">surge ends<") && svg.contains(">10 ms<"));
        let points = numbers_in("points", &svg);
        assert_eq!(points.len(), 12, "NaN, and 0 on a log axis, are left out");
        for pair in points.chunks(2) {
            assert!((LEFT..=W - RIGHT).contains(&pair[0]), "{pair:?}");
            assert!((TOP..=H - BOTTOM).contains(&pair[1]), "{pair:?}");
        }
        // Higher is higher up: 9000 ms is above 5 ms.
        let ys: Vec<f64> = points.chunks(2).map(|p| p[1]).collect();
        assert!(ys[4] < ys[3]);
        assert!(!svg.contains("<circle"));
    }

    #[test]
    fn given_ticks_a_linear_axis_from_zero_and_dots() {
        let plot = Plot {
            title: "throughput".into(),
            x: Axis {
                label: "connections".into(),
                scale: Scale::Log,
                span: vec![],
                ticks: Some(vec![(32.0, "32".into()), (4096.0, "4,096".into())]),
                format: plain,
            },
            y: Axis {
                label: "req/s".into(),
                scale: Scale::Linear,
                span: vec![0.0],
                ticks: None,
                format: plain,
            },
            x_marks: vec![],
            y_marks: vec![],
            dots: true,
        };
        let svg = render(
            &plot,
            &[Series {
                label: "a&b".into(),
                color: "red".into(),
                points: vec![(32.0, 30_000.0), (4096.0, 27_000.0)],
            }],
        );
        assert!(svg.contains(">4,096<") && svg.contains(">32<"));
        // The axis runs a tenth of the span (in log) past the ticks, not to whole decades.
        let xs = numbers_in("cx", &svg);
        assert_eq!(xs.len(), 2);
        let (pw, left) = (W - LEFT - RIGHT, LEFT);
        assert!((xs[0] - (left + pw / 12.0)).abs() < 0.2, "{xs:?}");
        assert!((xs[1] - (left + pw * 11.0 / 12.0)).abs() < 0.2, "{xs:?}");
        assert!(svg.contains(">0<") && svg.contains(">30000<"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("a&amp;b"));
        let ys = numbers_in("cy", &svg);
        assert!(ys.iter().all(|y| (TOP..=H - BOTTOM).contains(y)), "{ys:?}");
    }

    #[test]
    fn empty_series_still_make_a_document_and_steps_are_round() {
        let svg = render(
            &probe_plot(),
            &[Series {
                label: "none".into(),
                color: "red".into(),
                points: vec![],
            }],
        );
        assert!(svg.contains("points=\"\""));
        assert_eq!(nice_step(25.0, 6.0), 5.0);
        assert_eq!(nice_step(30_000.0, 6.0), 5_000.0);
        assert_eq!(nice_step(1.0, 6.0), 0.2);
        assert_eq!(nice_step(0.9, 6.0), 0.2);
    }
}
