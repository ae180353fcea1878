//! A strict parser of Prometheus's text exposition format (0.0.4), the naming conventions and
//! cumulative histogram buckets, for the tests that read the launcher's `/metrics`. The tests'
//! own rather than a crate: it stays strict (the crates that parse this format accept much that
//! Prometheus warns about) and it needs no new dependency.

use std::collections::{BTreeMap, HashSet};

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

#[derive(Debug, Default)]
pub struct Family {
    pub kind: String,
    pub help: bool,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Default)]
pub struct Exposition {
    pub families: BTreeMap<String, Family>,
}

pub fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

pub fn valid_label_name(s: &str) -> bool {
    valid_name(s) && !s.contains(':') && !s.starts_with("__")
}

pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// `{a="x",b="y"}` (the braces included) → labels, and what follows.
pub fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').ok_or("no {")?;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("a label without =")?;
        let name = &rest[..eq];
        if !valid_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("a label value without \"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some((_, '\n')) | None => return Err("an unterminated label value".into()),
                Some((_, c)) => value.push(c),
            }
        };
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = &rest[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if !rest.starts_with('}') {
            return Err("labels not separated by ,".into());
        }
    }
}

/// The family a sample name belongs to, given the declared families.
pub fn family_of<'a>(name: &'a str, fams: &BTreeMap<String, Family>) -> Option<&'a str> {
    if fams.contains_key(name) {
        return Some(name);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if fams.get(base).is_some_and(|f| f.kind == "histogram") {
                return Some(base);
            }
        }
    }
    None
}

/// Parses the text format strictly: every line a comment, HELP, TYPE or a well-formed sample of
/// a family declared before it, each family's lines together, no series twice.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut e = Exposition::default();
    let mut series = HashSet::new();
    let mut closed: HashSet<String> = HashSet::new();
    let mut current: Option<String> = None;
    if !text.ends_with('\n') {
        return Err("does not end with a newline".into());
    }
    for (n, line) in text.lines().enumerate() {
        let err = |m: String| format!("line {}: {m}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        let (fam, sample) = if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kw, name, arg) = (parts.next(), parts.next(), parts.next());
            match (kw, name) {
                (Some("HELP"), Some(name)) => {
                    if !valid_name(name) || arg.is_none_or(|h| h.trim().is_empty()) {
                        return Err(err("bad HELP".into()));
                    }
                    let f = e.families.entry(name.to_string()).or_default();
                    if f.help {
                        return Err(err("a second HELP".into()));
                    }
                    f.help = true;
                    (name.to_string(), None)
                }
                (Some("TYPE"), Some(name)) => {
                    let kind = arg.unwrap_or("");
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                        return Err(err(format!("unknown type {kind:?}")));
                    }
                    let f = e.families.entry(name.to_string()).or_default();
                    if !f.kind.is_empty() || !f.samples.is_empty() {
                        return Err(err("TYPE twice, or after samples".into()));
                    }
                    f.kind = kind.to_string();
                    (name.to_string(), None)
                }
                _ => continue, // a plain comment
            }
        } else {
            let name_end = line
                .find(['{', ' '])
                .ok_or_else(|| err("no value".into()))?;
            let name = &line[..name_end];
            if !valid_name(name) {
                return Err(err(format!("bad metric name {name:?}")));
            }
            let (labels, rest) = if line[name_end..].starts_with('{') {
                parse_labels(&line[name_end..]).map_err(err)?
            } else {
                (BTreeMap::new(), &line[name_end..])
            };
            let mut fields = rest
                .strip_prefix(' ')
                .ok_or_else(|| err("no space before the value".into()))?
                .split(' ');
            let value = fields
                .next()
                .and_then(parse_value)
                .ok_or_else(|| err("bad value".into()))?;
            if let Some(ts) = fields.next() {
                ts.parse::<i64>().map_err(|_| err("bad timestamp".into()))?;
            }
            if fields.next().is_some() {
                return Err(err("trailing fields".into()));
            }
            let fam = family_of(name, &e.families)
                .ok_or_else(|| err("a sample of no declared family".into()))?
                .to_string();
            if !series.insert((name.to_string(), labels.clone())) {
                return Err(err("the same series twice".into()));
            }
            let s = Sample {
                name: name.to_string(),
                labels,
                value,
            };
            (fam, Some(s))
        };
        if current.as_deref() != Some(fam.as_str()) {
            if closed.contains(&fam) {
                return Err(err(format!("family {fam}'s lines are not together")));
            }
            if let Some(prev) = current.replace(fam.clone()) {
                closed.insert(prev);
            }
        }
        if let Some(s) = sample {
            e.families.get_mut(&fam).expect("declared").samples.push(s);
        }
    }
    Ok(e)
}

/// The standard series of the Prometheus client libraries' process collector, the launcher's own.
pub const STANDARD: [&str; 6] = [
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
    "process_virtual_memory_bytes",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
];

/// The naming conventions and the histograms' shape.
pub fn check_conventions(e: &Exposition) -> Result<(), String> {
    for (name, f) in &e.families {
        if !f.help || f.kind.is_empty() {
            return Err(format!("{name}: HELP and TYPE both needed"));
        }
        if !(name.starts_with("fhircluster_") || STANDARD.contains(&name.as_str()))
            || name.chars().any(|c| c.is_ascii_uppercase())
        {
            return Err(format!("{name}: fhircluster_ and snake_case"));
        }
        match f.kind.as_str() {
            "counter" if !name.ends_with("_total") => {
                return Err(format!("{name}: a counter ends in _total"))
            }
            "gauge" | "histogram" if name.ends_with("_total") => {
                return Err(format!("{name}: only counters end in _total"))
            }
            "histogram" if !(name.ends_with("_seconds") || name.ends_with("_bytes")) => {
                return Err(format!("{name}: a histogram names its unit"))
            }
            _ => {}
        }
        let base = name.trim_end_matches("_total");
        if (base.contains("memory") || base.contains("bytes")) && !base.ends_with("_bytes") {
            return Err(format!("{name}: memory in _bytes"));
        }
        if (base.contains("seconds") || base.contains("wait") || base.contains("duration"))
            && !base.ends_with("_seconds")
        {
            return Err(format!("{name}: time in _seconds"));
        }
        for s in &f.samples {
            if s.labels.contains_key("le") != s.name.ends_with("_bucket") {
                return Err(format!("{}: le only on buckets", s.name));
            }
            // Seconds counted may have fractions (`process_cpu_seconds_total`); the rest count.
            let whole = s.value.fract() == 0.0 || name.ends_with("_seconds_total");
            if f.kind == "counter" && !(s.value >= 0.0 && whole) {
                return Err(format!("{}: a counter counts: {}", s.name, s.value));
            }
        }
        if f.kind == "histogram" {
            check_histogram(name, f)?;
        }
    }
    Ok(())
}

pub fn check_histogram(name: &str, f: &Family) -> Result<(), String> {
    let without_le = |s: &Sample| {
        let mut l = s.labels.clone();
        l.remove("le");
        l
    };
    let mut groups: BTreeMap<Vec<(String, String)>, Vec<&Sample>> = BTreeMap::new();
    for s in &f.samples {
        groups
            .entry(without_le(s).into_iter().collect())
            .or_default()
            .push(s);
    }
    for (labels, samples) in groups {
        let buckets: Vec<(f64, f64)> = samples
            .iter()
            .filter(|s| s.name.ends_with("_bucket"))
            .map(|s| (parse_value(&s.labels["le"]).unwrap_or(f64::NAN), s.value))
            .collect();
        let count = samples
            .iter()
            .find(|s| s.name.ends_with("_count"))
            .map(|s| s.value);
        let sum = samples.iter().find(|s| s.name.ends_with("_sum"));
        if buckets.is_empty() || count.is_none() || sum.is_none() {
            return Err(format!("{name}{labels:?}: buckets, _sum and _count"));
        }
        for w in buckets.windows(2) {
            if w[0].0.partial_cmp(&w[1].0) != Some(std::cmp::Ordering::Less) || w[1].1 < w[0].1 {
                return Err(format!(
                    "{name}: buckets ascending in le and cumulative: {buckets:?}"
                ));
            }
        }
        let last = buckets[buckets.len() - 1];
        if last.0 != f64::INFINITY || Some(last.1) != count {
            return Err(format!("{name}: le=\"+Inf\" last and equal to _count"));
        }
    }
    Ok(())
}

/// Scrapes `/metrics`, checks it whole, and returns it.
pub fn scrape(admin: u16) -> Exposition {
    scrape_text(admin).1
}

/// `promtool check metrics` on `text`: Prometheus's own linter (package `prometheus`). Fails
/// the test, saying what, when promtool is missing or finds anything.
pub fn promtool_check_metrics(text: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("promtool (package prometheus) is needed to check /metrics: {e}")
        });
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(text.as_bytes()).expect("write to promtool");
    drop(stdin);
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}\n{}{}\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Scrapes `/metrics`, checks it whole, and returns its text and what it says.
pub fn scrape_text(admin: u16) -> (String, Exposition) {
    let r = admin_get(admin, "/metrics");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("text/plain") && c.contains("version=0.0.4")),
        "{:?}",
        r.header("content-type")
    );
    let text = r.text();
    let e = parse(&text).unwrap_or_else(|m| panic!("{m}\n{text}"));
    check_conventions(&e).unwrap_or_else(|m| panic!("{m}\n{text}"));
    (text, e)
}

impl Exposition {
    /// The value of the one sample `name{labels}` (exactly those labels).
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
    }

    /// The value of `name{labels}`, or None if there is no such sample.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let fam = family_of(name, &self.families).unwrap_or(name);
        self.families.get(fam).and_then(|f| {
            f.samples
                .iter()
                .find(|s| s.name == name && s.labels == want)
                .map(|s| s.value)
        })
    }

    /// The sum of every sample `name` whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let fam = family_of(name, &self.families).unwrap_or(name);
        self.families.get(fam).map_or(0.0, |f| {
            f.samples
                .iter()
                .filter(|s| s.name == name)
                .filter(|s| {
                    labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
                })
                .map(|s| s.value)
                .sum()
        })
    }

    pub fn requests(&self, route: &str, class: &str) -> f64 {
        self.value(
            "fhircluster_requests_total",
            &[("route", route), ("status", class)],
        )
    }
}
