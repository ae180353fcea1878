//! The forwarding pieces (`is_unsupported`, `prepare_request`, `buffered`, `streamed`, the
//! pool) behind a small hyper server of the test's own, with raw sockets at both ends so the
//! bytes on each leg can be checked. The harness is not the listener: what the listener does
//! with them (which slot a response holds and for how long, STREAM-1 and STREAM-2) is proven on
//! the real binary in tests/proxy_slots.rs.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use super::body::{empty, BodyEnd, EndKind, NotifyOnEnd};
use super::test_support::*;
use super::*;
use crate::proxy::answer::Answer;
use crate::proxy::budget::Budget;

/// A front door: refuse, prepare, forward, stream back.
async fn proxy(up: Upstream) -> SocketAddr {
    proxy_mode(up, Mode::Streamed, None).await
}

#[derive(Clone, Copy)]
enum Mode {
    Buffered,
    Streamed,
}

/// A front door passing responses on the given way; `done` hears when the process's part is over
/// (buffered: the body was read whole; streamed: the body ended or was dropped).
async fn proxy_mode(
    up: Upstream,
    mode: Mode,
    done: Option<mpsc::UnboundedSender<EndKind>>,
) -> SocketAddr {
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        while let Ok((stream, peer)) = l.accept().await {
            let up = up.clone();
            let done = done.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let up = up.clone();
                    let done = done.clone();
                    async move {
                        let (mut parts, body) = req.into_parts();
                        if is_unsupported(&parts) {
                            return Ok::<_, Infallible>(Answer::Unsupported.respond());
                        }
                        prepare_request(&mut parts, &Peer::new(peer));
                        let resp = match up.send(Request::from_parts(parts, body)).await {
                            Ok(resp) => resp,
                            Err(_) => return Ok(bad_gateway()),
                        };
                        Ok(match mode {
                            Mode::Buffered => {
                                let unlimited = Arc::new(Budget::new(0));
                                let r = buffered(resp, &unlimited).await;
                                if let Some(d) = &done {
                                    let _ = d.send(EndKind::Complete);
                                }
                                match r {
                                    Ok(Buffered::Whole(r)) => r,
                                    _ => bad_gateway(),
                                }
                            }
                            Mode::Streamed => streamed(resp, move |end| {
                                if let Some(d) = &done {
                                    let _ = d.send(end.how);
                                }
                            }),
                        })
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

fn bad_gateway() -> Response<ProxyBody> {
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::BAD_GATEWAY;
    r
}

/// A process answering every request with `chunks` x 64 KB, telling `ends` how its body ended.
async fn big_process(chunks: usize) -> (SocketAddr, mpsc::UnboundedReceiver<BodyEnd>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (addr, _) = hyper_server(move |_req| {
        let tx = tx.clone();
        async move {
            let body = NotifyOnEnd::new(Repeat::new(64 * 1024, chunks), move |end| {
                let _ = tx.send(end);
            });
            Response::new(ProxyBody::new(body))
        }
    })
    .await;
    (addr, rx)
}

#[tokio::test]
async fn a_buffered_response_is_read_whole_from_the_process_while_the_client_reads_nothing() {
    // `buffered` itself: the process's body is read to its end whatever the client does (the
    // listener's use of it, STREAM-1 and STREAM-2: tests/proxy_slots.rs).
    let chunks = 128; // 8 MB
    let (process, mut process_ends) = big_process(chunks).await;
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let front = proxy_mode(Upstream::new(process, 4), Mode::Buffered, Some(done_tx)).await;
    let mut client = small_buffer_client(front).await;
    write(
        &mut client,
        b"GET /r4/ValueSet/$expand HTTP/1.1\r\nhost: h\r\n\r\n",
    )
    .await;
    let end = bounded("the process's body to end", process_ends.recv()).await;
    assert_eq!(
        end,
        Some(BodyEnd {
            how: EndKind::Complete,
            bytes: (chunks * 64 * 1024) as u64
        })
    );
    assert_eq!(
        bounded("buffered", done.recv()).await,
        Some(EndKind::Complete)
    );
    // Only now does the client read, and it gets everything that was held for it.
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    bounded("the client's read", async {
        while got < chunks * 64 * 1024 {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
    })
    .await;
    assert!(got >= chunks * 64 * 1024, "{got}");
}

#[tokio::test]
async fn a_streamed_response_goes_only_as_fast_as_the_client_and_ends_upstream_when_dropped() {
    // spec: STREAM-3, STREAM-6
    let chunks = 1024; // 64 MB: more than every socket buffer on the way can hold
    let (process, mut process_ends) = big_process(chunks).await;
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let front = proxy_mode(Upstream::new(process, 4), Mode::Streamed, Some(done_tx)).await;
    let mut client = small_buffer_client(front).await;
    write(
        &mut client,
        b"GET /packages/big.tgz HTTP/1.1\r\nhost: h\r\n\r\n",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        process_ends.try_recv().is_err(),
        "the process finished early"
    );
    assert!(done.try_recv().is_err(), "the stream ended early");
    // The client goes away: the front's body is dropped, and so is the process's request.
    drop(client);
    assert_eq!(
        bounded("front end", done.recv()).await,
        Some(EndKind::Dropped)
    );
    let end = bounded("the process's body", process_ends.recv()).await;
    let end = end.map(|e| e.how);
    assert_eq!(end, Some(EndKind::Dropped));
}

/// What the process received: the request head (lower-cased) and the body bytes as framed on
/// the wire.
struct Seen {
    head: String,
    wire_body: Vec<u8>,
}

/// A process that records one request and answers with hop-by-hop headers of its own.
async fn recording_process() -> (SocketAddr, oneshot::Receiver<Seen>) {
    let (l, addr) = listener().await;
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut s, _)) = l.accept().await else {
            return;
        };
        let head = String::from_utf8_lossy(&read_head(&mut s).await).to_lowercase();
        let mut wire_body = Vec::new();
        if head.contains("transfer-encoding: chunked") {
            let mut b = [0u8; 1];
            while !wire_body.ends_with(b"0\r\n\r\n") {
                match s.read(&mut b).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => wire_body.push(b[0]),
                }
            }
        } else if let Some(len) = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            wire_body = vec![0; len];
            let _ = s.read_exact(&mut wire_body).await;
        }
        let _ = tx.send(Seen { head, wire_body });
        write(
            &mut s,
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive, x-internal\r\n\
              x-internal: 1\r\nkeep-alive: timeout=5\r\nx-served-by: tx1\r\n\r\nok",
        )
        .await;
        read_to_close(&mut s).await;
    });
    (addr, rx)
}

async fn exchange(request: &[u8]) -> (Seen, String) {
    let (process, seen) = recording_process().await;
    let front = proxy(Upstream::new(process, 4)).await;
    let mut client = TcpStream::connect(front).await.unwrap();
    write(&mut client, request).await;
    let seen = bounded("the process's view", seen).await.unwrap();
    let head = bounded("response head", read_head(&mut client)).await;
    (seen, String::from_utf8_lossy(&head).to_lowercase())
}

#[tokio::test]
async fn a_chunked_request_body_arrives_chunked() {
    // spec: EDGE-4
    let (seen, resp) = exchange(
        b"POST /r4/ValueSet/$expand HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n\
          5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    )
    .await;
    assert!(
        seen.head.contains("transfer-encoding: chunked"),
        "{}",
        seen.head
    );
    assert!(!seen.head.contains("content-length"), "{}", seen.head);
    let body = String::from_utf8_lossy(&seen.wire_body);
    assert!(body.ends_with("0\r\n\r\n"), "{body:?}");
    assert!(
        body.contains("hello") && body.contains(" world"),
        "{body:?}"
    );
    assert!(resp.starts_with("http/1.1 200"), "{resp}");
}

#[tokio::test]
async fn a_content_length_request_body_arrives_with_its_length() {
    let (seen, _) = exchange(
        b"POST /r4/CodeSystem/$lookup HTTP/1.1\r\nhost: h\r\ncontent-length: 5\r\n\r\nhello",
    )
    .await;
    assert!(seen.head.contains("content-length: 5"), "{}", seen.head);
    assert!(!seen.head.contains("transfer-encoding"), "{}", seen.head);
    assert_eq!(seen.wire_body, b"hello");
}

#[tokio::test]
async fn hop_by_hop_headers_are_stripped_both_ways_and_the_client_is_added_to_xff() {
    // spec: EDGE-1, EDGE-2
    let (seen, resp) = exchange(
        b"GET /r4/metadata HTTP/1.1\r\nhost: tx.fhir.org\r\nconnection: keep-alive, x-hop\r\n\
          x-hop: secret\r\nkeep-alive: 300\r\nte: trailers\r\nx-forwarded-for: 203.0.113.7\r\n\
          x-forwarded-proto: https\r\n\r\n",
    )
    .await;
    let h = &seen.head;
    assert!(h.starts_with("get /r4/metadata http/1.1\r\n"), "{h}");
    assert!(h.contains("host: tx.fhir.org\r\n"), "{h}");
    assert!(
        h.contains("x-forwarded-for: 203.0.113.7, 127.0.0.1\r\n"),
        "{h}"
    );
    assert!(h.contains("x-forwarded-proto: https\r\n"), "{h}");
    for gone in ["x-hop", "keep-alive", "te:"] {
        assert!(!h.contains(gone), "{gone} reached the process: {h}");
    }
    assert!(resp.contains("x-served-by: tx1"), "{resp}");
    for gone in ["x-internal", "keep-alive"] {
        assert!(!resp.contains(gone), "{gone} reached the client: {resp}");
    }
}

#[tokio::test]
async fn connect_is_answered_501_by_the_front_door() {
    let (l, addr) = listener().await;
    drop(l);
    let front = proxy(Upstream::new(addr, 1)).await;
    let mut client = TcpStream::connect(front).await.unwrap();
    write(
        &mut client,
        b"CONNECT example.org:443 HTTP/1.1\r\nhost: example.org:443\r\n\r\n",
    )
    .await;
    let head = bounded("response head", read_head(&mut client)).await;
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 501"), "{head}");
    assert!(head.contains("application/fhir+json"), "{head}");
}
