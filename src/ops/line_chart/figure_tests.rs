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

fn line(code: &str, points: Vec<(f64, f64)>) -> Line {
    Line {
        code: code.into(),
        color: "red",
        dash: "",
        width: 1.5,
        runs: vec![points],
    }
}

fn probe_figure() -> Figure {
    Figure {
        title: "3× surge <probe>".into(),
        x: AxisSpec {
            label: "seconds".into(),
            scale: Scale::Linear,
            span: vec![0.0],
            ticks: None,
            format: plain,
        },
        y: AxisSpec {
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
    svg.split(&format!(" {attr}=\""))
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .flat_map(|v| v.split([' ', ',']).map(str::to_string).collect::<Vec<_>>())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// Whether (x, y) is inside the plot.
fn inside(x: f64, y: f64) -> bool {
    let f = FRAME;
    (f.left..=f.width - f.right).contains(&x) && (f.top..=f.height - f.bottom).contains(&y)
}

#[test]
fn one_line_per_series_inside_the_frame_on_a_log_scale() {
    let series = vec![
        line(
            "fhircluster",
            vec![(0.0, 4.0), (10.0, 80.0), (21.0, 5.0), (25.0, f64::NAN)],
        ),
        line(
            "nginx",
            vec![(0.5, 5.0), (10.0, 9000.0), (24.0, 300.0), (24.5, 0.0)],
        ),
    ];
    let svg = document(&probe_figure(), &series);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert_eq!(svg.matches(r#"<line class="key""#).count(), 2);
    assert!(svg.contains("3× surge &lt;probe&gt;"));
    // Decades from 1 ms to 10 s; seconds in steps of 5 to 25.
    assert!(svg.contains(">1 ms<") && svg.contains(">10 s<"), "{svg}");
    assert!(svg.contains(">25<") && !svg.contains(">30<"), "{svg}");
    assert!(svg.contains(">surge ends<") && svg.contains(">10 ms<"));
    let points = numbers_in("points", &svg);
    assert_eq!(points.len(), 12, "NaN, and 0 on a log axis, are left out");
    for pair in points.chunks(2) {
        assert!(inside(pair[0], pair[1]), "{pair:?}");
    }
    // Higher is higher up: 9000 ms is above 5 ms.
    let ys: Vec<f64> = points.chunks(2).map(|p| p[1]).collect();
    assert!(ys[4] < ys[3]);
    assert!(!svg.contains("<circle"));
}

#[test]
fn given_ticks_a_linear_axis_from_zero_and_dots() {
    let fig = Figure {
        title: "throughput".into(),
        x: AxisSpec {
            label: "connections".into(),
            scale: Scale::Log,
            span: vec![],
            ticks: Some(vec![(32.0, "32".into()), (4096.0, "4,096".into())]),
            format: plain,
        },
        y: AxisSpec {
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
    let svg = document(
        &fig,
        &[line("a&b", vec![(32.0, 30_000.0), (4096.0, 27_000.0)])],
    );
    assert!(svg.contains(">4,096<") && svg.contains(">32<"));
    // The axis runs a tenth of the span (in log) past the ticks, not to whole decades.
    let xs = numbers_in("cx", &svg);
    assert_eq!(xs.len(), 2);
    let (pw, left) = (FRAME.width - FRAME.left - FRAME.right, FRAME.left);
    assert!((xs[0] - (left + pw / 12.0)).abs() < 0.2, "{xs:?}");
    assert!((xs[1] - (left + pw * 11.0 / 12.0)).abs() < 0.2, "{xs:?}");
    assert!(svg.contains(">0<") && svg.contains(">30000<"), "{svg}");
    assert_eq!(svg.matches("<circle").count(), 2);
    assert!(svg.contains("a&amp;b"));
    let ys = numbers_in("cy", &svg);
    assert!(ys.iter().all(|y| inside(left, *y)), "{ys:?}");
}

#[test]
fn empty_series_still_make_a_document_and_steps_are_round() {
    let svg = document(&probe_figure(), &[line("none", vec![])]);
    assert!(svg.contains(">none<") && svg.trim_end().ends_with("</svg>"));
    assert!(!svg.contains("<polyline") && !svg.contains("<circle"));
    assert_eq!(nice_step(25.0, 6.0), 5.0);
    assert_eq!(nice_step(30_000.0, 6.0), 5_000.0);
    assert_eq!(nice_step(1.0, 6.0), 0.2);
    assert_eq!(nice_step(0.9, 6.0), 0.2);
}
