//! The fast lane's rule: which tx requests are cheap (LANE-7..14).
//!
//! The launcher never reads a body, so the rule is by method, path and `Content-Length` only.
//! Cheap: a `GET`/`HEAD` of `metadata` (at the endpoint's root), or of `$lookup`, `$subsumes` or
//! `$validate-code` as the last path segment (system, type or instance level); a `POST` of those
//! three operations only with a `Content-Length` of at most `fastLaneMaxBytes`. Everything else
//! (reads, searches, `$expand`, other operations and methods) is normal. Names are matched
//! exactly: a misspelt or re-cased operation is not known to be cheap, and a wrong "cheap" is the
//! costly mistake (it lets heavy work past `maxOutstanding`).

use http::Method;

use crate::per_kind::Kind;

/// Which slots a tx request may use on a process.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Cheap: any slot, and a freed slot first.
    Fast,
    /// Everything else: up to `maxOutstanding` (more while few normal requests run).
    Normal,
}

impl Lane {
    /// The `lane` label in `/metrics`.
    pub fn label(self) -> &'static str {
        match self {
            Lane::Fast => "fast",
            Lane::Normal => "normal",
        }
    }
}

impl Kind for Lane {
    const ALL: &'static [Lane] = &[Lane::Fast, Lane::Normal];
    fn index(self) -> usize {
        self as usize
    }
}

/// Operations whose parameters fit in a small body or the URL.
const CHEAP_OPERATIONS: [&str; 3] = ["$lookup", "$subsumes", "$validate-code"];

/// The lane of a tx request. `rest` is the decoded path after the tx endpoint (`/metadata`,
/// `/CodeSystem/$lookup`, empty for the endpoint itself), without the query.
/// `content_length` is `None` when the request has none (chunked, or no body).
pub fn lane_of(
    method: &Method,
    rest: &str,
    content_length: Option<u64>,
    fast_lane_max_bytes: u64,
) -> Lane {
    // By bytes: `rsplit_once('/')` searches by char, on every request.
    let bytes = rest.as_bytes();
    let last = bytes
        .iter()
        .rposition(|&b| b == b'/')
        .map_or(bytes, |i| &bytes[i + 1..]);
    let is_operation = CHEAP_OPERATIONS.iter().any(|op| op.as_bytes() == last);
    let cheap = if method == Method::GET || method == Method::HEAD {
        is_operation || rest == "/metadata"
    } else if method == Method::POST {
        is_operation
            && fast_lane_max_bytes > 0
            && content_length.is_some_and(|n| n <= fast_lane_max_bytes)
    } else {
        false
    };
    if cheap {
        Lane::Fast
    } else {
        Lane::Normal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_index_in_order() {
        crate::per_kind::assert_in_order::<Lane>();
    }

    fn get(rest: &str) -> Lane {
        lane_of(&Method::GET, rest, None, 1024)
    }

    #[test]
    fn get_and_head_of_cheap_operations_take_the_lane() {
        // spec: LANE-8
        for rest in [
            "/metadata",
            "/$lookup",
            "/CodeSystem/$lookup",
            "/CodeSystem/$subsumes",
            "/CodeSystem/$validate-code",
            "/ValueSet/$validate-code",
            "/ValueSet/x/$validate-code",
            "/CodeSystem/loinc/$lookup",
        ] {
            assert_eq!(get(rest), Lane::Fast, "{rest}");
            assert_eq!(
                lane_of(&Method::HEAD, rest, None, 1024),
                Lane::Fast,
                "{rest}"
            );
        }
    }

    #[test]
    fn post_takes_the_lane_only_with_a_small_content_length() {
        // spec: LANE-9, LANE-10, CONF-23
        for rest in [
            "/CodeSystem/$lookup",
            "/$subsumes",
            "/ValueSet/$validate-code",
        ] {
            assert_eq!(lane_of(&Method::POST, rest, Some(1024), 1024), Lane::Fast);
            assert_eq!(lane_of(&Method::POST, rest, Some(0), 1024), Lane::Fast);
            assert_eq!(lane_of(&Method::POST, rest, Some(1025), 1024), Lane::Normal);
            assert_eq!(lane_of(&Method::POST, rest, None, 1024), Lane::Normal);
            assert_eq!(lane_of(&Method::POST, rest, Some(0), 0), Lane::Normal);
        }
        // metadata is a GET only
        assert_eq!(
            lane_of(&Method::POST, "/metadata", Some(10), 1024),
            Lane::Normal
        );
    }

    #[test]
    fn reads_searches_and_expand_never_take_the_lane() {
        // spec: LANE-11, LANE-12, LANE-13, LANE-14
        for rest in [
            "/CodeSystem/loinc",
            "/CodeSystem/metadata",
            "/CodeSystem",
            "/ValueSet",
            "/ValueSet/$expand",
            "/ValueSet/x/$expand",
            "/$closure",
            "/$translate",
            "/ConceptMap/$translate",
            "",
            "/",
            "/metadata/",
            "/$lookup/",
            "/CodeSystem/$LOOKUP",
            "/CodeSystem/$lookupx",
        ] {
            assert_eq!(get(rest), Lane::Normal, "{rest}");
        }
        for m in [Method::PUT, Method::DELETE, Method::PATCH, Method::OPTIONS] {
            assert_eq!(
                lane_of(&m, "/CodeSystem/$lookup", Some(10), 1024),
                Lane::Normal
            );
        }
        assert_eq!(
            lane_of(&Method::POST, "/ValueSet/$expand", Some(10), 1024),
            Lane::Normal
        );
    }
}
