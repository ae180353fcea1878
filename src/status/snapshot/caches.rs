//! The snapshot's `caches` section (STATUS-8, STATUS-9).

use serde_json::{json, Value};

use super::{ProcessInput, StatusFigures};
use crate::process::Role;

/// Client caches and concepts: summed, or with `sharedCache` the one store counted once, as the
/// master counts it (STATUS-9). Every process counts the same store, so without the master's
/// figures another process's are the same store's. Expansion caches are always per process.
pub(super) fn caches_section(shared: bool, counted: &[(&ProcessInput, &StatusFigures)]) -> Value {
    let sum = |get: fn(&StatusFigures) -> Option<u64>| {
        counted
            .iter()
            .filter_map(|(_, f)| get(f))
            .fold(None, |acc: Option<u64>, v| Some(acc.unwrap_or(0) + v))
    };
    let once = |get: fn(&StatusFigures) -> Option<u64>| {
        counted
            .iter()
            .find(|(p, f)| p.role == Role::Master && get(f).is_some())
            .or_else(|| counted.iter().find(|(_, f)| get(f).is_some()))
            .and_then(|(_, f)| get(f))
    };
    let caches = |f: &StatusFigures| f.client_caches;
    let concepts = |f: &StatusFigures| f.client_concepts;
    let (scope, caches, concepts) = if shared {
        ("shared", once(caches), once(concepts))
    } else {
        ("summed", sum(caches), sum(concepts))
    };
    json!({
        "scope": scope,
        "clientCaches": caches,
        "clientConcepts": concepts,
        "expansionItems": sum(|f| f.expansion_items),
    })
}
