use super::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What hyper's own server does with `raw` (with hyper's settings, as `served` builds it):
/// whether it calls the service.
async fn hyper_takes(raw: &[u8]) -> bool {
    hyper_calls(raw).await > 0
}

/// How many requests of `raw` hyper's own server calls the service with.
async fn hyper_calls(raw: &[u8]) -> usize {
    let (mut client, server) = tokio::io::duplex(256 * 1024);
    let called = Arc::new(AtomicUsize::new(0));
    let seen = called.clone();
    let svc = hyper::service::service_fn(move |_req| {
        seen.fetch_add(1, Ordering::Relaxed);
        async { Ok::<_, std::convert::Infallible>(http::Response::new(String::new())) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.max_buf_size(256 * 1024);
    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(server), svc);
    let task = tokio::spawn(conn);
    let _ = client.write_all(raw).await;
    let _ = client.shutdown().await;
    let mut out = Vec::new();
    let _ = client.read_to_end(&mut out).await;
    let _ = task.await;
    called.load(Ordering::Relaxed)
}

/// Requests that hyper 1.x refuses itself, each with what was wrong (issue #25, defect 8).
pub(crate) const REFUSED_BY_HYPER: &[&str] = &[
    "GET /r4/metadata?q=\"x\" HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata?q=<x> HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata?q=a\x7fb HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata?q=a\tb HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata HTTP/2.0\r\nHost: a\r\n\r\n",
    "GET /r4/metadata HTTP/1.2\r\nHost: a\r\n\r\n",
    "GET /r4/metadata http/1.1\r\nHost: a\r\n\r\n",
    "GET  /r4/metadata HTTP/1.1\r\nHost: a\r\n\r\n",
    "G(T /r4/metadata HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\r\nHo st: a\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\r\nHost : a\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\r\nHost: a\r\n: empty\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\rHost: a\r\n\r\n",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\nabcde",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nabcde",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    "POST /r4/metadata HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    // Obs-text is no `str` to hyper, even as UTF-8: no last coding, so not chunked.
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \u{e9}, chunked\r\n\r\n0\r\n\r\n",
    "\x16\x03\x01\x02\x00\x01\x00\x01\x7c\x03\x03",
    "GET\r\n\r\n",
];

/// Requests hyper takes (the service answers what is wrong with some of them).
const TAKEN_BY_HYPER: &[&str] = &[
    "GET /r4/metadata?q={x} HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata?q=a|b HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata?q=a\\b HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata?q=a^b HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata?q=a`b HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metad\u{e4}ta HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\r\nHost: a\r\n\r\n",
    "\r\nGET /r4/metadata HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata?q=%22x%22&a=b;c HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/ValueSet/$expand?url=http://x/y|1.0 HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata HTTP/1.0\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "GET http://a/r4/metadata HTTP/1.1\r\nHost: a\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    "PURGE /r4/metadata HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /r4/metadata HTTP/1.1\nHost: a\n\n",
    "GET /r4/metadata HTTP/1.1\r\nHost: a\r\nX: caf\u{e9} \"q\" <a>\t\r\n\r\n",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nabcde",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "POST /r4/metadata HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
];

#[tokio::test]
async fn refuses_exactly_what_hyper_refuses() {
    // spec: DEC-38 (issue #25, defect 8), DEC-64: hyper refuses none of the heads
    // this takes, and takes none of the heads this refuses.
    let many = format!(
        "GET /r4/metadata HTTP/1.1\r\nHost: a\r\n{}\r\n",
        "X: y\r\n".repeat(MAX_HEADERS)
    );
    let most = format!(
        "GET /r4/metadata HTTP/1.1\r\nHost: a\r\n{}\r\n",
        "X: y\r\n".repeat(MAX_HEADERS - 1)
    );
    let long = format!(
        "GET /{} HTTP/1.1\r\nHost: a\r\n\r\n",
        "a".repeat(MAX_TARGET)
    );
    let refused = REFUSED_BY_HYPER.iter().map(|s| s.to_string());
    let mut wrong = Vec::new();
    for raw in refused.chain([many, long]) {
        let ours = matches!(check(raw.as_bytes()), Check::Refused(_));
        let hypers = !hyper_takes(raw.as_bytes()).await;
        if !(ours && hypers) {
            wrong.push(format!("refused? ours {ours} hyper {hypers}: {raw:.120?}"));
        }
    }
    for raw in TAKEN_BY_HYPER.iter().map(|s| s.to_string()).chain([most]) {
        let ours = matches!(check(raw.as_bytes()), Check::Taken(_));
        let hypers = hyper_takes(raw.as_bytes()).await;
        if !(ours && hypers) {
            wrong.push(format!("taken? ours {ours} hyper {hypers}: {raw:.120?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[tokio::test]
async fn every_single_byte_in_the_target_and_a_header_value_as_hyper_decides() {
    for b in 0u8..=255 {
        if b == b'\r' || b == b'\n' || b == b' ' {
            continue;
        }
        let mut target = b"GET /r4/metadata?q=a".to_vec();
        target.push(b);
        target.extend_from_slice(b"b HTTP/1.1\r\nHost: a\r\n\r\n");
        let mut value = b"GET /r4/metadata HTTP/1.1\r\nHost: a\r\nX: a".to_vec();
        value.push(b);
        value.extend_from_slice(b"b\r\n\r\n");
        let mut name = b"GET /r4/metadata HTTP/1.1\r\nHost: a\r\nX".to_vec();
        name.push(b);
        name.extend_from_slice(b"Y: v\r\n\r\n");
        for raw in [target, value, name] {
            let ours = matches!(check(&raw), Check::Taken(_));
            assert_eq!(
                ours,
                hyper_takes(&raw).await,
                "byte {b:#04x} in {:?}",
                String::from_utf8_lossy(&raw)
            );
        }
    }
}

#[test]
fn a_partial_head_is_partial_and_the_framing_is_read() {
    assert_eq!(check(b"GET /r4/metadata HTTP/1.1\r\nHo"), Check::Partial);
    let post = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcde";
    assert!(matches!(
        check(post),
        Check::Taken(Taken {
            len,
            body: Body::Length(5),
            ..
        }) if len == post.len() - 5
    ));
    let chunked = b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert!(matches!(
        check(chunked),
        Check::Taken(Taken {
            body: Body::Chunked,
            ..
        })
    ));
}
