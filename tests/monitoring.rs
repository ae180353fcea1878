//! The monitoring files operators import (`src/kit/`, printed by `fhircluster print alerts` and
//! `print dashboard`): the Prometheus alert rules pass `promtool check rules`, and `promtool test
//! rules` on series recorded from real runs (`recorded_run`: a surge of refusals, the master
//! killed and slow to be ready again, memory over the threshold with and without a cgroup limit,
//! a refused reload, the launcher stopped); the Grafana dashboard and the rules name only series
//! `/metrics` exports, and every dashboard query is filtered by its `$job` and `$instance`.
//!
//! A run is scraped once a second and each scrape becomes one minute of the rule test's
//! timeline (`interval: 1m`): the values are the run's, the clock is sped up sixty times, so
//! `for: 1m` means two scrapes in a row. Which alerts fire at each checked minute is worked out
//! from the recorded values alone (the conditions are simple), and promtool must agree.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

fn monitoring(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/kit")
        .join(file)
}

const RULES: &str = "fhircluster-alerts.yml";
const DASHBOARD: &str = "fhircluster-dashboard.json";

fn promtool(args: &[&str]) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("promtool (package prometheus) is needed: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The metric names in a PromQL expression: `fhircluster_...` and `process_...` words.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut i = 0;
    while i < bytes.len() {
        if word(bytes[i]) && (i == 0 || !word(bytes[i - 1])) {
            let end = (i..bytes.len())
                .find(|&j| !word(bytes[j]))
                .unwrap_or(bytes.len());
            let w = &expr[i..end];
            // A word followed by `=` is a label name, not a metric.
            let label = bytes.get(end).is_some_and(|&c| c == b'=' || c == b'!');
            if (w.starts_with("fhircluster_") || w.starts_with("process_")) && !label {
                names.insert(w.to_string());
            }
            i = end;
        } else {
            i += 1;
        }
    }
    names
}

/// The rules' expressions (the `expr:` values, folded ones included).
fn rule_exprs(yaml: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        let mut e = rest.trim().trim_start_matches('>').to_string();
        while let Some(next) = lines.peek() {
            let deeper = next.len() - next.trim_start().len() > indent;
            if !deeper || next.trim().is_empty() {
                break;
            }
            e.push(' ');
            e.push_str(next.trim());
            lines.next();
        }
        exprs.push(e);
    }
    exprs
}

/// Each alert's annotations as the rules write them (`summary`, `description`).
fn annotations(yaml: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut all = BTreeMap::new();
    let mut current = None;
    for line in yaml.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert:") {
            current = Some(name.trim().to_string());
            continue;
        }
        for key in ["summary", "description"] {
            if let (Some(v), Some(alert)) = (line.strip_prefix(&format!("{key}:")), &current) {
                let v = v.trim().trim_matches('"').replace("\\\"", "\"");
                all.entry(alert.clone())
                    .or_insert_with(BTreeMap::new)
                    .insert(key.to_string(), v);
            }
        }
    }
    all
}

/// Every series `expr` selects is filtered by the dashboard's `$job` and `$instance`, so one
/// launcher's panels never mix in another job's `process_*` series or another launcher.
fn assert_filtered_by_job_and_instance(expr: &str) {
    for name in metric_names(expr) {
        let uses: Vec<&str> = expr
            .match_indices(name.as_str())
            .map(|(i, _)| &expr[i + name.len()..])
            .collect();
        for rest in uses {
            // A longer name that begins with this one (`_bucket` after a histogram's base).
            if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let selector = rest
                .strip_prefix('{')
                .and_then(|r| r.split('}').next())
                .unwrap_or_else(|| panic!("{name} without a selector in {expr}"));
            for wanted in ["job=~\"$job\"", "instance=~\"$instance\""] {
                assert!(
                    selector.split(',').any(|m| m.trim() == wanted),
                    "{name} in {expr:?} is not filtered by {wanted}"
                );
            }
        }
    }
}

/// A scrape of a cluster run with the processes' memory guard limit set (so the thresholds are
/// exported).
fn checked_against_a_scrape(names: &BTreeSet<String>, what: &str, m: &Exposition) {
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| prometheus_family_of(n, m).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "{what} names series /metrics doesn't export: {missing:?}"
    );
}

fn prometheus_family_of<'a>(name: &'a str, m: &Exposition) -> Option<&'a str> {
    family_of(name, &m.families)
}

#[test]
fn the_rules_pass_promtool_check_and_the_dashboard_and_rules_name_only_exported_series() {
    let rules = monitoring(RULES);
    let (ok, text) = promtool(&["check", "rules", &rules.to_string_lossy()]);
    assert!(ok, "{text}");

    let admin = free_port();
    let c = cluster()
        .workers(1)
        .env("SIM_MEMORY_LIMIT_MB", "4096")
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    assert_eq!(c.get("/r4/metadata").status, 200);
    let m = poll("the memory thresholds in /metrics", secs(20), || {
        let m = scrape(admin);
        m.get("fhircluster_memory_refuse_threshold_bytes", &[])
            .map(|_| m)
    });

    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(monitoring(DASHBOARD)).expect("dashboard"))
            .expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "{} panels", panels.len());
    let mut names = BTreeSet::new();
    for p in panels {
        let targets = p["targets"].as_array().map_or(&[][..], |t| t.as_slice());
        assert!(!targets.is_empty(), "panel {} has no query", p["title"]);
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            let found = metric_names(expr);
            assert!(!found.is_empty(), "{expr}: no series");
            assert_filtered_by_job_and_instance(expr);
            names.extend(found);
        }
    }
    // The variables the queries filter by, from the launchers' own series.
    let vars = dash["templating"]["list"].as_array().expect("templating");
    for var in ["job", "instance"] {
        let v = vars
            .iter()
            .find(|v| v["name"] == var)
            .unwrap_or_else(|| panic!("no ${var} variable: {vars:?}"));
        assert_eq!(v["type"], "query", "{v}");
        assert!(
            v["query"]["query"]
                .as_str()
                .is_some_and(|q| q.starts_with("label_values(fhircluster_build_info")
                    && q.ends_with(&format!(", {var})"))),
            "{v}"
        );
    }
    // What the issue asks the dashboard to show.
    for needed in [
        "fhircluster_process_ready",
        "fhircluster_in_flight",
        "fhircluster_process_queued",
        "fhircluster_request_duration_seconds_bucket",
        "fhircluster_refusals_total",
        "fhircluster_memory_refuse_threshold_bytes",
        "fhircluster_restarts_total",
    ] {
        assert!(names.contains(needed), "the dashboard shows no {needed}");
    }
    checked_against_a_scrape(&names, "the dashboard", &m);

    let yaml = std::fs::read_to_string(&rules).expect("rules");
    let exprs = rule_exprs(&yaml);
    assert_eq!(exprs.len(), 6, "{exprs:?}");
    let names: BTreeSet<String> = exprs.iter().flat_map(|e| metric_names(e)).collect();
    checked_against_a_scrape(&names, "the alert rules", &m);
}

mod real_prometheus;
mod recorded_run;
mod recording;
