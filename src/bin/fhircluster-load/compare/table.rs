//! The comparison's table: one row per measure, a column per front door (medians over the
//! rounds), the ratios of fhircluster's figure to each other door's, and the targets each row is
//! held to, checked. Pure: figures in, Markdown out.

use serde::Serialize;

/// The front doors, in the table's column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Door {
    Fhircluster,
    Nginx,
    Haproxy,
    Direct,
}

impl Door {
    pub const ALL: [Door; 4] = [Door::Fhircluster, Door::Nginx, Door::Haproxy, Door::Direct];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Door::Fhircluster => "fhircluster",
            Door::Nginx => "nginx",
            Door::Haproxy => "HAProxy",
            Door::Direct => "direct",
        }
    }
}

/// What fhircluster's figure in a row is held to.
// The names read as the rule ("at least 0.6 times direct") and are what the report's JSON says.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Target {
    /// At least `k` times the other door's figure.
    AtLeastTimes(Door, f64),
    /// At most `k` times the other door's figure.
    AtMostTimes(Door, f64),
    AtLeast(f64),
    AtMost(f64),
}

impl Target {
    /// Whether `values` (indexed by `Door`) meet it; `None` when a figure it needs is missing.
    pub fn met(&self, values: &[Option<f64>; 4]) -> Option<bool> {
        let fc = values[Door::Fhircluster.index()]?;
        Some(match *self {
            Target::AtLeastTimes(d, k) => fc >= k * values[d.index()]?,
            Target::AtMostTimes(d, k) => fc <= k * values[d.index()]?,
            Target::AtLeast(v) => fc >= v,
            Target::AtMost(v) => fc <= v,
        })
    }

    pub fn text(&self, unit: &str) -> String {
        let times = |k: f64| {
            if k == 1.0 {
                String::new()
            } else {
                format!("{k}× ")
            }
        };
        match *self {
            Target::AtLeastTimes(d, k) => format!("≥ {}{}", times(k), d.name()),
            Target::AtMostTimes(d, k) => format!("≤ {}{}", times(k), d.name()),
            Target::AtLeast(v) => format!("≥ {}{}", group(v, 0), unit_suffix(unit)),
            Target::AtMost(v) => format!("≤ {}{}", group(v, decimals_of(v)), unit_suffix(unit)),
        }
    }
}

fn unit_suffix(unit: &str) -> String {
    if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    }
}

fn decimals_of(v: f64) -> usize {
    if v.fract() == 0.0 {
        0
    } else {
        1
    }
}

/// One measure across the doors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub label: String,
    pub unit: String,
    /// Decimals shown.
    pub decimals: usize,
    pub values: [Option<f64>; 4],
    pub targets: Vec<Target>,
}

impl Row {
    pub fn new(label: &str, unit: &str, decimals: usize) -> Self {
        Row {
            label: label.to_string(),
            unit: unit.to_string(),
            decimals,
            values: [None; 4],
            targets: Vec::new(),
        }
    }

    pub fn set(mut self, door: Door, value: Option<f64>) -> Self {
        self.values[door.index()] = value;
        self
    }

    pub fn target(mut self, t: Target) -> Self {
        self.targets.push(t);
        self
    }

    /// fhircluster's figure over `door`'s.
    pub fn ratio(&self, door: Door) -> Option<f64> {
        let fc = self.values[Door::Fhircluster.index()]?;
        let other = self.values[door.index()]?;
        (other != 0.0 && fc.is_finite() && other.is_finite()).then(|| fc / other)
    }

    /// "met", "MISSED", or "" for a row without targets; "?" when a figure is missing.
    pub fn verdict(&self) -> &'static str {
        if self.targets.is_empty() {
            return "";
        }
        let results: Vec<Option<bool>> = self.targets.iter().map(|t| t.met(&self.values)).collect();
        if results.contains(&Some(false)) {
            "MISSED"
        } else if results.iter().all(|r| *r == Some(true)) {
            "met"
        } else {
            "?"
        }
    }
}

/// The median of the finite-or-infinite figures (NaN dropped); the mean of the middle two for an
/// even count.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// A number with thousands separators and `decimals` decimals; infinity as "never".
pub fn group(v: f64, decimals: usize) -> String {
    if v.is_infinite() {
        return "never".to_string();
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = s
        .split_once('.')
        .map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    if v < 0.0 && s.chars().any(|c| c != '0' && c != '.') {
        out.insert(0, '-');
    }
    out
}

/// The table as Markdown.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| measure | fhircluster | nginx | HAProxy | direct | fhircluster ÷ nginx | ÷ HAProxy | ÷ direct | target | |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|---|---|\n",
    );
    for r in rows {
        let cell = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| group(v, r.decimals));
        let ratio = |d: Door| {
            r.ratio(d)
                .map_or_else(|| "–".to_string(), |x| format!("{x:.2}×"))
        };
        let label = if r.unit.is_empty() {
            r.label.clone()
        } else {
            format!("{} ({})", r.label, r.unit)
        };
        let targets: Vec<String> = r.targets.iter().map(|t| t.text(&r.unit)).collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            label,
            cell(r.values[0]),
            cell(r.values[1]),
            cell(r.values[2]),
            cell(r.values[3]),
            ratio(Door::Nginx),
            ratio(Door::Haproxy),
            ratio(Door::Direct),
            targets.join(", "),
            r.verdict()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_even_and_infinite_rounds() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(
            median(&[f64::INFINITY, 1.0, f64::INFINITY]),
            Some(f64::INFINITY)
        );
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(group(1_234_567.0, 0), "1,234,567");
        assert_eq!(group(999.0, 0), "999");
        assert_eq!(group(12.345, 1), "12.3");
        assert_eq!(group(-1234.5, 1), "-1,234.5");
        assert_eq!(group(-0.01, 1), "0.0");
        assert_eq!(group(f64::INFINITY, 1), "never");
    }

    #[test]
    fn targets_are_checked_against_the_other_doors() {
        let rps = Row::new("raw throughput", "req/s", 0)
            .set(Door::Fhircluster, Some(9000.0))
            .set(Door::Nginx, Some(10000.0))
            .set(Door::Direct, Some(14000.0))
            .target(Target::AtLeastTimes(Door::Nginx, 1.0))
            .target(Target::AtLeastTimes(Door::Direct, 0.6));
        assert_eq!(rps.verdict(), "MISSED");
        assert_eq!(rps.ratio(Door::Nginx), Some(0.9));
        assert_eq!(rps.ratio(Door::Haproxy), None);
        let rss = Row::new("RSS idle", "MB", 1)
            .set(Door::Fhircluster, Some(6.2))
            .target(Target::AtMost(15.0));
        assert_eq!(rss.verdict(), "met");
        let missing = Row::new("probe", "ms", 1)
            .set(Door::Fhircluster, Some(50.0))
            .target(Target::AtMostTimes(Door::Nginx, 0.1));
        assert_eq!(missing.verdict(), "?");
        assert_eq!(Row::new("info", "", 0).verdict(), "");
    }

    #[test]
    fn the_markdown_table_has_one_line_per_row_and_the_same_columns() {
        let rows = [
            Row::new("raw throughput", "req/s", 0)
                .set(Door::Fhircluster, Some(20000.0))
                .set(Door::Nginx, Some(10000.0))
                .target(Target::AtLeastTimes(Door::Nginx, 1.0)),
            Row::new("scheduler", "decisions/s", 0)
                .set(Door::Fhircluster, Some(2_500_000.0))
                .target(Target::AtLeast(1_000_000.0)),
        ];
        let md = markdown(&rows);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 4);
        let columns = lines[0].matches('|').count();
        assert!(
            lines.iter().all(|l| l.matches('|').count() == columns),
            "{md}"
        );
        assert!(lines[2].contains("| 20,000 | 10,000 | – |"), "{md}");
        assert!(lines[2].contains("2.00×"), "{md}");
        assert!(lines[2].ends_with("| ≥ nginx | met |"), "{md}");
        assert!(lines[3].contains("≥ 1,000,000 decisions/s"), "{md}");
    }
}
