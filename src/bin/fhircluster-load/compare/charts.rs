//! The comparison's charts and curve tables, made from its figures: the probe's latency during
//! the surge, fhircluster's memory against connections held open, and throughput, p99 and CPU
//! against connections and against threads. Each chart from one run (the last round's, or the
//! curve's own). Pure: figures in, SVG and Markdown out.

use super::curves::CurvePoint;
use super::figures::{Round, SURGE_DOORS};
use super::table::{group, Door};
use fhircluster::ops::line_chart::figure::{document, AxisSpec, Figure};
use fhircluster::ops::line_chart::{Line, Scale};

/// Where each chart goes, under the chart directory.
pub const PROBE_SVG: &str = "surge-probe.svg";
pub const MEMORY_SVG: &str = "memory.svg";
pub const CONNECTIONS_THROUGHPUT_SVG: &str = "connections-throughput.svg";
pub const CONNECTIONS_P99_SVG: &str = "connections-p99.svg";
pub const THREADS_SVG: &str = "proxy-threads.svg";

fn color(d: Door) -> &'static str {
    match d {
        Door::Fhircluster => "#1f77b4",
        Door::Nginx => "#2ca02c",
        Door::Haproxy => "#d62728",
        Door::Direct => "#7f7f7f",
    }
}

fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{} s", group(v / 1000.0, 0))
    } else if v >= 1.0 {
        format!("{} ms", group(v, 0))
    } else {
        format!("{v} ms")
    }
}

/// A line of the points of one door or measure, left to right.
fn series(label: &str, color: &'static str, mut points: Vec<(f64, f64)>) -> Line {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    Line {
        code: label.to_string(),
        color,
        dash: "",
        width: 1.5,
        runs: vec![points],
    }
}

fn whole(v: f64) -> String {
    group(v, 0)
}

fn axis(label: &str, scale: Scale, span: &[f64], format: fn(f64) -> String) -> AxisSpec {
    AxisSpec {
        label: label.to_string(),
        scale,
        span: span.to_vec(),
        ticks: None,
        format,
    }
}

/// The probe's latency through each door during and after the surge, from the last round
/// that surged.
pub fn probe(rounds: &[Round], title: &str, surge_end_s: f64) -> Option<String> {
    let last = rounds
        .iter()
        .rev()
        .find(|r| r.surge.iter().any(Option::is_some))?;
    let series: Vec<Line> = SURGE_DOORS
        .iter()
        .zip(&last.surge)
        .filter_map(|(&door, f)| {
            let points = f.as_ref()?.series.iter();
            Some(series(
                door.name(),
                color(door),
                points.filter_map(|&(t, ms)| Some((t, ms?))).collect(),
            ))
        })
        .collect();
    let plot = Figure {
        title: title.to_string(),
        x: axis(
            "seconds from the start of the surge",
            Scale::Linear,
            &[0.0],
            whole,
        ),
        y: axis("$lookup probe latency", Scale::Log, &[1.0], ms),
        x_marks: vec![(surge_end_s, "surge ends".into())],
        y_marks: vec![(10.0, "10 ms".into())],
        dots: false,
    };
    Some(document(&plot, &series))
}

/// fhircluster's RSS against idle keep-alive clients and against queued requests, from the
/// last round that measured either.
pub fn memory(rounds: &[Round]) -> Option<String> {
    let last = rounds
        .iter()
        .rev()
        .find(|r| !r.idle_clients.is_empty() || !r.waiting.is_empty())?;
    let line = |label: &str, color: &'static str, points: &[super::memory::MemoryPoint]| {
        let rss = points.iter();
        series(
            label,
            color,
            rss.filter_map(|p| Some((p.count as f64, p.rss_mb?)))
                .collect(),
        )
    };
    let plot = Figure {
        title: "fhircluster's resident memory against connections held open".into(),
        x: axis("connections", Scale::Linear, &[0.0], whole),
        y: axis("RSS (MB)", Scale::Linear, &[0.0], whole),
        x_marks: vec![],
        y_marks: vec![],
        dots: true,
    };
    Some(document(
        &plot,
        &[
            line("idle keep-alive", "#1f77b4", &last.idle_clients),
            line("queued requests", "#ff7f0e", &last.waiting),
        ],
    ))
}

fn per_door(points: &[CurvePoint], f: fn(&CurvePoint) -> Option<f64>) -> Vec<Line> {
    Door::ALL
        .iter()
        .filter(|&&d| points.iter().any(|p| p.door == d))
        .map(|&d| {
            let of_door = points.iter().filter(|p| p.door == d);
            series(
                d.name(),
                color(d),
                of_door.filter_map(|p| Some((p.x as f64, f(p)?))).collect(),
            )
        })
        .collect()
}

fn x_ticks(points: &[CurvePoint]) -> Vec<(f64, String)> {
    let mut xs: Vec<u32> = points.iter().map(|p| p.x).collect();
    xs.sort_unstable();
    xs.dedup();
    xs.into_iter()
        .map(|x| (x as f64, group(x as f64, 0)))
        .collect()
}

fn throughput(p: &CurvePoint) -> Option<f64> {
    Some(p.measured.as_ref()?.wrk.ok_per_second())
}

/// Throughput, and p99, against connections (log scale: 32 to 4,096).
pub fn connections(points: &[CurvePoint], wrk_threads: u32) -> Option<(String, String)> {
    if points.is_empty() {
        return None;
    }
    let x = AxisSpec {
        ticks: Some(x_ticks(points)),
        ..axis("wrk connections", Scale::Log, &[], whole)
    };
    let title =
        |what: &str| format!("{what} against connections (fast upstream, wrk -t{wrk_threads})");
    let rps = Figure {
        title: title("Throughput"),
        x: x.clone(),
        y: axis("2xx responses a second", Scale::Linear, &[0.0], whole),
        x_marks: vec![],
        y_marks: vec![],
        dots: true,
    };
    let p99 = Figure {
        title: title("p99 latency"),
        x,
        y: axis("p99 latency", Scale::Log, &[], ms),
        x_marks: vec![],
        y_marks: vec![],
        dots: true,
    };
    Some((
        document(&rps, &per_door(points, throughput)),
        document(
            &p99,
            &per_door(points, |p| Some(p.measured.as_ref()?.wrk.p99_ms)),
        ),
    ))
}

/// Throughput against each door's threads.
pub fn threads(points: &[CurvePoint], connections: u32, pinned: &str) -> Option<String> {
    if points.is_empty() {
        return None;
    }
    let plot = Figure {
        title: format!(
            "Throughput against the front door's threads (wrk -t1 -c{connections}, {pinned})"
        ),
        x: AxisSpec {
            ticks: Some(x_ticks(points)),
            ..axis(
                "threads (proxyThreads, worker_processes, nbthread)",
                Scale::Linear,
                &[0.0],
                whole,
            )
        },
        y: axis("2xx responses a second", Scale::Linear, &[0.0], whole),
        x_marks: vec![],
        y_marks: vec![],
        dots: true,
    };
    Some(document(&plot, &per_door(points, throughput)))
}

/// A curve as a table: a line per x, a column per door, each cell "2xx/s · p99 ms · CPU µs".
pub fn curve_table(points: &[CurvePoint], x_name: &str) -> String {
    let doors: Vec<Door> = Door::ALL
        .iter()
        .copied()
        .filter(|&d| points.iter().any(|p| p.door == d))
        .collect();
    let mut out = format!("| {x_name} |");
    for d in &doors {
        out.push_str(&format!(" {} |", d.name()));
    }
    out.push_str(&format!("\n|--:|{}\n", "--:|".repeat(doors.len())));
    for (x, _) in x_ticks(points) {
        out.push_str(&format!("| {} |", group(x, 0)));
        for &d in &doors {
            let cell = points
                .iter()
                .find(|p| p.door == d && f64::from(p.x) == x)
                .and_then(|p| p.measured.as_ref())
                .map_or_else(
                    || "–".to_string(),
                    |m| {
                        let cpu = if d == Door::Direct {
                            m.upstream_cpu_us_per_request
                        } else {
                            m.cpu_us_per_request
                        };
                        format!(
                            "{} · {} ms · {} µs",
                            group(m.wrk.ok_per_second(), 0),
                            group(m.wrk.p99_ms, 2),
                            cpu.map_or_else(|| "–".to_string(), |c| group(c, 1))
                        )
                    },
                );
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::measure::sample;
    use crate::compare::memory::MemoryPoint;

    fn at(door: Door, x: u32, rps: f64, p99: f64) -> CurvePoint {
        let cpu = (door != Door::Direct).then_some(30.0);
        CurvePoint {
            door,
            x,
            measured: Some(sample(rps, p99, cpu, 9.5)),
        }
    }

    fn curve() -> Vec<CurvePoint> {
        let mut v = Vec::new();
        for (i, c) in [32, 256, 1024, 4096].into_iter().enumerate() {
            let k = i as f64;
            v.push(at(
                Door::Fhircluster,
                c,
                30_000.0 - 1000.0 * k,
                1.0 + 10.0 * k,
            ));
            v.push(at(Door::Direct, c, 60_000.0, 0.5 + k));
        }
        v.push(CurvePoint {
            door: Door::Nginx,
            x: 32,
            measured: None,
        });
        v
    }

    #[test]
    fn connection_charts_have_a_line_per_door_and_the_counts_as_ticks() {
        let Some((rps, p99)) = connections(&curve(), 2) else {
            panic!("no charts")
        };
        for svg in [&rps, &p99] {
            assert_eq!(
                svg.matches(r#"<line class="key""#).count(),
                3,
                "fhircluster, nginx, direct"
            );
            assert_eq!(svg.matches("<polyline").count(), 2, "nginx has no point");
            assert!(svg.contains(">4,096<") && svg.contains(">32<"));
            assert_eq!(
                svg.matches("<circle").count(),
                8,
                "nginx's run failed: no point"
            );
        }
        assert!(rps.contains("Throughput against connections (fast upstream, wrk -t2)"));
        assert!(p99.contains(">10 ms<"), "{p99}");
        assert_eq!(connections(&[], 2), None);
    }

    #[test]
    fn a_curve_table_has_a_line_per_count() {
        let t = curve_table(&curve(), "connections");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6, "{t}");
        assert_eq!(lines[0], "| connections | fhircluster | nginx | direct |");
        assert_eq!(
            lines[2],
            "| 32 | 30,000 · 1.00 ms · 30.0 µs | – | 60,000 · 0.50 ms · 9.5 µs |"
        );
        assert!(lines[5].starts_with("| 4,096 | 27,000 · 31.00 ms"), "{t}");
    }

    #[test]
    fn the_memory_chart_comes_from_the_last_round_that_measured() {
        let point = |count, mb| MemoryPoint {
            count,
            rss_mb: Some(mb),
            answered: None,
        };
        let measured = Round {
            idle_clients: vec![point(1000, 12.0), point(20_000, 80.0)],
            waiting: vec![point(1000, 9.0)],
            ..Round::default()
        };
        let svg = memory(&[measured, Round::default()]).unwrap_or_default();
        assert_eq!(svg.matches(r#"<line class="key""#).count(), 2);
        assert_eq!(svg.matches("<polyline").count(), 1, "one point is a dot");
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains(">idle keep-alive<") && svg.contains(">queued requests<"));
        assert_eq!(memory(&[Round::default()]), None);
        assert_eq!(probe(&[Round::default()], "t", 20.0), None);
        let t = threads(&curve(), 256, "wrk on CPU 1").unwrap_or_default();
        assert!(t.contains("wrk -t1 -c256, wrk on CPU 1"));
    }
}
