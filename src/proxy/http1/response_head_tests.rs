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

/// The reason phrase the client would be given: the one received when it is not the usual one.
fn reason(h: &Head) -> Option<&[u8]> {
    h.parts
        .extensions
        .get::<hyper::ext::ReasonPhrase>()
        .map(|p| p.as_bytes())
}

#[test]
fn a_status_line_without_a_reason_or_with_obs_text_is_passed_on_as_received() {
    // spec: LAUNCH-9 (an answer passed on, or a 502; never the launcher down). httparse gives a
    // static "" for these reasons, not a slice of the head: no span may be taken from it.
    let h = get("HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok");
    assert_eq!(
        (h.parts.status.as_u16(), h.framing),
        (200, Framing::Length(2))
    );
    assert_eq!(reason(&h), Some(&b""[..]), "none received, none passed on");
    let h = get("HTTP/1.1 299\r\n\r\n");
    assert_eq!(reason(&h), Some(&b""[..]));
    let h = get("HTTP/1.1 204 \r\n\r\n");
    assert_eq!(reason(&h), Some(&b""[..]));
    let h = get("HTTP/1.1 404 N\u{e3}o encontrado\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(h.parts.status, 404);
    assert_eq!(reason(&h), Some("N\u{e3}o encontrado".as_bytes()));
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 \xff\xfeOK\r\nContent-Length: 0\r\n\r\n"[..]);
    let h = parse(&mut buf, &Method::GET).unwrap().unwrap();
    assert_eq!(reason(&h), Some(&b"\xff\xfeOK"[..]));
    // Line ends of a bare LF, interim heads before, and empty lines before the status line.
    let h = get("\r\n\nHTTP/1.1 100\n\nHTTP/1.0 201 Cr\u{e9}\u{e9}\nContent-Length: 0\n\n");
    assert_eq!(h.parts.status, 201);
    assert_eq!(reason(&h), Some("Cr\u{e9}\u{e9}".as_bytes()));
    // The usual phrase is not stored (hyper writes it anyway).
    assert_eq!(reason(&get("HTTP/1.1 404 Not Found\r\n\r\n")), None);
}

proptest::proptest! {
    #[test]
    fn any_bytes_after_a_status_code_give_a_head_or_an_error_never_a_panic(
        tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
        status in 100u16..1000,
        cut in 0usize..64,
    ) {
        let mut text = format!("HTTP/1.1 {status}").into_bytes();
        text.extend_from_slice(&tail);
        text.extend_from_slice(b"\r\nA: b\r\nContent-Length: 1, 1\r\n\r\n");
        let mut buf = BytesMut::from(&text[..cut.min(text.len())]);
        let _ = parse(&mut buf, &Method::GET);
        let mut buf = BytesMut::from(&text[..]);
        if let Ok(Some(h)) = parse(&mut buf, &Method::GET) {
            if let Some(r) = reason(&h) {
                // What is kept is none, or bytes of the line as received after the code's space.
                proptest::prop_assert!(
                    r.is_empty() || (tail.starts_with(b" ") && tail[1..].starts_with(r))
                );
            }
        }
    }
}

#[test]
fn an_unsolicited_switch_of_protocols_is_refused() {
    // RFC 9110 §15.2.2: a 101 only answers an Upgrade, which the launcher never sends on.
    for text in [
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
        "HTTP/1.1 101\r\n\r\n",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n\r\n",
    ] {
        assert_eq!(
            head(text, Method::GET).unwrap_err(),
            HeadError::SwitchingProtocols,
            "{text:?}"
        );
    }
}

#[test]
fn a_content_length_list_or_repeated_line_goes_on_as_one_value() {
    // RFC 9110 §8.6: the body is framed by the one length, and the client is told that one.
    for text in [
        "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5,5\r\nX: y\r\nContent-Length: 5\r\n\r\n",
    ] {
        let h = get(text);
        assert_eq!(h.framing, Framing::Length(5));
        let all: Vec<&[u8]> = h
            .parts
            .headers
            .get_all(CONTENT_LENGTH)
            .iter()
            .map(HeaderValue::as_bytes)
            .collect();
        assert_eq!(all, [b"5"], "{text:?}");
    }
    // A body-less response's list, as its framing does not read it: one value when they agree,
    // none when they do not (a length nobody can trust is not passed on).
    let h = head(
        "HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n",
        Method::HEAD,
    )
    .unwrap()
    .unwrap();
    assert_eq!(h.parts.headers[CONTENT_LENGTH], "7");
    let h = get("HTTP/1.1 304 Not Modified\r\nContent-Length: 7, 8\r\n\r\n");
    assert!(!h.parts.headers.contains_key(CONTENT_LENGTH));
    // One plain value is left as it came.
    let h = get("HTTP/1.1 200 OK\r\nContent-Length: 007\r\n\r\n");
    assert_eq!(h.parts.headers[CONTENT_LENGTH], "007");
}

#[test]
fn a_head_longer_than_the_read_cap_is_refused_even_when_whole() {
    let big = "b".repeat(HEAD_AT_MOST);
    let text = format!("HTTP/1.1 200 OK\r\nX-Big: {big}\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(head(&text, Method::GET).unwrap_err(), HeadError::TooLarge);
    let fits = format!(
        "HTTP/1.1 200 OK\r\nX-Big: {}\r\n\r\n",
        &big[..HEAD_AT_MOST - 40]
    );
    assert!(head(&fits, Method::GET).unwrap().is_some());
}

/// The head as the proxy passed it on before the hop-by-hop headers were left out here: every
/// line appended (the `Content-Length` lines made one, as `parse` does), then
/// `forward::headers::strip_hop_by_hop`, the rule both legs share.
fn appended_then_stripped(text: &str) -> HeaderMap {
    let mut lines = [httparse::EMPTY_HEADER; 32];
    let mut res = httparse::Response::new(&mut lines);
    assert!(matches!(
        res.parse(text.as_bytes()),
        Ok(httparse::Status::Complete(_))
    ));
    let mut headers = HeaderMap::new();
    for h in res.headers.iter() {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(h.name.as_bytes()),
            HeaderValue::from_bytes(h.value),
        ) {
            headers.append(n, v);
        }
    }
    if headers.get_all(CONTENT_LENGTH).iter().count() > 1 {
        headers.remove(CONTENT_LENGTH);
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("5"));
    }
    crate::proxy::forward::headers::strip_hop_by_hop(&mut headers);
    headers
}

proptest::proptest! {
    /// RFC 9110 §7.6.1: what is left out is exactly what stripping every hop-by-hop header from
    /// the whole map took, `Connection`'s named headers, `close` and `Transfer-Encoding` with
    /// its `Content-Length` included, whatever the names' case.
    #[test]
    fn the_head_comes_out_as_stripping_every_hop_by_hop_header_left_it(
        lines in proptest::collection::vec((0usize..18, 0usize..14, 0usize..14), 0..10)
    ) {
        const NAMES: [&str; 18] = [
            "Connection", "connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
            "Transfer-Encoding", "UPGRADE", "Host", "Content-Length", "Close", "X-Internal",
            "content-type", "Set-Cookie", "Vary", "X-Powered-By", "Server", "x-internal",
        ];
        const TOKENS: [&str; 14] = [
            "keep-alive", "Keep-Alive", "close", "CLOSE", "x-internal", "transfer-encoding",
            "host", "content-length", "te", "connection", " upgrade ", "bad token",
            "Content-Type", "set-cookie",
        ];
        let mut text = String::from("HTTP/1.1 200 OK\r\n");
        for (n, a, b) in lines {
            let value = match NAMES[n].to_ascii_lowercase().as_str() {
                "connection" => format!("{}, {}", TOKENS[a], TOKENS[b]),
                "transfer-encoding" => "chunked".to_string(),
                "content-length" => "5".to_string(),
                _ => format!("v{a}"),
            };
            text.push_str(&format!("{}: {value}\r\n", NAMES[n]));
        }
        text.push_str("\r\n");
        let ours = head(&text, Method::GET);
        proptest::prop_assert!(matches!(ours, Ok(Some(_))), "{:?}: {:?}", text, ours);
        if let Ok(Some(h)) = ours {
            proptest::prop_assert_eq!(&h.parts.headers, &appended_then_stripped(&text), "{}", text);
            // What the pool's framing check reads of a line left out.
            let te = text.to_ascii_lowercase().contains("\ntransfer-encoding:");
            proptest::prop_assert_eq!(h.transfer_encoding, te);
        }
    }
}

#[test]
fn an_answers_own_headers_go_on_as_they_came_and_its_hop_by_hop_ones_do_not() {
    // RFC 9110 §7.6.1; RFC 6265 §3 (each Set-Cookie its own line, never joined).
    let h = get(
        "HTTP/1.1 200 OK\r\nServer: nginx\r\nSet-Cookie: a=1; Path=/\r\nVary: Accept\r\n\
         Set-Cookie: b=2\r\nVary: Origin, Accept-Encoding\r\nX-Odd_Name.v2: kept\r\n\
         Connection: keep-alive, X-Hop\r\nX-Hop: gone\r\nKeep-Alive: timeout=5\r\n\
         content-length: 2\r\n\r\nok",
    );
    let all = |name: &str| -> Vec<&[u8]> {
        h.parts
            .headers
            .get_all(name)
            .iter()
            .map(HeaderValue::as_bytes)
            .collect()
    };
    assert_eq!(all("set-cookie"), [&b"a=1; Path=/"[..], b"b=2"]);
    assert_eq!(all("vary"), [&b"Accept"[..], b"Origin, Accept-Encoding"]);
    assert_eq!(all("x-odd_name.v2"), [b"kept"]);
    assert_eq!(all("server"), [b"nginx"]);
    assert_eq!(all("content-length"), [b"2"]);
    for gone in ["connection", "x-hop", "keep-alive"] {
        assert!(!h.parts.headers.contains_key(gone), "{gone}");
    }
    assert_eq!((h.framing, h.keep_alive), (Framing::Length(2), true));
}
