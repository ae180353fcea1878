//! How the status page writes its figures: HTML-escaped text, bytes in MB, durations in the
//! two largest units, counts with thin separators, wall-clock times in UTC. `—` where a figure
//! doesn't apply or isn't known (spec "Status": nothing made up).

use std::fmt::Write as _;

pub(crate) const NONE: &str = "—";

pub(crate) use crate::ops::line_chart::esc;

/// Bytes as MB (10⁶, as the spec's table has them), or GB past 10 000 MB.
pub(crate) fn bytes(b: Option<u64>) -> String {
    match b {
        None => NONE.into(),
        Some(b) if b >= 10_000_000_000 => format!("{:.1} GB", b as f64 / 1e9),
        Some(b) => format!("{:.1} MB", b as f64 / 1e6),
    }
}

/// A duration in its two largest units: `3 d 4 h`, `5 min 2 s`, `12 s`.
pub(crate) fn duration(ms: Option<u64>) -> String {
    let Some(ms) = ms else {
        return NONE.into();
    };
    let s = ms / 1000;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min {sec} s")
    } else if ms >= 1000 {
        format!("{sec} s")
    } else {
        format!("{ms} ms")
    }
}

/// A count with thin spaces between thousands.
pub(crate) fn count(n: Option<u64>) -> String {
    let Some(n) = n else {
        return NONE.into();
    };
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    out
}

/// A short number for an axis: `950`, `1.2k`, `3.4M`.
pub(crate) fn short(v: f64) -> String {
    let a = v.abs();
    let mut out = String::new();
    if a >= 1e9 {
        let _ = write!(out, "{:.1}G", v / 1e9);
    } else if a >= 1e6 {
        let _ = write!(out, "{:.1}M", v / 1e6);
    } else if a >= 1e4 {
        let _ = write!(out, "{:.0}k", v / 1e3);
    } else if a >= 1e3 {
        let _ = write!(out, "{:.1}k", v / 1e3);
    } else if a >= 10.0 || a == 0.0 {
        let _ = write!(out, "{v:.0}");
    } else {
        let _ = write!(out, "{v:.1}");
    }
    out
}

/// The UTC time of day of `ms` since the epoch, `HH:MM`, or `HH:MM:SS` with `seconds`.
pub(crate) fn clock(ms: u64, seconds: bool) -> String {
    let s = ms / 1000;
    let (h, m, sec) = (s / 3600 % 24, s / 60 % 60, s % 60);
    if seconds {
        format!("{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}")
    }
}
