//! The write timeout on a real hyper server connection, with small socket buffers so a client
//! that stops reading stalls the server within a few tens of kilobytes.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use super::super::body::{BodyEnd, EndKind, NotifyOnEnd};
use super::super::test_support::*;
use super::super::ProxyBody;
use super::WriteTimeoutIo;

const TIMEOUT: Duration = Duration::from_millis(300);

struct Served {
    result: Result<(), hyper::Error>,
    closes: u64,
    ends: Vec<BodyEnd>,
    started: Instant,
}

/// Serves one connection with a write timeout; every response is `chunks` x 64 KB, watched.
async fn serve_one(chunks: usize) -> (std::net::SocketAddr, tokio::task::JoinHandle<Served>) {
    let (l, addr) = small_buffer_listener();
    let task = tokio::spawn(async move {
        let (stream, _) = l.accept().await.unwrap();
        let closes = Arc::new(AtomicU64::new(0));
        let ends: Arc<Mutex<Vec<BodyEnd>>> = Arc::default();
        let e = Arc::clone(&ends);
        let svc = service_fn(move |_req: Request<Incoming>| {
            let e = Arc::clone(&e);
            async move {
                let body = NotifyOnEnd::new(Repeat::new(64 * 1024, chunks), move |end| {
                    e.lock().unwrap().push(end)
                });
                Ok::<_, Infallible>(Response::new(ProxyBody::new(body)))
            }
        });
        let started = Instant::now();
        let io = WriteTimeoutIo::new(stream, TIMEOUT, Arc::clone(&closes));
        let result = http1::Builder::new()
            .serve_connection(TokioIo::new(io), svc)
            .await;
        let ends = ends.lock().unwrap().clone();
        Served {
            result,
            closes: closes.load(Ordering::SeqCst),
            ends,
            started,
        }
    });
    (addr, task)
}

#[tokio::test]
async fn a_client_that_reads_nothing_is_cut_after_the_write_timeout() {
    // spec: STREAM-4, STREAM-6 (the response body is dropped: upstream it would close the
    // process's connection)
    let (addr, server) = serve_one(1024).await; // 64 MB: far more than the socket buffers
    let mut client = small_buffer_client(addr).await;
    write(
        &mut client,
        b"GET /packages/big.tgz HTTP/1.1\r\nhost: h\r\n\r\n",
    )
    .await;
    let served = bounded("the server to cut the connection", server)
        .await
        .unwrap();
    let err = served.result.unwrap_err();
    let io = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .map(|e| e.kind());
    assert_eq!(io, Some(std::io::ErrorKind::TimedOut), "{err:?}");
    assert!(served.started.elapsed() >= TIMEOUT);
    assert_eq!(served.closes, 1);
    assert_eq!(served.ends.len(), 1);
    assert_eq!(served.ends[0].how, EndKind::Dropped);
    assert!(served.ends[0].bytes < 64 * 1024 * 1024);
    // The client finds its connection closed once it reads what was sent.
    let got = bounded("the client to see the close", read_to_close(&mut client)).await;
    assert!(got.len() < 64 * 1024 * 1024);
}

#[tokio::test]
async fn a_slow_reader_that_keeps_taking_some_is_not_cut() {
    // spec: STREAM-5
    let chunks = 16; // 1 MB
    let (addr, server) = serve_one(chunks).await;
    let mut client = small_buffer_client(addr).await;
    write(
        &mut client,
        b"GET /packages/big.tgz HTTP/1.1\r\nhost: h\r\n\r\n",
    )
    .await;
    let want = chunks * 64 * 1024;
    let mut got = 0usize;
    let mut buf = vec![0u8; 32 * 1024];
    let start = Instant::now();
    bounded("the slow read", async {
        // Reads a little at a time, pausing well under the timeout between reads.
        while got < want {
            tokio::time::sleep(Duration::from_millis(40)).await;
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
    })
    .await;
    assert!(got >= want, "cut after {got} of {want} bytes");
    // It took many timeouts' worth of time, so the server really was stalled and resumed.
    assert!(start.elapsed() > TIMEOUT * 2, "{:?}", start.elapsed());
    drop(client);
    let served = bounded("the server", server).await.unwrap();
    assert_eq!(served.closes, 0);
    assert_eq!(served.ends.len(), 1);
    assert_eq!(served.ends[0].how, EndKind::Complete);
}

#[tokio::test]
async fn zero_means_no_write_timeout() {
    // spec: CONF-17 (end to end: tests/proxy_failures.rs)
    let (l, addr) = small_buffer_listener();
    let closes = Arc::new(AtomicU64::new(0));
    let c = Arc::clone(&closes);
    let server = tokio::spawn(async move {
        let (stream, _) = l.accept().await.unwrap();
        let svc = service_fn(|_req: Request<Incoming>| async {
            let body = Repeat::new(64 * 1024, 64).map_err(|e| e);
            Ok::<_, Infallible>(Response::new(ProxyBody::new(body)))
        });
        http1::Builder::new()
            .serve_connection(
                TokioIo::new(WriteTimeoutIo::new(stream, Duration::ZERO, c)),
                svc,
            )
            .await
    });
    let mut client = small_buffer_client(addr).await;
    write(&mut client, b"GET / HTTP/1.1\r\nhost: h\r\n\r\n").await;
    tokio::time::sleep(TIMEOUT * 3).await;
    assert!(!server.is_finished());
    assert_eq!(closes.load(Ordering::SeqCst), 0);
    server.abort();
}

/// A stream whose writes are ready only when told; reads never are; flushes always are.
struct Gate {
    open: Arc<std::sync::atomic::AtomicBool>,
}

impl tokio::io::AsyncRead for Gate {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Pending
    }
}

impl tokio::io::AsyncWrite for Gate {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.open.load(Ordering::SeqCst) {
            std::task::Poll::Ready(Ok(buf.len()))
        } else {
            std::task::Poll::Pending
        }
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// One poll of a write: `None` while pending, else whether it failed with `TimedOut`.
async fn try_write(io: &mut WriteTimeoutIo<Gate>) -> Option<bool> {
    std::future::poll_fn(|cx| {
        let r = match tokio::io::AsyncWrite::poll_write(std::pin::Pin::new(&mut *io), cx, b"x") {
            std::task::Poll::Pending => None,
            std::task::Poll::Ready(Ok(_)) => Some(false),
            std::task::Poll::Ready(Err(e)) => Some(e.kind() == std::io::ErrorKind::TimedOut),
        };
        std::task::Poll::Ready(r)
    })
    .await
}

async fn flush(io: &mut WriteTimeoutIo<Gate>) {
    let _ = std::future::poll_fn(|cx| {
        tokio::io::AsyncWrite::poll_flush(std::pin::Pin::new(&mut *io), cx)
    })
    .await;
}

fn gate() -> (
    WriteTimeoutIo<Gate>,
    Arc<std::sync::atomic::AtomicBool>,
    Arc<AtomicU64>,
) {
    let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let closes = Arc::new(AtomicU64::new(0));
    let io = WriteTimeoutIo::new(
        Gate {
            open: Arc::clone(&open),
        },
        TIMEOUT,
        Arc::clone(&closes),
    );
    (io, open, closes)
}

#[tokio::test(start_paused = true)]
async fn the_clock_runs_from_the_first_stall_and_a_ready_flush_does_not_stop_it() {
    // spec: STREAM-4
    let (mut io, _open, closes) = gate();
    assert_eq!(try_write(&mut io).await, None); // stalls: the clock starts
    tokio::time::advance(Duration::from_millis(200)).await;
    flush(&mut io).await; // ready, but nothing was written
    assert_eq!(try_write(&mut io).await, None); // stalls again: the same clock
    tokio::time::advance(Duration::from_millis(150)).await; // 350 ms since the first stall
    assert_eq!(try_write(&mut io).await, Some(true));
    assert_eq!(closes.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn progress_stops_the_clock_and_the_next_stall_starts_a_new_one() {
    // spec: STREAM-5
    let (mut io, open, closes) = gate();
    let step = Duration::from_millis(200);
    assert_eq!(try_write(&mut io).await, None);
    tokio::time::advance(step).await;
    open.store(true, Ordering::SeqCst);
    assert_eq!(try_write(&mut io).await, Some(false)); // progress: the clock stops
    open.store(false, Ordering::SeqCst);
    assert_eq!(try_write(&mut io).await, None); // stalls: a new clock
    tokio::time::advance(step).await;
    assert_eq!(
        try_write(&mut io).await,
        None,
        "cut though it had progressed"
    );
    assert_eq!(closes.load(Ordering::SeqCst), 0);
    tokio::time::advance(Duration::from_millis(150)).await; // 350 ms since that stall began
    assert_eq!(try_write(&mut io).await, Some(true));
    assert_eq!(closes.load(Ordering::SeqCst), 1);
    // The connection stays failed, and is counted once.
    open.store(true, Ordering::SeqCst);
    assert_eq!(try_write(&mut io).await, Some(true));
    assert_eq!(closes.load(Ordering::SeqCst), 1);
}
