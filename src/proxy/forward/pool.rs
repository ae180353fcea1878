//! The keep-alive connections to one process (LAUNCH-8): a small LIFO stack of idle
//! connections of the launcher's own HTTP/1.1 client (`upstream_conn`), capped, reused across
//! requests.
//!
//! Why not hyper-util's legacy `Client`: it only takes absolute-form URIs and its pool has no
//! cap (a checkout races a new connect and both end up pooled). Every process here already has a
//! fixed number of slots, so at most one connection per slot is ever busy, and the idle stack only
//! needs a cap.
//!
//! A request takes a connection off the stack whole; its response body gives it back when the
//! body has ended, if the response allowed keep-alive and was read to its end (a body dropped
//! unread closes it). LIFO keeps the most recently used connection hot and lets the others age
//! out on the server's keep-alive timeout. Checkout looks at the socket (`idle_check`: as the
//! reactor knows it just after its answer, as the kernel does later), just before the request
//! is written: one the server closed is dropped, and one holding bytes
//! no request asked for is dropped and costs its process the reuse of its connections until it restarts. If one
//! still races the server's close and its first write fails before any byte went, the request
//! goes on a fresh connection instead; if the write went and the process closed without a byte
//! of an answer, an idempotent request without a body goes once more on a fresh connection too
//! (DEC-33; what Go's `net/http` transport does on a reused connection), and on a fresh one it is
//! handed back for another process.

use std::future::Future;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::header::{HeaderValue, HOST};
use http::{Request, Response, Version};
use hyper::body::Incoming;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::error::{ForwardError, SendFailure};
use super::idle_check::{
    asks_the_kernel, look, look_as_the_reactor_knows, Idle as Look, Trust, REACTOR_TRUSTED_FOR,
};
use super::live::Live;
use super::liveness::Liveness;
use super::outgoing::OutgoingBody;
use super::reach::Reach;
use super::replay::{self, Next};
use super::timed::Timed;
use super::upstream_conn::{Home, UpstreamBody, UpstreamConn, WriteError};
use super::upstream_error::UpstreamError;

/// Below Node.js's default `server.keepAliveTimeout` (5 s), so a connection is retired before the
/// server may close it.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

type Conn = Box<UpstreamConn<TcpStream>>;

/// The keep-alive connections to one process at `addr`. Cheap to clone (shared state).
///
/// `B` is the request body type: the listener forwards `ClientBody` bodies.
pub struct Upstream<B = Incoming> {
    inner: Arc<Inner>,
    _body: PhantomData<fn(B)>,
}

impl<B> Clone for Upstream<B> {
    fn clone(&self) -> Self {
        Upstream {
            inner: Arc::clone(&self.inner),
            _body: PhantomData,
        }
    }
}

struct Inner {
    /// The addresses the process may be reached at (DEC-40); the port is `Idle::addr`'s.
    reach: Reach,
    /// The process's instance code, for the log.
    name: String,
    max_idle: usize,
    idle_timeout: Duration,
    /// Up to how long after its answer a connection is taken on the reactor's word (DEC-67).
    reactor_trusted_for: Duration,
    idle: Mutex<Idle>,
    /// Requests sent again after the process closed without answering (DEC-33), shared with
    /// `fhircluster_retries_total`.
    retries: Arc<AtomicU64>,
    /// What the hang watchdog reads of the process (DEC-82): bytes heard, the request owed.
    liveness: Arc<Liveness>,
}

struct Idle {
    /// LIFO: pushed and popped at the end.
    conns: Vec<Conn>,
    /// Bumped by `clear()`: a connection made before it never comes back to the stack.
    generation: u64,
    /// Lost when the process writes outside a response; back when it restarts (`clear()`).
    trust: Trust,
    /// Where the process listens: its place's port, or the other one after a replacement
    /// started beside it took over (`move_to`).
    addr: SocketAddr,
    /// The connections made to `addr` and not yet closed, busy or idle (`Live`).
    live: Arc<super::live::Count>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Idle> {
        // Nothing panics while the lock is held; a poisoned lock still holds a valid stack.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most recent idle connection fit for a request, as of `now` (the send's clock read).
    fn checkout(&self, now: Instant) -> Option<Conn> {
        let mut stale = Vec::new();
        let mut strays = false;
        let found = {
            let mut idle = self.lock();
            let mut found = None;
            // From the top: the most recently used first.
            while let Some(c) = idle.conns.pop() {
                if self.too_old(&c, now) {
                    stale.push(c);
                    continue;
                }
                let seen = if asks_the_kernel(
                    now.saturating_duration_since(c.idle_since),
                    self.reactor_trusted_for,
                ) {
                    look(c.io())
                } else {
                    look_as_the_reactor_knows(c.io())
                };
                match seen {
                    Look::Quiet => {
                        found = Some(c);
                        break;
                    }
                    Look::Stray => {
                        strays = true;
                        stale.push(c);
                    }
                    Look::Closed => stale.push(c),
                }
            }
            found
        };
        drop(stale); // closes them outside the lock
        if strays {
            self.saw(Look::Stray);
        }
        found
    }

    /// What a look at one of the process's connections saw: bytes outside a response cost it
    /// the reuse of its connections (logged once), and the idle ones are closed.
    fn saw(&self, what: Look) {
        let (lost, old) = {
            let mut idle = self.lock();
            let (trust, lost) = idle.trust.after(what);
            idle.trust = trust;
            let old = if lost {
                std::mem::take(&mut idle.conns)
            } else {
                Vec::new()
            };
            (lost, old)
        };
        drop(old);
        if lost {
            warn!(
                "{}: wrote bytes outside any response (a second or late response, or more than \
                 its framing announced); its connections now carry one request each until it \
                 restarts, so what it writes after an answer reaches no other request",
                self.name
            );
        }
    }

    /// Idle long enough that the server may be closing it right now: the race of a request with
    /// the server's keep-alive close cannot be undone once the request is written, so such a
    /// connection is not used at all.
    fn too_old(&self, c: &Conn, now: Instant) -> bool {
        !self.idle_timeout.is_zero() && now.duration_since(c.idle_since) >= self.idle_timeout
    }
}

impl Home<TcpStream> for Inner {
    fn take_back(&self, mut conn: Conn) {
        if conn.odd_framing {
            return;
        }
        // No look here: the checkout's, just before the next request is written, sees whatever
        // this one would (bytes stay on the socket until read), and more; a look at both ends
        // was a system call more per request (one in seven, `strace -c`). What was read past
        // the response's end was seen by the body (`Home::stray`).
        conn.idle_since = Instant::now();
        let mut idle = self.lock();
        if conn.generation != idle.generation
            || idle.conns.len() >= self.max_idle
            || !idle.trust.reuses()
        {
            return;
        }
        idle.conns.push(conn);
    }

    fn stray(&self) {
        self.saw(Look::Stray);
    }
}

impl<B: OutgoingBody> Upstream<B> {
    /// The process listening at `addr`, keeping at most `max_idle` idle connections (one per slot
    /// is the natural figure: `maxOutstanding + fastLaneExtra` for a tx process). For the tests.
    #[cfg(test)]
    pub fn new(addr: SocketAddr, max_idle: usize) -> Upstream<B> {
        Upstream::with_idle_timeout(addr, max_idle, DEFAULT_IDLE_TIMEOUT)
    }

    /// As [`Upstream::new`], for the process `name` (its instance code, for the log), counting
    /// its retries (DEC-33) in `retries`, reached at `addr` or, should it refuse, at the same
    /// port on the other addresses its `bindAddress` resolves to (`also_at`, DEC-40).
    pub fn for_process(
        addr: SocketAddr,
        also_at: &[std::net::IpAddr],
        max_idle: usize,
        name: &str,
        retries: Arc<AtomicU64>,
    ) -> Upstream<B> {
        Upstream::build(addr, also_at, max_idle, DEFAULT_IDLE_TIMEOUT, name, retries)
    }

    /// As [`Upstream::new`], with how long a connection may sit idle and still be reused (zero:
    /// forever). Keep it below the server's keep-alive timeout. For the tests.
    #[cfg(test)]
    pub fn with_idle_timeout(
        addr: SocketAddr,
        max_idle: usize,
        idle_timeout: Duration,
    ) -> Upstream<B> {
        let name = addr.to_string();
        Upstream::build(addr, &[], max_idle, idle_timeout, &name, Arc::default())
    }

    /// As it is, with its connections taken on the reactor's word for up to `trusted_for` after
    /// their answers (DEC-67; zero: always asked of the kernel). Before its first request. For
    /// the tests.
    #[cfg(test)]
    pub fn trusting_the_reactor_for(mut self, trusted_for: Duration) -> Upstream<B> {
        Arc::get_mut(&mut self.inner)
            .expect("set before the pool is shared")
            .reactor_trusted_for = trusted_for;
        self
    }

    fn build(
        addr: SocketAddr,
        also_at: &[std::net::IpAddr],
        max_idle: usize,
        idle_timeout: Duration,
        name: &str,
        retries: Arc<AtomicU64>,
    ) -> Upstream<B> {
        Upstream {
            inner: Arc::new(Inner {
                reach: Reach::new(addr.ip(), also_at.iter().copied()),
                name: name.to_string(),
                max_idle,
                idle_timeout,
                reactor_trusted_for: REACTOR_TRUSTED_FOR,
                idle: Mutex::new(Idle {
                    conns: Vec::new(),
                    generation: 0,
                    trust: Trust::Reuse,
                    addr,
                    live: Arc::default(),
                }),
                retries,
                liveness: Arc::default(),
            }),
            _body: PhantomData,
        }
    }

    /// Whether the process's connections are reused (not since it wrote outside a response).
    #[cfg(test)]
    pub fn reuses(&self) -> bool {
        self.inner.lock().trust.reuses()
    }

    /// Requests this pool sent again on a fresh connection (DEC-33). For the tests.
    #[cfg(test)]
    pub fn retried(&self) -> u64 {
        self.inner.retries.load(Ordering::Relaxed)
    }

    /// How many idle connections are held now and still usable (one the server has closed is
    /// dropped and not counted). For the pool's tests.
    #[cfg(test)]
    pub fn idle_count(&self) -> usize {
        let mut idle = self.inner.lock();
        idle.conns.retain(|c| look(c.io()) == Look::Quiet);
        idle.conns.len()
    }

    /// Whether the reactor has marked any idle connection readable (nothing asked of the
    /// kernel). For the pool's tests.
    #[cfg(test)]
    pub fn reactor_saw_something(&self) -> bool {
        let idle = self.inner.lock();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        idle.conns
            .iter()
            .any(|c| c.io().poll_read_ready(&mut cx).is_ready())
    }

    /// What the hang watchdog reads of the process (DEC-82).
    pub fn liveness(&self) -> &Liveness {
        &self.inner.liveness
    }

    /// Drops every idle connection, and keeps those now busy from coming back (the process
    /// restarted: its old connections lead nowhere). A new process is trusted again.
    pub fn clear(&self) {
        let old = {
            let mut idle = self.inner.lock();
            idle.generation = idle.generation.wrapping_add(1);
            idle.trust = Trust::Reuse;
            std::mem::take(&mut idle.conns)
        };
        drop(old);
        self.inner.liveness.clear();
    }

    /// The process now listens at `addr` (a replacement started beside the old one took its
    /// place): new requests go there, the idle connections to the old one are closed and the
    /// busy ones never come back. Returns how many connections to the old one are still open,
    /// counted down as each closes: its requests in flight (what its drain waits for).
    pub fn move_to(&self, addr: SocketAddr) -> Arc<super::live::Count> {
        let (old, live) = {
            let mut idle = self.inner.lock();
            idle.addr = addr;
            idle.generation = idle.generation.wrapping_add(1);
            idle.trust = Trust::Reuse;
            let live = std::mem::take(&mut idle.live);
            (std::mem::take(&mut idle.conns), live)
        };
        drop(old);
        // The hang watchdog watches the place's new process from here on.
        self.inner.liveness.clear();
        live
    }

    /// As [`Upstream::try_send`], without the request back on failure. For the tests.
    #[cfg(test)]
    pub async fn send(&self, req: Request<B>) -> Result<Response<UpstreamBody>, ForwardError> {
        self.try_send(req).await.map_err(ForwardError::from)
    }

    /// As [`Upstream::try_send_with_timeout`], without the request back on failure. For the
    /// tests.
    #[cfg(test)]
    pub async fn send_with_timeout(
        &self,
        req: Request<B>,
        timeout: Duration,
    ) -> Result<Response<UpstreamBody>, ForwardError> {
        self.try_send_with_timeout(req, timeout, Instant::now())
            .await
            .map_err(ForwardError::from)
    }

    /// As [`Upstream::try_send`], failing with [`ForwardError::Timeout`] when the response head
    /// has not begun within `timeout` (zero: no timeout). The clock starts at `sent`, after any
    /// queueing (TIMEOUT-5), and stops at the head: the body is never timed (TIMEOUT-6). On
    /// timeout the upstream connection is closed (dropped with the send), which aborts the
    /// request on the process (TIMEOUT-3). A timeout never hands the request back.
    ///
    /// Not an `async fn`, nor is `try_send`: each async layer kept its own copy of the request
    /// in a future that is boxed and moved per request (callgrind: memcpy).
    ///
    /// `sent` is the caller's clock read as it sends (its latency figures start there too): the
    /// timeout and the pool's checkout take it rather than read the clock again.
    pub fn try_send_with_timeout(
        &self,
        req: Request<B>,
        timeout: Duration,
        sent: Instant,
    ) -> Timed<impl Future<Output = Result<Response<UpstreamBody>, SendFailure<B>>> + '_> {
        Timed::new(self.send_from(None, req, sent), timeout, sent)
    }

    /// Sends `req` (origin-form target, headers already prepared) and returns the response head
    /// with its body unread; no timeout. Hands the request back when nothing of it was sent
    /// (connect refused, connection closed before anything was written), so the caller can offer
    /// it to another process.
    #[cfg(test)]
    pub fn try_send(
        &self,
        req: Request<B>,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, SendFailure<B>>> + '_ {
        self.send_from(None, req, Instant::now())
    }

    /// As [`Upstream::try_send`], on `preset` if given (the tests' way to race a close).
    async fn send_from(
        &self,
        preset: Option<Conn>,
        req: Request<B>,
        now: Instant,
    ) -> Result<Response<UpstreamBody>, SendFailure<B>> {
        let (mut parts, mut body) = req.into_parts();
        // The upstream leg is always HTTP/1.1 with keep-alive, whatever the client spoke.
        parts.version = Version::HTTP_11;
        if !parts.headers.contains_key(HOST) {
            let port = self.inner.lock().addr.port();
            if let Ok(v) = HeaderValue::from_str(&self.inner.reach.now(port).to_string()) {
                parts.headers.insert(HOST, v);
            }
        }
        let replayable = replay::replayable(&parts.method, body.is_end_stream());
        // A connection from the pool was looked at a moment ago, with nothing awaited since; one
        // handed in (the tests') is looked at before the write.
        let mut unlooked = preset.is_some();
        let mut conn = match preset.or_else(|| self.inner.checkout(now)) {
            Some(conn) => conn,
            None => match self.connect().await {
                Ok(conn) => conn,
                Err(error) => return Err(back(error, parts, body)),
            },
        };
        let mut reconnected = false;
        loop {
            // Closed, or holding bytes no request asked for: not used.
            let seen = if std::mem::take(&mut unlooked) && conn.reused {
                look(conn.io())
            } else {
                Look::Quiet
            };
            if seen == Look::Stray {
                self.inner.saw(Look::Stray);
            }
            let written = if seen != Look::Quiet {
                Err(WriteError::Unsent(
                    std::io::ErrorKind::ConnectionReset.into(),
                ))
            } else {
                conn.write_request(&mut parts, &mut body).await
            };
            if written.is_ok() {
                self.inner.liveness.sent(now, &parts.method, &parts.uri);
            }
            let error = match written {
                Ok(()) => match conn.read_head(&parts.method).await {
                    Ok(head) => {
                        let home = (self.inner.max_idle > 0).then(|| {
                            let inner: Arc<dyn Home<TcpStream>> = self.inner.clone();
                            inner
                        });
                        return Ok(conn.respond(head, home));
                    }
                    Err(e) => e,
                },
                // A pooled connection lost the race with the server's keep-alive close before
                // anything was written: the same request goes on a fresh one.
                Err(WriteError::Unsent(_)) if conn.reused => {
                    conn = match self.connect().await {
                        Ok(conn) => conn,
                        Err(error) => return Err(back(error, parts, body)),
                    };
                    continue;
                }
                // Sent once already, unanswered: it stays so (DEC-73 judges whether it may go on).
                Err(WriteError::Unsent(e)) if reconnected => {
                    let error = ForwardError::Unanswered(UpstreamError::Io(e));
                    return Err(back(error, parts, body));
                }
                Err(WriteError::Unsent(e)) => {
                    let error = ForwardError::NotSent(UpstreamError::Io(e));
                    return Err(back(error, parts, body));
                }
                Err(WriteError::Sent(e @ UpstreamError::Io(_))) => e,
                Err(WriteError::Sent(e)) => return Err(sent(e)),
            };
            // Sent, and no answer: DEC-33.
            let silent = matches!(error, UpstreamError::Closed | UpstreamError::Io(_))
                && conn.heard_nothing();
            match replay::after_silence(replayable, silent, conn.reused, reconnected) {
                Next::Fail => return Err(sent(error)),
                Next::Reconnect => {
                    self.inner.retries.fetch_add(1, Ordering::Relaxed);
                    debug!(
                        "{}: closed a kept-alive connection without answering {} ({error}); \
                         sending it again on a fresh connection",
                        self.inner.name, parts.method
                    );
                    reconnected = true;
                    conn = match self.connect().await {
                        Ok(conn) => conn,
                        // It went unanswered, and its process takes no new connection: most
                        // likely dead, maybe by this request (DEC-73 judges whether it goes on).
                        Err(_) => {
                            return Err(back(ForwardError::Unanswered(error), parts, body));
                        }
                    };
                }
                Next::HandBack => {
                    return Err(back(ForwardError::Unanswered(error), parts, body));
                }
            }
        }
    }

    async fn connect(&self) -> Result<Conn, ForwardError> {
        let (generation, addr, live) = {
            let idle = self.inner.lock();
            (idle.generation, idle.addr, Live::count(&idle.live))
        };
        let stream = (self.inner.reach)
            .connect(addr.port(), &self.inner.name)
            .await
            .map_err(ForwardError::Connect)?;
        stream.set_nodelay(true).map_err(ForwardError::Connect)?;
        let mut conn = UpstreamConn::new(stream, generation);
        conn.hearing = Some(self.inner.liveness.clone());
        conn.live = Some(live);
        Ok(Box::new(conn))
    }
}

/// A failure after the request went: it is spent.
fn sent<B>(e: UpstreamError) -> SendFailure<B> {
    SendFailure {
        error: ForwardError::Sent(e),
        request: None,
    }
}

/// A failure with the request handed back whole.
fn back<B>(error: ForwardError, parts: http::request::Parts, body: B) -> SendFailure<B> {
    SendFailure {
        error,
        request: Some(Request::from_parts(parts, body)),
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "pool_reuse_tests.rs"]
mod reuse_tests;
