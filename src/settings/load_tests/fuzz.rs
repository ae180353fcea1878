//! Fuzzing the config.json reader: `jsonc::parse` on arbitrary JSON-ish text with comments, and
//! `from_sources` on arbitrary values at every key it reads, with arbitrary `PORT` and
//! `FHIRSMITH_WORKERS`. Neither may panic: bad input is an error naming the setting, never a
//! crash of the launcher at start.

use proptest::prelude::*;

use super::*;
use crate::settings::jsonc;

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
    let known: Vec<String> = crate::settings::CLUSTER_KEYS
        .iter()
        .chain(crate::settings::MEMORY_KEYS)
        .chain(&[
            "server",
            "cluster",
            "memory",
            "port",
            "modules",
            "tx",
            "endpoints",
            "path",
            "instanceCode",
            "enabled",
            "stats",
            "sampleSeconds",
            "intervalMinutes",
            "command",
        ])
        .map(|s| s.to_string())
        .collect();
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
