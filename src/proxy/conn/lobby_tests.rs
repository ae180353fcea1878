use super::*;
use crate::proxy::http1::limits::MAX_HEADERS;

/// What the lobby admits of `raw`: read once by the codec, then taken whole or left to hyper.
fn head(raw: &str) -> Option<Head<'_>> {
    match request_head::check(raw.as_bytes()) {
        Check::Taken(t) => whole_request(raw.as_bytes(), &t),
        _ => None,
    }
}

#[test]
fn a_whole_get_is_read_with_what_routing_needs() {
    let raw = "GET /r4/ValueSet/$expand?url=x HTTP/1.1\r\nHost: a\r\nX-Cache-Id:  tx1-7 \r\n\r\n";
    assert_eq!(
        head(raw),
        Some(Head {
            len: raw.len(),
            method: Method::GET,
            target: "/r4/ValueSet/$expand?url=x",
            cache_id: Some(&b"tx1-7"[..]),
            content_length: None,
        })
    );
}

#[test]
fn a_post_is_whole_only_with_all_of_its_body() {
    let post =
        "POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: a\r\ncontent-length: 5\r\n\r\n";
    assert_eq!(head(post), None, "no body yet");
    assert_eq!(head(&format!("{post}abcd")), None, "4 of 5 bytes");
    let whole = format!("{post}abcde");
    let h = head(&whole).map(|h| (h.method, h.content_length, h.len));
    assert_eq!(h, Some((Method::POST, Some(5), whole.len())));
    // A pipelined request behind it changes nothing.
    let more = format!("{post}abcdeGET /r4/metadata HTTP/1.1\r\n\r\n");
    let h = head(&more).map(|h| (h.content_length, h.len));
    assert_eq!(h, Some((Some(5), whole.len())));
}

#[test]
fn a_fragment_is_routed_without_it_as_by_the_service() {
    // Found by the differential test: the lobby routed `/r4/x#f`, the service (`http::Uri`)
    // `/r4/x`, so the two routings could differ and the lobby's admission be dropped.
    let h = head("GET /r4/x?a=1#f HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(h.map(|h| h.target), Some("/r4/x?a=1"));
}

#[test]
fn an_http_1_0_request_may_come_without_host() {
    assert!(head("GET /r4/metadata HTTP/1.0\r\n\r\n").is_some());
}

#[test]
fn the_first_cache_id_counts_as_in_hyper() {
    let h = head("GET /r4/x HTTP/1.1\r\nHost: a\r\nX-Cache-Id: tx1-1\r\nx-cache-id: tx2-2\r\n\r\n");
    assert_eq!(h.and_then(|h| h.cache_id), Some(&b"tx1-1"[..]));
}

#[test]
fn what_the_lobby_leaves_to_hyper() {
    for (why, raw) in [
        ("head not whole", "GET /r4/metadata HTTP/1.1\r\nHost: a\r\n"),
        ("nothing yet", ""),
        (
            "chunked",
            "POST /r4/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ),
        (
            "two lengths",
            "POST /r4/x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na",
        ),
        (
            "a length not a number",
            "POST /r4/x HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        ),
        ("absolute form", "GET http://a/r4/metadata HTTP/1.1\r\n\r\n"),
        ("asterisk form", "OPTIONS * HTTP/1.1\r\n\r\n"),
        (
            "CONNECT, refused by the service",
            "CONNECT /r4/x HTTP/1.1\r\nHost: a\r\n\r\n",
        ),
        ("not HTTP", "hello there\r\n\r\n"),
        ("no Host", "GET /r4/metadata HTTP/1.1\r\n\r\n"),
        (
            "two Hosts",
            "GET /r4/metadata HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
        ),
    ] {
        assert_eq!(head(raw), None, "{why}");
    }
    let many: String = (0..MAX_HEADERS + 1)
        .map(|i| format!("X-{i}: v\r\n"))
        .collect();
    assert_eq!(
        head(&format!("GET /r4/x HTTP/1.1\r\n{many}\r\n")),
        None,
        "too many headers"
    );
}

#[test]
fn a_length_near_the_largest_number_is_left_to_hyper_not_wrapped() {
    // The request's end is the head's length plus the body's: computed unchecked, a length of
    // 2^64 - 1 wrapped to a request shorter than its own head (a panic in a debug build).
    for n in [u64::MAX, u64::MAX - 10, 1 << 63] {
        let raw = format!("POST /r4/x HTTP/1.1\r\nHost: a\r\nContent-Length: {n}\r\n\r\nabc");
        assert_eq!(head(&raw), None, "{n}");
    }
}
