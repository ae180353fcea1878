//! What the front door answered itself reaches the daily report's counts (spec "The daily
//! report"), end to end: every `404 cache-id-unknown` the launcher gives for a restarting issuer
//! counts once against that issuer, however the launcher learned the issuer was gone (EVENT-8),
//! and its `503`s for the master's paths while the master restarts count as refusals with no
//! process ready (EVENT-10). The counts are read from the events the master received.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// The `counts` events the master has received.
fn counts_events(c: &Cluster) -> Vec<Value> {
    c.direct(0, "GET", "/sim/received").json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["kind"] == "counts")
        .collect()
}

fn sum(events: &[Value], pointer: &str) -> u64 {
    events
        .iter()
        .filter_map(|e| e.pointer(pointer).and_then(Value::as_u64))
        .sum()
}

/// A launcher answer (no process stamped it).
fn launchers(r: &Response) -> bool {
    r.served_by().is_empty()
}

#[test]
fn the_launchers_own_answers_around_a_crash_reach_the_daily_report_once_each() {
    // spec: EVENT-8, EVENT-10, ROUTE-3b, LIMIT-1
    let admin = admin_addr();
    let mut c = cluster()
        .workers(2)
        // The master ignores SIGTERM, so it can still be asked after the launcher's stop, which
        // sends it the last counts. Each restart takes 2 s: a window to be answered in.
        .env("SIM_IGNORE_SIGTERM_m0", "1")
        .env("SIM_START_DELAY_MS_m0", "2000")
        .env("SIM_START_DELAY_MS_tx1", "2000")
        .config(json!({"server": {"cluster": {
            "recycleSeconds": 0, "adminAddress": admin.to_string()
        }}}))
        .start();
    let addr = c.addr();

    // The master restarting: its paths are answered 503 by the launcher.
    let mark = c.mark();
    unsafe_kill(c.pid_of("m0"), 9);
    c.wait_for_after(mark, "m0: exited", secs(10));
    let mut master_503 = 0u64;
    let began = Instant::now();
    while c.count_lines("m0: ready") < 2 {
        assert!(began.elapsed() < secs(20), "m0 never came back");
        let r = c.get("/dashboard");
        if r.status == 503 && launchers(&r) {
            master_503 += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(master_503 > 0, "no 503 while the master restarted");

    // tx1 dies under requests with its cache-ids: some were sent to it (it was stopped, so they
    // hang there until it dies), others arrive just after, before and after the launcher hears
    // of the exit. Each is answered 404 cache-id-unknown by the launcher.
    let id = poll("a cache-id from tx1", secs(10), || {
        let r = c.request("POST", "/r4/$cache-control", &[], b"");
        (r.status == 200 && r.served_by() == "tx1")
            .then(|| r.header("x-cache-id").unwrap_or("").to_string())
    });
    let tx1 = c.pid_of("tx1");
    unsafe_kill(tx1, 19); // SIGSTOP
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (id, stop) = (id.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    answers.push(request(
                        addr,
                        "GET",
                        "/r4/CodeSystem/$lookup?code=x",
                        &[("X-Cache-Id", &id)],
                        b"",
                    ));
                }
                answers
            })
        })
        .collect();
    poll(
        "every client's first request at the stopped tx1",
        secs(10),
        || {
            let s = admin_status(admin);
            (s["processes"][1]["frontInFlight"].as_u64() == Some(8)).then_some(())
        },
    );
    let mark = c.mark();
    unsafe_kill(tx1, 9);
    c.wait_for_after(mark, "tx1: exited", secs(10));
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let answers: Vec<Response> = clients
        .into_iter()
        .flat_map(|t| t.join().expect("client"))
        .collect();
    let lost_404 = answers
        .iter()
        .filter(|r| r.is_cache_id_unknown() && launchers(r))
        .count() as u64;
    let others: Vec<String> = answers
        .iter()
        .filter(|r| !(r.is_cache_id_unknown() && launchers(r)))
        .map(|r| format!("{} {} {}", r.status, r.served_by(), r.text()))
        .collect();
    assert!(others.is_empty(), "other answers: {others:?}");
    assert!(lost_404 >= 8, "only {lost_404} answers");

    // The launcher's stop sends the last counts; the master still answers.
    c.wait_for_count("tx1: ready", 2, secs(20));
    c.signal(15);
    c.wait_for("m0: stopping (SIGTERM)", secs(20));
    let events = counts_events(&c);
    assert_eq!(
        sum(&events, "/lost/tx1/cacheIdWhileRestarting"),
        lost_404,
        "each 404 for tx1's cache-ids counted once against tx1: {events:?}"
    );
    assert_eq!(
        sum(&events, "/refused/noProcessReady"),
        master_503,
        "each 503 for the master's paths counted as no process ready: {events:?}"
    );
    c.wait_exit(secs(30));
}
