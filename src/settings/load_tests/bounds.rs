//! Every number's upper bound (`bounds.rs`, cluster.md's settings table): the bound itself is
//! taken, a step past it is refused naming the setting and the bound, and the values that used
//! to pass and then panic at run time (1e19 seconds, 4294967295 threads) are refused at start.

use serde_json::{json, Value};

use super::*;

/// Each numeric setting with its largest allowed value (the table's), and a value just past it.
/// Not the ports, `adminAddress` among them, nor `workers`: their bound is the port range's,
/// whose edge other settings must leave room at (`workers_are_bounded_by_the_ports`, `value.rs`'s
/// port test); nor `rejectFraction`, which must stay below `abortFraction` (`values.rs`).
fn bounded() -> Vec<(&'static str, f64, f64)> {
    use crate::settings::setting::Kind;
    TABLE
        .iter()
        .filter(|s| !matches!(s.kind, Kind::Port | Kind::AdminAddress))
        .filter(|s| !["server.cluster.workers", "server.memory.rejectFraction"].contains(&s.path))
        .filter_map(|s| {
            let max = s.kind.max()?;
            let past = match s.kind {
                Kind::Whole { .. } => max + 1.0,
                _ => max + 0.5,
            };
            Some((s.path, max, past))
        })
        .collect()
}

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
    let bounded = bounded();
    assert!(bounded.len() > 20, "{bounded:?}");
    for (path, bound, past) in bounded {
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
    // spec: DEC-28 (issue 18: 0.5 stopped the launcher; FHIRsmith reads it as 30 s)
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
    // spec: DEC-28 (0.5 → 30 s); "stats.sampleSeconds ... Not set: a minute with a role (or
    // stats.intervalMinutes, if shorter)"; the launcher tells the processes this in `hello`.
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
