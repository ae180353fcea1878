//! A request about to wait (in the queue, for a slot) holds no more than it needs meanwhile.
//!
//! hyper hands out the target and the header values as slices of its 8 KB read buffer. Held by
//! a waiting request, any one of them keeps that buffer alive whole; hyper, reading on to see
//! whether the client hangs up, then takes a second 8 KB buffer. Copied into one small buffer of
//! their own, they let hyper's read buffer be reused in place.
//!
//! The copy is made from the parts as they are, not by writing the target out and parsing it
//! again: an origin-form target (what nearly every request has) is copied as its path and query
//! alone, and parsed as that alone.

use std::fmt::Write as _;

use bytes::BytesMut;
use http::header::{HeaderMap, HeaderValue};
use http::uri::{PathAndQuery, Uri};

/// Copies the target and every header value of a request's head into one buffer of their own.
pub fn compact_head(uri: &mut Uri, headers: &mut HeaderMap) {
    // Origin-form: no scheme, no authority, only the path and query (`*` is one too).
    let origin = uri.scheme().is_none() && uri.authority().is_none();
    let target = match (origin, uri.path_and_query()) {
        (true, Some(pq)) => pq.as_str().len(),
        // What `Display` writes; a little more or less only costs the buffer a resize.
        _ => {
            uri.scheme_str().map_or(0, |s| s.len() + 3)
                + uri.authority().map_or(0, |a| a.as_str().len())
                + uri.path_and_query().map_or(1, |p| p.as_str().len())
        }
    };
    let values: usize = headers.values().map(HeaderValue::len).sum();
    let mut buf = BytesMut::with_capacity(target + values);
    match (origin, uri.path_and_query()) {
        (true, Some(pq)) => {
            buf.extend_from_slice(pq.as_str().as_bytes());
            // A path and query hyper accepted parse again; one that would not is left as it is.
            if let Ok(own) = PathAndQuery::from_maybe_shared(buf.split().freeze()) {
                *uri = Uri::from(own);
            }
        }
        // Absolute-form (a client taking us for a forward proxy): rare, written out whole.
        _ => {
            if write!(buf, "{uri}").is_ok() {
                if let Ok(own) = Uri::from_maybe_shared(buf.split().freeze()) {
                    *uri = own;
                }
            }
            buf.clear();
        }
    }
    for v in headers.values() {
        buf.extend_from_slice(v.as_bytes());
    }
    let mut values = buf.freeze();
    for v in headers.values_mut() {
        let own = values.split_to(v.len().min(values.len()));
        if let Ok(mut copied) = HeaderValue::from_maybe_shared(own) {
            copied.set_sensitive(v.is_sensitive());
            *v = copied;
        }
    }
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
