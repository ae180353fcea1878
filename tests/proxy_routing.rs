//! The routing rules through the real front door: `fhircluster` with `fhirsmith-sim` processes
//! (which stamp `X-Served-By` and answer an error to anything a worker should never get), on
//! free loopback ports. Covers the master's paths, the options that move `$closure` and the
//! master's share of tx work, cache-id routing (with a control that goes around the launcher to
//! show the same traffic fails without it), a dead issuer, and the headers and framing passed on.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use serde_json::json;

const METHODS_AND_MASTER_PATHS: &[(&str, &str)] = &[
    ("POST", "/r4/$closure"),
    ("POST", "/r4/%24closure"),
    ("GET", "/r4/syndication"),
    ("GET", "/r4/syndication/feed.xml"),
    ("GET", "/r4/info/loinc"),
    ("GET", "/"),
    ("GET", "/packages"),
    ("GET", "/dashboard"),
    ("GET", "/health"),
    ("GET", "/xig/some/page?x=1"),
];

#[test]
fn master_paths_reach_the_master_and_tx_work_is_spread() {
    // spec: ROUTE-1a, ROUTE-1b, ROUTE-1c, ROUTE-2a, ROUTE-4a, DEC-14, OPT-2, OPT-4
    let c = cluster().workers(2).start();
    // Three rounds: rule 4 rotates ties over m0, tx1, tx2, so a master path routed by rule 4
    // would land on a worker (which answers 500) at least once.
    for _ in 0..3 {
        for (method, path) in METHODS_AND_MASTER_PATHS {
            let r = c.request(method, path, &[], b"");
            assert_eq!(
                (r.status, r.served_by()),
                (200, "m0"),
                "{method} {path}: {}",
                r.text()
            );
        }
    }
    // A cache-id does not take `$closure` away from the master (DEC-14).
    let r = c.request(
        "POST",
        "/r4/$closure",
        &[("X-Cache-Id", "tx1.abc.def")],
        b"",
    );
    // (The master checks the id itself: it never issued it.)
    assert_eq!(r.served_by(), "m0", "{}", r.text());

    let served: BTreeSet<String> = (0..9)
        .map(|_| {
            let r = c.get("/r4/metadata");
            assert_eq!(r.status, 200);
            r.served_by().to_string()
        })
        .collect();
    assert_eq!(
        served,
        ["m0", "tx1", "tx2"].iter().map(|s| s.to_string()).collect(),
        "ordinary tx requests go to every tx process"
    );
}

#[test]
fn a_target_the_launcher_cannot_route_is_400() {
    // spec: ROUTE-2b, DEC-14 (bad targets are the launcher's own 400)
    let c = cluster().workers(1).start();
    for target in [
        "/r4/../etc/passwd",
        "/r4/%2e%2e/x",
        "/r4/CodeSystem/%zz",
        "/r4/CodeSystem/%ff%fe",
        // Authority-form is CONNECT's alone (an absolute-form target is routed by its path:
        // see reliability_clients).
        "example.org:80",
    ] {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let r = raw_request(c.addr(), raw.as_bytes(), Duration::from_secs(10));
        assert_eq!(r.status, 400, "{target}: {}", r.text());
        assert_eq!(r.json()["resourceType"], "OperationOutcome", "{target}");
        assert_eq!(
            r.served_by(),
            "",
            "{target}: answered by the launcher itself"
        );
    }
    // The launcher is still fine afterwards.
    assert_eq!(c.get("/r4/metadata").status, 200);
}

#[test]
fn shared_closure_sends_closure_to_every_tx_process() {
    // spec: ROUTE-5a, OPT-8, OPT-2
    let c = cluster()
        .workers(2)
        .config(json!({ "server": { "cluster": { "sharedClosure": true } } }))
        .start();
    let served: BTreeSet<String> = (0..9)
        .map(|_| {
            let r = c.request("POST", "/r4/$closure", &[], b"");
            assert_eq!(r.status, 200, "{}", r.text());
            r.served_by().to_string()
        })
        .collect();
    assert!(
        served.contains("tx1") && served.contains("tx2"),
        "$closure reached {served:?}"
    );
    for path in ["/r4/syndication", "/r4/info/x", "/"] {
        let r = c.get(path);
        assert_eq!((r.status, r.served_by()), (200, "m0"), "{path}");
    }
}

#[test]
fn a_master_that_does_not_serve_tx_gets_no_ordinary_tx_request() {
    // spec: ROUTE-4b, CONF-7
    let c = cluster()
        .workers(2)
        .config(json!({ "server": { "cluster": { "masterServesTx": false } } }))
        .start();
    let addr = c.addr();
    // Concurrent, so the least-loaded choice is exercised with loads above zero.
    let served = in_parallel(6, move |_| {
        (0..6)
            .map(|i| {
                let path = if i % 2 == 0 {
                    "/r4/CodeSystem/$lookup?code=1"
                } else {
                    "/r4/ValueSet/$expand?url=x"
                };
                let r = request(addr, "GET", path, &[], b"");
                (r.status, r.served_by().to_string())
            })
            .collect::<Vec<_>>()
    });
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for (status, code) in served.into_iter().flatten() {
        assert_eq!(status, 200);
        *by.entry(code).or_default() += 1;
    }
    assert!(
        !by.contains_key("m0"),
        "tx requests reached the master: {by:?}"
    );
    assert!(by.contains_key("tx1") && by.contains_key("tx2"), "{by:?}");
    // The master's own paths still reach it.
    let r = c.request("POST", "/r4/$closure", &[], b"");
    assert_eq!((r.status, r.served_by()), (200, "m0"));
}

/// Starts `n` `$cache-control` sessions through `addr`; returns their cache-ids.
fn start_sessions(addr: std::net::SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let r = request(addr, "POST", "/r4/$cache-control", &[], b"{}");
            assert_eq!(r.status, 200, "{}", r.text());
            let id = r.header("x-cache-id").unwrap_or("").to_string();
            assert!(
                id.starts_with(&format!("{}.", r.served_by())),
                "id {id:?} from {}",
                r.served_by()
            );
            id
        })
        .collect()
}

/// Sends 8 requests with each cache-id (6 threads at once) to `addr`; returns (status, unknown,
/// served by, issuer) for each.
fn use_sessions(addr: std::net::SocketAddr, ids: &[String]) -> Vec<(u16, bool, String, String)> {
    let ids = ids.to_vec();
    in_parallel(ids.len(), move |i| {
        let id = ids[i].clone();
        let issuer = id.split('.').next().unwrap_or("").to_string();
        (0..8)
            .map(|k| {
                let (method, path) = match k % 4 {
                    0 => ("GET", "/r4/ValueSet/$expand?url=x"),
                    1 => ("GET", "/r4/CodeSystem/$lookup?code=1"),
                    2 => ("POST", "/r4/CodeSystem/$validate-code"),
                    _ => ("GET", "/r4/CodeSystem/loinc"),
                };
                let r = request(addr, method, path, &[("X-Cache-Id", &id)], b"");
                (
                    r.status,
                    r.is_cache_id_unknown(),
                    r.served_by().to_string(),
                    issuer.clone(),
                )
            })
            .collect::<Vec<_>>()
    })
    .into_iter()
    .flatten()
    .collect()
}

#[test]
fn cache_sessions_reach_the_process_that_issued_them() {
    // spec: ROUTE-3a, OPT-3, QUEUE-6
    let c = cluster().workers(2).env("SIM_COST_EXPAND_MS", "20").start();
    let ids = start_sessions(c.addr(), 6);
    let issuers: BTreeSet<&str> = ids.iter().filter_map(|i| i.split('.').next()).collect();
    assert!(
        issuers.len() >= 2,
        "the sessions should be spread over the processes: {ids:?}"
    );
    let results = use_sessions(c.addr(), &ids);
    assert_eq!(results.len(), 48);
    let unknown = results.iter().filter(|r| r.1).count();
    assert_eq!(
        unknown, 0,
        "cache-id-unknown through the launcher: {results:?}"
    );
    for (status, _, served, issuer) in &results {
        assert_eq!(*status, 200);
        assert_eq!(served, issuer, "a request went to another process");
    }

    // The control: the same sessions sent straight to one process, as a front door without the
    // cache-id rule would, mostly fail. This is what the test above would see if routing broke.
    let direct = use_sessions(c.process_addr("tx1"), &ids);
    let unknown = direct.iter().filter(|r| r.1).count();
    let foreign = direct.iter().filter(|r| r.3 != "tx1").count();
    assert!(foreign > 0, "every session was tx1's: {ids:?}");
    assert_eq!(
        unknown, foreign,
        "straight to tx1, every other process's id is unknown"
    );
}

#[test]
fn a_dead_issuer_is_lost_to_a_restart_and_an_unknown_prefix_goes_to_a_tx_process() {
    // spec: ROUTE-3b, ROUTE-3c, OPT-3, OPT-11, QUEUE-7
    let c = cluster().workers(2).start();
    // An id no process has: any tx process answers cache-id-unknown itself (ROUTE-3c).
    for id in ["zz9.abc.def", "nodots", "tx9.abc.def"] {
        let r = c.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", id)], b"");
        assert!(r.is_cache_id_unknown(), "{id}: {} {}", r.status, r.text());
        assert!(
            ["m0", "tx1", "tx2"].contains(&r.served_by()),
            "{id}: answered by a process, got {:?}",
            r.served_by()
        );
    }
    // A session on tx1, then tx1 killed: the launcher answers for it at once (ROUTE-3b).
    let id = c.session_on("tx1");
    let r = c.request("GET", "/r4/metadata", &[("X-Cache-Id", &id)], b"");
    assert_eq!((r.status, r.served_by()), (200, "tx1"));
    let pid = c.pid_of("tx1");
    unsafe_kill(pid, 9);
    let (r, took) = c.timed("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", &id)], b"");
    assert!(
        r.is_cache_id_unknown(),
        "right after the kill: {} {}",
        r.status,
        r.text()
    );
    assert!(
        r.outcome_text().contains("lost to a server restart"),
        "{}",
        r.text()
    );
    assert!(
        took < Duration::from_secs(3),
        "answered at once, took {took:?}"
    );
    // Once the launcher has seen it go, the answer is its own (no process stamped it).
    let mut c = c;
    c.wait_for("tx1: exited", Duration::from_secs(10));
    let r = c.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", &id)], b"");
    // (tx1 comes back only after a 1 s backoff.)
    assert_eq!(r.served_by(), "", "{}", r.text());
    assert!(r.is_cache_id_unknown(), "{}", r.text());
    assert!(r.outcome_text().contains("lost to a server restart"));
    // Other work carries on meanwhile.
    assert_eq!(c.get("/r4/metadata").status, 200);
    // Restarted, tx1 itself says the id was lost to its restart.
    c.wait_for_count("tx1: ready", 2, Duration::from_secs(15));
    let r = c.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", &id)], b"");
    assert!(r.is_cache_id_unknown(), "{}", r.text());
    assert!(r.outcome_text().contains("lost to a server restart"));
}

#[test]
fn forwarded_headers_and_chunked_bodies_are_passed_on() {
    // spec: EDGE-1, EDGE-2, EDGE-4, EDGE-6
    let c = cluster().workers(1).start();
    let r = c.get("/r4/metadata");
    assert_eq!(r.header("x-sim-forwarded-for"), Some("127.0.0.1"));
    let r = c.request(
        "GET",
        "/r4/metadata",
        &[
            ("X-Forwarded-For", "203.0.113.7"),
            ("X-Forwarded-Proto", "https"),
        ],
        b"",
    );
    assert_eq!(
        r.header("x-sim-forwarded-for"),
        Some("203.0.113.7, 127.0.0.1"),
        "the client's address is appended (EDGE-1)"
    );
    assert_eq!(
        r.header("x-sim-forwarded-proto"),
        Some("https"),
        "from loopback the proto is believed (EDGE-2)"
    );
    // The same on a master path.
    let r = c.request("GET", "/", &[("X-Forwarded-For", "198.51.100.1")], b"");
    assert_eq!(r.served_by(), "m0");
    assert_eq!(
        r.header("x-sim-forwarded-for"),
        Some("198.51.100.1, 127.0.0.1")
    );

    // A chunked body goes on chunked, whole (EDGE-4), on a tx path and on a master path.
    for path in ["/r4/ValueSet/$expand", "/r4/$closure"] {
        let raw = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n\
             5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        );
        let r = raw_request(c.addr(), raw.as_bytes(), Duration::from_secs(10));
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert_eq!(r.header("x-sim-chunked"), Some("true"), "{path}");
        assert_eq!(r.header("x-sim-content-length"), Some("none"), "{path}");
        assert_eq!(r.header("x-sim-body-length"), Some("11"), "{path}");
    }
    // A Content-Length body keeps its length.
    let r = c.request("POST", "/r4/ValueSet/$expand", &[], b"{\"a\":1}");
    assert_eq!(r.header("x-sim-content-length"), Some("7"));
    assert_eq!(r.header("x-sim-chunked"), Some("false"));

    // Keep-alive: several requests on one client connection (EDGE-6).
    let mut conn = Conn::open(c.addr()).expect("connect");
    for _ in 0..3 {
        conn.send("GET", "/r4/metadata", &[], b"", true)
            .expect("send");
        let r = conn.read();
        assert_eq!(r.status, 200);
    }
}
