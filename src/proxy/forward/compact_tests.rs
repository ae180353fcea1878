//! `compact_head` held to what it is for: the same head, nothing of hyper's read buffer kept.
//! The reference is the compaction as it was first written (the target written out and parsed
//! again, every value copied and validated again), against which the cheaper one is a
//! differential property test over generated heads built as hyper builds them.

use std::fmt::Write as _;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue, HOST};
use http::uri::Uri;
use proptest::prelude::*;

use super::*;

/// The compaction as it was first written: slower, plainly right.
fn reference(uri: &mut Uri, headers: &mut HeaderMap) {
    let mut buf = BytesMut::new();
    if write!(buf, "{uri}").is_ok() {
        if let Ok(own) = Uri::from_maybe_shared(buf.split().freeze()) {
            *uri = own;
        }
    }
    for v in headers.values_mut() {
        if let Ok(mut copied) = HeaderValue::from_maybe_shared(Bytes::copy_from_slice(v.as_bytes()))
        {
            copied.set_sensitive(v.is_sensitive());
            *v = copied;
        }
    }
}

/// A head as hyper hands it over: the target and every value slices of one read buffer (the
/// buffer returned beside them), written as `METHOD target HTTP/1.1`, the headers in order.
fn as_hyper_reads(target: &[u8], headers: &[(&str, Vec<u8>, bool)]) -> (Uri, HeaderMap, Bytes) {
    let mut head = b"GET ".to_vec();
    let target_at = head.len()..head.len() + target.len();
    head.extend_from_slice(target);
    head.extend_from_slice(b" HTTP/1.1\r\n");
    let mut value_at = Vec::new();
    for (name, value, _) in headers {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        value_at.push(head.len()..head.len() + value.len());
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    // hyper's read buffer is larger than the head: a `BytesMut` the head is split from.
    let mut read = BytesMut::with_capacity(8192);
    read.extend_from_slice(&head);
    let read_buf = read.split().freeze();
    let uri = match Uri::from_maybe_shared(read_buf.slice(target_at)) {
        Ok(u) => u,
        Err(e) => panic!("test target {:?}: {e}", String::from_utf8_lossy(target)),
    };
    let mut map = HeaderMap::new();
    for ((name, _, sensitive), at) in headers.iter().zip(value_at) {
        let value = HeaderValue::from_maybe_shared(read_buf.slice(at));
        match (name.parse::<HeaderName>(), value) {
            (Ok(n), Ok(mut v)) => {
                v.set_sensitive(*sensitive);
                map.append(n, v);
            }
            _ => panic!("test header {name}"),
        }
    }
    (uri, map, read_buf)
}

/// What a head is, to compare: the target whole and in its parts, and every header in order
/// with its value's bytes and sensitivity.
type Seen = (
    String,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
    Vec<(String, Vec<u8>, bool)>,
);

fn seen(uri: &Uri, headers: &HeaderMap) -> Seen {
    (
        uri.to_string(),
        uri.scheme_str().map(str::to_owned),
        uri.authority().map(|a| a.as_str().to_owned()),
        uri.path().to_owned(),
        uri.query().map(str::to_owned),
        headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    v.as_bytes().to_vec(),
                    v.is_sensitive(),
                )
            })
            .collect(),
    )
}

#[test]
fn a_compacted_head_is_the_same_head_and_lets_the_read_buffer_go() {
    let (mut uri, mut headers, read_buf) = as_hyper_reads(
        b"/r4/ValueSet/$expand?url=http%3A%2F%2Fx",
        &[
            ("host", b"example.org".to_vec(), false),
            ("accept", b"application/fhir+json".to_vec(), false),
            ("accept", b"text/plain".to_vec(), false),
            ("x-empty", Vec::new(), false),
            ("authorization", b"Bearer abc".to_vec(), true),
        ],
    );
    assert!(!read_buf.is_unique(), "the request shares the read buffer");
    let expected = seen(&uri, &headers);
    compact_head(&mut uri, &mut headers);
    assert!(read_buf.is_unique(), "nothing of the read buffer is held");
    assert_eq!(seen(&uri, &headers), expected);
    let accepts: Vec<_> = headers.get_all("accept").iter().collect();
    assert_eq!(accepts, ["application/fhir+json", "text/plain"]);
    assert!(headers
        .get("authorization")
        .is_some_and(HeaderValue::is_sensitive));
    assert_eq!(
        headers.get(HOST).map(|h| h.as_bytes()),
        Some(&b"example.org"[..])
    );
}

#[test]
fn an_absolute_target_stays_absolute() {
    let (mut uri, mut headers, read_buf) = as_hyper_reads(
        b"http://example.org:8080/r4/metadata?_format=json",
        &[("host", b"example.org:8080".to_vec(), false)],
    );
    compact_head(&mut uri, &mut headers);
    assert!(read_buf.is_unique(), "nothing of the read buffer is held");
    assert_eq!(
        uri.to_string(),
        "http://example.org:8080/r4/metadata?_format=json"
    );
    assert_eq!(
        uri.authority().map(|a| a.as_str()),
        Some("example.org:8080")
    );
}

#[test]
fn a_head_of_static_parts_is_left_as_it_is() {
    let mut uri = Uri::from_static("/r4/metadata");
    let mut headers = HeaderMap::new();
    headers.insert(HOST, HeaderValue::from_static("example.org"));
    let expected = seen(&uri, &headers);
    compact_head(&mut uri, &mut headers);
    assert_eq!(seen(&uri, &headers), expected);
}

/// A path or query character as RFC 3986 allows it (hyper passes these on), with some
/// percent-escapes and non-ASCII UTF-8 (which hyper passes too).
fn target_char() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => proptest::char::ranges(vec!['a'..='z', 'A'..='Z', '0'..='9'].into())
            .prop_map(String::from),
        4 => proptest::sample::select(vec![
            "-", ".", "_", "~", "!", "$", "&", "'", "(", ")", "*", "+", ",", ";", "=", ":", "@",
            "/", "%2F", "%3A", "%20",
        ])
        .prop_map(str::to_owned),
        1 => proptest::sample::select(vec!["é", "ü", "中"]).prop_map(str::to_owned),
    ]
}

fn path() -> impl Strategy<Value = String> {
    proptest::collection::vec(target_char(), 0..40).prop_map(|cs| format!("/{}", cs.concat()))
}

fn query() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(
        proptest::collection::vec(
            prop_oneof![target_char(), Just("?".to_owned()), Just("=".to_owned())],
            0..40,
        )
        .prop_map(|cs| cs.concat()),
    )
}

/// A request target in each form hyper gives a proxied request: origin-form (nearly all),
/// absolute-form, asterisk-form; an origin-form one may end in a fragment (dropped by the
/// parse, as hyper drops it).
fn target() -> impl Strategy<Value = Vec<u8>> {
    let origin = (path(), query(), proptest::option::of("[a-z]{0,5}")).prop_map(|(p, q, f)| {
        let mut t = p;
        if let Some(q) = q {
            t.push('?');
            t.push_str(&q);
        }
        if let Some(f) = f {
            t.push('#');
            t.push_str(&f);
        }
        t.into_bytes()
    });
    let absolute = (
        proptest::sample::select(vec!["http", "https"]),
        "[a-z][a-z0-9.-]{0,20}",
        proptest::option::of(1u16..),
        path(),
        query(),
    )
        .prop_map(|(scheme, host, port, p, q)| {
            let mut t = format!("{scheme}://{host}");
            if let Some(port) = port {
                let _ = write!(t, ":{port}");
            }
            t.push_str(&p);
            if let Some(q) = q {
                t.push('?');
                t.push_str(&q);
            }
            t.into_bytes()
        });
    prop_oneof![8 => origin, 2 => absolute, 1 => Just(b"*".to_vec())]
}

/// A header value as hyper accepts one: visible ASCII, spaces and tabs within, obs-text.
fn value() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        10 => 0x21u8..=0x7e,
        2 => Just(b' '),
        1 => Just(b'\t'),
        1 => 0x80u8..=0xff,
    ];
    proptest::collection::vec(byte, 0..60).prop_map(|mut v| {
        // hyper trims the whitespace around a value.
        while v.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            v.remove(0);
        }
        while v.last().is_some_and(|b| *b == b' ' || *b == b'\t') {
            v.pop();
        }
        v
    })
}

fn headers() -> impl Strategy<Value = Vec<(&'static str, Vec<u8>, bool)>> {
    let name = proptest::sample::select(vec![
        "host",
        "accept",
        "authorization",
        "cookie",
        "x-cache-id",
        "user-agent",
        "content-length",
        "x-forwarded-for",
        "x-a",
    ]);
    proptest::collection::vec((name, value(), any::<bool>()), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The same target (whole and in its parts), the same headers in the same order with the
    /// same values and sensitivity as the reference compaction, and nothing of the read buffer
    /// held after it.
    #[test]
    fn compacts_as_the_reference_does_and_keeps_nothing_of_the_read_buffer(
        target in target(),
        headers in headers(),
    ) {
        let (mut uri, mut map, read_buf) = as_hyper_reads(&target, &headers);
        let before = seen(&uri, &map);
        let (mut ref_uri, mut ref_map, _ref_buf) = as_hyper_reads(&target, &headers);
        reference(&mut ref_uri, &mut ref_map);
        compact_head(&mut uri, &mut map);
        prop_assert_eq!(seen(&uri, &map), seen(&ref_uri, &ref_map));
        prop_assert_eq!(seen(&uri, &map), before);
        prop_assert!(read_buf.is_unique(), "the compacted head still holds the read buffer");
    }
}
