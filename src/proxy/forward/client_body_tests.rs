//! Request bodies read ahead and responses held, against a real hyper connection on loopback:
//! what is read, what the budget counts, and when it is given back.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use http_body::Body as _;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::*;
use crate::proxy::budget::Budget;
use crate::proxy::forward::test_support::*;
use crate::proxy::forward::{buffered, full, streamed, Buffered, Upstream};

/// What a server saw of the request body it read ahead.
#[derive(Debug)]
struct Seen {
    result: Result<(usize, bool, Option<u64>), String>,
    complete: bool,
    /// What the body gave when read on after the read-ahead.
    total: usize,
}

/// A server that reads each request's body ahead with `budget` and `within`, then reads the rest.
async fn reading_server(
    budget: Arc<Budget>,
    within: Duration,
) -> (std::net::SocketAddr, mpsc::UnboundedReceiver<Seen>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (addr, _) = hyper_server(move |req: Request<Incoming>| {
        let (tx, budget) = (tx.clone(), budget.clone());
        async move {
            let (body, arrival) = ClientBody::arriving(req.into_body());
            let read = body
                .read_ahead(&budget, Some(Instant::now() + within))
                .await;
            let seen = match read {
                Ok(body) => {
                    let ahead = body.ahead.as_ref().map_or(0, |b| b.len());
                    let whole = body.rest.is_none();
                    let exact = body.size_hint().exact();
                    let complete = arrival.as_ref().is_none_or(Arrival::is_complete);
                    let total = body.collect().await.map_or(0, |c| c.to_bytes().len());
                    Seen {
                        result: Ok((ahead, whole, exact)),
                        complete,
                        total,
                    }
                }
                Err(e) => Seen {
                    result: Err(format!("{e:?}")),
                    complete: arrival.as_ref().is_none_or(Arrival::is_complete),
                    total: 0,
                },
            };
            let _ = tx.send(seen);
            Response::new(full("ok"))
        }
    })
    .await;
    (addr, rx)
}

async fn post(addr: std::net::SocketAddr, head_extra: &str, body: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = format!("POST /x HTTP/1.1\r\nHost: a\r\n{head_extra}\r\n");
    write(&mut s, head.as_bytes()).await;
    write(&mut s, body).await;
    s
}

#[tokio::test]
async fn a_small_body_is_read_whole_and_counted_until_dropped() {
    let budget = Arc::new(Budget::new(1 << 20));
    let (addr, mut seen) = reading_server(budget.clone(), Duration::from_secs(5)).await;
    let _s = post(addr, "Content-Length: 1000\r\n", &[b'a'; 1000]).await;
    let s = bounded("the server's look", seen.recv()).await.unwrap();
    assert_eq!(s.result.unwrap(), (1000, true, Some(1000)));
    assert!(s.complete);
    assert_eq!(s.total, 1000);
    until("the budget given back", || budget.used() == 0).await;
}

#[tokio::test]
async fn a_chunked_body_stays_chunked_and_a_large_one_is_left_to_come() {
    let budget = Arc::new(Budget::new(1 << 20));
    let (addr, mut seen) = reading_server(budget.clone(), Duration::from_secs(5)).await;
    let _s = post(
        addr,
        "Transfer-Encoding: chunked\r\n",
        b"5\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    let s = bounded("chunked", seen.recv()).await.unwrap();
    assert_eq!(
        s.result.unwrap(),
        (5, true, None),
        "no exact size: sent on chunked"
    );
    let big = AHEAD_AT_MOST + 1;
    let _s = post(
        addr,
        &format!("Content-Length: {big}\r\n"),
        &vec![b'a'; big],
    )
    .await;
    let s = bounded("large", seen.recv()).await.unwrap();
    assert_eq!(
        s.result.unwrap(),
        (0, false, Some(big as u64)),
        "not read ahead"
    );
    assert!(!s.complete, "still to come when the read-ahead gave up");
    assert_eq!(s.total, big, "then passed on whole");
}

#[tokio::test]
async fn a_body_that_does_not_come_in_time_times_out_and_is_not_complete() {
    let budget = Arc::new(Budget::new(1 << 20));
    let (addr, mut seen) = reading_server(budget.clone(), Duration::from_millis(200)).await;
    let _s = post(addr, "Content-Length: 100\r\n", b"only some").await;
    let s = bounded("the timeout", seen.recv()).await.unwrap();
    assert_eq!(s.result.unwrap_err(), "TimedOut");
    assert!(!s.complete);
    until("the budget given back", || budget.used() == 0).await;
}

#[tokio::test]
async fn with_the_budget_full_a_body_is_left_to_come() {
    let budget = Arc::new(Budget::new(100));
    let (addr, mut seen) = reading_server(budget.clone(), Duration::from_secs(5)).await;
    let _s = post(addr, "Content-Length: 500\r\n", &[b'a'; 500]).await;
    let s = bounded("the look", seen.recv()).await.unwrap();
    assert_eq!(s.result.unwrap(), (0, false, Some(500)));
    assert_eq!(s.total, 500);
    assert_eq!(
        budget
            .requests_streamed
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

/// A process answering with `chunks` chunks of 16 KB, chunked or with a length.
async fn response_of(
    chunks: usize,
    chunked: bool,
) -> Response<super::super::upstream_conn::UpstreamBody> {
    let (addr, _) = hyper_server(move |_req| async move {
        let mut body = Repeat::new(16 << 10, chunks);
        body.chunked = chunked;
        Response::new(body.boxed_unsync())
    })
    .await;
    let up: Upstream<http_body_util::Empty<bytes::Bytes>> = Upstream::new(addr, 1);
    let req = Request::get("/")
        .body(http_body_util::Empty::new())
        .unwrap();
    bounded("a response", up.send(req)).await.unwrap()
}

#[tokio::test]
async fn a_response_that_fits_is_held_whole_until_the_bytes_are_dropped() {
    let budget = Arc::new(Budget::new(1 << 20));
    for chunked in [false, true] {
        let resp = response_of(4, chunked).await;
        let Ok(Buffered::Whole(resp)) = buffered(resp, &budget).await else {
            panic!("not held whole (chunked: {chunked})");
        };
        assert_eq!(budget.used(), 64 << 10, "chunked: {chunked}");
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(bytes.len(), 64 << 10);
        assert_eq!(budget.used(), 64 << 10, "the bytes still held");
        drop(bytes);
        assert_eq!(budget.used(), 0);
    }
}

#[tokio::test]
async fn a_response_past_the_budget_is_streamed_after_what_was_read() {
    let budget = Arc::new(Budget::new(40 << 10));
    for chunked in [false, true] {
        let resp = response_of(8, chunked).await;
        let Ok(Buffered::Streaming(resp)) = buffered(resp, &budget).await else {
            panic!("held whole past the budget (chunked: {chunked})");
        };
        assert!(
            budget.used() <= (40 << 10) + (16 << 10),
            "{}",
            budget.used()
        );
        let (tx, mut ended) = mpsc::unbounded_channel();
        let resp = streamed(resp, move |end| {
            let _ = tx.send(end.how);
        });
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(bytes.len(), 128 << 10, "all of it, in order");
        assert_eq!(
            ended.recv().await,
            Some(super::super::body::EndKind::Complete)
        );
        drop(bytes);
        assert_eq!(budget.used(), 0);
    }
    assert_eq!(
        budget
            .responses_streamed
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
}
