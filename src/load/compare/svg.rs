//! The probe's latency over time during the surge, one line per front door, as a small
//! hand-written SVG (log scale: a 4 ms `$lookup` and one that waited seconds on the same chart).
//! Pure: the series in, the document out.

use std::fmt::Write as _;

/// One front door's probe series: (seconds from the start, latency in ms).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub color: String,
    pub points: Vec<(f64, f64)>,
}

/// What the chart shows besides the series.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    /// When the surge ended (s), drawn as a dashed line.
    pub surge_end_s: f64,
    /// A latency drawn as a dotted line (the "fast" threshold), ms.
    pub threshold_ms: f64,
}

const W: f64 = 760.0;
const H: f64 = 380.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 46.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn decade_label(exp: i32) -> String {
    match exp {
        e if e < 0 => format!("{}", 10f64.powi(e)),
        e if e < 3 => format!("{} ms", 10i64.pow(e as u32)),
        e => format!("{} s", 10i64.pow((e - 3) as u32)),
    }
}

/// The chart as an SVG document. Points that are not finite or not above 0 are left out.
pub fn render(chart: &Chart, series: &[Series]) -> String {
    let finite = |&(t, ms): &(f64, f64)| t.is_finite() && ms.is_finite() && ms > 0.0 && t >= 0.0;
    let all = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| finite(p))
    };
    let t_max = all()
        .map(|p| p.0)
        .fold(chart.surge_end_s.max(1.0), f64::max)
        .ceil();
    let ms_max = all()
        .map(|p| p.1)
        .fold(chart.threshold_ms.max(10.0), f64::max);
    let ms_min = all()
        .map(|p| p.1)
        .fold(chart.threshold_ms.min(1.0), f64::min);
    let (lo, hi) = (ms_min.log10().floor() as i32, ms_max.log10().ceil() as i32);
    let hi = hi.max(lo + 1);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |t: f64| LEFT + pw * (t / t_max);
    let y = |ms: f64| TOP + ph * (1.0 - (ms.log10() - lo as f64) / (hi - lo) as f64);

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
        escape(&chart.title)
    );
    for e in lo..=hi {
        let yy = y(10f64.powi(e));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            yy + 4.0,
            decade_label(e)
        );
    }
    let step = if t_max > 40.0 { 10.0 } else { 5.0 };
    let mut t = 0.0;
    while t <= t_max + 1e-9 {
        let xx = x(t);
        let _ = writeln!(
            s,
            r#"<text x="{xx:.1}" y="{:.1}" text-anchor="middle">{t}</text>"#,
            TOP + ph + 16.0
        );
        t += step;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds from the start of the surge</text>"#,
        LEFT + pw / 2.0,
        H - 8.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">$lookup probe latency</text>"#,
        TOP + ph / 2.0
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##
    );
    let se = x(chart.surge_end_s);
    let _ = writeln!(
        s,
        r##"<line x1="{se:.1}" y1="{TOP}" x2="{se:.1}" y2="{:.1}" stroke="#444" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}">surge ends</text>"##,
        TOP + ph,
        se + 4.0,
        TOP + 14.0
    );
    let th = y(chart.threshold_ms);
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{th:.1}" x2="{:.1}" y2="{th:.1}" stroke="#444" stroke-dasharray="2 3"/><text x="{:.1}" y="{:.1}">{} ms</text>"##,
        LEFT + pw,
        LEFT + pw + 4.0,
        th + 4.0,
        chart.threshold_ms
    );
    for (i, ser) in series.iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = ser.points.iter().copied().filter(finite).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let coords: Vec<String> = pts
            .iter()
            .map(|&(t, ms)| format!("{:.1},{:.1}", x(t), y(ms)))
            .collect();
        let color = escape(&ser.color);
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
            coords.join(" ")
        );
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

    fn chart() -> Chart {
        Chart {
            title: "3× surge <probe>".into(),
            surge_end_s: 20.0,
            threshold_ms: 10.0,
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
    fn one_line_per_door_inside_the_frame_on_a_log_scale() {
        let series = vec![
            Series {
                label: "fhircluster".into(),
                color: "#1f77b4".into(),
                points: vec![(0.0, 4.0), (10.0, 80.0), (21.0, 5.0), (25.0, f64::NAN)],
            },
            Series {
                label: "nginx".into(),
                color: "#d62728".into(),
                points: vec![(0.5, 5.0), (10.0, 9000.0), (24.0, 300.0)],
            },
        ];
        let svg = render(&chart(), &series);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("3× surge &lt;probe&gt;"));
        // Decades from 1 ms to 10 s.
        assert!(svg.contains(">1 ms<") && svg.contains(">10 s<"), "{svg}");
        let points = numbers_in("points", &svg);
        assert_eq!(points.len(), 12, "the NaN point is left out");
        for pair in points.chunks(2) {
            assert!((LEFT..=W - RIGHT).contains(&pair[0]), "{pair:?}");
            assert!((TOP..=H - BOTTOM).contains(&pair[1]), "{pair:?}");
        }
        // Higher latency is higher up: 9000 ms is above 5 ms.
        let ys: Vec<f64> = points.chunks(2).map(|p| p[1]).collect();
        assert!(ys[4] < ys[3]);
    }

    #[test]
    fn empty_series_still_make_a_document() {
        let svg = render(
            &chart(),
            &[Series {
                label: "a&b".into(),
                color: "red".into(),
                points: vec![],
            }],
        );
        assert!(svg.contains("a&amp;b"));
        assert!(svg.contains("points=\"\""));
    }
}
