//! The pool against real servers on 127.0.0.1: reuse, cap, stale connections, failure classes and
//! the upstream timeout.

use std::sync::Arc;
use std::time::Duration;

use http::Request;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use tokio::sync::{oneshot, Barrier};
use tokio::time::Instant;

use super::super::test_support::*;
use super::super::{full, ForwardError};
use super::Upstream;

type Up = Upstream<Empty<Bytes>>;

fn get(path: &str) -> Request<Empty<Bytes>> {
    Request::get(path).body(Empty::new()).unwrap()
}

async fn get_ok(up: &Up, path: &str) -> Bytes {
    let resp = bounded("response", up.send(get(path))).await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.into_body().collect().await.unwrap().to_bytes()
}

#[tokio::test]
async fn sequential_requests_reuse_one_keep_alive_connection() {
    // spec: LAUNCH-8
    let (addr, counts) = ok_server().await;
    let up = Up::new(addr, 4);
    for _ in 0..3 {
        assert_eq!(get_ok(&up, "/r4/metadata").await, "ok");
        until("the connection back in the pool", || up.idle_count() == 1).await;
    }
    assert_eq!(counts.accepted(), 1);
}

#[tokio::test]
async fn idle_connections_are_capped() {
    let barrier = Arc::new(Barrier::new(4));
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (addr, counts) = hyper_server(move |_req| {
        let b = Arc::clone(&barrier);
        let first_four = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 4;
        async move {
            // Four requests at once force four connections.
            if first_four {
                b.wait().await;
            }
            hyper::Response::new(full("ok"))
        }
    })
    .await;
    let up = Up::new(addr, 2);
    let sends: Vec<_> = (0..4)
        .map(|_| {
            let up = up.clone();
            tokio::spawn(async move { get_ok(&up, "/").await })
        })
        .collect();
    for s in sends {
        assert_eq!(bounded("concurrent request", s).await.unwrap(), "ok");
    }
    assert_eq!(counts.accepted(), 4);
    // The two connections over the cap are closed, the other two kept.
    until("two closed, two pooled", || {
        counts.ended() == 2 && up.idle_count() == 2
    })
    .await;
    get_ok(&up, "/").await;
    assert_eq!(counts.accepted(), 4);
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_is_not_used() {
    let (l, addr) = listener().await;
    let (closed_tx, mut closed_rx) = tokio::sync::mpsc::unbounded_channel();
    let accepts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let a = Arc::clone(&accepts);
    tokio::spawn(async move {
        // Answers one request per connection, keep-alive by the protocol, then closes anyway:
        // what a server's keep-alive timeout does.
        while let Ok((mut s, _)) = l.accept().await {
            a.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            read_head(&mut s).await;
            write(&mut s, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
            drop(s);
            let _ = closed_tx.send(());
        }
    });
    let up = Up::with_idle_timeout(addr, 4, Duration::ZERO);
    for _ in 0..3 {
        assert_eq!(get_ok(&up, "/").await, "ok");
        bounded("server close", closed_rx.recv()).await;
        // The connection's task sees the close and the pool stops offering it.
        until("the close noticed", || up.idle_count() == 0).await;
    }
    assert_eq!(accepts.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_request_refused_by_a_closed_pooled_connection_goes_on_a_fresh_one() {
    // The race of a checkout with the connection's close, made certain: the connection closes
    // after it left the pool and before the request is written.
    let (l, addr) = listener().await;
    let (close_tx, close_rx) = oneshot::channel::<()>();
    let accepts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let a = Arc::clone(&accepts);
    tokio::spawn(async move {
        let mut close_rx = Some(close_rx);
        while let Ok((mut s, _)) = l.accept().await {
            a.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let close = close_rx.take();
            tokio::spawn(async move {
                while !read_head(&mut s).await.is_empty() {
                    write(&mut s, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
                    if let Some(rx) = close {
                        let _ = rx.await;
                        return; // closes the first connection
                    }
                }
            });
        }
    });
    let up = Up::new(addr, 4);
    get_ok(&up, "/").await;
    let mut conn = up.inner.checkout(tokio::time::Instant::now()).unwrap();
    assert!(conn.reused);
    let _ = close_tx.send(());
    until("connection closed", || conn.observed_closed()).await;
    let resp = bounded(
        "retry",
        up.send_from(Some(conn), get("/again"), tokio::time::Instant::now()),
    )
    .await;
    let resp = resp.map_err(|f| f.error).unwrap();
    assert_eq!(resp.into_body().collect().await.unwrap().to_bytes(), "ok");
    assert_eq!(accepts.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn connect_refused_is_not_sent_and_hands_the_request_back() {
    let (l, addr) = listener().await;
    drop(l);
    let up = Up::new(addr, 4);
    let failure = bounded("connect", up.try_send(get("/r4/metadata")))
        .await
        .unwrap_err();
    assert!(matches!(failure.error, ForwardError::Connect(_)));
    assert!(failure.error.nothing_sent());
    assert_eq!(failure.request.unwrap().uri(), "/r4/metadata");
}

#[tokio::test]
async fn a_server_that_closes_after_reading_the_request_is_a_sent_failure() {
    // spec: LAUNCH-9, DEC-33
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            read_head(&mut s).await;
        }
    });
    // A POST may have been acted on: spent, a 502.
    let up = Upstream::<Full<Bytes>>::new(addr, 4);
    let post = Request::post("/")
        .body(Full::new(Bytes::from_static(b"x")))
        .unwrap();
    let failure = bounded("failure", up.try_send(post)).await.unwrap_err();
    assert!(
        matches!(failure.error, ForwardError::Sent(_)),
        "{:?}",
        failure.error
    );
    assert!(!failure.error.nothing_sent());
    assert!(failure.request.is_none());
    // A GET on a fresh connection comes back, for another process (DEC-33).
    let up = Up::new(addr, 4);
    let failure = bounded("failure", up.try_send(get("/"))).await.unwrap_err();
    assert!(failure.error.unanswered(), "{:?}", failure.error);
    assert!(!failure.error.nothing_sent());
    assert_eq!(
        failure.request.map(|r| r.uri().clone()),
        Some("/".parse().unwrap())
    );
    assert_eq!(
        up.retried(),
        0,
        "a fresh connection is not tried again here"
    );
}

#[tokio::test]
async fn no_head_within_the_timeout_is_a_timeout_and_closes_the_upstream_connection() {
    // spec: TIMEOUT-1, TIMEOUT-3
    let (l, addr) = listener().await;
    let (eof_tx, eof_rx) = oneshot::channel();
    tokio::spawn(async move {
        if let Ok((mut s, _)) = l.accept().await {
            read_head(&mut s).await;
            // A stuck process: never answers, and notices when the launcher hangs up.
            let rest = read_to_close(&mut s).await;
            let _ = eof_tx.send((Instant::now(), rest.len()));
        }
    });
    let up = Up::new(addr, 4);
    let timeout = Duration::from_millis(200);
    let start = Instant::now();
    let err = bounded("timeout", up.send_with_timeout(get("/"), timeout))
        .await
        .unwrap_err();
    let timed_out_at = Instant::now();
    assert!(err.is_timeout(), "{err:?}");
    assert!(!err.nothing_sent());
    assert!(timed_out_at - start >= timeout);
    let (closed_at, extra) = bounded("upstream close", eof_rx).await.unwrap();
    assert_eq!(extra, 0);
    assert!(closed_at - start >= timeout, "closed before the timeout");
    assert_eq!(up.idle_count(), 0);
}

#[tokio::test]
async fn a_long_stream_after_a_quick_head_is_not_timed() {
    // spec: TIMEOUT-6
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        if let Ok((mut s, _)) = l.accept().await {
            read_head(&mut s).await;
            write(
                &mut s,
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
            )
            .await;
            for _ in 0..6 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                write(&mut s, b"4\r\nabcd\r\n").await;
            }
            write(&mut s, b"0\r\n\r\n").await;
            read_to_close(&mut s).await;
        }
    });
    let up = Up::new(addr, 4);
    let start = Instant::now();
    let resp = bounded(
        "head",
        up.send_with_timeout(get("/packages/big.tgz"), Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let body = bounded("body", resp.into_body().collect())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(body.len(), 24);
    assert!(start.elapsed() >= Duration::from_millis(600));
}

#[tokio::test]
async fn the_timeout_counts_from_the_send_not_from_before() {
    // spec: TIMEOUT-5 (time spent before the call, e.g. queued, is not counted)
    let (addr, _counts) = hyper_server(|_req| async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        hyper::Response::new(full("late but in time"))
    })
    .await;
    let up = Up::new(addr, 4);
    let req = get("/");
    tokio::time::sleep(Duration::from_millis(200)).await; // "queued"
    let resp = bounded(
        "head",
        up.send_with_timeout(req, Duration::from_millis(300)),
    )
    .await;
    assert!(resp.is_ok(), "{:?}", resp.err());
}

#[tokio::test]
async fn clear_drops_idle_connections_and_keeps_busy_ones_from_coming_back() {
    let (addr, counts) = ok_server().await;
    let up = Up::new(addr, 4);
    get_ok(&up, "/").await;
    until("pooled", || up.idle_count() == 1).await;
    up.clear();
    assert_eq!(up.idle_count(), 0);
    until("old connection closed", || counts.ended() == 1).await;

    // Busy across a clear: closed when done instead of pooled.
    let resp = up.send(get("/")).await.unwrap();
    up.clear();
    resp.into_body().collect().await.unwrap();
    until("busy connection closed", || counts.ended() == 2).await;
    assert_eq!(up.idle_count(), 0);
    assert_eq!(counts.accepted(), 2);
}

#[tokio::test]
async fn connections_idle_past_the_idle_timeout_are_not_reused() {
    let (addr, counts) = ok_server().await;
    let up = Up::with_idle_timeout(addr, 4, Duration::from_millis(50));
    get_ok(&up, "/").await;
    until("pooled", || up.idle_count() == 1).await;
    tokio::time::sleep(Duration::from_millis(80)).await;
    get_ok(&up, "/").await;
    assert_eq!(counts.accepted(), 2);
}

#[tokio::test]
async fn a_request_without_host_gets_the_process_address() {
    let (addr, _counts) = hyper_server(|req| async move {
        let host = req
            .headers()
            .get("host")
            .map(|h| h.as_bytes().to_vec())
            .unwrap_or_default();
        hyper::Response::new(full(host))
    })
    .await;
    let up: Upstream<Full<Bytes>> = Upstream::new(addr, 1);
    let req = Request::get("/").body(Full::new(Bytes::new())).unwrap();
    let resp = up.send(req).await.unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, addr.to_string());
}

#[tokio::test]
async fn a_connection_still_reading_its_response_is_passed_over_then_reused() {
    // The first response's body comes only when told; meanwhile a second request must not wait
    // behind it on the same connection, and once the body is read the connection is reused.
    let (l, addr) = listener().await;
    let (release, wait) = oneshot::channel::<()>();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Arc::clone(&accepted);
    tokio::spawn(async move {
        let mut wait = Some(wait);
        while let Ok((mut s, _)) = l.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let slow = wait.take();
            tokio::spawn(async move {
                let mut slow = slow;
                loop {
                    let head = read_head(&mut s).await;
                    if head.is_empty() {
                        return;
                    }
                    if head.starts_with(b"GET /slow") {
                        write(
                            &mut s,
                            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                        )
                        .await;
                        if let Some(rx) = slow.take() {
                            let _ = rx.await;
                        }
                        write(&mut s, b"4\r\nlate\r\n0\r\n\r\n").await;
                    } else {
                        write(&mut s, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
                    }
                }
            });
        }
    });
    let accepted_now = || accepted.load(std::sync::atomic::Ordering::SeqCst);
    let up = Up::new(addr, 4);
    let slow = bounded("slow head", up.send(get("/slow"))).await.unwrap();
    assert_eq!(get_ok(&up, "/").await, "ok");
    assert_eq!(accepted_now(), 2, "the busy connection was passed over");
    let _ = release.send(());
    let body = bounded("slow body", slow.into_body().collect())
        .await
        .unwrap();
    assert_eq!(body.to_bytes(), "late");
    until("both idle", || up.idle_count() == 2).await;
    for _ in 0..3 {
        assert_eq!(get_ok(&up, "/").await, "ok");
    }
    assert_eq!(accepted_now(), 2, "no new connection once both were idle");
}
