//! The requests a run sends: the heavy mix (`$expand`, small and large `POST $validate-code`),
//! the `$lookup` probe, and the IG Publisher's `$cache-control` session calls.
//!
//! The two `$validate-code` bodies sit on either side of the fast lane's `fastLaneMaxBytes`
//! (1024): the small one is a single coding with its parameters, about 450 bytes, as the spec
//! describes a validator's call; the large one carries an inline code system (about 4 KB).

use bytes::Bytes;
use http::Method;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Characters left as they are in a query value (RFC 3986 unreserved).
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// One request as the client sends it; the `Host` header and path prefix come from the target.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    pub method: Method,
    /// Path and query, without the target's prefix.
    pub path_and_query: String,
    pub body: Bytes,
    pub cache_id: Option<String>,
}

impl RequestSpec {
    fn get(path_and_query: String) -> Self {
        RequestSpec {
            method: Method::GET,
            path_and_query,
            body: Bytes::new(),
            cache_id: None,
        }
    }

    fn post(path: &str, body: Bytes) -> Self {
        RequestSpec {
            method: Method::POST,
            path_and_query: path.to_string(),
            body,
            cache_id: None,
        }
    }

    pub fn with_cache_id(mut self, id: &str) -> Self {
        self.cache_id = Some(id.to_string());
        self
    }
}

/// The heavy request kinds, in the order of the mix's weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeavyKind {
    Expand,
    ValidateSmall,
    ValidateLarge,
}

impl HeavyKind {
    pub const ALL: [HeavyKind; 3] = [
        HeavyKind::Expand,
        HeavyKind::ValidateSmall,
        HeavyKind::ValidateLarge,
    ];
}

fn encode(value: &str) -> String {
    utf8_percent_encode(value, QUERY_VALUE).to_string()
}

/// `GET /r4/ValueSet/$expand?url=...`
pub fn expand(value_set_url: &str) -> RequestSpec {
    RequestSpec::get(format!(
        "/r4/ValueSet/$expand?url={}",
        encode(value_set_url)
    ))
}

/// `GET /r4/CodeSystem/$lookup?system=...&code=...`, the probe.
pub fn lookup(system: &str, code: &str) -> RequestSpec {
    RequestSpec::get(format!(
        "/r4/CodeSystem/$lookup?system={}&code={}",
        encode(system),
        encode(code)
    ))
}

/// `POST /r4/CodeSystem/$validate-code` with `body`.
pub fn validate_code(body: Bytes) -> RequestSpec {
    RequestSpec::post("/r4/CodeSystem/$validate-code", body)
}

/// `POST /r4/$cache-control`, which starts a cache session.
pub fn cache_control() -> RequestSpec {
    RequestSpec::post(
        "/r4/$cache-control",
        Bytes::from_static(
            br#"{"resourceType":"Parameters","parameter":[{"name":"mode","valueCode":"start"}]}"#,
        ),
    )
}

/// The request each heavy kind sends.
pub fn heavy(kind: HeavyKind, value_set_url: &str) -> RequestSpec {
    match kind {
        HeavyKind::Expand => expand(value_set_url),
        HeavyKind::ValidateSmall => validate_code(small_validate_body()),
        HeavyKind::ValidateLarge => validate_code(large_validate_body()),
    }
}

/// A single coding with the parameters a validator sends with it: about 450 bytes.
pub fn small_validate_body() -> Bytes {
    Bytes::from(
        serde_json::json!({
            "resourceType": "Parameters",
            "parameter": [
                {"name": "coding", "valueCoding": {
                    "system": "http://loinc.org", "code": "8480-6", "display": "Systolic blood pressure"}},
                {"name": "displayLanguage", "valueCode": "en-US"},
                {"name": "default-to-latest-version", "valueBoolean": true},
                {"name": "valueSetMode", "valueString": "NO_MEMBERSHIP_CHECK"},
                                {"name": "profile-url", "valueString": "http://hl7.org/fhir/ExpansionProfile/dc8fd4bc"}
            ]
        })
        .to_string(),
    )
}

/// A coding validated against an inline code system of 64 concepts: about 4 KB.
pub fn large_validate_body() -> Bytes {
    let concepts: Vec<serde_json::Value> = (1..=64)
        .map(|i| serde_json::json!({"code": format!("code-{i:03}"), "display": format!("Example concept number {i:03}")}))
        .collect();
    Bytes::from(
        serde_json::json!({
            "resourceType": "Parameters",
            "parameter": [
                {"name": "coding", "valueCoding": {"system": "http://example.org/fhir/CodeSystem/load", "code": "code-007"}},
                {"name": "tx-resource", "resource": {
                    "resourceType": "CodeSystem", "url": "http://example.org/fhir/CodeSystem/load",
                    "version": "1.0.0", "status": "active", "content": "complete", "concept": concepts}}
            ]
        })
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_small_body_fits_the_fast_lane_and_the_large_one_does_not() {
        // The load tool's own bodies, not the launcher's lane (its tests are in `proxy::lane`):
        // sized either side of the default fastLaneMaxBytes (1024), so a run has both kinds.
        let small = small_validate_body().len();
        let large = large_validate_body().len();
        assert!((400..=520).contains(&small), "small body is {small} bytes");
        assert!(
            (3_500..=4_600).contains(&large),
            "large body is {large} bytes"
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        let probe = lookup("http://loinc.org", "8480-6");
        assert_eq!(
            probe.path_and_query,
            "/r4/CodeSystem/$lookup?system=http%3A%2F%2Floinc.org&code=8480-6"
        );
        assert_eq!(probe.method, Method::GET);
        let e = expand("http://hl7.org/fhir/ValueSet/a b&c");
        assert_eq!(
            e.path_and_query,
            "/r4/ValueSet/$expand?url=http%3A%2F%2Fhl7.org%2Ffhir%2FValueSet%2Fa%20b%26c"
        );
    }

    #[test]
    fn each_heavy_kind_sends_its_own_request() {
        assert_eq!(heavy(HeavyKind::Expand, "u").method, Method::GET);
        let small = heavy(HeavyKind::ValidateSmall, "u");
        let large = heavy(HeavyKind::ValidateLarge, "u");
        assert_eq!(small.path_and_query, "/r4/CodeSystem/$validate-code");
        assert_eq!((small.method, large.method), (Method::POST, Method::POST));
        assert!(large.body.len() > small.body.len());
        assert_eq!(
            cache_control().with_cache_id("tx1.a.b").cache_id.as_deref(),
            Some("tx1.a.b")
        );
    }
}
