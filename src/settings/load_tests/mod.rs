//! Tests of `load.rs`, by concept: precedence and the layers (`precedence.rs`), each setting's
//! values (`values.rs`), every key wired to its own field (`wiring.rs`), and `load` with
//! config.json and the template (`files.rs`). They go through `from_sources`, so they read no
//! environment and no files, except the `load` tests, which use a temp data directory and flags
//! that outrank this process's environment.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::*;
use crate::settings::{LogFormat, LogLevel, Sources, TABLE};

mod admin;
mod bounds;
mod files;
mod fuzz;
mod log_level;
mod precedence;
mod values;
mod wiring;

pub(super) fn cli(args: &[&str]) -> Cli {
    use clap::Parser;
    match Cli::try_parse_from(std::iter::once("fhircluster").chain(args.iter().copied())) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

pub(super) fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

pub(super) const FILE: &str = "/d/config.json";

/// Settings from flags, environment and a config.json given as JSON.
pub(super) fn settings(
    args: &[&str],
    env: &[(&str, &str)],
    file: Option<Value>,
) -> Result<Settings, SettingsError> {
    let env = env_of(env);
    let path = Path::new(FILE);
    from_sources(&cli(args), &env, file.as_ref().map(|j| (path, j)))
}

pub(super) fn ok(args: &[&str], env: &[(&str, &str)], file: Option<Value>) -> Settings {
    match settings(args, env, file) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

pub(super) fn cluster(v: Value) -> Option<Value> {
    Some(json!({"server": {"cluster": v}}))
}

/// Asserts a refusal whose one line names `setting` and contains `phrase`.
pub(super) fn refused(r: Result<Settings, SettingsError>, setting: &str, phrase: &str) {
    let e = match r {
        Ok(_) => panic!("{setting}: accepted"),
        Err(e) => e,
    };
    let line = e.to_string();
    assert_eq!(e.setting(), setting, "{line}");
    assert!(line.contains(setting) && line.contains(phrase), "{line}");
    assert!(!line.contains('\n'), "{line}");
}

/// Puts `value` at the dotted `path` in `root`, making the objects on the way (replacing any
/// non-object there).
pub(super) fn set_path(root: &mut Value, path: &str, value: Value) {
    let (parents, last) = path.rsplit_once('.').unwrap_or(("", path));
    let mut at = root;
    for part in parents.split('.').filter(|p| !p.is_empty()) {
        if !at.get(part).is_some_and(Value::is_object) {
            at[part] = json!({});
        }
        at = &mut at[part];
    }
    at[last] = value;
}
