//! What the last reload left for an operator to see beside the counts of `/metrics`: the reason
//! it was refused (the service runs on as it was), and the settings `config.json` changes that
//! wait for a restart of the launcher. `/status` (`front.reload`), `fhircluster status` and the
//! status page show them (DEC-91): a refusal only in the log is one nobody sees.

use std::sync::Mutex;

use serde_json::{json, Value};

/// The reason a reload was refused is cut to this many characters: it is a line, not a file.
const REASON_AT_MOST: usize = 500;

#[derive(Debug, Default)]
pub struct ReloadNote(Mutex<Note>);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Note {
    /// The last reload's refusal: its reason and when (Unix ms); none once one succeeds.
    refused: Option<(String, u64)>,
    /// The settings waiting for a restart of the launcher, as the last reload taken found them.
    restart_pending: Vec<String>,
}

impl ReloadNote {
    fn with<T>(&self, f: impl FnOnce(&mut Note) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A reload was refused at `unix_ms`: what waited for a restart still does.
    pub fn refused(&self, reason: &str, unix_ms: u64) {
        let reason: String = reason.chars().take(REASON_AT_MOST).collect();
        self.with(|n| n.refused = Some((reason, unix_ms)));
    }

    /// A reload was taken; `pending`: the settings it left for a restart of the launcher.
    pub fn taken(&self, pending: Vec<String>) {
        self.with(|n| {
            *n = Note {
                refused: None,
                restart_pending: pending,
            }
        });
    }

    /// `/status`'s `front.reload`.
    pub fn to_json(&self) -> Value {
        self.with(|n| {
            json!({
                "refused": n.refused.as_ref().map(|(why, at)| json!({"reason": why, "atMs": at})),
                "restartPending": n.restart_pending,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_kept_until_a_reload_is_taken_and_the_pending_settings_until_the_next() {
        // spec: DEC-91
        let n = ReloadNote::default();
        assert_eq!(n.to_json(), json!({"refused": null, "restartPending": []}));
        n.taken(vec!["server.cluster.hostPrefix".into()]);
        n.refused(&"x".repeat(2000), 7);
        let v = n.to_json();
        assert_eq!(v["refused"]["atMs"], 7);
        assert_eq!(
            v["refused"]["reason"].as_str().map(str::len),
            Some(REASON_AT_MOST)
        );
        assert_eq!(v["restartPending"], json!(["server.cluster.hostPrefix"]));
        n.taken(Vec::new());
        assert_eq!(n.to_json(), json!({"refused": null, "restartPending": []}));
    }
}
