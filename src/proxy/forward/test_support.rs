//! Small real servers and bodies for the forwarding tests: everything on 127.0.0.1 with ports
//! picked by the kernel, every wait bounded.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use super::{full, BoxError, ProxyBody};

/// A wait that fails the test instead of hanging it.
pub async fn bounded<F: Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(10), f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// Polls `cond` every millisecond until it holds (bounded).
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    bounded(what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
}

pub async fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// How many connections a test server accepted, and how many of them have ended.
#[derive(Clone, Default)]
pub struct Counts {
    pub accepted: Arc<AtomicUsize>,
    pub ended: Arc<AtomicUsize>,
}

impl Counts {
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
    pub fn ended(&self) -> usize {
        self.ended.load(Ordering::SeqCst)
    }
}

/// A hyper HTTP/1.1 server calling `handler` for every request.
pub async fn hyper_server<H, Fut>(handler: H) -> (SocketAddr, Counts)
where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    let (l, addr) = listener().await;
    let counts = Counts::default();
    let c = counts.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = l.accept().await {
            c.accepted.fetch_add(1, Ordering::SeqCst);
            let h = handler.clone();
            let ended = Arc::clone(&c.ended);
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let h = h.clone();
                    async move { Ok::<_, Infallible>(h(req).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
                ended.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (addr, counts)
}

/// A server answering every request with `200 ok`.
pub async fn ok_server() -> (SocketAddr, Counts) {
    hyper_server(|_req| async { Response::new(full("ok")) }).await
}

/// Reads one request head (up to the blank line) from a raw stream.
pub async fn read_head(s: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte).await {
            Ok(0) | Err(_) => break,
            Ok(_) => head.push(byte[0]),
        }
    }
    head
}

/// Reads until the peer closes; the bytes read.
pub async fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
        }
    }
}

pub async fn write(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).await.unwrap();
}

/// A listener whose accepted sockets have a small send buffer (Linux copies it from the
/// listening socket), so a client that does not read stalls the server's writes quickly.
pub fn small_buffer_listener() -> (TcpListener, SocketAddr) {
    let s = TcpSocket::new_v4().unwrap();
    s.set_send_buffer_size(16 * 1024).unwrap();
    s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let l = s.listen(16).unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// A client socket with a small receive buffer.
pub async fn small_buffer_client(addr: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.set_recv_buffer_size(16 * 1024).unwrap();
    s.connect(addr).await.unwrap()
}

/// `count` chunks of `chunk` bytes, with an exact size (so a `Content-Length`) unless `chunked`.
pub struct Repeat {
    pub chunk: Bytes,
    pub left: usize,
    pub chunked: bool,
}

impl Repeat {
    pub fn new(chunk_size: usize, count: usize) -> Repeat {
        Repeat {
            chunk: Bytes::from(vec![b'x'; chunk_size]),
            left: count,
            chunked: false,
        }
    }
}

impl Body for Repeat {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        self.left -= 1;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.clone()))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        if self.chunked {
            SizeHint::default()
        } else {
            SizeHint::with_exact((self.chunk.len() * self.left) as u64)
        }
    }
}

impl super::outgoing::OutgoingBody for Repeat {}
