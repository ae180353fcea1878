//! Saturation (fhircluster's own, `server.cluster.saturatedPercent`): once a process's event
//! loop wants the CPU all the time, the launcher sends it no more than `normalMinSlots` heavy
//! requests at once and the rest wait in the launcher, where the fast lane passes them; a process
//! that isn't busy, or `saturatedPercent` 0, gets `maxOutstanding` as the spec says. The real
//! binary, a real sim burning real CPU, the launcher's `/metrics` to watch its slots.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// One gauge of the launcher's `/metrics` (read strictly) for process m0.
fn gauge(admin: u16, name: &str) -> Option<f64> {
    Some(scrape(admin).value(name, &[("process", "m0")]))
}

fn queue_length(admin: u16) -> Option<f64> {
    Some(scrape(admin).value("fhircluster_queue_length", &[]))
}

/// Starts `$expand`s in the background (their answers are not waited for).
fn expands(addr: SocketAddr, n: usize) {
    for _ in 0..n {
        std::thread::spawn(move || request(addr, "GET", "/r4/ValueSet/$expand?url=x", &[], b""));
    }
}

/// The master alone serves tx; each `$expand` burns `expand_ms` of CPU in 25 ms turns.
fn one_process(expand_ms: u64, saturated_percent: u32) -> (Cluster, u16) {
    let admin = free_port();
    let c = cluster()
        .workers(0)
        .env("SIM_COST_EXPAND_MS", &expand_ms.to_string())
        .config(json!({ "server": { "cluster": {
            "queueSeconds": 60,
            "adminAddress": format!("127.0.0.1:{admin}"),
            "saturatedPercent": saturated_percent
        } } }))
        .start();
    (c, admin)
}

#[test]
fn a_saturated_process_gets_only_normal_min_slots_heavy_requests_and_the_lane_passes_the_rest() {
    let (c, admin) = one_process(20_000, 90);
    let addr = c.addr();
    // One long `$expand` keeps the loop busy all the time: saturated within a few samples.
    expands(addr, 1);
    assert!(
        eventually(Duration::from_secs(5), || gauge(
            admin,
            "fhircluster_saturated"
        ) == Some(1.0)),
        "m0 was never marked saturated: {}",
        admin_get(admin, "/metrics").text()
    );
    // 7 more: 3 join it (normalMinSlots 4), 4 wait in the launcher.
    expands(addr, 7);
    assert!(
        eventually(Duration::from_secs(5), || gauge(
            admin,
            "fhircluster_in_flight"
        ) == Some(4.0)
            && queue_length(admin) == Some(4.0)),
        "in flight {:?}, queued {:?}",
        gauge(admin, "fhircluster_in_flight"),
        queue_length(admin)
    );
    holds_for_or(
        "4 in flight and 4 waiting",
        Duration::from_millis(500),
        || {
            let held = gauge(admin, "fhircluster_in_flight") == Some(4.0)
                && queue_length(admin) == Some(4.0);
            if held {
                Ok(())
            } else {
                Err(admin_get(admin, "/metrics").text())
            }
        },
    );
    // A cheap request takes the lane past the waiting ones and is answered while they wait.
    let t = Instant::now();
    let probe = request(
        addr,
        "GET",
        "/r4/CodeSystem/$lookup?system=s&code=c",
        &[],
        b"",
    );
    assert_eq!(probe.status, 200, "{}", probe.text());
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(queue_length(admin), Some(4.0), "the heavy ones still wait");
    let status = admin_get(admin, "/status").json();
    assert_eq!(status["processes"][0]["saturated"], true, "{status}");
}

#[test]
fn with_saturated_percent_0_a_busy_process_gets_max_outstanding_as_the_spec_says() {
    let (c, admin) = one_process(20_000, 0);
    let addr = c.addr();
    expands(addr, 1);
    // Busy for as long as saturation took to show above, and never marked saturated.
    wait_until(
        "the first $expand in flight",
        Duration::from_secs(5),
        || gauge(admin, "fhircluster_in_flight") == Some(1.0),
    );
    holds_for("m0 not saturated", Duration::from_millis(800), || {
        gauge(admin, "fhircluster_saturated") == Some(0.0)
    });
    expands(addr, 7);
    assert!(
        eventually(Duration::from_secs(5), || gauge(
            admin,
            "fhircluster_in_flight"
        ) == Some(8.0)),
        "in flight {:?}",
        gauge(admin, "fhircluster_in_flight")
    );
    assert_eq!(queue_length(admin), Some(0.0));
    assert_eq!(gauge(admin, "fhircluster_saturated"), Some(0.0));
}

#[test]
fn saturation_ends_when_the_loop_has_nothing_to_do() {
    let (c, admin) = one_process(1_500, 90);
    let addr = c.addr();
    let worker = std::thread::spawn(move || {
        request(addr, "GET", "/r4/ValueSet/$expand?url=x", &[], b"").status
    });
    assert!(
        eventually(Duration::from_secs(5), || gauge(
            admin,
            "fhircluster_saturated"
        ) == Some(1.0)),
        "never saturated"
    );
    assert_eq!(worker.join().ok(), Some(200));
    assert!(
        eventually(Duration::from_secs(3), || gauge(
            admin,
            "fhircluster_saturated"
        ) == Some(0.0)),
        "still held after its work ended"
    );
    // and the next heavy requests get maxOutstanding again until it is busy once more
    expands(addr, 8);
    assert!(
        eventually(Duration::from_secs(3), || gauge(
            admin,
            "fhircluster_in_flight"
        )
        .is_some_and(|n| n >= 5.0)),
        "in flight {:?}",
        gauge(admin, "fhircluster_in_flight")
    );
}

#[test]
fn saturated_percent_is_taken_live_on_reload() {
    let (c, admin) = one_process(20_000, 0);
    let addr = c.addr();
    let mut config = c.config.clone();
    merge(
        &mut config,
        &json!({ "server": { "cluster": { "saturatedPercent": 90 } } }),
    );
    write_config(&c.data_dir(), &config);
    c.signal(1); // SIGHUP
    c.wait_for_count(
        "reload: server.cluster.saturatedPercent 0 → 90",
        1,
        Duration::from_secs(10),
    );
    // A reload restarts the processes in turn (the master alone here: it is down meanwhile).
    c.wait_for_count("rolling restart done", 1, Duration::from_secs(30));
    expands(addr, 1);
    assert!(
        eventually(Duration::from_secs(10), || gauge(
            admin,
            "fhircluster_saturated"
        ) == Some(1.0)),
        "not saturated after the reload turned it on: {}",
        c.log_lines().join("\n")
    );
}
