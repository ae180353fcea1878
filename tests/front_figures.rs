//! Figures from the front door for every process, end to end with the real binary: a Python
//! HTTP server that knows nothing of the IPC channel, as master and workers, has its answers by
//! class, in flight, latency, memory and CPU in `/status`, a line in each of the status page's
//! graphs, and its series in `/metrics` (everything but the heap). With the simulator, which
//! reports its own counts, its own stays the Requests tile's figure and the front door's is
//! beside it. And restarts are counted by reason: a killed worker is a crash, a reload's
//! rolling restart is not.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use serde_json::{json, Value};

const PLAIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/plain-server.py"
);

fn row<'a>(v: &'a Value, code: &str) -> &'a Value {
    v["processes"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["code"] == code))
        .unwrap_or(&Value::Null)
}

fn status(admin: u16) -> Value {
    admin_get(admin, "/status").json()
}

/// Answers seen by the client, by process (its `X-Served-By`) and status class.
type Seen = BTreeMap<(String, String), u64>;

fn send(c: &Cluster, path: &str, seen: &mut Seen) {
    let r = c.get(path);
    assert!(
        [200, 404].contains(&r.status) && !r.served_by().is_empty(),
        "{path}: {} {}",
        r.status,
        r.text()
    );
    let class = format!("{}xx", r.status / 100);
    *seen.entry((r.served_by().to_string(), class)).or_default() += 1;
}

#[test]
fn a_server_without_a_channel_has_every_figure_but_the_heap_from_the_front_door() {
    // spec: DEC-46
    let admin = free_port();
    let server = format!("exec python3 {PLAIN} \"$PORT\" 0");
    let mut c = cluster()
        .workers(2)
        .command(&["sh", "-c", &server])
        .arg("--admin-address")
        .arg(&admin.to_string())
        .config(json!({"stats": {"sampleSeconds": 1}}))
        .start();
    let codes = ["m0", "tx1", "tx2"];
    let mut seen = Seen::new();
    // Requests until every process has a latency for an interval in which it answered.
    poll("a latency for every process", secs(30), || {
        for _ in 0..4 {
            send(&c, "/r4/metadata", &mut seen);
            send(&c, "/r4/missing", &mut seen);
            send(&c, "/", &mut seen);
        }
        let v = status(admin);
        codes
            .iter()
            .all(|code| row(&v, code)["latencyMs"]["p99"].as_f64() > Some(0.0))
            .then_some(())
    });
    let count = |code: &str, class: &str| {
        seen.get(&(code.to_string(), class.to_string()))
            .copied()
            .unwrap_or(0)
    };
    // The counts reach the status as they are; CPU needs two readings for its share.
    let v = poll("the status has every answer and the CPU", secs(20), || {
        let v = status(admin);
        codes
            .iter()
            .all(|code| {
                let r = row(&v, code);
                r["noChannel"] == true
                    && r["frontAnswers"]["2xx"].as_u64() == Some(count(code, "2xx"))
                    && r["frontAnswers"]["4xx"].as_u64() == Some(count(code, "4xx"))
                    && r["cpuPercent"].is_number()
            })
            .then_some(v)
    });
    for code in codes {
        let r = row(&v, code);
        assert_eq!(r["noChannel"], true, "{code}: {r}");
        assert_eq!(
            r["requests"],
            Value::Null,
            "{code}: no count of its own: {r}"
        );
        assert_eq!(r["heapUsed"], Value::Null, "{code}: no heap: {r}");
        let total = count(code, "2xx") + count(code, "4xx");
        assert!(total > 0, "{code} answered nothing: {seen:?}");
        assert_eq!(r["frontRequests"].as_u64(), Some(total), "{code}: {r}");
        assert_eq!(r["frontInFlight"], 0, "{code}: {r}");
        assert_eq!(r["frontQueued"], 0, "{code}: {r}");
        assert_eq!(r["front502"], 0, "{code}: {r}");
        assert!(r["bytesOut"].as_u64() > Some(0), "{code}: {r}");
        assert!(r["rssAnon"].as_u64() > Some(0), "{code}: {r}");
        assert!(r["cpuSeconds"].as_f64() >= Some(0.0), "{code}: {r}");
    }
    let all: u64 = seen.values().sum();
    assert_eq!(v["totals"]["frontRequests"].as_u64(), Some(all), "{v}");
    assert_eq!(
        v["totals"]["requests"],
        Value::Null,
        "no process counts its own"
    );

    // /metrics: the same counts per process and class, through the strict checks.
    let m = scrape(admin);
    for code in codes {
        for class in ["2xx", "4xx"] {
            assert_eq!(
                m.value(
                    "fhircluster_process_requests_total",
                    &[("process", code), ("class", class)]
                ),
                count(code, class) as f64,
                "{code} {class}"
            );
        }
        assert!(
            m.value(
                "fhircluster_process_response_bytes_total",
                &[("process", code)]
            ) > 0.0
        );
        assert!(m
            .get(
                "fhircluster_process_cpu_seconds_total",
                &[("process", code)]
            )
            .is_some());
    }

    // Connections as nginx counts them: none closed at once for a limit.
    let accepted = m.value("fhircluster_connections_accepted_total", &[]);
    assert!(accepted >= all as f64, "one connection a request at least");
    assert_eq!(
        m.value("fhircluster_connections_handled_total", &[]),
        accepted
    );
    assert_eq!(m.value("fhircluster_accept_errors_total", &[]), 0.0);

    // The graphs: a line for every process, from the launcher's own samples.
    let html = poll("a line per process in each graph", secs(20), || {
        let html = admin_get(admin, "/").text();
        let drawn = ["requests", "memory", "inflight"].iter().all(|graph| {
            let Some(at) = html.find(&format!(r#"data-graph="{graph}""#)) else {
                return false;
            };
            let svg = &html[at..];
            let svg = &svg[..svg.find("</svg>").unwrap_or(svg.len())];
            codes
                .iter()
                .all(|code| svg.contains(&format!(r#"data-code="{code}""#)))
        });
        drawn.then_some(html)
    });
    // The headline's Requests is the front door's count, for every server (DEC-91).
    assert!(
        html.contains(r#"Requests <b data-figure="requests">"#),
        "{html}"
    );
    c.signal(15);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
}

#[test]
fn a_processs_own_count_stays_the_requests_tiles_and_the_front_doors_is_beside_it() {
    // spec: STATUS-16, DEC-46
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..25 {
        let r = c.get("/r4/CodeSystem/$lookup?code=x");
        assert_eq!(r.status, 200, "{}", r.text());
        *seen.entry(r.served_by().to_string()).or_default() += 1;
    }
    let v = poll(
        "each process's own count and the front door's",
        secs(20),
        || {
            let v = status(admin);
            seen.iter()
                .all(|(code, n)| {
                    let r = row(&v, code);
                    r["frontRequests"].as_u64() == Some(*n) && r["requests"].as_u64() >= Some(*n)
                })
                .then_some(v)
        },
    );
    let own: u64 = ["m0", "tx1"]
        .iter()
        .filter_map(|code| row(&v, code)["requests"].as_u64())
        .sum();
    assert_eq!(
        v["totals"]["requests"].as_u64(),
        Some(own),
        "the tile sums the processes' own counts, nothing of the front door's: {v}"
    );
    let all: u64 = seen.values().sum();
    assert_eq!(v["totals"]["frontRequests"].as_u64(), Some(all), "{v}");
    assert_eq!(row(&v, "tx1")["noChannel"], false);
    c.signal(15);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
}

#[test]
fn a_crash_and_a_rolling_restart_are_counted_apart() {
    // spec: DEC-47, DEC-84
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let restarts = |m: &Exposition, code: &str, reason: &str| {
        m.value(
            "fhircluster_restarts_total",
            &[("process", code), ("reason", reason)],
        )
    };
    // A killed worker: a crash.
    let mark = c.mark();
    unsafe_kill(c.pid_of("tx1"), 9);
    c.wait_for_after(mark, "tx1: exited", secs(10));
    c.wait_for_count("tx1: ready", 2, secs(20));
    let m = scrape(admin);
    assert_eq!(restarts(&m, "tx1", "crash"), 1.0);
    assert_eq!(restarts(&m, "tx1", "rolling"), 0.0);
    // A reload that changes what the servers read: each process restarted in turn.
    let mut config = c.config.clone();
    config["stats"] = json!({"sampleSeconds": 7});
    write_config(&c.data_dir(), &config);
    c.signal(1);
    c.wait_for("rolling restart done", secs(60));
    let m = poll("the rolling restart counted", secs(10), || {
        let m = scrape(admin);
        (restarts(&m, "m0", "rolling") == 1.0).then_some(m)
    });
    assert_eq!(restarts(&m, "tx1", "rolling"), 1.0);
    assert_eq!(restarts(&m, "tx1", "crash"), 1.0, "no crash added");
    assert_eq!(
        restarts(&m, "m0", "crash"),
        0.0,
        "a planned restart is no crash"
    );
    let v = status(admin);
    assert_eq!(row(&v, "tx1")["restartsBy"]["crash"], 1, "{v}");
    assert_eq!(row(&v, "tx1")["restartsBy"]["rolling"], 1, "{v}");
    assert_eq!(row(&v, "tx1")["restarts"], 1, "only the crash is a problem");
    assert_eq!(row(&v, "m0")["restarts"], 0, "a planned restart is none");
    c.signal(15);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
}
