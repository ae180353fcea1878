//! `server.cluster.servedByHeader`: the launcher names the process that answered each request
//! it forwarded, whatever the server (the sim, a plain Python server), and the process its own
//! answer concerns (a `504` naming the master, the `404` for tx1's cache-ids while tx1
//! restarts), never a refusal that concerns none (a bad target). Off unless set; a reload
//! turns it off for the connections accepted after it.

use crate::common;

use common::*;
use serde_json::json;

const PLAIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/plain-server.py"
);

/// The launcher's header: the servers' own `X-Served-By` says who really answered.
const HEADER: &str = "x-process";

fn named(r: &Response) -> Option<&str> {
    r.header(HEADER)
}

#[test]
fn the_header_names_the_process_that_answered_or_that_a_refusal_concerns() {
    // spec: ROUTE-3b (the 404 for a cache-id whose issuer restarts), TIMEOUT-2 (a 504 names it)
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "servedByHeader": "X-Process", "upstreamTimeoutSeconds": 1
        } } }))
        .start();
    let mut seen = Vec::new();
    for path in ["/r4/metadata", "/r4/CodeSystem/$lookup", "/dashboard"] {
        for _ in 0..4 {
            let r = c.get(path);
            assert!(r.status < 300, "{path}: {} {}", r.status, r.text());
            assert_eq!(named(&r), Some(r.served_by()), "{path}");
            seen.push(r.served_by().to_string());
        }
    }
    assert!(
        seen.iter().any(|s| s == "tx1") && seen.iter().any(|s| s == "m0"),
        "{seen:?}"
    );

    // The launcher's own refusal of a bad target concerns no process.
    let r = c.get("/r4/%zz");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(named(&r), None);

    // A 504 for the master's hang names it.
    let r = c.get("/sim/hang");
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(named(&r), Some("m0"));

    // tx1's cache-id while tx1 restarts: the launcher's 404 names tx1.
    let id = (0..20)
        .map(|_| c.request("POST", "/r4/$cache-control", &[], b"{}"))
        .find(|r| r.served_by() == "tx1")
        .and_then(|r| r.header("x-cache-id").map(String::from))
        .expect("a session on tx1 within 20 tries");
    let mark = c.mark();
    unsafe_kill(c.pid_of("tx1"), 9);
    c.wait_for_after(mark, "tx1: exited", secs(10));
    let r = c.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", &id)], b"");
    assert!(r.is_cache_id_unknown(), "{} {}", r.status, r.text());
    assert_eq!(named(&r), Some("tx1"));

    // Reloaded without it: off for the connections accepted from then on.
    let mut config = c.config.clone();
    config["server"]["cluster"]
        .as_object_mut()
        .expect("cluster")
        .remove("servedByHeader");
    write_config(&c.data_dir(), &config);
    c.signal(1);
    c.wait_for_after(mark, "reload: server.cluster.servedByHeader", secs(10));
    let r = c.get("/");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(named(&r), None, "off after the reload");
}

#[test]
fn a_server_without_the_channel_is_named_too() {
    let cmd = format!("exec python3 {PLAIN} \"$PORT\" 0");
    let c = cluster()
        .workers(1)
        .command(&["sh", "-c", &cmd])
        .config(json!({ "server": { "cluster": { "servedByHeader": "X-Process" } } }))
        .start();
    for path in ["/r4/metadata", "/r4/metadata", "/r4/metadata", "/"] {
        let r = c.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert!(["m0", "tx1"].contains(&r.served_by()), "{path}: {r:?}");
        assert_eq!(named(&r), Some(r.served_by()), "{path}");
    }
}
