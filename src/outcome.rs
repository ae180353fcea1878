//! FHIR OperationOutcome bodies: the answers the launcher gives itself (400, 404 cache-id-unknown,
//! 502, 503, 504) and the simulated server's own errors, built in one place so the wording, issue
//! codes and `tx-issue-type` codings are the same wherever they are given.

use serde_json::{json, Value};

/// The FHIR content type the launcher answers with.
pub const CONTENT_TYPE: &str = "application/fhir+json";

/// The code system of the terminology-specific issue types (`cache-id-unknown` ...).
pub(crate) const TX_ISSUE_TYPE: &str = "http://hl7.org/fhir/tools/CodeSystem/tx-issue-type";

/// One-issue OperationOutcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// `error`, `fatal`, `warning` ...
    pub severity: &'static str,
    /// The FHIR issue type: `not-found`, `transient`, `timeout`, `invalid`, `exception` ...
    pub code: &'static str,
    /// A `tx-issue-type` code, when there is one (`cache-id-unknown`).
    pub tx_issue_type: Option<&'static str>,
    /// The sentence a person reads.
    pub text: String,
}

impl Outcome {
    pub fn error(code: &'static str, text: impl Into<String>) -> Outcome {
        Outcome {
            severity: "error",
            code,
            tx_issue_type: None,
            text: text.into(),
        }
    }

    pub(crate) fn with_tx_issue_type(mut self, t: &'static str) -> Outcome {
        self.tx_issue_type = Some(t);
        self
    }

    /// `404` `cache-id-unknown`: the id's issuer is down or restarting, so its caches are gone
    /// (ROUTE-3b, OPT-11).
    pub fn cache_id_lost_to_restart(cache_id: &str) -> Outcome {
        Outcome::error(
            "not-found",
            format!(
                "Cache-id '{}' is unknown: the cache was lost to a server restart. Start a new cache.",
                printable(cache_id)
            ),
        )
        .with_tx_issue_type("cache-id-unknown")
    }

    /// `404` `cache-id-unknown` for an id this process never issued (SIM-7).
    pub fn cache_id_never_issued(cache_id: &str) -> Outcome {
        Outcome::error(
            "not-found",
            format!(
                "Cache-id '{}' is unknown: it was never issued. Start a new cache.",
                printable(cache_id)
            ),
        )
        .with_tx_issue_type("cache-id-unknown")
    }

    /// `404` `cache-id-unknown` for an id another instance issued: a routing mistake (SIM-7).
    pub fn cache_id_another_instance(cache_id: &str, own_code: &str) -> Outcome {
        Outcome::error(
            "not-found",
            format!(
                "Cache-id '{}' is unknown here: it is another instance's, and this is {}.",
                printable(cache_id),
                printable(own_code)
            ),
        )
        .with_tx_issue_type("cache-id-unknown")
    }

    /// `500` from a tx-worker given a request only the master answers (SIM-10).
    pub fn routing_error(code: &str, path: &str) -> Outcome {
        Outcome::error(
            "exception",
            format!(
                "routing error: {} is a tx-worker and does not answer {}",
                printable(code),
                printable(path)
            ),
        )
    }

    /// `503` from a process whose memory guard is refusing requests (SIM-13).
    pub fn memory_guard_refusing() -> Outcome {
        Outcome::error(
            "transient",
            "The server is short of memory and is refusing requests for now. Retry later.",
        )
    }

    pub fn to_json(&self) -> Value {
        let mut details = json!({ "text": self.text });
        if let Some(t) = self.tx_issue_type {
            details["coding"] = json!([{ "system": TX_ISSUE_TYPE, "code": t }]);
        }
        json!({
            "resourceType": "OperationOutcome",
            "issue": [{
                "severity": self.severity,
                "code": self.code,
                "details": details,
                "diagnostics": self.text,
            }]
        })
    }

    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        // A Value built from strings and literals always serialises.
        serde_json::to_vec(&self.to_json()).unwrap_or_default()
    }
}

/// A client-supplied value made safe to quote in a message: at most 100 characters, control
/// characters replaced, so a hostile header cannot forge lines or bloat the answer.
pub fn printable(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(100)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if s.chars().count() > 100 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_id_unknown_has_the_tx_issue_type_and_says_lost_to_a_server_restart() {
        // spec: ROUTE-3b, OPT-11
        let v = Outcome::cache_id_lost_to_restart("tx2.mhp4x2k9.4f0c").to_json();
        assert_eq!(v["resourceType"], "OperationOutcome");
        assert_eq!(v["issue"][0]["code"], "not-found");
        assert_eq!(
            v["issue"][0]["details"]["coding"][0]["code"],
            "cache-id-unknown"
        );
        assert_eq!(
            v["issue"][0]["details"]["coding"][0]["system"],
            TX_ISSUE_TYPE
        );
        let text = v["issue"][0]["details"]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("lost to a server restart"), "{text}");
        assert!(text.contains("tx2.mhp4x2k9.4f0c"), "{text}");
    }

    #[test]
    fn hostile_values_are_quoted_safely() {
        let long = "x".repeat(500);
        assert_eq!(printable(&long).chars().count(), 101);
        assert_eq!(printable("a\r\nb"), "a??b");
    }
}
