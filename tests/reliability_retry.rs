//! DEC-33 through the real launcher: a GET whose process closed the connection before a byte of
//! an answer is sent once more, on a fresh connection or to another ready process, instead of a
//! `502`: a process that closes each kept-alive connection as the next request arrives, and one
//! SIGKILLed with GETs sent and unanswered. The scripted upstream is
//! `fixtures/scripted-upstream.py`; each answer is tagged with its request's id.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use serde_json::json;

const SCRIPTED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/scripted-upstream.py"
);
const SIGKILL: i32 = 9;

/// The id's own answer (tagged with it), or what came instead.
fn own(addr: std::net::SocketAddr, id: &str, b: &str) -> Result<(), String> {
    let r = request(addr, "GET", &format!("/r4/attr?id={id}&b={b}"), &[], b"");
    if r.status == 200 && r.header("x-attr") == Some(id) {
        Ok(())
    } else {
        let text = r.text();
        Err(format!(
            "{id}: {} {:?}",
            r.status,
            &text[..text.len().min(120)]
        ))
    }
}

#[test]
fn gets_a_process_closes_unanswered_on_kept_alive_connections_are_sent_again() {
    // spec: DEC-33, LAUNCH-8
    let admin = admin_addr();
    let c = cluster()
        .workers(2)
        .command(&["python3", SCRIPTED])
        .env("SCRIPTED_CLOSE_KEPT_ALIVE", "1")
        .config(json!({ "server": { "cluster": { "adminAddress": admin.to_string() } } }))
        .start();
    let addr = c.addr();
    let clients: Vec<_> = (0..4)
        .map(|k| {
            std::thread::spawn(move || {
                (0..40)
                    .filter_map(|n| own(addr, &format!("k{k}-{n}"), "ok").err())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let failed: Vec<String> = clients
        .into_iter()
        .flat_map(|t| t.join().expect("client"))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 160 failed, e.g. {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    let retries = scrape(admin.port()).value("fhircluster_retries_total", &[]);
    assert!(retries > 0.0, "no retry counted: {retries}");
    report_figures(
        "reliability_retry::gets_a_process_closes_unanswered_on_kept_alive_connections",
        "4 clients, 160 GETs, a process closing each kept-alive connection as its next request \
         arrives",
        retries as u64,
        160,
        0,
        "every GET answered by its own process, sent again on a fresh connection (DEC-33)",
    );
}

#[test]
fn gets_in_flight_on_a_process_sigkilled_go_once_to_another() {
    // spec: DEC-33, LAUNCH-9
    const IN_FLIGHT: usize = 6;
    let mut c = cluster()
        .workers(2)
        .command(&["python3", SCRIPTED])
        .config(json!({ "server": { "cluster": { "maxOutstanding": 8 } } }))
        .start();
    let addr = c.addr();
    let mark = c.mark();
    let sends: Vec<_> = (0..IN_FLIGHT)
        .map(|n| std::thread::spawn(move || own(addr, &format!("s{n}"), "slow")))
        .collect();
    // Every GET has reached a process (it printed `got <id>`), none is answered yet.
    let mut on: Vec<(String, String)> = Vec::new();
    for n in 0..IN_FLIGHT {
        let line = c.wait_for_after(mark, &format!("got s{n}"), Duration::from_secs(20));
        let code = if line.contains("[tx1]") { "tx1" } else { "tx2" };
        on.push((code.to_string(), format!("s{n}")));
    }
    let codes: BTreeSet<&str> = on.iter().map(|(c, _)| c.as_str()).collect();
    let victim = *codes.iter().next().expect("a process holds some");
    let killed: Vec<&str> = on
        .iter()
        .filter(|(c, _)| c == victim)
        .map(|(_, id)| id.as_str())
        .collect();
    unsafe_kill(c.pid_of(victim), SIGKILL);
    let failed: Vec<String> = sends
        .into_iter()
        .filter_map(|t| t.join().expect("send").err())
        .collect();
    assert!(
        failed.is_empty(),
        "{victim} killed holding {killed:?}: {failed:?}"
    );
    c.wait_for(&format!("{victim}: ready"), Duration::from_secs(20));
    report_figures(
        "reliability_retry::gets_in_flight_on_a_process_sigkilled",
        "6 slow GETs in flight, the process holding some SIGKILLed",
        1,
        IN_FLIGHT as u64,
        0,
        "each GET the dead process had was answered by the other (DEC-33)",
    );
}

#[test]
fn gets_with_a_cache_id_whose_issuer_is_killed_in_flight_are_not_sent_elsewhere() {
    // spec: DEC-33, ROUTE-3b
    let mut c = cluster()
        .workers(2)
        .config(json!({ "server": { "cluster": { "maxOutstanding": 8 } } }))
        .env("SIM_COST_EXPAND_MS", "3000")
        .start();
    let addr = c.addr();
    let session = c.session_on("tx1");
    let owned: Vec<_> = (0..2)
        .map(|_| {
            let s = session.clone();
            std::thread::spawn(move || request(addr, "GET", EXPAND, &[("X-Cache-Id", &s)], b""))
        })
        .collect();
    // The sim works on one at a time: one in progress, the other sent and waiting in it.
    wait_until("tx1 working on its session's", secs(20), || {
        in_flight_on(&c, "tx1") >= 1
    });
    unsafe_kill(c.pid_of("tx1"), SIGKILL);
    for t in owned {
        let r = t.join().expect("owned");
        // Lost with its issuer, never a 200 from tx2 (which has no such cache) nor a 502.
        assert!(
            r.is_cache_id_unknown() && r.outcome_text().contains("restart"),
            "a request of tx1's session, tx1 killed: {} {}",
            r.status,
            r.text()
        );
    }
    c.wait_for("tx1: ready", secs(20));
}

/// A GET the worker answers after 1.5 s, burning no CPU (its slot stays taken).
const SLOW_GET: &str = "/r4/CodeSystem/$lookup?system=http://loinc.org&code=1&_sim_delay_ms=1500";

#[test]
fn a_get_sigkilled_unanswered_waits_for_a_busy_processes_slot_instead_of_a_502() {
    // spec: DEC-33 (the GET sent once more waits for a slot as a new request does, its
    // queueSeconds counted from the retry)
    let mut c = cluster()
        .workers(2)
        .config(json!({ "server": { "cluster": {
            "masterServesTx": false, "maxOutstanding": 1, "fastLaneExtra": 0,
            "normalMinSlots": 0, "saturatedPercent": 0, "queueSeconds": 10
        } } }))
        .start();
    let addr = c.addr();
    let gets: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                let sent = std::time::Instant::now();
                (request(addr, "GET", SLOW_GET, &[], b""), sent.elapsed())
            })
        })
        .collect();
    wait_until("one slow GET on each worker", secs(20), || {
        in_flight_on(&c, "tx1") == 1 && in_flight_on(&c, "tx2") == 1
    });
    std::thread::sleep(Duration::from_millis(300)); // into its 1.5 s, as the probe did
    unsafe_kill(c.pid_of("tx1"), SIGKILL);
    let answers: Vec<(Response, Duration)> =
        gets.into_iter().map(|t| t.join().expect("get")).collect();
    // Answered by tx2 once its slot freed, or by tx1 once restarted: never a 502.
    for (r, took) in &answers {
        assert_eq!(r.status, 200, "after {took:?}: {}", r.text());
    }
    c.wait_for("tx1: ready", secs(20));
    report_figures(
        "reliability_retry::a_get_sigkilled_unanswered_waits_for_a_busy_processes_slot",
        "2 workers with maxOutstanding 1, two 1.5 s GETs, tx1 SIGKILLed into its GET",
        1,
        2,
        0,
        "the GET tx1 had waited for tx2's slot and was answered (DEC-33)",
    );
}

#[test]
fn a_get_its_only_process_never_answered_is_a_502_logged_at_warning() {
    // spec: DEC-33, LAUNCH-9 (every 502 of the launcher's is logged at WARNING, with its reason)
    let mut c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "masterServesTx": false } } }))
        .start();
    let addr = c.addr();
    let mark = c.mark();
    let get = std::thread::spawn(move || request(addr, "GET", SLOW_GET, &[], b""));
    wait_until("the slow GET on tx1", secs(20), || {
        in_flight_on(&c, "tx1") == 1
    });
    unsafe_kill(c.pid_of("tx1"), SIGKILL);
    let r = get.join().expect("get");
    assert_eq!(r.status, 502, "{}", r.text());
    let line = c.wait_for_after(mark, "answered 502", secs(10));
    assert!(line.contains("WARN") && line.contains("tx1"), "{line}");
    c.wait_for("tx1: ready", secs(20));
}
