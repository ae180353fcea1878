//! The keep-alive connections to one process (LAUNCH-8): a small LIFO stack of idle
//! `hyper::client::conn::http1` connections, capped, reused across requests.
//!
//! Why not hyper-util's legacy `Client`: it only takes absolute-form URIs and its pool has no
//! cap (a checkout races a new connect and both end up pooled). Every process here already has a
//! fixed number of slots, so at most one connection per slot is ever busy, and the idle stack only
//! needs a cap.
//!
//! A connection goes back on the stack as soon as its response head arrives, and is taken again
//! only once hyper says it is ready, i.e. its response has been read to the end: checkout passes
//! over the busy ones from the top. (Waiting for the end in a task of its own cost a spawn and two
//! polls per request.) LIFO keeps the most recently used connection hot and lets the others age
//! out on the server's keep-alive timeout; a connection the server closed, or whose body was
//! dropped unread, is closed by hyper and dropped at checkout. If one still races the server's
//! close and hyper gives the request back unsent, the request goes on a fresh connection instead.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::header::{HeaderValue, HOST};
use http::{Request, Response, Version};
use hyper::body::{Body, Bytes, Incoming};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::error::{ForwardError, SendFailure};
use super::BoxError;

/// Below Node.js's default `server.keepAliveTimeout` (5 s), so a connection is retired before the
/// server may close it.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// The largest read from a process's connection (hyper's default is about 400 KB). Each frame of
/// a response is a slice of one read, and a slice waiting for a client that doesn't read keeps
/// that whole read alive: a streamed response held one to three of them. hyper reads that much
/// only when the launcher falls behind (under CPU load), so 24 clients that never read cost
/// 14 MB more on an idle machine and up to 48 MB more on a busy one, outside `bufferMaxMB`.
/// 64 KB reads cost a large response no measurable speed; the cap is also the largest response
/// head a process may send.
const UPSTREAM_READ_AT_MOST: usize = 64 << 10;

/// The keep-alive connections to one process at `addr`. Cheap to clone (shared state).
///
/// `B` is the request body type: the listener forwards `hyper::body::Incoming` bodies unread.
pub struct Upstream<B = Incoming> {
    inner: Arc<Inner<B>>,
}

impl<B> Clone for Upstream<B> {
    fn clone(&self) -> Self {
        Upstream {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<B> {
    addr: SocketAddr,
    max_idle: usize,
    idle_timeout: Duration,
    idle: Mutex<Idle<B>>,
}

struct Idle<B> {
    /// LIFO: pushed and popped at the end.
    conns: Vec<Conn<B>>,
    /// Bumped by `clear()`: a connection made before it never comes back to the stack.
    generation: u64,
}

struct Conn<B> {
    sender: SendRequest<B>,
    generation: u64,
    reused: bool,
    idle_since: Instant,
    /// The task driving the connection (tests close a connection through it).
    #[cfg_attr(not(test), allow(dead_code))]
    task: AbortHandle,
}

impl<B> Inner<B> {
    fn lock(&self) -> MutexGuard<'_, Idle<B>> {
        // Nothing panics while the lock is held; a poisoned lock still holds a valid stack.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn checkout(&self) -> Option<Conn<B>> {
        let mut stale = Vec::new();
        let now = Instant::now();
        let found = {
            let mut idle = self.lock();
            let mut found = None;
            // From the top: the most recently used first; busy ones (still reading their
            // response) stay for later.
            for i in (0..idle.conns.len()).rev() {
                let c = &idle.conns[i];
                if c.sender.is_closed() || self.too_old(c, now) {
                    stale.push(idle.conns.remove(i));
                } else if c.sender.is_ready() {
                    found = Some(idle.conns.remove(i));
                    break;
                }
            }
            found
        };
        drop(stale); // closes them outside the lock
        found
    }

    /// Idle long enough that the server may be closing it right now: the race of a request with
    /// the server's keep-alive close cannot be undone once the request is written, so such a
    /// connection is not used at all.
    fn too_old(&self, c: &Conn<B>, now: Instant) -> bool {
        !self.idle_timeout.is_zero() && now.duration_since(c.idle_since) >= self.idle_timeout
    }

    fn put(&self, mut conn: Conn<B>) {
        conn.reused = true;
        conn.idle_since = Instant::now();
        let mut idle = self.lock();
        if conn.generation != idle.generation || conn.sender.is_closed() {
            return;
        }
        // The cap is on idle connections; those still reading a response are in use.
        if idle.conns.len() >= self.max_idle {
            idle.conns.retain(|c| !c.sender.is_closed());
            let ready = idle.conns.iter().filter(|c| c.sender.is_ready()).count();
            if ready >= self.max_idle {
                return;
            }
        }
        idle.conns.push(conn);
    }
}

impl<B> Upstream<B>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    /// The process listening at `addr`, keeping at most `max_idle` idle connections (one per slot
    /// is the natural figure: `maxOutstanding + fastLaneExtra` for a tx process).
    pub fn new(addr: SocketAddr, max_idle: usize) -> Upstream<B> {
        Upstream::with_idle_timeout(addr, max_idle, DEFAULT_IDLE_TIMEOUT)
    }

    /// As [`Upstream::new`], with how long a connection may sit idle and still be reused (zero:
    /// forever). Keep it below the server's keep-alive timeout.
    pub fn with_idle_timeout(
        addr: SocketAddr,
        max_idle: usize,
        idle_timeout: Duration,
    ) -> Upstream<B> {
        Upstream {
            inner: Arc::new(Inner {
                addr,
                max_idle,
                idle_timeout,
                idle: Mutex::new(Idle {
                    conns: Vec::new(),
                    generation: 0,
                }),
            }),
        }
    }

    /// How many idle connections are held now and still usable (one the server has closed is
    /// dropped at the next checkout and not counted). For the pool's tests.
    #[cfg(test)]
    pub fn idle_count(&self) -> usize {
        self.inner
            .lock()
            .conns
            .iter()
            .filter(|c| c.sender.is_ready())
            .count()
    }

    /// Drops every idle connection, and keeps those now busy from coming back (the process
    /// restarted: its old connections lead nowhere).
    pub fn clear(&self) {
        let old = {
            let mut idle = self.inner.lock();
            idle.generation = idle.generation.wrapping_add(1);
            std::mem::take(&mut idle.conns)
        };
        drop(old);
    }

    /// As [`Upstream::try_send`], without the request back on failure. For the tests.
    #[cfg(test)]
    pub async fn send(&self, req: Request<B>) -> Result<Response<Incoming>, ForwardError> {
        self.try_send(req).await.map_err(ForwardError::from)
    }

    /// As [`Upstream::try_send_with_timeout`], without the request back on failure. For the
    /// tests.
    #[cfg(test)]
    pub async fn send_with_timeout(
        &self,
        req: Request<B>,
        timeout: Duration,
    ) -> Result<Response<Incoming>, ForwardError> {
        self.try_send_with_timeout(req, timeout)
            .await
            .map_err(ForwardError::from)
    }

    /// As [`Upstream::try_send`], failing with [`ForwardError::Timeout`] when the response head
    /// has not begun within `timeout` (zero: no timeout). The clock starts here, after any
    /// queueing (TIMEOUT-5), and stops at the head: the body is never timed (TIMEOUT-6). On
    /// timeout the upstream connection is closed, which aborts the request on the process
    /// (TIMEOUT-3). A timeout never hands the request back.
    pub async fn try_send_with_timeout(
        &self,
        req: Request<B>,
        timeout: Duration,
    ) -> Result<Response<Incoming>, SendFailure<B>> {
        if timeout.is_zero() {
            return self.try_send(req).await;
        }
        // Dropping the in-flight send on timeout drops hyper's response future, and hyper closes
        // an HTTP/1 connection whose request future was dropped: the process sees the abort.
        match tokio::time::timeout(timeout, self.try_send(req)).await {
            Ok(result) => result,
            Err(_) => Err(SendFailure {
                error: ForwardError::Timeout(timeout),
                request: None,
            }),
        }
    }

    /// Sends `req` (origin-form target, headers already prepared) and returns the response head
    /// with its body unread; no timeout. Hands the request back when nothing of it was sent
    /// (connect refused, connection closed before dispatch), so the caller can offer it to
    /// another process.
    pub fn try_send(
        &self,
        req: Request<B>,
    ) -> impl Future<Output = Result<Response<Incoming>, SendFailure<B>>> + '_ {
        // Not an async fn: it returns the sending future itself, one level fewer.
        self.send_from(None, req)
    }

    /// As [`Upstream::try_send`], on `preset` if given (the tests' way to race a close).
    async fn send_from(
        &self,
        preset: Option<Conn<B>>,
        mut req: Request<B>,
    ) -> Result<Response<Incoming>, SendFailure<B>> {
        // The upstream leg is always HTTP/1.1 with keep-alive, whatever the client spoke.
        *req.version_mut() = Version::HTTP_11;
        if !req.headers().contains_key(HOST) {
            if let Ok(v) = HeaderValue::from_str(&self.inner.addr.to_string()) {
                req.headers_mut().insert(HOST, v);
            }
        }

        // One async fn for checkout and send (no `send_on` inside it): each nested future took
        // its own copy of the request, a memcpy at every level.
        let mut conn = match preset.or_else(|| self.inner.checkout()) {
            Some(conn) => conn,
            None => match self.connect().await {
                Ok(conn) => conn,
                Err(error) => {
                    return Err(SendFailure {
                        error,
                        request: Some(req),
                    })
                }
            },
        };
        loop {
            match conn.sender.try_send_request(req).await {
                Ok(resp) => {
                    self.recycle_when_done(conn);
                    return Ok(resp);
                }
                Err(mut e) => {
                    let unsent = e.take_message();
                    let error = e.into_error();
                    match unsent {
                        // A pooled connection lost the race with the server's keep-alive close
                        // before anything was written: the same request goes on a fresh one.
                        Some(r) if conn.reused => {
                            req = r;
                            conn = match self.connect().await {
                                Ok(conn) => conn,
                                Err(error) => {
                                    return Err(SendFailure {
                                        error,
                                        request: Some(req),
                                    })
                                }
                            };
                        }
                        Some(r) => {
                            return Err(SendFailure {
                                error: ForwardError::NotSent(error),
                                request: Some(r),
                            })
                        }
                        None => {
                            return Err(SendFailure {
                                error: ForwardError::Sent(error),
                                request: None,
                            })
                        }
                    }
                }
            }
        }
    }

    async fn connect(&self) -> Result<Conn<B>, ForwardError> {
        let generation = self.inner.lock().generation;
        let stream = TcpStream::connect(self.inner.addr)
            .await
            .map_err(ForwardError::Connect)?;
        stream.set_nodelay(true).map_err(ForwardError::Connect)?;
        let (sender, connection) = http1::Builder::new()
            .max_buf_size(UPSTREAM_READ_AT_MOST)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(ForwardError::NotSent)?;
        let addr = self.inner.addr;
        let task = tokio::spawn(async move {
            // The request that was on it, if any, sees the same error; this is only a trace.
            if let Err(e) = connection.await {
                tracing::debug!(upstream = %addr, error = %e, "upstream connection ended");
            }
        })
        .abort_handle();
        Ok(Conn {
            sender,
            generation,
            reused: false,
            idle_since: Instant::now(),
            task,
        })
    }

    /// Puts the connection back on the stack while its response body is still being read;
    /// checkout takes it once hyper has read that to the end. If the body is dropped unread, or
    /// the connection fails, hyper closes it and checkout drops it.
    fn recycle_when_done(&self, conn: Conn<B>) {
        if self.inner.max_idle > 0 {
            self.inner.put(conn);
        }
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
