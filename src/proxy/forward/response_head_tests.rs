//! Response heads: parts, framing and keep-alive, and each way one is refused.

use super::*;

fn head(text: &str, method: Method) -> Result<Option<Head>, HeadError> {
    let mut buf = BytesMut::from(text.as_bytes());
    parse(&mut buf, &method)
}

fn get(text: &str) -> Head {
    head(text, Method::GET).unwrap().unwrap()
}

#[test]
fn a_plain_head_gives_status_headers_and_length() {
    let mut buf =
        BytesMut::from(&b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\nX-A: b\r\n\r\nabc"[..]);
    let h = parse(&mut buf, &Method::GET).unwrap().unwrap();
    assert_eq!(h.parts.status, 201);
    assert_eq!(h.parts.version, Version::HTTP_11);
    assert_eq!(h.parts.headers["x-a"], "b");
    assert_eq!(h.framing, Framing::Length(3));
    assert!(h.keep_alive);
    assert_eq!(&buf[..], b"abc", "the body stays in the buffer");
    assert!(h
        .parts
        .extensions
        .get::<hyper::ext::ReasonPhrase>()
        .is_none());
}

#[test]
fn an_incomplete_head_asks_for_more() {
    assert!(head("HTTP/1.1 200 OK\r\nA: b\r\n", Method::GET)
        .unwrap()
        .is_none());
}

#[test]
fn interim_heads_are_skipped() {
    let h = get("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(h.parts.status, 200);
    assert!(!h.parts.headers.contains_key("link"));
    // Only the interim head so far: more is needed.
    assert!(head("HTTP/1.1 100 Continue\r\n\r\n", Method::GET)
        .unwrap()
        .is_none());
}

#[test]
fn bodiless_responses_have_no_body_whatever_they_say() {
    for status in ["204 No Content", "304 Not Modified"] {
        let h = get(&format!("HTTP/1.1 {status}\r\nContent-Length: 5\r\n\r\n"));
        assert_eq!(h.framing, Framing::Empty);
    }
    let h = head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", Method::HEAD)
        .unwrap()
        .unwrap();
    assert_eq!(h.framing, Framing::Empty);
    let h = get("HTTP/1.1 101 Switching Protocols\r\n\r\n");
    assert_eq!((h.framing, h.keep_alive), (Framing::Empty, false));
}

#[test]
fn chunked_wins_over_content_length_and_the_connection_is_not_trusted() {
    let h = get("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n");
    assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, false));
    let h = get("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
    assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, true));
}

#[test]
fn a_transfer_coding_not_ending_in_chunked_or_no_length_reads_to_close() {
    let h = get("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n");
    assert_eq!((h.framing, h.keep_alive), (Framing::ToClose, false));
    let h = get("HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!((h.framing, h.keep_alive), (Framing::ToClose, false));
}

#[test]
fn content_length_values_must_agree_and_be_numbers() {
    assert_eq!(
        get("HTTP/1.1 200 OK\r\nContent-Length: 4, 4\r\nContent-Length: 4\r\n\r\n").framing,
        Framing::Length(4)
    );
    for bad in ["4, 5", "+4", "-1", "4 4", "", "99999999999999999999"] {
        let text = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\n");
        assert_eq!(
            head(&text, Method::GET).unwrap_err(),
            HeadError::ContentLength,
            "{bad:?}"
        );
    }
}

#[test]
fn keep_alive_follows_version_and_connection() {
    assert!(!get("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").keep_alive);
    assert!(!get("HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n").keep_alive);
    assert!(!get("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);
    assert!(
        get("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n").keep_alive
    );
}

#[test]
fn transfer_encoding_in_http_1_0_is_refused() {
    let e = head(
        "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        Method::GET,
    )
    .unwrap_err();
    assert_eq!(e, HeadError::TransferEncodingHttp10);
}

#[test]
fn malformed_heads_are_refused() {
    for bad in [
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n",
        "HTTP/1.1 200 OK\r\nA: b\x01\r\n\r\n",
        "HTTP/1.1 200 OK\r\nA b\r\n\r\n",
    ] {
        assert!(
            matches!(head(bad, Method::GET), Err(HeadError::Syntax(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn an_unusual_reason_phrase_is_kept_for_the_client() {
    let h = get("HTTP/1.1 200 Fine Thanks\r\nContent-Length: 0\r\n\r\n");
    let p = h
        .parts
        .extensions
        .get::<hyper::ext::ReasonPhrase>()
        .unwrap();
    assert_eq!(p.as_bytes(), b"Fine Thanks");
}
