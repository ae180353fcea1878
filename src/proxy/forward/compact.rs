//! A request about to wait (in the queue, for a slot) holds no more than it needs meanwhile.
//!
//! hyper hands out the target and the header values as slices of its 8 KB read buffer. Held by
//! a waiting request, any one of them keeps that buffer alive whole; hyper, reading on to see
//! whether the client hangs up, then takes a second 8 KB buffer. Copied into one small buffer of
//! their own, they let hyper's read buffer be reused in place.

use std::fmt::Write as _;

use bytes::BytesMut;
use http::header::HeaderValue;
use http::uri::Uri;
use http::Request;

/// Copies the target and every header value of `req` into one buffer of their own.
pub fn compact_head<B>(req: &mut Request<B>) {
    let uri = req.uri();
    // What `Display` writes; a little more or less only costs the buffer a resize.
    let target = uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(1, |p| p.as_str().len());
    let values: usize = req.headers().values().map(HeaderValue::len).sum();
    let mut buf = BytesMut::with_capacity(target + values);
    if write!(buf, "{uri}").is_ok() {
        // A target hyper accepted parses again; one that would not is left as it is.
        if let Ok(own) = Uri::from_maybe_shared(buf.split().freeze()) {
            *req.uri_mut() = own;
        }
    }
    buf.clear();
    for v in req.headers().values() {
        buf.extend_from_slice(v.as_bytes());
    }
    let mut values = buf.freeze();
    for v in req.headers_mut().values_mut() {
        let own = values.split_to(v.len().min(values.len()));
        if let Ok(mut copied) = HeaderValue::from_maybe_shared(own) {
            copied.set_sensitive(v.is_sensitive());
            *v = copied;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::header::{HeaderMap, HOST};

    /// A request as hyper builds it: target and values are slices of one read buffer.
    fn as_hyper_reads(read_buf: &Bytes, target: &str, headers: &[(&str, &str)]) -> Request<()> {
        let slice = |s: &str| {
            let text = std::str::from_utf8(read_buf).unwrap_or_default();
            let at = text
                .find(s)
                .unwrap_or_else(|| panic!("{s} not in the buffer"));
            read_buf.slice(at..at + s.len())
        };
        let mut req = Request::new(());
        *req.uri_mut() = Uri::from_maybe_shared(slice(target)).unwrap_or_default();
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let v = HeaderValue::from_maybe_shared(slice(value));
            match (name.parse::<http::HeaderName>(), v) {
                (Ok(n), Ok(v)) => {
                    map.append(n, v);
                }
                _ => panic!("test header {name}"),
            }
        }
        *req.headers_mut() = map;
        req
    }

    #[test]
    fn a_compacted_head_is_the_same_head_and_lets_the_read_buffer_go() {
        let read_buf = Bytes::from(
            b"GET /r4/ValueSet/$expand?url=http%3A%2F%2Fx HTTP/1.1\r\nHost: example.org\r\n\
              Accept: application/fhir+json\r\nAccept: text/plain\r\nX-Empty: \r\n\
              Authorization: Bearer abc\r\n\r\n"
                .to_vec(),
        );
        let mut req = as_hyper_reads(
            &read_buf,
            "/r4/ValueSet/$expand?url=http%3A%2F%2Fx",
            &[
                ("host", "example.org"),
                ("accept", "application/fhir+json"),
                ("accept", "text/plain"),
                ("x-empty", ""),
                ("authorization", "Bearer abc"),
            ],
        );
        if let Some(v) = req.headers_mut().get_mut("authorization") {
            v.set_sensitive(true);
        }
        assert!(!read_buf.is_unique(), "the request shares the read buffer");
        let expected = (req.uri().to_string(), format!("{:?}", req.headers()));
        compact_head(&mut req);
        assert!(read_buf.is_unique(), "nothing of the read buffer is held");
        assert_eq!(
            (req.uri().to_string(), format!("{:?}", req.headers())),
            expected
        );
        let accepts: Vec<_> = req.headers().get_all("accept").iter().collect();
        assert_eq!(accepts, ["application/fhir+json", "text/plain"]);
        assert!(req
            .headers()
            .get("authorization")
            .is_some_and(HeaderValue::is_sensitive));
        assert_eq!(
            req.headers().get(HOST).map(|h| h.as_bytes()),
            Some(&b"example.org"[..])
        );
    }

    #[test]
    fn an_absolute_target_stays_absolute() {
        let mut req = Request::new(());
        *req.uri_mut() = Uri::from_static("http://example.org:8080/r4/metadata?_format=json");
        compact_head(&mut req);
        assert_eq!(
            req.uri().to_string(),
            "http://example.org:8080/r4/metadata?_format=json"
        );
        assert_eq!(
            req.uri().authority().map(|a| a.as_str()),
            Some("example.org:8080")
        );
    }
}
