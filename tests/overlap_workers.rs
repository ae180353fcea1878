//! A worker count changed while a replacement runs beside a worker (DEC-78, DEC-94), end to
//! end: the replacement borrows the port of the place beyond the worker count, so a worker
//! raised meanwhile starts once the place's second process has gone, and is routed to the port
//! its place has after the switch (also long after a restart swapped the ports); a worker taken
//! away meanwhile goes with its replacement.

use crate::common::*;
use crate::reload::{rewrite, served_by};
use crate::rolling_overlap::{restart, secs, slow_cluster, Load, SIGHUP};

use serde_json::json;

#[test]
fn a_worker_count_raised_while_a_replacement_runs_beside_starts_the_new_worker_once_and_routes_to_it(
) {
    // spec: DEC-78, DEC-21
    let (c, admin) = slow_cluster(2);
    let load = Load::start(&c, 3);
    // The raise lands while tx1's replacement starts beside it, on the port of the place beyond
    // the count (tx3's).
    let mark = workers_changed_during_overlap(&c, "tx1", 3);
    c.wait_for_after(
        mark,
        "reload: tx3 starts once tx1's second process has gone",
        secs(10),
    );
    c.wait_for_after(mark, "rolling restart done", secs(120));
    c.wait_for_after(mark, "tx3: ready", secs(60));
    let (sent, failed) = load.end();
    let log = c.log_lines().join("\n");
    assert!(
        failed.is_empty(),
        "{} of {sent} failed: {failed:?}\n{log}",
        failed.len()
    );
    assert_eq!(c.count_lines("tx3: started"), 1, "tx3 started once:\n{log}");
    assert_eq!(
        c.count_lines("tx3: starting again"),
        0,
        "tx3 never failed to start:\n{log}"
    );
    let status = admin_get(admin, "/status").json();
    for row in status["processes"].as_array().into_iter().flatten() {
        assert!(
            row["restarts"].as_u64().unwrap_or(0) == 0,
            "no crash nor hang counted: {row}\n{log}"
        );
    }
    // The new place routes to its own process (the switch gave it tx1's old port).
    let by = served_by(&c, 20);
    assert!(by.iter().any(|b| b == "tx3"), "tx3 takes requests: {by:?}");
    report_figures(
        "raise_during_overlap",
        "a reload raising 2 workers to 3 while tx1's replacement (4 s to be ready) started \
         beside it on the port tx3 takes, 3 keep-alive clients",
        1,
        sent as u64,
        failed.len() as u64,
        "tx3 started once, after tx1's old process had gone, on the port its place had after \
         the switch; ready with no restart counted; its requests answered by tx3",
    );
}

#[test]
fn after_a_restart_swapped_the_ports_a_worker_more_routes_to_its_own_process() {
    // spec: DEC-78: the place beyond the count was left the port of the last worker's old
    // process; a worker raised there later is reached there.
    let (c, _admin) = slow_cluster(2);
    let out = restart(&c);
    assert_eq!(out.code, Some(0), "{out:?}");
    let mark = c.mark();
    rewrite(&c, json!({"server": {"cluster": {"workers": 3}}}));
    c.signal(SIGHUP);
    c.wait_for_after(mark, "tx3: ready", secs(30));
    let by = served_by(&c, 20);
    assert!(by.iter().any(|b| b == "tx3"), "tx3 takes requests: {by:?}");
}

#[test]
fn a_worker_count_lowered_while_the_workers_replacement_starts_retires_it_and_its_replacement() {
    // spec: DEC-78: the place leaves; its replacement must not take it back, nor the old process
    // be left running.
    let (c, admin) = slow_cluster(2);
    let load = Load::start(&c, 3);
    let mark = workers_changed_during_overlap(&c, "tx2", 1);
    c.wait_for_after(mark, "tx2: stopped for good", secs(60));
    c.wait_for_after(mark, "rolling restart done", secs(120));
    wait_until("the master and tx1 alone run", secs(30), || {
        c.child_pids().len() == 2
    });
    let (sent, failed) = load.end();
    let log = c.log_lines().join("\n");
    assert!(
        failed.is_empty(),
        "{} of {sent} failed: {failed:?}\n{log}",
        failed.len()
    );
    assert_eq!(
        c.count_lines("tx2: switched to its replacement"),
        0,
        "{log}"
    );
    let status = admin_get(admin, "/status").json();
    let codes: Vec<&str> = status["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["code"].as_str())
        .collect();
    assert_eq!(codes, ["m0", "tx1"], "{status:#}");
}

/// A reload changing the command of 2 workers to replacements that take 4 s to be ready, then,
/// once `code`'s replacement has started beside it, one setting the count to `workers`; from
/// before both (a log mark).
fn workers_changed_during_overlap(c: &Cluster, code: &str, workers: u32) -> usize {
    let command = json!(["env", "SIM_READY_DELAY_MS=4000", SIM]);
    let mark = c.mark();
    rewrite(c, json!({"server": {"cluster": {"command": command}}}));
    c.signal(SIGHUP);
    c.wait_for_after(mark, &format!("{code}: its replacement started"), secs(60));
    rewrite(
        c,
        json!({"server": {"cluster": {"command": command, "workers": workers}}}),
    );
    c.signal(SIGHUP);
    c.wait_for_after(mark, &format!("reload: workers 2 → {workers}"), secs(10));
    mark
}
