//! What the status shows while a replacement runs beside the old one (DEC-92) and after a
//! rolling restart stopped by its replacement (DEC-93), end to end: the launcher's `/status`,
//! `fhircluster status`' table and the status page in headless Chromium, sampled during a
//! restart whose replacements take seconds to be ready.

use crate::common::*;
use crate::ops_status_page::{after_each, dump, require_chromium};
use crate::rolling_overlap::{restart_at, secs, set_command, slow_cluster, SIGHUP};

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

/// The rows of `/status`'s `processes` by code, in order.
fn rows_by_code(status: &Value) -> BTreeMap<String, Vec<Value>> {
    let mut by = BTreeMap::<String, Vec<Value>>::new();
    for p in status["processes"].as_array().into_iter().flatten() {
        let code = p["code"].as_str().unwrap_or("?").to_string();
        by.entry(code).or_default().push(p.clone());
    }
    by
}

/// A place with two rows: the place's own first (`beside` false), its second process after
/// (`beside` true), exactly one of them the replacement; before the switch the old one ready
/// and the replacement starting, after it the replacement ready and the old one leaving.
fn check_pair(code: &str, rows: &[Value]) -> Result<bool, String> {
    let [own, second] = rows else {
        return Err(format!("{code} has {} rows: {rows:?}", rows.len()));
    };
    let flags = |r: &Value| (r["beside"] == true, r["replacement"] == true);
    let starting = match (flags(own), flags(second)) {
        ((false, false), (true, true)) => true,
        ((false, true), (true, false)) => false,
        other => return Err(format!("{code}: beside/replacement {other:?}: {rows:?}")),
    };
    let states = (own["status"].as_str(), second["status"].as_str());
    let ok = if starting {
        states == (Some("ready"), Some("starting"))
    } else {
        matches!(states, (Some("ready"), Some("draining" | "stopping")))
    };
    if !ok || own["pid"] == second["pid"] || second["pid"].is_null() {
        return Err(format!("{code}: {states:?}, pids: {rows:?}"));
    }
    Ok(starting)
}

fn status_table(data_dir: &std::path::Path) -> String {
    let out = run_bounded(
        Command::new(LAUNCHER)
            .args(["status", "--data-dir"])
            .arg(data_dir)
            .env_remove("FHIRSMITH_DATA_DIR"),
        secs(20),
    );
    out.stdout
}

#[test]
fn both_processes_of_a_place_show_in_status_and_the_table_during_a_restart() {
    // spec: DEC-92
    let (c, admin) = slow_cluster(2);
    let data_dir = c.data_dir();
    let roll = {
        let dir = data_dir.clone();
        std::thread::spawn(move || restart_at(&dir))
    };
    let (mut samples, mut pairs, mut starting_seen, mut table_seen) = (0, 0, 0, None);
    while !roll.is_finished() {
        let status = admin_get(admin, "/status").json();
        let by = rows_by_code(&status);
        samples += 1;
        // The ready tx places, each counted once: never more than the places, never fewer.
        let ready: usize = by
            .iter()
            .filter(|(code, _)| code.starts_with("tx"))
            .map(|(_, rows)| rows.iter().filter(|r| r["status"] == "ready").count())
            .sum();
        assert_eq!(ready, 2, "ready tx rows: {status:#}");
        for (code, rows) in by.iter().filter(|(_, rows)| rows.len() > 1) {
            pairs += 1;
            let starting = check_pair(code, rows).unwrap_or_else(|e| panic!("{e}\n{status:#}"));
            if !starting || table_seen.is_some() {
                continue;
            }
            starting_seen += 1;
            // `fhircluster status` while the replacement starts: both rows, the new one said.
            let table = status_table(&data_dir);
            let lines: Vec<&str> = table
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(code.as_str()))
                .collect();
            if lines.len() == 2 {
                assert!(
                    lines[0].contains("ready") && lines[1].contains("starting (new)"),
                    "{table}"
                );
                table_seen = Some(table);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = roll.join().expect("the restart");
    assert_eq!(out.code, Some(0), "{out:?}");
    eprintln!("measured: {samples} samples, {pairs} with two rows of a place");
    assert!(
        starting_seen > 0,
        "no /status sample showed a replacement starting beside its place's process \
         ({samples} samples):\n{}",
        c.log_lines().join("\n")
    );
    let table = table_seen.expect("`fhircluster status` showed both rows of a place once");
    eprintln!("{table}");
}

#[test]
fn the_status_page_in_chromium_shows_the_replacement_beside_the_old_process() {
    // spec: DEC-92
    require_chromium();
    let admin = free_port();
    let c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    // Replacements that take 6 s to be ready (within the 10 s start limit, DEC-81): the page is loaded while tx1's starts.
    let mark = c.mark();
    set_command(&c, json!(["env", "SIM_READY_DELAY_MS=6000", SIM]));
    c.signal(SIGHUP);
    c.wait_for_after(mark, "tx1: its replacement started", secs(30));
    wait_until("/status shows tx1's replacement", secs(10), || {
        rows_by_code(&admin_get(admin, "/status").json())
            .get("tx1")
            .is_some_and(|r| r.len() == 2)
    });
    let html = dump(admin);
    let codes = after_each(&html, r#"<tr class="row""#, "data-code");
    let states = after_each(&html, r#"<tr class="row""#, "data-status");
    let overlap = after_each(&html, r#"<tr class="row""#, "data-overlap");
    let rows: Vec<(&str, &str, &str)> = codes
        .iter()
        .zip(&states)
        .zip(&overlap)
        .map(|((c, s), o)| (c.as_str(), s.as_str(), o.as_str()))
        .collect();
    assert!(
        rows.contains(&("tx1", "ready", "")) && rows.contains(&("tx1", "starting", "replacement")),
        "{rows:?}"
    );
    assert!(
        html.contains("· 2 processes"),
        "the place counted once in the heading"
    );
    assert!(
        !html.contains(r#"data-kind="not-ready""#),
        "a replacement starting beside its place's process is no problem"
    );
    c.wait_for_after(mark, "tx1: switched to its replacement", secs(60));
}

/// The places whose new inputs wait (DEC-93), as `/status`, `fhircluster status` and the page
/// show them: each row of `/status`, the table's line and the page's problem line name `codes`
/// (none: no place waits, and neither says so).
pub(crate) fn assert_inputs_waiting(c: &Cluster, admin: u16, codes: &[&str]) {
    let status = admin_get(admin, "/status").json();
    let waiting: Vec<&str> = status["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["inputsWaiting"] == true)
        .filter_map(|p| p["code"].as_str())
        .collect();
    assert_eq!(waiting, codes, "{status:#}");
    let table = status_table(&c.data_dir());
    let page = admin_get(admin, "/").text();
    if codes.is_empty() {
        assert!(!table.contains("New inputs wait"), "{table}");
        assert!(!page.contains(r#"data-kind="inputs-waiting""#), "{page}");
        return;
    }
    let line = format!("New inputs wait for {}:", codes.join(", "));
    assert!(table.contains(&format!("⚠ {line}")), "{table}");
    assert!(
        page.contains(r#"data-kind="inputs-waiting""#) && page.contains(&line),
        "{page}"
    );
}
