//! Fuzzing the config.json reader: `jsonc::parse` on arbitrary JSON-ish text with comments, and
//! `from_sources` on arbitrary values at every key it reads, with arbitrary `PORT` and
//! `FHIRSMITH_WORKERS`. Neither may panic: bad input is an error naming the setting, never a
//! crash of the launcher at start. And whatever extreme numbers it accepts, the run-time
//! arithmetic on them (deadlines, the plan, the lifecycle's drain and kill timers, the
//! scheduler's queue and cooldown) never panics either: 1e19 seconds used to pass and then
//! panic at `Instant + Duration`.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::plan::{plan, render_check};
use crate::process::ProcessId;
use crate::proxy::lane::Lane;
use crate::proxy::route::{Target, TxDemand};
use crate::proxy::scheduler::{Finish, ProcessState, RequestId, Scheduler, SchedulerConfig};
use crate::settings::jsonc;
use crate::sizing::{size_for, CpuInputs};
use crate::supervisor::lifecycle::Lifecycle;

/// Pieces that JSON with comments is made of, so random sequences hit the comment blanker's and
/// the parser's edge cases (a `/*` inside a string, an escaped quote before `//`, ...).
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "{",
            "}",
            "[",
            "]",
            ":",
            ",",
            "\"",
            "\\",
            "\\\"",
            "//",
            "/*",
            "*/",
            "/",
            "*",
            "\n",
            "\r\n",
            " ",
            "\t",
            "true",
            "null",
            "-",
            "1e999",
            "-0",
            "0.5",
            "18446744073709551616",
            "\"server\"",
            "\"cluster\"",
            "\"workers\"",
            "\"port\"",
            "\u{feff}",
            "é",
            "\u{2028}",
        ])
        .prop_map(str::to_string),
        "\\PC{0,6}",
    ]
}

/// Any JSON value, a few levels deep, with keys the reader knows mixed in.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![0.0, -1.0, 0.5, 1e300, 4294967296.0, 65536.0, 1e-300])
            .prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::vec((key(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    // Every part of every setting's path (`server`, `cluster`, `workers` ...), and `path`.
    let mut known: Vec<String> = TABLE
        .iter()
        .flat_map(|s| s.path.split('.'))
        .chain(["path"])
        .map(str::to_string)
        .collect();
    known.sort();
    known.dedup();
    prop_oneof![prop::sample::select(known), "\\PC{0,8}"]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_comment_reader_never_panics_on_json_ish_text(
        tokens in prop::collection::vec(token(), 0..60),
    ) {
        let text: String = tokens.concat();
        if let Ok(v) = jsonc::parse(Path::new(FILE), &text) {
            // Whatever it accepts, the settings reader takes without panicking too.
            let _ = from_sources(&cli(&["--data-dir", "/d"]), &env_of(&[]), Some((Path::new(FILE), &v)));
        }
    }

    #[test]
    fn comments_anywhere_between_tokens_change_nothing(v in value()) {
        let plain = serde_json::to_string_pretty(&v).unwrap_or_default();
        // A comment after every structural character: the same value comes back.
        let commented: String = plain
            .lines()
            .map(|l| format!("{l} // c \"/*\n/* x\n */"))
            .collect();
        let back = jsonc::parse(Path::new(FILE), &commented);
        // Compared with serde_json's own reading of the plain text (its float parsing is not
        // an exact round trip).
        let expected: Option<Value> = serde_json::from_str(&plain).ok();
        prop_assert!(expected.is_some());
        prop_assert_eq!(back.ok(), expected);
    }

    #[test]
    fn settings_from_any_values_never_panic(
        cluster in prop::collection::vec((key(), value()), 0..8),
        memory in prop::collection::vec((key(), value()), 0..3),
        top in prop::collection::vec((key(), value()), 0..3),
        port in prop::option::of("\\PC{0,8}"),
        workers in prop::option::of("\\PC{0,8}"),
    ) {
        let mut root: serde_json::Map<String, Value> = top.into_iter().collect();
        let server = json!({
            "cluster": Value::Object(cluster.into_iter().collect()),
            "memory": Value::Object(memory.into_iter().collect()),
        });
        root.insert("server".into(), server);
        let root = Value::Object(root);
        let mut env = Vec::new();
        if let Some(p) = port.as_deref() {
            env.push(("PORT", p));
        }
        if let Some(w) = workers.as_deref() {
            env.push(("FHIRSMITH_WORKERS", w));
        }
        let r = from_sources(&cli(&["--data-dir", "/d"]), &env_of(&env), Some((Path::new(FILE), &root)));
        if let Err(e) = r {
            // An error says something (it is shown to the operator as the one line at exit).
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

/// Found by the fuzzer: a tiny negative float must come back through the comment reader as
/// serde_json reads it, and be refused as a worker count, not panic.
#[test]
fn regression_a_tiny_negative_float() {
    let text = "{\"workers\": -3.9544759619142754e-253} // c";
    let v = jsonc::parse(Path::new(FILE), text).expect("parses");
    let plain: Value = serde_json::from_str("{\"workers\": -3.9544759619142754e-253}")
        .expect("serde_json reads it");
    assert_eq!(v, plain);
    let config = json!({"server": {"cluster": {"workers": -3.9544759619142754e-253}}});
    let err = from_sources(&cli(&[]), &env_of(&[]), Some((Path::new(FILE), &config)))
        .expect_err("not a whole number");
    assert_eq!(err.setting(), "server.cluster.workers");
}

/// Every numeric setting, for the run-time property.
fn numeric() -> Vec<&'static str> {
    TABLE
        .iter()
        .filter(|s| s.kind.numeric())
        .map(|s| s.path)
        .collect()
}

/// Numbers at and around every bound, and the ones that broke the launcher before.
fn extreme() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(vec![
            0.0,
            0.001,
            0.5,
            1.0,
            2.0,
            100.0,
            1024.0,
            1025.0,
            65535.0,
            525_600.0,
            1e6,
            31_536_000.0,
            31_536_000.5,
            1e9,
            4_294_967_295.0,
            4_294_967_296.0,
            9_007_199_254_740_991.0,
            1e19,
            1.8446744073709552e19,
            1e300,
        ]),
        0.0..3.2e7f64,
    ]
}

/// Every duration setting, as the launcher holds them.
fn durations(s: &Settings) -> Vec<Duration> {
    let c = &s.cluster;
    let mut d = vec![
        c.drain,
        c.queue,
        c.owner_queue,
        c.cooldown,
        c.upstream_timeout,
        c.write_timeout,
        c.header_timeout,
        c.recycle,
        c.status_interval,
        c.kill_after,
        s.stats.sample_period(),
    ];
    d.extend(s.stats.sample);
    d
}

/// What the launcher computes from the settings as it runs, with the pure parts it runs them
/// through; a panic anywhere fails the property.
fn run_time_arithmetic(s: &Settings) -> Result<(), TestCaseError> {
    let now = Instant::now();
    let c = &s.cluster;
    // Every deadline `now + d` a setting makes, and the status staleness (three intervals).
    for d in durations(s) {
        prop_assert!(now.checked_add(d).is_some(), "now + {d:?} overflows");
        prop_assert!(now.checked_add(d.saturating_mul(3)).is_some(), "3 x {d:?}");
    }
    // The front door's slots per process (launcher.rs adds them as u32).
    prop_assert!(c.max_outstanding.checked_add(c.fast_lane_extra).is_some());
    // The plan, its lines and `--check`'s output.
    let inputs = CpuInputs {
        vcpu: 4,
        detected_cores: Some(2),
        quota: None,
    };
    if let Ok(sizing) = size_for(s, &inputs) {
        if let Ok(p) = plan(s, &sizing, None) {
            let _ = render_check(&p);
        }
    }
    // The supervisor: a start, a recycle's drain, a stop's kill timer, every timeout fired.
    let (m, t1) = (ProcessId(0), ProcessId(1));
    let mut l = Lifecycle::new(1, c.max_start_failures, c.kill_after);
    l.start(now);
    l.ready(m, now);
    l.set_workers(1, now);
    l.ready(t1, now);
    l.recycle(t1, c.drain, now);
    l.stop(now);
    while let Some(at) = l.poll_timeout() {
        l.handle_timeout(at);
        while l.poll_action().is_some() {}
        if l.poll_timeout() == Some(at) {
            break;
        }
    }
    // The scheduler: requests that wait their queue time, a 503 that starts a cooldown.
    let procs = [(m, true), (t1, true)];
    let mut sched = Scheduler::new(SchedulerConfig::from(c), &procs);
    for (p, _) in procs {
        sched.set_process(p, ProcessState::Ready, now);
    }
    for i in 0..40u64 {
        let target = if i % 2 == 0 {
            Target::LeastLoaded
        } else {
            Target::Owner(t1)
        };
        let demand = TxDemand {
            target,
            lane: Lane::Normal,
            counted: true,
        };
        sched.submit(RequestId(i), &demand, now);
    }
    sched.finish(RequestId(0), Finish::Responded { status: 503 }, now);
    sched.finish(RequestId(1), Finish::TimedOut, now);
    while let Some(at) = sched.poll_timeout() {
        sched.handle_timeout(at);
        while sched.poll_action().is_some() {}
        if sched.poll_timeout() == Some(at) {
            break;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn extreme_numbers_never_panic_at_run_time(
        values in prop::collection::vec((prop::sample::select(numeric()), extreme()), 1..8),
    ) {
        let mut root = json!({});
        for (path, n) in &values {
            set_path(&mut root, path, json!(n));
        }
        if let Ok(s) = from_sources(&cli(&["--data-dir", "/d"]), &env_of(&[]), Some((Path::new(FILE), &root))) {
            run_time_arithmetic(&s)?;
        }
    }
}

#[test]
fn every_setting_at_its_bound_runs_through_the_run_time_arithmetic() {
    // The property above samples; this is every bound at once.
    let file = json!({
        "server": {"cluster": {
            "drainSeconds": 31_536_000, "queueSeconds": 31_536_000, "ownerQueueSeconds": 31_536_000,
            "cooldownSeconds": 31_536_000, "upstreamTimeoutSeconds": 31_536_000,
            "writeTimeoutSeconds": 31_536_000, "headerTimeoutSeconds": 31_536_000,
            "recycleSeconds": 31_536_000, "statusSeconds": 31_536_000, "killSeconds": 31_536_000,
            "maxOutstanding": 1_000_000, "fastLaneExtra": 1_000_000, "normalMinSlots": 1_000_000,
            "maxStartFailures": 1_000_000, "cores": 1_000_000, "proxyThreads": 1024,
            "fastLaneMaxBytes": 9_007_199_254_740_991u64, "memoryHeadroomGB": 1_048_576
        }},
        "stats": {"sampleSeconds": 31_536_000, "intervalMinutes": 525_600}
    });
    let s = ok(&[], &[], Some(file));
    if let Err(e) = run_time_arithmetic(&s) {
        panic!("{e}");
    }
}
