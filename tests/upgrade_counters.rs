//! `/metrics` across an in-place upgrade (#26.5): the pid and `process_start_time_seconds` stay,
//! so no counter may go back (Prometheus would read a reset). Traffic and a reload first, then
//! USR2 with nothing else going on: every counter and histogram series is where it was, the
//! reload counts and the last reload's time too.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Every counter and histogram series of a scrape (but the process's own, which the kernel
/// keeps across the execve), by name and labels.
fn summed(e: &Exposition) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (name, f) in &e.families {
        if !matches!(f.kind.as_str(), "counter" | "histogram") || name.starts_with("process_") {
            continue;
        }
        for s in &f.samples {
            out.insert(format!("{}{:?}", s.name, s.labels), s.value);
        }
    }
    out
}

#[test]
fn counters_go_on_across_an_in_place_upgrade() {
    let admin = admin_addr();
    let mut c = cluster()
        .workers(1)
        .config(serde_json::json!({"server": {"cluster": {"adminAddress": admin.to_string()}}}))
        .start();
    for _ in 0..12 {
        assert_eq!(c.get("/r4/metadata").status, 200);
    }
    assert_eq!(c.get("/r4/CodeSystem/$lookup?_sim_hang=0").status, 200);
    let mark = c.mark();
    // A change the processes read: the reload restarts them in turn.
    let mut config = c.config.clone();
    merge(
        &mut config,
        &serde_json::json!({"library": {"reloaded": 1}}),
    );
    write_config(&c.data_dir(), &config);
    c.signal(libc::SIGHUP);
    c.wait_for_after(mark, "rolling restart done", secs(60));
    let before = scrape(admin.port());
    let was = summed(&before);
    assert!(
        before.requests("tx", "2xx") >= 13.0,
        "the traffic was counted: {was:?}"
    );
    let reload_at = before.value(
        "fhircluster_config_last_reload_success_timestamp_seconds",
        &[],
    );

    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    let after = scrape(admin.port());
    let now = summed(&after);
    let back: Vec<String> = was
        .iter()
        .filter(|(k, v)| now.get(*k).is_some_and(|n| n < v))
        .map(|(k, v)| format!("{k}: {v} → {}", now[k]))
        .collect();
    assert!(back.is_empty(), "counters went back: {back:?}");
    let missing: Vec<&String> = was.keys().filter(|k| !now.contains_key(*k)).collect();
    assert!(missing.is_empty(), "series gone: {missing:?}");
    assert_eq!(after.requests("tx", "2xx"), before.requests("tx", "2xx"));
    assert_eq!(
        after.value("fhircluster_config_reloads_total", &[("result", "success")]),
        1.0
    );
    assert_eq!(
        after.value(
            "fhircluster_config_last_reload_success_timestamp_seconds",
            &[]
        ),
        reload_at,
        "the last reload's time is the reload's, not the upgrade's"
    );
    c.signal(libc::SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
}
