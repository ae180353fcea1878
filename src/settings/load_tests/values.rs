//! Each setting's values from config.json, as read: types, ranges, zero, fractions, rules
//! between them. Reading only: what a value then does is proved where it acts, and those tests
//! name the spec's IDs (`// spec: CONF-13` in the scheduler's tests, ...).

use std::time::Duration;

use serde_json::{json, Value};

use super::*;

#[test]
fn a_wrong_json_type_names_the_setting_path() {
    refused(
        settings(&[], &[], Some(json!({"server": {"port": "abc"}}))),
        "server.port",
        "\"abc\"",
    );
    refused(
        settings(&[], &[], cluster(json!({"sharedCache": "yes"}))),
        "server.cluster.sharedCache",
        "true or false",
    );
    refused(
        settings(&[], &[], cluster(json!({"workerRule": 1}))),
        "server.cluster.workerRule",
        "string",
    );
    refused(
        settings(&[], &[], cluster(json!({"command": "node server.js"}))),
        "server.cluster.command",
        "array of strings",
    );
    refused(
        settings(&[], &[], Some(json!({"server": {"memory": 5}}))),
        "server.memory",
        "object",
    );
    refused(
        settings(
            &[],
            &[],
            Some(json!({"modules": {"tx": {"enabled": "yes"}}})),
        ),
        "modules.tx.enabled",
        "true or false",
    );
    refused(
        settings(&[], &[], Some(json!({"stats": {"intervalMinutes": "10"}}))),
        "stats.intervalMinutes",
        "number",
    );
}

#[test]
fn every_numeric_cluster_setting_refuses_a_negative() {
    // spec: DEC-7
    for key in [
        "workers",
        "cores",
        "memoryHeadroomGB",
        "internalPort",
        "drainSeconds",
        "maxOutstanding",
        "queueSeconds",
        "ownerQueueSeconds",
        "cooldownSeconds",
        "upstreamTimeoutSeconds",
        "writeTimeoutSeconds",
        "headerTimeoutSeconds",
        "proxyThreads",
        "maxStartFailures",
        "recycleSeconds",
        "fastLaneExtra",
        "normalMinSlots",
        "saturatedPercent",
        "fastLaneMaxBytes",
        "statusSeconds",
        "sharedCacheMaxMB",
        "killSeconds",
    ] {
        let setting = format!("server.cluster.{key}");
        refused(
            settings(&[], &[], cluster(json!({ key: -1 }))),
            &setting,
            "-1",
        );
    }
    refused(
        settings(&[], &[], Some(json!({"stats": {"sampleSeconds": -1}}))),
        "stats.sampleSeconds",
        "above 0",
    );
    refused(
        settings(
            &[],
            &[],
            Some(json!({"server": {"memory": {"rejectFraction": -0.5}}})),
        ),
        "server.memory.rejectFraction",
        "above 0",
    );
}

#[test]
fn saturated_percent_is_a_share_from_0_to_100() {
    assert_eq!(ok(&[], &[], None).cluster.saturated_percent, 90);
    let s = ok(&[], &[], cluster(json!({ "saturatedPercent": 0 })));
    assert_eq!(s.cluster.saturated_percent, 0);
    refused(
        settings(&[], &[], cluster(json!({ "saturatedPercent": 101 }))),
        "server.cluster.saturatedPercent",
        "101",
    );
}

#[test]
fn proxy_threads_is_read_and_at_least_one() {
    assert_eq!(ok(&[], &[], None).cluster.proxy_threads, 1);
    let s = ok(&[], &[], cluster(json!({ "proxyThreads": 2 })));
    assert_eq!(s.cluster.proxy_threads, 2);
    refused(
        settings(&[], &[], cluster(json!({ "proxyThreads": 0 }))),
        "server.cluster.proxyThreads",
        "0",
    );
}

#[test]
fn the_hang_timeout_is_three_upstream_timeouts_unless_given() {
    // spec: DEC-82
    assert_eq!(
        ok(&[], &[], None).cluster.hang_timeout,
        Duration::from_secs(180)
    );
    let s = ok(&[], &[], cluster(json!({"upstreamTimeoutSeconds": 2.5})));
    assert_eq!(s.cluster.hang_timeout, Duration::from_millis(7500));
    let given = json!({"upstreamTimeoutSeconds": 0, "hangTimeoutSeconds": 4});
    assert_eq!(
        ok(&[], &[], cluster(given)).cluster.hang_timeout,
        Duration::from_secs(4)
    );
}

#[test]
fn seconds_may_be_fractional() {
    let s = ok(
        &[],
        &[],
        cluster(json!({
            "queueSeconds": 0.5, "drainSeconds": 2.25, "statusSeconds": 0.1, "killSeconds": 0.5,
            "ownerQueueSeconds": 1.5, "cooldownSeconds": 0.25, "upstreamTimeoutSeconds": 0.75,
            "writeTimeoutSeconds": 1.5, "recycleSeconds": 0.5, "headerTimeoutSeconds": 1.25
        })),
    );
    let c = &s.cluster;
    assert_eq!(c.queue, Duration::from_millis(500));
    assert_eq!(c.drain, Duration::from_millis(2250));
    assert_eq!(c.status_interval, Duration::from_millis(100));
    assert_eq!(c.kill_after, Duration::from_millis(500));
    assert_eq!(c.owner_queue, Duration::from_millis(1500));
    assert_eq!(c.cooldown, Duration::from_millis(250));
    assert_eq!(c.upstream_timeout, Duration::from_millis(750));
    assert_eq!(c.write_timeout, Duration::from_millis(1500));
    assert_eq!(c.recycle, Duration::from_millis(500));
    assert_eq!(c.header_timeout, Duration::from_millis(1250));
    let s = ok(&[], &[], Some(json!({"stats": {"sampleSeconds": 2.5}})));
    assert_eq!(s.stats.sample, Some(Duration::from_millis(2500)));
}

#[test]
fn zero_is_read_as_zero_wherever_the_spec_gives_it_a_meaning() {
    // Reading only. What each zero means is proved where it acts: workers 0 in
    // supervisor/lifecycle_tests.rs and tests/supervise.rs (CONF-6); drainSeconds in
    // lifecycle_tests.rs and tests/proxy_drain.rs (CONF-11); maxOutstanding, queueSeconds,
    // ownerQueueSeconds, cooldownSeconds, fastLaneExtra and normalMinSlots in proxy/scheduler's
    // tests (CONF-12..15, CONF-20, CONF-21); upstreamTimeoutSeconds in tests/proxy_slots.rs
    // (CONF-16); writeTimeoutSeconds in tests/proxy_failures.rs (CONF-17); maxStartFailures in
    // supervisor/restart.rs (CONF-18); recycleSeconds in supervisor/recycle_tests.rs (CONF-19);
    // fastLaneMaxBytes in proxy/lane.rs and route_tests.rs (CONF-23).
    let s = ok(
        &[],
        &[],
        cluster(json!({
            "workers": 0, "drainSeconds": 0, "maxOutstanding": 0, "queueSeconds": 0,
            "ownerQueueSeconds": 0, "cooldownSeconds": 0, "upstreamTimeoutSeconds": 0,
            "writeTimeoutSeconds": 0, "maxStartFailures": 0, "recycleSeconds": 0,
            "fastLaneExtra": 0, "normalMinSlots": 0, "fastLaneMaxBytes": 0, "sharedCacheMaxMB": 0,
            "memoryHeadroomGB": 0, "killSeconds": 0
        })),
    );
    let c = &s.cluster;
    assert_eq!(c.workers, Some(0));
    for d in [
        c.drain,
        c.queue,
        c.owner_queue,
        c.cooldown,
        c.upstream_timeout,
        c.write_timeout,
        c.recycle,
        c.kill_after,
        // DEC-82: with no upstream timeout, no hang timeout unless one is given.
        c.hang_timeout,
    ] {
        assert!(d.is_zero());
    }
    assert_eq!(
        (
            c.max_outstanding,
            c.max_start_failures,
            c.fast_lane_extra,
            c.normal_min_slots
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(
        (
            c.fast_lane_max_bytes,
            c.shared_cache_max_mb,
            c.memory_headroom_gb
        ),
        (0, 0, 0.0)
    );
}

#[test]
fn status_seconds_must_be_above_zero() {
    // spec: CONF-24, DEC-7
    refused(
        settings(&[], &[], cluster(json!({"statusSeconds": 0}))),
        "server.cluster.statusSeconds",
        "above 0",
    );
    refused(
        settings(&[], &[], cluster(json!({"cores": 0}))),
        "server.cluster.cores",
        "from 1 to",
    );
}

#[test]
fn normal_min_slots_is_bounded_by_max_outstanding_from_the_file() {
    // spec: CONF-22, DEC-7
    refused(
        settings(&[], &[], cluster(json!({"maxOutstanding": 2}))),
        "server.cluster.normalMinSlots",
        "= 4 (the default): must be at most server.cluster.maxOutstanding (2, from /d/config.json)",
    );
    assert_eq!(
        ok(
            &[],
            &[],
            cluster(json!({"maxOutstanding": 0, "normalMinSlots": 50}))
        )
        .cluster
        .normal_min_slots,
        50
    );
}

#[test]
fn memory_fractions_and_trim_allocator_are_read() {
    // Reading only: the thresholds are proved in supervisor/recycle_tests.rs and
    // tests/status_snapshot.rs (MEM-1, MEM-2), the limits line in plan/limits.rs (CONF-25).
    let mem = |v: Value| Some(json!({"server": {"memory": v}}));
    let s = ok(
        &[],
        &[],
        mem(json!({"rejectFraction": 0.75, "abortFraction": 1})),
    );
    assert_eq!(
        (s.memory.reject_fraction, s.memory.abort_fraction),
        (0.75, 1.0)
    );
    assert!(s.memory.trim_allocator);
    assert!(
        !ok(&[], &[], mem(json!({"trimAllocator": false})))
            .memory
            .trim_allocator
    );
    refused(
        settings(&[], &[], mem(json!({"abortFraction": 1.5}))),
        "server.memory.abortFraction",
        "at most 1",
    );
    refused(
        settings(&[], &[], mem(json!({"rejectFraction": 0.95}))),
        "server.memory.rejectFraction",
        "below server.memory.abortFraction",
    );
}

#[test]
fn the_port_range_is_checked_when_workers_are_given() {
    // spec: CONF-10, DEC-21
    let file = cluster(json!({"internalPort": 3001}));
    refused(
        settings(&["--workers=3", "--port=3003"], &[], file.clone()),
        "server.cluster.internalPort",
        "include server.port 3003",
    );
    assert_eq!(
        ok(&["--workers=2", "--port=3004"], &[], file)
            .cluster
            .workers,
        Some(2)
    );
    refused(
        settings(&["--port=3001", "--internal-port=3001"], &[], None),
        "server.cluster.internalPort",
        "3001",
    );
}

#[test]
fn instance_code_rule_and_bind_address() {
    // spec: DEC-20, DEC-23 (the master's code itself: ROLE-2 in plan/plan_tests.rs)
    let tx = |v: Value| Some(json!({"modules": {"tx": v}}));
    assert_eq!(
        ok(&[], &[], tx(json!({"instanceCode": "main7"})))
            .tx
            .instance_code,
        "main7"
    );
    refused(
        settings(&[], &[], tx(json!({"instanceCode": "tx2"}))),
        "modules.tx.instanceCode",
        "tx-worker",
    );
    refused(
        settings(&[], &[], tx(json!({"instanceCode": "a.b"}))),
        "modules.tx.instanceCode",
        "1-16",
    );
    refused(
        settings(&[], &[], cluster(json!({"workerRule": "fast"}))),
        "server.cluster.workerRule",
        "classic",
    );
    assert_eq!(
        ok(&[], &[], cluster(json!({"bindAddress": "::"})))
            .cluster
            .bind_address,
        "::"
    );
    // ROLE-9, DEC-40: a host name is taken as cluster.js takes it; one that resolves to nothing
    // is refused, naming it.
    assert_eq!(
        ok(&[], &[], cluster(json!({"bindAddress": "localhost"})))
            .cluster
            .bind_address,
        "localhost"
    );
    refused(
        settings(
            &[],
            &[],
            cluster(json!({"bindAddress": "no-such-host.invalid"})),
        ),
        "server.cluster.bindAddress",
        "resolve",
    );
}

#[test]
fn listen_address_from_flag_env_or_file_and_checked() {
    let ip = |s: &str| s.parse::<std::net::IpAddr>().expect("ip");
    assert_eq!(ok(&[], &[], None).cluster.listen_address, None);
    assert_eq!(
        ok(&[], &[], cluster(json!({"listenAddress": "127.0.0.1"})))
            .cluster
            .listen_address,
        Some(ip("127.0.0.1"))
    );
    assert_eq!(
        ok(
            &["--listen-address", "::1"],
            &[("FHIRSMITH_LISTEN_ADDRESS", "10.0.0.1")],
            cluster(json!({"listenAddress": "127.0.0.1"}))
        )
        .cluster
        .listen_address,
        Some(ip("::1"))
    );
    assert_eq!(
        ok(&[], &[("FHIRSMITH_LISTEN_ADDRESS", "::")], None)
            .cluster
            .listen_address,
        Some(ip("::"))
    );
    refused(
        settings(&[], &[], cluster(json!({"listenAddress": "localhost"}))),
        "server.cluster.listenAddress",
        "IP address",
    );
    refused(
        settings(&["--listen-address=1.2.3"], &[], None),
        "server.cluster.listenAddress",
        "IP address",
    );
}

#[test]
fn endpoints_are_normalised_and_checked() {
    // spec: DEC-14 (their routing: ROUTE-2b in proxy/route_tests.rs)
    let tx = |v: Value| Some(json!({"modules": {"tx": v}}));
    let s = ok(
        &[],
        &[],
        tx(json!({"endpoints": [{"path": "/r4/"}, {"path": "/tx/r5", "fhirVersion": 5}]})),
    );
    assert_eq!(s.tx.endpoints, vec!["/r4", "/tx/r5"]);
    refused(
        settings(
            &[],
            &[],
            tx(json!({"endpoints": [{"path": "/r4"}, {"path": "r5"}]})),
        ),
        "modules.tx.endpoints[1].path",
        "start with /",
    );
    refused(
        settings(&[], &[], tx(json!({"endpoints": [{"fhirVersion": 4}]}))),
        "modules.tx.endpoints[0].path",
        "\"path\"",
    );
    refused(
        settings(&[], &[], tx(json!({"endpoints": [{"path": 4}]}))),
        "modules.tx.endpoints[0].path",
        "string",
    );
    refused(
        settings(
            &[],
            &[],
            tx(json!({"endpoints": [{"path": "/r4"}, {"path": "/r4/"}]})),
        ),
        "modules.tx.endpoints[1].path",
        "twice",
    );
    refused(
        settings(&[], &[], tx(json!({"endpoints": "/r4"}))),
        "modules.tx.endpoints",
        "array",
    );
    refused(
        settings(&[], &[], tx(json!({"endpoints": []}))),
        "modules.tx.endpoints",
        "at least one",
    );
    assert!(ok(&["--workers=0"], &[], tx(json!({"endpoints": []})))
        .tx
        .endpoints
        .is_empty());
    refused(
        settings(&[], &[], tx(json!({"enabled": false}))),
        "modules.tx.enabled",
        "workers",
    );
}

#[test]
fn command_from_flag_or_file() {
    let s = ok(
        &["--command", "  ./sim   --fast  "],
        &[],
        cluster(json!({"command": ["x"]})),
    );
    assert_eq!(s.command, vec!["./sim", "--fast"]);
    assert_eq!(
        ok(&[], &[], cluster(json!({"command": ["bun", "server.js"]}))).command,
        vec!["bun", "server.js"]
    );
    refused(
        settings(&["--command", "  "], &[], None),
        "server.cluster.command",
        "must name a program",
    );
    refused(
        settings(&[], &[], cluster(json!({"command": []}))),
        "server.cluster.command",
        "must name a program",
    );
}

#[test]
fn unknown_keys_are_warnings_not_errors() {
    let s = ok(
        &[],
        &[],
        Some(json!({"server": {"cluster": {"wokers": 2}, "memory": {"x": 1}}})),
    );
    assert_eq!(s.cluster.workers, None);
    assert_eq!(s.warnings.len(), 3, "{:?}", s.warnings);
    assert!(s.warnings[0].contains("server.cluster.wokers") && s.warnings[0].contains(FILE));
    assert!(s.warnings[1].contains("server.memory.x"));
}

#[test]
fn a_master_alone_that_serves_no_tx_is_a_warning() {
    let s = ok(&["--workers=0", "--master-serves-tx=false"], &[], None);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("no process takes tx requests")),
        "{:?}",
        s.warnings
    );
}

#[test]
fn node_flags_are_read_or_refused() {
    // spec: DEC-19 (passing them on: LAUNCH-12..14 in plan/plan_tests.rs)
    assert_eq!(
        ok(&["--", "--max-old-space-size=8192"], &[], None).node_flags,
        vec!["--max-old-space-size=8192"]
    );
    refused(
        settings(&["--", "--inspect=9229"], &[], None),
        "node flags",
        "debugger",
    );
    refused(
        settings(&["--", "--watch"], &[], None),
        "node flags",
        "watcher",
    );
}

#[test]
fn served_by_header_is_a_header_name_http_does_not_use_itself() {
    let c = ok(&[], &[], cluster(json!({"servedByHeader": "X-Served-By"}))).cluster;
    assert_eq!(c.served_by_header, "X-Served-By");
    assert_eq!(
        ok(&[], &[], None).cluster.served_by_header,
        "",
        "off by default"
    );
    let key = "server.cluster.servedByHeader";
    refused(
        settings(&[], &[], cluster(json!({"servedByHeader": "X Served"}))),
        key,
        "header name",
    );
    refused(
        settings(
            &[],
            &[],
            cluster(json!({"servedByHeader": "Content-Length"})),
        ),
        key,
        "HTTP itself uses",
    );
    refused(
        settings(&[], &[], cluster(json!({"servedByHeader": true}))),
        key,
        "string",
    );
}
