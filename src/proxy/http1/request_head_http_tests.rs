//! `check` held to the `http` crate's own types, which hyper reads a head through: `check` reads
//! the method, the target and the header names by byte classes (no `Method`, `Uri` or
//! `HeaderName` built, no copy, no allocation), which is sound only while those classes are
//! exactly what the types take. So the same heads go through [`by_http`], the check as it was
//! written with the types (`http::Method::from_bytes`,
//! `http::Uri::try_from`, `http::HeaderName::from_bytes`, `HeaderValue::to_str` as hyper's
//! `connection_has` and `is_chunked_`), and both must give the same answer, with the same
//! reason, at every prefix: every byte value in each place of a head, every pair of bytes in a
//! target, and generated heads (the lobby's differential generator, and random bytes in each
//! place).

use proptest::prelude::*;

use super::*;
use crate::proxy::http1::span_in;

/// The check as hyper does it, with `http`'s types: the reference the byte classes are held to.
fn by_http(buf: &[u8]) -> Check {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Partial) => return Check::Partial,
        Ok(httparse::Status::Complete(n)) => n,
        Err(e) => return Check::Refused(parse_error(e, req.method.is_some())),
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Check::Refused(Refused::Bad("the request line is malformed"));
    };
    if target.len() > MAX_TARGET {
        return Check::Refused(Refused::TargetTooLong);
    }
    if http::Method::from_bytes(method.as_bytes()).is_err() {
        return Check::Refused(Refused::Bad("the request line's method is malformed"));
    }
    if http::Uri::try_from(target).is_err() {
        return Check::Refused(Refused::Bad(
            "the request target holds a character not allowed there \
             (percent-encode it: RFC 3986)",
        ));
    }
    let head = &buf[..len];
    let mut route = RouteParts {
        method: span_in(head, method.as_bytes()).unwrap(),
        target: span_in(head, target.as_bytes()).unwrap(),
        cache_id: None,
        hosts: 0,
        lengths: 0,
        http_10: version == 0,
        transfer_encoding: false,
    };
    let http_11 = version == 1;
    let (mut length, mut has_te, mut chunked) = (None::<u64>, false, false);
    // hyper's `is_chunked_`, on its `HeaderValue`.
    let text = |v: &[u8]| {
        let v = http::HeaderValue::from_bytes(v).expect("httparse's value is a HeaderValue");
        v.to_str().ok().map(str::to_string)
    };
    for h in req.headers.iter() {
        let Ok(name) = http::HeaderName::from_bytes(h.name.as_bytes()) else {
            return Check::Refused(Refused::Bad("a header name is malformed"));
        };
        if name == http::header::TRANSFER_ENCODING {
            if !http_11 {
                return Check::Refused(Refused::Bad(
                    "Transfer-Encoding is not allowed in an HTTP/1.0 request",
                ));
            }
            (has_te, route.transfer_encoding, length) = (true, true, None);
            chunked = text(h.value).is_some_and(|s| {
                s.rsplit(',')
                    .next()
                    .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"))
            });
        } else if name == http::header::CONTENT_LENGTH {
            if has_te {
                continue;
            }
            match (digits(h.value), length) {
                (None, _) => {
                    return Check::Refused(Refused::Bad("the Content-Length is malformed"))
                }
                (Some(n), Some(prev)) if prev != n => {
                    return Check::Refused(Refused::Bad(
                        "the request has differing Content-Lengths",
                    ))
                }
                (n, _) => length = n,
            }
        } else if name == http::header::HOST {
            route.hosts = route.hosts.saturating_add(1);
        } else if name == super::super::X_CACHE_ID && route.cache_id.is_none() {
            route.cache_id = span_in(head, h.value);
        }
    }
    route.lengths = u16::from(length.is_some());
    if has_te && !chunked {
        return Check::Refused(Refused::Bad(
            "the request's Transfer-Encoding does not end in chunked",
        ));
    }
    let body = if chunked {
        Body::Chunked
    } else {
        Body::Length(length.unwrap_or(0))
    };
    Check::Taken(Taken { len, body, route })
}

/// Both readings of `raw` agree, whole and cut at every length (at 200 lengths of a long one):
/// on the answer, its reason, and for a head taken, on all of it.
fn agree(raw: &[u8]) {
    let step = (raw.len() / 200).max(1);
    let ends = (0..raw.len()).step_by(step).chain([raw.len()]);
    for end in ends {
        let raw = &raw[..end];
        let (ours, theirs) = (check(raw), by_http(raw));
        assert_eq!(
            ours,
            theirs,
            "ours, by httparse and http's types: {:?}",
            String::from_utf8_lossy(raw)
        );
    }
}

/// Heads with `b` put in each place `check` reads by byte classes.
fn with_byte(b: u8) -> Vec<Vec<u8>> {
    let b = [b];
    let b = b.as_slice();
    let places: [(&[u8], &[u8]); 28] = [
        (
            b"GET /r4/metadata/abcdef",
            b"/x HTTP/1.1\r\nHost: a\r\n\r\n",
        ),
        (
            b"GET /r4/metadata?abcdef",
            b"/x HTTP/1.1\r\nHost: a\r\n\r\n",
        ),
        (
            b"GET /r4 HTTP/1.1\r\nX: abcdefghi",
            b"jklmnopqrstuvwxyz\r\n\r\n",
        ),
        (
            b"GET /r4 HTTP/1.1\r\nX: abcdefghijklmno",
            b"pqrstuvwxyz\r\n\r\n",
        ),
        (b"", b"ET /r4 HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"G", b"T /r4 HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"ABCDEFGHIJKLMNOP", b" /r4 HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET ", b"/r4 HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET ", b" HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET /", b" HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET /r4/a", b"b HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET /r4?a", b"b HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET /r4?", b" HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET /r4#a", b"b HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET /r4?q#", b"?<> HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET http://a", b"/r4 HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET http://a/r4?", b" HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"CONNECT a", b":443 HTTP/1.1\r\nHost: a\r\n\r\n"),
        (b"GET /r4 HTTP/1.1\r\n", b"X: v\r\n\r\n"),
        (b"GET /r4 HTTP/1.1\r\nX", b"Y: v\r\n\r\n"),
        (b"GET /r4 HTTP/1.1\r\nHos", b": a\r\n\r\n"),
        (b"GET /r4 HTTP/1.1\r\nX-Cache-I", b": tx1-1\r\n\r\n"),
        (b"GET /r4 HTTP/1.1\r\nConnection: close", b"\r\n\r\n"),
        (b"GET /r4 HTTP/1.1\r\nConnection: a,", b"close, b\r\n\r\n"),
        (b"GET /r4 HTTP/1.0\r\nConnection: ", b"keep-alive\r\n\r\n"),
        (
            b"POST /r4 HTTP/1.1\r\nTransfer-Encoding: ",
            b", chunked\r\n\r\n",
        ),
        (
            b"POST /r4 HTTP/1.1\r\nTransfer-Encoding: chunked",
            b"\r\n\r\n",
        ),
        (b"POST /r4 HTTP/1.1\r\nContent-Length: 5", b"\r\n\r\nabcde"),
    ];
    places.iter().map(|(a, z)| [a, b, z].concat()).collect()
}

#[test]
fn every_byte_in_each_place_as_https_types_read_it() {
    // spec: DEC-38: a head passed is one hyper takes.
    for b in 0u8..=255 {
        for raw in with_byte(b) {
            agree(&raw);
        }
    }
    // Obs-text in a `Connection` or `Transfer-Encoding` value, as UTF-8: no `str` to hyper.
    for b in 0x80u8..=0xbf {
        for raw in with_byte(b) {
            let raw = String::from_utf8_lossy(&raw).replace('\u{fffd}', "\u{e9}");
            agree(raw.as_bytes());
        }
    }
}

#[test]
fn every_pair_of_bytes_in_a_target_as_http_uri_reads_it() {
    // The target alone: `target_ok` against `http::Uri` on every target httparse can give
    // (UTF-8, as httparse checks it before any class is read).
    for a in 0u8..=255 {
        for b in 0u8..=255 {
            for t in [
                [b'/', a, b].to_vec(),
                [b'/', b'?', a, b].to_vec(),
                [b'/', a, b'?', b].to_vec(),
                [a, b].to_vec(),
                [a, b'/', b].to_vec(),
            ] {
                if let Ok(s) = std::str::from_utf8(&t) {
                    assert_eq!(target_ok(&t), http::Uri::try_from(s).is_ok(), "{s:?}");
                }
            }
        }
    }
}

#[test]
fn long_header_names_as_hyper_reads_them() {
    for n in [MAX_HEADER_NAME, MAX_HEADER_NAME + 1] {
        let raw = format!("GET / HTTP/1.1\r\n{}: v\r\n\r\n", "a".repeat(n));
        agree(raw.as_bytes());
    }
}

fn place() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(b"/?#%:@!$&'()*+,;=-._~\"<>{}|\\^`[] \tazAZ09,".to_vec()),
            1 => any::<u8>(),
        ],
        0..12,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn generated_heads_as_https_types_read_them(
        c in crate::proxy::conn::lobby_differential_tests::case(),
    ) {
            agree(&c.bytes);
    }

    #[test]
    fn random_bytes_in_each_place_as_https_types_read_them(
        method in place(), target in place(), name in place(), value in place(),
        utf8 in any::<bool>(),
    ) {
        let mut raw = [&method[..], b" /", &target, b" HTTP/1.1\r\n", &name, b": ", &value,
            b"\r\nConnection: ", &value, b"\r\n\r\n"].concat();
        if utf8 {
            raw = String::from_utf8_lossy(&raw).into_owned().into_bytes();
        }
        agree(&raw);
        let te = [b"POST /", &target[..], b" HTTP/1.1\r\nTransfer-Encoding: ", &value,
            b"\r\n\r\n"].concat();
        agree(&te);
    }
}
