//! A query of death (DEC-73) through the real launcher: a GET that makes its process exit (the
//! sim's `_sim_exit`: a crash signal, an exit code) gets a `502` saying so and is not sent to a
//! second process, so one process dies, not all of them; a GET on a process shot from outside
//! (`SIGKILL`, no OOM) still goes to another (DEC-33, `reliability_retry`); a GET that hangs its
//! process gets the `504` of `upstreamTimeoutSeconds` and is not sent again either.

use crate::common;

use common::*;
use serde_json::json;

fn two_workers(admin: std::net::SocketAddr) -> Cluster {
    cluster()
        .workers(2)
        .config(json!({ "server": { "cluster": {
            "masterServesTx": false, "upstreamTimeoutSeconds": 2,
            "adminAddress": admin.to_string()
        } } }))
        .start()
}

/// The launcher's log lines from `mark` on that say a process exited.
fn exits_after(c: &Cluster, mark: usize) -> Vec<String> {
    c.log_lines()
        .into_iter()
        .skip(mark)
        .filter(|l| l.contains(": exited ("))
        .collect()
}

#[test]
fn a_get_that_ends_its_process_is_a_502_and_ends_no_other() {
    // spec: DEC-73, DEC-33, LAUNCH-9
    let admin = admin_addr();
    let c = two_workers(admin);
    let addr = c.addr();
    for (how, said) in [("SEGV", "signal SIGSEGV"), ("3", "exit code 3")] {
        let mark = c.mark();
        let target = format!("{LOOKUP}&_sim_exit={how}");
        let r = request(addr, "GET", &target, &[], b"");
        assert_eq!(r.status, 502, "{how}: {}", r.text());
        let text = r.outcome_text();
        assert!(
            text.contains(said) && text.contains("may be what ended it"),
            "{how}: {text}"
        );
        let line = c.wait_for_after(mark, "may be what ended it", secs(10));
        assert!(
            line.contains("WARN") && line.contains("answered 502"),
            "{line}"
        );
        // The one that had it restarts; the other never had it.
        let dead = if line.contains("tx1:") { "tx1" } else { "tx2" };
        c.wait_for_after(mark, &format!("{dead}: ready"), secs(20));
        let exits = exits_after(&c, mark);
        assert_eq!(exits.len(), 1, "{how}: {exits:?}");
        assert!(exits[0].contains(said), "{exits:?}");
    }
    let retries = scrape(admin.port()).value("fhircluster_retries_total", &[]);
    assert_eq!(retries, 0.0, "a GET that ended its process was sent again");
    report_figures(
        "reliability_query_of_death::a_get_that_ends_its_process",
        "2 workers, a GET that makes its process die (SIGSEGV, then exit code 3)",
        2,
        2,
        2,
        "one process ended each time, never the second; the client got a 502 saying why (DEC-73)",
    );
}

#[test]
fn a_get_that_hangs_its_process_is_a_504_and_is_not_sent_again() {
    // spec: DEC-73, TIMEOUT-1, TIMEOUT-3 (a 504 is no death: the request is aborted, not retried)
    let admin = admin_addr();
    let c = two_workers(admin);
    let target = format!("{LOOKUP}&_sim_hang=1");
    let r = request(c.addr(), "GET", &target, &[], b"");
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(
        r.outcome_text().contains("upstreamTimeoutSeconds"),
        "{}",
        r.text()
    );
    // Aborted on the process that had it (its connection closed), and never on the other.
    wait_until("the hung request aborted", secs(10), || {
        in_flight_on(&c, "tx1") == 0 && in_flight_on(&c, "tx2") == 0
    });
    let retries = scrape(admin.port()).value("fhircluster_retries_total", &[]);
    assert_eq!(retries, 0.0, "the hung GET was sent again");
    assert!(exits_after(&c, 0).is_empty(), "{:?}", exits_after(&c, 0));
}
