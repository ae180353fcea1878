//! Every number's upper bound (`bounds.rs`, cluster.md's settings table): the bound itself is
//! taken, a step past it is refused naming the setting and the bound, and the values that used
//! to pass and then panic at run time (1e19 seconds, 4294967295 threads) are refused at start.

use serde_json::{json, Value};

use super::*;

/// Each numeric setting with its largest allowed value, and a value just past it.
const BOUNDED: &[(&str, f64, f64)] = &[
    ("server.cluster.cores", 1e6, 1_000_001.0),
    ("server.cluster.memoryHeadroomGB", 1_048_576.0, 1_048_576.5),
    ("server.cluster.drainSeconds", 31_536_000.0, 31_536_000.5),
    ("server.cluster.maxOutstanding", 1e6, 1_000_001.0),
    ("server.cluster.queueSeconds", 31_536_000.0, 31_536_000.5),
    (
        "server.cluster.ownerQueueSeconds",
        31_536_000.0,
        31_536_000.5,
    ),
    ("server.cluster.cooldownSeconds", 31_536_000.0, 31_536_000.5),
    (
        "server.cluster.upstreamTimeoutSeconds",
        31_536_000.0,
        31_536_000.5,
    ),
    (
        "server.cluster.writeTimeoutSeconds",
        31_536_000.0,
        31_536_000.5,
    ),
    (
        "server.cluster.headerTimeoutSeconds",
        31_536_000.0,
        31_536_000.5,
    ),
    ("server.cluster.proxyThreads", 1024.0, 1025.0),
    ("server.cluster.maxStartFailures", 1e6, 1_000_001.0),
    ("server.cluster.recycleSeconds", 31_536_000.0, 31_536_000.5),
    ("server.cluster.fastLaneExtra", 1e6, 1_000_001.0),
    ("server.cluster.saturatedPercent", 100.0, 101.0),
    (
        "server.cluster.fastLaneMaxBytes",
        9_007_199_254_740_991.0,
        1e16,
    ),
    ("server.cluster.statusSeconds", 31_536_000.0, 31_536_000.5),
    (
        "server.cluster.sharedCacheMaxMB",
        9_007_199_254_740_991.0,
        1e16,
    ),
    ("server.cluster.killSeconds", 31_536_000.0, 31_536_000.5),
    ("stats.sampleSeconds", 31_536_000.0, 31_536_000.5),
    ("stats.intervalMinutes", 525_600.0, 525_600.5),
    ("server.memory.abortFraction", 1.0, 1.01),
];

/// A config.json setting `path` (dotted) to `value`, with `maxOutstanding` 0 so that
/// `normalMinSlots` is bounded by nothing else.
fn with(path: &str, value: Value) -> Value {
    let mut root = json!({"server": {"cluster": {"maxOutstanding": 0}}});
    set_path(&mut root, path, value);
    root
}

#[test]
fn every_number_takes_its_bound_and_refuses_a_step_past_it() {
    // spec: DEC-7 (refused, never clamped)
    for &(path, bound, past) in BOUNDED {
        let file = with(path, json!(bound));
        if let Err(e) = settings(&[], &[], Some(file)) {
            panic!("{path} = {bound} (its bound) refused: {e}");
        }
        let shown = format!("{bound}");
        refused(
            settings(&[], &[], Some(with(path, json!(past)))),
            path,
            &shown,
        );
    }
}

#[test]
fn the_values_that_panicked_at_run_time_are_refused_at_start() {
    // Issue 20 item 7: these passed --check and then panicked (Instant + Duration overflow),
    // or aborted and hung (proxyThreads).
    for key in [
        "headerTimeoutSeconds",
        "killSeconds",
        "drainSeconds",
        "queueSeconds",
    ] {
        refused(
            settings(&[], &[], cluster(json!({ key: 1e19 }))),
            &format!("server.cluster.{key}"),
            "from 0 to 31536000 (a year)",
        );
    }
    refused(
        settings(&[], &[], cluster(json!({"statusSeconds": 1e19}))),
        "server.cluster.statusSeconds",
        "above 0 and at most 31536000 (a year)",
    );
    for threads in [20_000u64, 4_294_967_295] {
        refused(
            settings(&[], &[], cluster(json!({ "proxyThreads": threads }))),
            "server.cluster.proxyThreads",
            "must be a whole number from 1 to 1024",
        );
    }
    refused(
        settings(
            &[],
            &[],
            cluster(json!({"maxOutstanding": 4_294_967_295u64})),
        ),
        "server.cluster.maxOutstanding",
        "from 0 to 1000000",
    );
}

#[test]
fn workers_are_bounded_by_the_ports() {
    // The ports after internalPort bound the count: internalPort + workers <= 65535.
    assert_eq!(
        ok(
            &["--workers=65000", "--port=80"],
            &[],
            cluster(json!({"internalPort": 500}))
        )
        .cluster
        .workers,
        Some(65000)
    );
    refused(
        settings(&["--workers=65535"], &[], None),
        "server.cluster.internalPort",
        "65535 at most",
    );
    refused(
        settings(&["--workers=65536"], &[], None),
        "server.cluster.workers",
        "from 0 to 65535",
    );
}

#[test]
fn interval_minutes_takes_fractions_as_fhirsmith_does() {
    // Issue 18: 0.5 stopped the launcher; FHIRsmith reads it as 30 s.
    let stats = |v: Value| Some(json!({"stats": v}));
    let s = ok(&[], &[], stats(json!({"intervalMinutes": 0.5})));
    assert_eq!(s.stats.interval_minutes, 0.5);
    // FHIRsmith takes 0 as not set (`if (config.intervalMinutes)`): the default, 10.
    assert_eq!(
        ok(&[], &[], stats(json!({"intervalMinutes": 0})))
            .stats
            .interval_minutes,
        10.0
    );
    refused(
        settings(&[], &[], stats(json!({"intervalMinutes": -1}))),
        "stats.intervalMinutes",
        "from 0 to 525600",
    );
}

#[test]
fn the_sample_period_is_a_minute_or_interval_minutes_if_shorter_unless_set() {
    // spec: "stats.sampleSeconds ... Not set: a minute with a role (or stats.intervalMinutes,
    // if shorter)"; the launcher tells the processes this in `hello`.
    let period = |v: Value| {
        ok(&[], &[], Some(json!({ "stats": v })))
            .stats
            .sample_period()
    };
    let secs = std::time::Duration::from_secs;
    assert_eq!(period(json!({})), secs(60));
    assert_eq!(period(json!({"intervalMinutes": 5})), secs(60));
    assert_eq!(period(json!({"intervalMinutes": 0.5})), secs(30));
    assert_eq!(period(json!({"intervalMinutes": 0.25})), secs(15));
    assert_eq!(
        period(json!({"intervalMinutes": 0.5, "sampleSeconds": 90})),
        secs(90)
    );
}
