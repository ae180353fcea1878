//! The connection on its own, over an in-memory duplex: the request as written (a head and a
//! body in hand together, a body of unknown size chunked), and each way a response fails.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Method, Request};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;
use crate::proxy::forward::outgoing::OutgoingBody;
use crate::proxy::forward::test_support::Repeat;

/// A body in memory, as a read-ahead `ClientBody` is.
struct InHand(Option<Bytes>);

impl Body for InHand {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }
    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }
    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
    }
}

impl OutgoingBody for InHand {
    fn whole(&self) -> Option<Bytes> {
        self.0.clone()
    }
}

fn parts(method: Method) -> http::request::Parts {
    let req = Request::builder()
        .method(method)
        .uri("/r4/x?y=1")
        .header("host", "p");
    req.body(()).unwrap().into_parts().0
}

/// A connection whose process end has already sent `answer`.
async fn answered(answer: &[u8]) -> (Box<UpstreamConn<DuplexStream>>, DuplexStream) {
    let (client, mut server) = tokio::io::duplex(1 << 17);
    server.write_all(answer).await.unwrap();
    (Box::new(UpstreamConn::new(client, 0)), server)
}

async fn written(conn: Box<UpstreamConn<DuplexStream>>, mut server: DuplexStream) -> String {
    drop(conn);
    let mut got = Vec::new();
    server.read_to_end(&mut got).await.unwrap();
    String::from_utf8(got).unwrap()
}

#[tokio::test]
async fn heads_and_bodies_in_hand_are_framed_as_hyper_framed_them() {
    let (mut conn, server) = answered(b"").await;
    let mut body = InHand(None);
    conn.write_request(&mut parts(Method::GET), &mut body)
        .await
        .unwrap();
    let mut body = InHand(Some(Bytes::from_static(b"hello")));
    conn.write_request(&mut parts(Method::POST), &mut body)
        .await
        .unwrap();
    assert!(body.0.is_some(), "a body in hand is not consumed");
    assert_eq!(
        written(conn, server).await,
        "GET /r4/x?y=1 HTTP/1.1\r\nhost: p\r\n\r\n\
         POST /r4/x?y=1 HTTP/1.1\r\nhost: p\r\ncontent-length: 5\r\n\r\nhello"
    );
}

#[tokio::test]
async fn a_body_of_unknown_size_goes_chunked_as_it_comes() {
    let (mut conn, server) = answered(b"").await;
    let mut body = Repeat::new(3, 2);
    body.chunked = true;
    conn.write_request(&mut parts(Method::PUT), &mut body)
        .await
        .unwrap();
    let got = written(conn, server).await;
    assert!(
        got.ends_with("transfer-encoding: chunked\r\n\r\n3\r\nxxx\r\n3\r\nxxx\r\n0\r\n\r\n"),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_closed_connection_before_the_head_is_closed() {
    let (mut conn, server) = answered(b"HTTP/1.1 200 OK\r\n").await;
    drop(server);
    let e = conn.read_head(&Method::GET).await.unwrap_err();
    assert!(matches!(e, UpstreamError::Closed), "{e:?}");
}

#[tokio::test]
async fn a_malformed_head_is_refused() {
    let (mut conn, _server) = answered(b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n").await;
    let e = conn.read_head(&Method::GET).await.unwrap_err();
    assert!(
        matches!(e, UpstreamError::Head(HeadError::Syntax(_))),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_head_larger_than_the_read_cap_is_refused() {
    let mut big = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
    big.resize(UPSTREAM_READ_AT_MOST + 10, b'a');
    let (mut conn, _server) = answered(&big).await;
    let e = conn.read_head(&Method::GET).await.unwrap_err();
    assert!(
        matches!(e, UpstreamError::Head(HeadError::TooLarge)),
        "{e:?}"
    );
}

async fn body_of(answer: &[u8]) -> Result<Bytes, UpstreamError> {
    let (mut conn, server) = answered(answer).await;
    drop(server);
    let head = conn.read_head(&Method::GET).await.unwrap();
    let body = conn.respond(head, None).into_body();
    body.collect().await.map(|c| c.to_bytes())
}

#[tokio::test]
async fn a_body_cut_short_or_badly_chunked_fails() {
    let e = body_of(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort").await;
    assert!(matches!(e, Err(UpstreamError::Closed)), "{e:?}");
    let e = body_of(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabX").await;
    assert!(matches!(e, Err(UpstreamError::Chunk(_))), "{e:?}");
    let ok = body_of(b"HTTP/1.1 200 OK\r\n\r\nto the close").await;
    assert_eq!(ok.unwrap(), "to the close");
}

#[tokio::test]
async fn a_failing_client_body_is_the_clients_failure() {
    struct Failing;
    impl Body for Failing {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            Poll::Ready(Some(Err(std::io::ErrorKind::ConnectionReset.into())))
        }
    }
    impl OutgoingBody for Failing {}
    let (mut conn, _server) = answered(b"").await;
    let e = conn
        .write_request(&mut parts(Method::POST), &mut Failing)
        .await
        .unwrap_err();
    assert!(
        matches!(e, WriteError::Sent(UpstreamError::ClientBody(_))),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_connection_the_process_closed_is_seen_closed_without_waiting() {
    let (mut conn, server) = answered(b"").await;
    assert!(!conn.observed_closed());
    drop(server);
    assert!(conn.observed_closed());
}

/// A body whose first part comes and then no more (a client that stops sending).
struct Stalls(bool);

impl Body for Stalls {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Pending
        } else {
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"abc")))))
        }
    }
}

impl OutgoingBody for Stalls {}

/// The request on `conn`, whose process end has answered `413` and reads nothing: its answer
/// comes at once (bounded: without the watch the write or the body waits for ever), and the
/// connection is not reused.
async fn heard_before_the_body<B: OutgoingBody>(body: &mut B) {
    let (mut conn, _server) =
        answered(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\n\r\n").await;
    let in_time = std::time::Duration::from_secs(10);
    tokio::time::timeout(in_time, conn.write_request(&mut parts(Method::POST), body))
        .await
        .expect("the request's sending gave way to the answer")
        .unwrap();
    let head = conn.read_head(&Method::POST).await.unwrap();
    assert_eq!(head.parts.status, 413);
    assert!(head.keep_alive, "the process itself allowed reuse");
    let resp = conn.respond(head, None);
    assert!(!resp.body().keeps_alive(), "cut short: never reused");
}

#[tokio::test]
async fn a_process_that_answers_before_taking_a_large_body_is_heard_at_once() {
    // spec: LAUNCH-8
    // 4 MB through a 128 KB pipe nobody reads.
    heard_before_the_body(&mut Repeat::new(64 << 10, 64)).await;
}

#[tokio::test]
async fn a_process_that_answers_while_the_client_stops_sending_is_heard_at_once() {
    // spec: LAUNCH-8
    heard_before_the_body(&mut Stalls(false)).await;
}
