//! `/metrics` on the launcher's own endpoint, read the way Prometheus reads it: a strict parser of
//! the text exposition format (0.0.4) written here, the naming conventions, cumulative histogram
//! buckets, and every figure checked against the traffic the test itself sent: answers by route
//! and status class, lanes, queue waits, the launcher's refusals after a surge, and `504`s after a
//! hang, each counted against the process that hung.
//!
//! The parser is the test's own rather than a crate: it stays strict (the crates that parse this
//! format accept much that Prometheus warns about) and it needs no new dependency.

mod common;

use std::collections::{BTreeMap, HashSet};

use common::*;
use serde_json::json;

#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

#[derive(Debug, Default)]
struct Family {
    kind: String,
    help: bool,
    samples: Vec<Sample>,
}

#[derive(Debug, Default)]
struct Exposition {
    families: BTreeMap<String, Family>,
}

fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(s: &str) -> bool {
    valid_name(s) && !s.contains(':') && !s.starts_with("__")
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// `{a="x",b="y"}` (the braces included) → labels, and what follows.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
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
fn family_of<'a>(name: &'a str, fams: &BTreeMap<String, Family>) -> Option<&'a str> {
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
fn parse(text: &str) -> Result<Exposition, String> {
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

/// The naming conventions and the histograms' shape.
fn check_conventions(e: &Exposition) -> Result<(), String> {
    for (name, f) in &e.families {
        if !f.help || f.kind.is_empty() {
            return Err(format!("{name}: HELP and TYPE both needed"));
        }
        if !name.starts_with("fhircluster_") || name.chars().any(|c| c.is_ascii_uppercase()) {
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
            if f.kind == "counter" && !(s.value >= 0.0 && s.value.fract() == 0.0) {
                return Err(format!("{}: a counter counts: {}", s.name, s.value));
            }
        }
        if f.kind == "histogram" {
            check_histogram(name, f)?;
        }
    }
    Ok(())
}

fn check_histogram(name: &str, f: &Family) -> Result<(), String> {
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
fn scrape(admin: u16) -> Exposition {
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
    e
}

impl Exposition {
    /// The value of the one sample `name{labels}` (exactly those labels).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let fam = family_of(name, &self.families).unwrap_or(name);
        self.families
            .get(fam)
            .and_then(|f| {
                f.samples
                    .iter()
                    .find(|s| s.name == name && s.labels == want)
            })
            .map(|s| s.value)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
    }

    fn requests(&self, route: &str, class: &str) -> f64 {
        self.value(
            "fhircluster_requests_total",
            &[("route", route), ("status", class)],
        )
    }
}

#[test]
fn the_parser_rejects_what_prometheus_would() {
    // Every test must be able to fail: the parser and the conventions catch each of these.
    let ok = "# HELP fhircluster_x_total X.\n# TYPE fhircluster_x_total counter\nfhircluster_x_total{a=\"1\"} 3\n";
    assert!(parse(ok).is_ok_and(|e| check_conventions(&e).is_ok()));
    for bad in [
        "fhircluster_x_total 1\n", // no family
        "# TYPE fhircluster_x_total counter\nfhircluster_x_total{a=\"1} 1\n", // open quote
        "# TYPE fhircluster_x_total counter\nfhircluster_x_total one\n", // no number
        "# TYPE fhircluster_x_total counter\nfhircluster_x_total 1\nfhircluster_x_total 2\n",
        "# TYPE fhircluster_x_total counter\n# TYPE fhircluster_x_total counter\n",
        "# TYPE fhircluster_x_total counter\nfhircluster_x_total 1", // no final newline
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
    for bad in [
        "# HELP fhircluster_x X.\n# TYPE fhircluster_x counter\nfhircluster_x 1\n",
        "# HELP fhircluster_memory X.\n# TYPE fhircluster_memory gauge\nfhircluster_memory 1\n",
        "# TYPE fhircluster_y gauge\nfhircluster_y 1\n", // no HELP
        "# HELP fhircluster_h_seconds H.\n# TYPE fhircluster_h_seconds histogram\n\
         fhircluster_h_seconds_bucket{le=\"1\"} 2\nfhircluster_h_seconds_bucket{le=\"+Inf\"} 1\n\
         fhircluster_h_seconds_sum 1\nfhircluster_h_seconds_count 1\n", // not cumulative
    ] {
        let e = parse(bad).unwrap_or_else(|m| panic!("{m}"));
        assert!(check_conventions(&e).is_err(), "accepted {bad:?}");
    }
}

#[test]
fn metrics_are_well_formed_and_count_the_requests_sent() {
    let admin = free_port();
    let c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let before = scrape(admin);
    for (route, class) in [("tx", "2xx"), ("master", "2xx"), ("tx", "4xx")] {
        assert_eq!(before.requests(route, class), 0.0, "nothing sent yet");
    }
    const TX: usize = 7;
    const MASTER: usize = 3;
    for _ in 0..TX {
        let r = c.get("/r4/CodeSystem/$lookup");
        assert_eq!(r.status, 200, "{}", r.text());
    }
    for _ in 0..MASTER {
        let r = c.get("/dashboard");
        assert!(r.status < 300, "{} {}", r.status, r.text());
    }
    // An id no process issued: the process answers 404 cache-id-unknown (ROUTE-3c).
    let r = c.request(
        "GET",
        "/r4/CodeSystem/$lookup",
        &[("X-Cache-Id", "tx1.nope.nope")],
        b"",
    );
    assert!(r.is_cache_id_unknown(), "{}", r.text());
    // The launcher's own endpoints are not counted as requests.
    for _ in 0..3 {
        admin_get(admin, "/readyz");
    }

    let after = scrape(admin);
    assert_eq!(after.requests("tx", "2xx"), TX as f64);
    assert_eq!(after.requests("tx", "4xx"), 1.0);
    assert_eq!(after.requests("master", "2xx"), MASTER as f64);
    for class in ["1xx", "3xx", "5xx"] {
        assert_eq!(after.requests("tx", class), 0.0, "{class}");
        assert_eq!(after.requests("master", class), 0.0, "{class}");
    }
    let lanes = after.value("fhircluster_lane_requests_total", &[("lane", "fast")])
        + after.value("fhircluster_lane_requests_total", &[("lane", "normal")]);
    assert_eq!(lanes, (TX + 1) as f64, "every tx request took a lane");
    assert_eq!(
        after.value("fhircluster_queue_wait_seconds_count", &[]),
        (TX + 1) as f64,
        "every tx request's wait recorded"
    );
    for reason in [
        "queue_wait",
        "no_process_ready",
        "stopping",
        "master_not_ready",
        "cache_id_lost",
    ] {
        assert_eq!(
            after.value("fhircluster_refusals_total", &[("reason", reason)]),
            0.0,
            "{reason}"
        );
    }
    assert_eq!(after.value("fhircluster_queue_length", &[]), 0.0);
    for p in ["m0", "tx1"] {
        assert_eq!(after.value("fhircluster_in_flight", &[("process", p)]), 0.0);
        assert_eq!(
            after.value("fhircluster_restarts_total", &[("process", p)]),
            0.0
        );
        assert!(
            after.value(
                "fhircluster_process_memory_bytes",
                &[("process", p), ("kind", "private")]
            ) > 0.0,
            "{p}'s memory"
        );
    }
}

#[test]
fn refusals_after_a_surge_and_504s_after_a_hang_are_counted_where_they_happened() {
    // spec: QUEUE-17 (the launcher's 503s), TIMEOUT-1 (504 naming the process)
    let admin = free_port();
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "queueSeconds": 0, "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
            "upstreamTimeoutSeconds": 1
        } } }))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let addr = c.addr();

    // A surge of 8 requests that each hold their slot for 1 s (a response that begins at once,
    // so no 504) at 2 processes with one slot each and no queue: the rest refused.
    let answers = in_parallel(8, move |_| {
        request(
            addr,
            "GET",
            "/r4/CodeSystem/$lookup?_sim_stream=1",
            &[],
            b"",
        )
    });
    let served = answers.iter().filter(|r| r.status == 200).count();
    let refused = answers
        .iter()
        .filter(|r| r.status == 503 && r.served_by().is_empty())
        .count();
    assert_eq!(
        served + refused,
        8,
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(
        refused >= 1 && served >= 1,
        "served {served}, refused {refused}"
    );
    let m = scrape(admin);
    assert_eq!(
        m.value("fhircluster_refusals_total", &[("reason", "queue_wait")]),
        refused as f64
    );
    assert_eq!(m.requests("tx", "5xx"), refused as f64);
    assert_eq!(m.requests("tx", "2xx"), served as f64);

    // A hang on tx1 (by its cache-id) and one on the master: 504 each, after 1 s.
    let id = (0..20)
        .map(|_| c.request("POST", "/r4/$cache-control", &[], b"{}"))
        .find(|r| r.served_by() == "tx1")
        .and_then(|r| r.header("x-cache-id").map(String::from))
        .expect("a session on tx1 within 20 tries");
    let r = c.request(
        "GET",
        "/r4/CodeSystem/$lookup?_sim_hang=1",
        &[("X-Cache-Id", &id)],
        b"",
    );
    assert_eq!(r.status, 504, "{}", r.text());
    let r = c.get("/sim/hang");
    assert_eq!(r.status, 504, "{}", r.text());

    let m = scrape(admin);
    let errors = |p: &str, s: &str| {
        m.value(
            "fhircluster_upstream_errors_total",
            &[("process", p), ("status", s)],
        )
    };
    assert_eq!(errors("tx1", "504"), 1.0, "tx1's hang");
    assert_eq!(errors("m0", "504"), 1.0, "the master's hang");
    assert_eq!(errors("tx1", "502") + errors("m0", "502"), 0.0);
    assert_eq!(m.requests("tx", "5xx"), (refused + 1) as f64);
    assert_eq!(m.requests("master", "5xx"), 1.0);
}
