//! The state's one compatibility rule (`upgrade::state`'s notes), held on every type of it: an
//! unknown field anywhere is skipped, and exactly the fields added within format 1 may be
//! missing, each read as what a program before it meant.

use serde_json::{json, Value};

use super::tests::handover;
use super::*;

/// A field no program writes.
const UNKNOWN: &str = "fieldOfALaterProgram";

/// Where the state carries another protocol's data or a map of its own (the IPC messages, the
/// history's points, the counters by name), not a struct of the state.
fn not_the_states(path: &str) -> bool {
    path.starts_with("mailbox/")
        || path.contains("/queued/")
        || path.starts_with("counters/")
        || path.starts_with("keeper/history/")
}

fn written() -> Value {
    serde_json::to_value(handover()).expect("json")
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}/{key}")
    }
}

/// The paths of every object of the state (the root is "").
fn object_paths(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            out.push(path.to_string());
            for (k, child) in map {
                object_paths(child, &join(path, k), out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                object_paths(item, &join(path, &i.to_string()), out);
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &str) -> &'a mut Value {
    if path.is_empty() {
        return v;
    }
    v.pointer_mut(&format!("/{path}")).expect("the path")
}

fn strip_unknown(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove(UNKNOWN);
            map.values_mut().for_each(strip_unknown);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_unknown),
        _ => {}
    }
}

#[test]
fn an_unknown_field_in_every_part_of_the_state_is_skipped() {
    // A downgrade within format 1: a later program's state, with a field this one doesn't know
    // in every object of it (the envelope, each child, the shell and its recycle, the lifecycle,
    // its slots, their states, the phase, the keeper and its rows, the guardian, each cooldown
    // and client connection), reads as the state without them.
    let mut v = written();
    let mut paths = Vec::new();
    object_paths(&v, "", &mut paths);
    let mut added = 0;
    // (not the counters' map: a key there is a series' name)
    for path in paths
        .iter()
        .filter(|p| !not_the_states(p) && *p != "counters")
    {
        if let Value::Object(map) = at(&mut v, path) {
            map.insert(UNKNOWN.to_string(), json!({"any": [1, "thing"]}));
            added += 1;
        }
    }
    assert!(added >= 18, "only {added} objects");
    let h = decode(&serde_json::to_vec(&v).expect("bytes"))
        .unwrap_or_else(|e| panic!("an unknown field refused: {e}"));
    let mut back = serde_json::to_value(&h).expect("json");
    // What is carried as data (the history, the messages) keeps it: the state's own types
    // dropped it.
    strip_unknown(&mut back);
    assert_eq!(back, written());
}

#[test]
fn an_unknown_state_or_phase_is_refused_not_defaulted() {
    // A new variant is a change an earlier reader would misread: a new number, never a guess.
    for (path, is) in [
        ("lifecycle/slots/0/state", "hibernating"),
        ("lifecycle/phase", "somethingElse"),
    ] {
        let mut v = written();
        at(&mut v, path)["is"] = json!(is);
        assert!(
            matches!(
                decode(&serde_json::to_vec(&v).expect("bytes")),
                Err(StateError::Unreadable(_))
            ),
            "{path}: {is} was read"
        );
    }
}

/// The fields of format 1's first program serde reads as none when missing (an `Option`).
fn options_of_format_1() -> Vec<&'static str> {
    vec![
        "adminFd",
        "guardian",
        "children/0/stdoutFd",
        "children/0/stderrFd",
        "keeper/rows/0/lastRestart",
        "keeper/rows/0/guardLimit",
        "keeper/rows/0/recycleReason",
        "lifecycle/gaveUp",
        "lifecycle/rolling",
        "lifecycle/recycling",
        "lifecycle/slots/0/startedMs",
        "lifecycle/slots/1/startedMs",
        "lifecycle/slots/2/startedMs",
    ]
}

/// The fields added to format 1 after its first program, with what a state without one is read
/// as (written back by this program). Every other field of the state is required.
fn added_within_format_1() -> Vec<(&'static str, Value)> {
    vec![
        ("controlFd", Value::Null),
        ("controlFile", Value::Null),
        ("prebound", json!([])),
        ("agentFd", Value::Null),
        ("cooldowns", json!([])),
        ("reloadPending", json!(false)),
        ("counters", json!({})),
        ("lastReload", Value::Null),
        ("clientConns", json!([])),
        ("clientConns/0/idleMs", json!(0)),
        ("children/0/inputs", Value::Null),
        (
            "shell/recycle",
            json!({"overForMs": [], "warned": [], "rssAtReady": []}),
        ),
        ("keeper/workers", Value::Null),
        ("lifecycle/slots/0/restartsBy", json!([0, 0, 0, 0])),
        ("lifecycle/slots/0/restartsHung", json!(0)),
        ("lifecycle/slots/1/restartsBy", json!([0, 0, 0, 0])),
        ("lifecycle/slots/1/restartsHung", json!(0)),
        ("lifecycle/slots/2/restartsBy", json!([0, 0, 0, 0])),
        ("lifecycle/slots/2/restartsHung", json!(0)),
    ]
}

fn without(path: &str) -> Value {
    let mut v = written();
    let (parent, key) = path.rsplit_once('/').unwrap_or(("", path));
    at(&mut v, parent)
        .as_object_mut()
        .expect("an object")
        .remove(key)
        .expect("the field");
    v
}

#[test]
fn a_missing_field_added_within_the_format_reads_as_an_earlier_program_meant_it() {
    for (path, default) in added_within_format_1() {
        let h = decode(&serde_json::to_vec(&without(path)).expect("bytes"))
            .unwrap_or_else(|e| panic!("{path} missing: {e}"));
        let mut back = serde_json::to_value(&h).expect("json");
        let read = back
            .pointer_mut(&format!("/{path}"))
            .map(std::mem::take)
            .unwrap_or(Value::Null);
        assert_eq!(read, default, "{path} missing was read as {read}");
    }
}

#[test]
fn exactly_the_fields_added_within_the_format_may_be_missing() {
    // Each field of the state's own types, taken out alone: the state is read without it only
    // if it is one added within format 1 or an `Option` of its first program (any other field
    // a format began with is required; a field added must be optional, and listed above).
    let mut paths = Vec::new();
    object_paths(&written(), "", &mut paths);
    let mut optional = Vec::new();
    let whole = written();
    for path in paths.iter().filter(|p| !not_the_states(p)) {
        let obj = at(&mut whole.clone(), path).clone();
        for key in obj.as_object().expect("object").keys() {
            let field = join(path, key);
            if not_the_states(&field) {
                continue;
            }
            if decode(&serde_json::to_vec(&without(&field)).expect("bytes")).is_ok() {
                optional.push(field);
            }
        }
    }
    let mut listed: Vec<String> = added_within_format_1()
        .into_iter()
        .map(|(p, _)| p.to_string())
        .chain(options_of_format_1().into_iter().map(str::to_string))
        .collect();
    optional.sort();
    listed.sort();
    assert_eq!(optional, listed);
}
