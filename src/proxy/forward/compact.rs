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
//!
//! The target and `Host` of the last head compacted on a thread are kept (`Last`), copies of
//! their own, never hyper's: a head with the same target, or the same `Host`, shares them
//! instead of copying and parsing again. `Host` is nearly always the same on a listener, and a
//! client that sends the same request again and again (a batch of the same `POST`, a health
//! check, a load generator) has the same target. What each step saved is in cluster.md (DEC-68).

use std::cell::RefCell;
use std::fmt::Write as _;

use bytes::BytesMut;
use http::header::{HeaderMap, HeaderName, HeaderValue, HOST};
use http::uri::{PathAndQuery, Uri};

/// The target and `Host` value of the last head compacted, copies of their own. What they keep
/// is at most the copies of two heads (each shares its head's one buffer), per thread.
#[derive(Default)]
pub struct Last {
    target: Option<PathAndQuery>,
    host: Option<HeaderValue>,
}

thread_local! {
    static LAST: RefCell<Last> = const {
        RefCell::new(Last {
            target: None,
            host: None,
        })
    };
}

/// Copies the target and every header value of a request's head into one buffer of their own,
/// or shares them with the last head compacted on this thread where they are the same.
pub fn compact_head(uri: &mut Uri, headers: &mut HeaderMap) {
    LAST.with(|last| match last.try_borrow_mut() {
        Ok(mut last) => compact_with(&mut last, uri, headers),
        // Not reentrant, so never; if it were, a copy of its own is as right.
        Err(_) => compact_with(&mut Last::default(), uri, headers),
    })
}

/// Whether `value` of header `name` is the last head's `Host`, to be shared.
fn is_last_host(last: Option<&HeaderValue>, name: &HeaderName, value: &HeaderValue) -> bool {
    *name == HOST && last.is_some_and(|l| l.as_bytes() == value.as_bytes())
}

/// `compact_head` with `last` the last head's target and `Host`, and made this head's.
pub fn compact_with(last: &mut Last, uri: &mut Uri, headers: &mut HeaderMap) {
    // Origin-form: no scheme, no authority, only the path and query (`*` is one too).
    let origin = uri.scheme().is_none() && uri.authority().is_none();
    let same_target = origin
        && matches!(
            (uri.path_and_query(), &last.target),
            (Some(pq), Some(l)) if pq.as_str() == l.as_str()
        );
    if let (true, Some(l)) = (same_target, &last.target) {
        *uri = Uri::from(l.clone());
    }
    let target = match (same_target, origin, uri.path_and_query()) {
        (true, _, _) => 0,
        (false, true, Some(pq)) => pq.as_str().len(),
        // What `Display` writes; a little more or less only costs the buffer a resize.
        _ => {
            uri.scheme_str().map_or(0, |s| s.len() + 3)
                + uri.authority().map_or(0, |a| a.as_str().len())
                + uri.path_and_query().map_or(1, |p| p.as_str().len())
        }
    };
    let last_host = last.host.as_ref();
    let values: usize = headers
        .iter()
        .filter(|(n, v)| !is_last_host(last_host, n, v))
        .map(|(_, v)| v.len())
        .sum();
    // Nothing to copy (the target and `Host` shared, no other header): no allocation.
    let mut buf = BytesMut::with_capacity(target + values);
    match (same_target, origin, uri.path_and_query()) {
        (true, _, _) => {}
        (false, true, Some(pq)) => {
            buf.extend_from_slice(pq.as_str().as_bytes());
            // A path and query hyper accepted parse again; one that would not is left as it is
            // (and not kept: it is hyper's).
            if let Ok(own) = PathAndQuery::from_maybe_shared(buf.split().freeze()) {
                last.target = Some(own.clone());
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
    // (With nothing to copy, as when `Host` is the only header and shared, not looked at again.)
    if values > 0 {
        for (n, v) in headers.iter() {
            if !is_last_host(last_host, n, v) {
                buf.extend_from_slice(v.as_bytes());
            }
        }
    }
    let mut values = buf.freeze();
    let mut new_host = None;
    for (n, v) in headers.iter_mut() {
        if let Some(l) = last_host.filter(|l| *n == HOST && l.as_bytes() == v.as_bytes()) {
            let mut same = l.clone();
            same.set_sensitive(v.is_sensitive());
            *v = same;
            continue;
        }
        let own = values.split_to(v.len().min(values.len()));
        if let Ok(mut copied) = HeaderValue::from_maybe_shared(own) {
            copied.set_sensitive(v.is_sensitive());
            if *n == HOST {
                new_host = Some(copied.clone());
            }
            *v = copied;
        }
    }
    if new_host.is_some() {
        last.host = new_host;
    }
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
