//! The Prometheus text format's pieces: a family's `# HELP`/`# TYPE` header, a histogram's
//! series, and the escaping a label value needs. Every part that writes series for `/metrics`
//! (the front door's counters, this process's figures, the rendering in `ops/metrics.rs`) writes
//! through these, so the format is written once.

use std::fmt::Write;

use super::histogram::Histogram;

/// A histogram's samples alone, with `labels` (`a="x",b="y"`, or empty) on each.
pub(crate) fn histogram_series(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let (open, sep, close) = if labels.is_empty() {
        ("", "", "")
    } else {
        ("{", ",", "}")
    };
    for (b, cumulative) in h.cumulative() {
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
    }
    let count = h.count();
    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
    let _ = writeln!(
        out,
        "{name}_sum{open}{labels}{close} {}\n{name}_count{open}{labels}{close} {count}",
        h.sum_secs()
    );
}

pub(crate) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Label values are escaped as the text format requires.
pub(crate) fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
