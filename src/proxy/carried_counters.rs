//! The counters of `/metrics` across an in-place upgrade. The pid and
//! `process_start_time_seconds` stay, so to Prometheus the process never restarted: a counter
//! that went back to 0 would read as a reset (`resets()`, and `rate()` losing the step). So the
//! old program hands over what each counter and histogram series had reached, as the text it
//! would have served, and the new one adds it to its own figures when it renders: a counter
//! resets only when the process starts.
//!
//! Pure: `carry` reads the series out of the exposition text, `add` writes them back into it.
//! Only the families typed `counter` or `histogram` are carried, and not those whose value is
//! the process's own and survives the `execve` by itself (`process_*`, the kernel's figures) or
//! is rebuilt from handed-over state (`fhircluster_restarts_total`, from the lifecycle's
//! counts), or is the children's own (`fhircluster_process_cpu_seconds_total`).

use std::collections::BTreeMap;

/// Series name with its labels (`fhircluster_requests_total{route="tx",status="2xx"}`) → value.
pub type Carried = BTreeMap<String, f64>;

/// Families whose figures need no carrying: they go on by themselves across the `execve`.
fn goes_on_by_itself(family: &str) -> bool {
    family.starts_with("process_")
        || family == "fhircluster_restarts_total"
        // The children's own CPU: they run on across the `execve`, and so does their count.
        || family == "fhircluster_process_cpu_seconds_total"
}

/// The counter and histogram families named in `text`'s `# TYPE` lines.
fn summed_families(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, kind)| matches!(*kind, "counter" | "histogram") && !goes_on_by_itself(name))
        .map(|(name, _)| name)
        .collect()
}

/// A sample line's series (name and labels) and value, if it is one of `families`.
fn sample<'a>(line: &'a str, families: &[&str]) -> Option<(&'a str, f64)> {
    if line.starts_with('#') {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let name = series.split('{').next()?;
    let of_family = |f: &&str| {
        name == *f
            || name
                .strip_prefix(*f)
                .is_some_and(|rest| matches!(rest, "_bucket" | "_sum" | "_count"))
    };
    families.iter().any(of_family).then_some(())?;
    let value: f64 = value.parse().ok().filter(|v: &f64| v.is_finite())?;
    Some((series, value))
}

/// What the counters and histograms of `text` (a `/metrics` answer) have reached.
pub fn carry(text: &str) -> Carried {
    let families = summed_families(text);
    text.lines()
        .filter_map(|l| sample(l, &families))
        .map(|(series, v)| (series.to_string(), v))
        .collect()
}

/// `text` with each carried series' figure added to its own.
pub fn add(text: &str, carried: &Carried) -> String {
    if carried.is_empty() {
        return text.to_string();
    }
    let families = summed_families(text);
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches('\n');
        match sample(bare, &families).and_then(|(s, v)| Some((s, v + carried.get(s)?))) {
            Some((series, sum)) => {
                out.push_str(series);
                out.push(' ');
                out.push_str(&number(sum));
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(line),
        }
    }
    out
}

/// A figure as the text format writes it: whole numbers without a fraction.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "\
# HELP fhircluster_requests_total Answers.
# TYPE fhircluster_requests_total counter
fhircluster_requests_total{route=\"tx\",status=\"2xx\"} 7
# TYPE fhircluster_queue_length gauge
fhircluster_queue_length 3
# TYPE fhircluster_queue_wait_seconds histogram
fhircluster_queue_wait_seconds_bucket{le=\"0.005\"} 2
fhircluster_queue_wait_seconds_sum 0.25
fhircluster_queue_wait_seconds_count 2
# TYPE fhircluster_restarts_total counter
fhircluster_restarts_total{process=\"tx1\"} 4
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1.5
";

    #[test]
    fn counters_and_histograms_are_carried_gauges_and_what_goes_on_by_itself_are_not() {
        let c = carry(OLD);
        assert_eq!(
            c.get("fhircluster_requests_total{route=\"tx\",status=\"2xx\"}"),
            Some(&7.0)
        );
        assert_eq!(c.get("fhircluster_queue_wait_seconds_sum"), Some(&0.25));
        assert_eq!(
            c.get("fhircluster_queue_wait_seconds_bucket{le=\"0.005\"}"),
            Some(&2.0)
        );
        assert_eq!(c.get("fhircluster_queue_length"), None);
        assert_eq!(c.get("fhircluster_restarts_total{process=\"tx1\"}"), None);
        assert_eq!(c.get("process_cpu_seconds_total"), None);
    }

    #[test]
    fn the_new_programs_figures_go_on_from_the_old_ones() {
        let new = OLD
            .replace("\"2xx\"} 7", "\"2xx\"} 1")
            .replace("_sum 0.25", "_sum 0.5");
        let out = add(&new, &carry(OLD));
        assert!(out.contains("fhircluster_requests_total{route=\"tx\",status=\"2xx\"} 8\n"));
        assert!(out.contains("fhircluster_queue_wait_seconds_sum 0.75\n"));
        assert!(out.contains("fhircluster_queue_wait_seconds_count 4\n"));
        assert!(
            out.contains("fhircluster_queue_length 3\n"),
            "gauges as they are"
        );
        assert!(out.contains("fhircluster_restarts_total{process=\"tx1\"} 4\n"));
        assert!(out.contains("process_cpu_seconds_total 1.5\n"));
        // Carried twice (a second upgrade): what the first carried is in the text it renders.
        let twice = add(&new, &carry(&out));
        assert!(twice.contains("fhircluster_requests_total{route=\"tx\",status=\"2xx\"} 9\n"));
    }

    #[test]
    fn nothing_carried_changes_nothing_and_odd_lines_pass_as_they_are() {
        assert_eq!(add(OLD, &Carried::new()), OLD);
        let odd = "# TYPE a_total counter\na_total NaN\na_total{x=\"1\"}\n";
        let c = carry(odd);
        assert!(c.is_empty());
        assert_eq!(add(odd, &c), odd);
    }
}
