//! The snapshot's `missing` list: what couldn't be read, grouped by why (STATUS-15, 23, 24).

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// What couldn't be read, one entry per reason.
#[derive(Default)]
pub(super) struct Missing {
    /// why → the processes whose memory couldn't be read for it (in order).
    memory: BTreeMap<String, Vec<String>>,
    order: Vec<String>,
    other: Vec<(String, String)>,
}

impl Missing {
    pub(super) fn add(&mut self, why: &str, code: &str) {
        if !self.memory.contains_key(why) {
            self.order.push(why.to_string());
        }
        self.memory
            .entry(why.to_string())
            .or_default()
            .push(code.to_string());
    }

    pub(super) fn add_what(&mut self, what: &str, why: &str) {
        self.other.push((what.to_string(), why.to_string()));
    }

    pub(super) fn into_json(self) -> Value {
        let mut out: Vec<Value> = self
            .other
            .into_iter()
            .map(|(what, why)| json!({"what": what, "why": why}))
            .collect();
        for why in self.order {
            let codes = self.memory.get(&why).cloned().unwrap_or_default();
            out.push(json!({
                "what": format!("private and mapped memory of {}", codes.join(", ")),
                "why": why,
            }));
        }
        Value::Array(out)
    }
}
