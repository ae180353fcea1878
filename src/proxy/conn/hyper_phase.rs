//! The hyper phase: one hyper HTTP/1.1 connection on the client's socket, each request handed to
//! the request pipeline (`proxy::pipeline`), until the client is done, the drain ends it, or it
//! has been idle long enough to park (then hyper gives the socket back, with any bytes of a next
//! request it had read). An upgrade's drain parks it as soon as it is idle, to be handed over.

use std::cell::Cell;
use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hyper::body::Body as _;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info};

use super::park::{park_after, park_at_once, Activity, Look, Quiet, RequestGuard, TrackedBody};
use super::park_io::ParkIo;
use super::phase::{ClientIo, ConnContext};
use super::refused;
use super::unread;
use crate::proxy::admission::Early;
use crate::proxy::forward::ProxyBody;
use crate::proxy::pipeline::handle;

/// Counts a connection as served by hyper while it lives.
struct ServedGauge<'a>(&'a AtomicUsize);

impl<'a> ServedGauge<'a> {
    fn new(g: &'a AtomicUsize) -> ServedGauge<'a> {
        g.fetch_add(1, Ordering::Relaxed);
        ServedGauge(g)
    }
}

impl Drop for ServedGauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The permits for pipelined requests routed at once, for a listener in front of `workers` tx
/// processes: one per worker (at least one), so that clients that pipeline share that much of
/// the cluster, in turn (the semaphore is first come, first served), while a client waiting for
/// its answer is served as ever.
pub fn pipelined_at_once(workers: usize) -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(workers.max(1)))
}

/// hyper's server as the listener sets it up, for heads of `max_head` bytes at most (the codec's
/// limits, `http1::limits`). A head over `headerMaxKB` on a connection hyper holds gets hyper's
/// own `431` (no body: hyper writes it itself) and a close; one on a connection the lobby reads
/// gets the OperationOutcome. hyper takes no less than 8 KB. No timer: `headerTimeoutSeconds`
/// is kept by the lobby, a connection idle in hyper being parked before it runs out
/// (`park_after`).
pub(crate) fn server_builder(max_head: usize) -> http1::Builder {
    let mut builder = http1::Builder::new();
    // The header count is hyper's default, which is the codec's (`http1::limits::MAX_HEADERS`, held
    // equal by the lobby's differential test at 99, 100 and 101 headers): set here, hyper fills two
    // 100-slot arrays per head instead of leaving them uninitialised, work on every request for
    // nothing. `writev` is left to hyper (on: the stream is vectored): off, or `pipeline_flush` on
    // (which turns it off), saved a little by copying each body into hyper's write buffer, but that
    // buffer keeps its capacity for the connection's life, so one large body would stay as memory
    // held by an idle connection. `max_buf_size` is the head bound, not a read size: hyper's reads
    // stay adaptive (8 KB first), a smaller bound changed nothing measured.
    builder
        .keep_alive(true)
        .max_buf_size(crate::proxy::http1::limits::hyper_max_buf(max_head));
    builder
}

/// The response body's wrapping for the connection's bookkeeping: the request is done for
/// `Activity` when its answer has been written (the guard goes with the body), and its body
/// read once the pipeline says so.
fn tracked(guard: RequestGuard) -> impl FnOnce(ProxyBody, bool) -> TrackedBody {
    move |b, read_whole| {
        if read_whole {
            guard.body_read();
        }
        TrackedBody::new(b, guard)
    }
}

/// The service's future, boxed: hyper keeps one future slot per connection for its whole life,
/// sized for it, and the forwarding future is large, so an idle keep-alive connection would hold
/// it; boxed, it exists only while a request is in flight. (Unboxed it cannot be: hyper gives a
/// connection back, to be parked, only with an `Unpin` future.) A request on the common path
/// boxes the pipeline's future alone (`Now`); one that must wait before it is routed (a client
/// that pipelines, or leaves its answers unread) boxes the waiting too (`Later`), which would
/// otherwise make every request's allocation larger: one async block for both was more than
/// twice the pipeline's future alone, a cost every request would pay for the few that wait.
enum Served<N, L> {
    Now { fut: Pin<Box<N>> },
    Later { fut: Pin<Box<L>> },
}

impl<N, L, B> Future for Served<N, L>
where
    N: Future<Output = Result<http::Response<B>, Infallible>>,
    L: Future<Output = Result<http::Response<B>, std::io::Error>>,
{
    type Output = Result<http::Response<B>, std::io::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Served::Now { fut } => fut.as_mut().poll(cx).map(|r| match r {
                Ok(r) => Ok(r),
                Err(never) => match never {},
            }),
            Served::Later { fut } => fut.as_mut().poll(cx),
        }
    }
}

/// A connection hyper has given back, idle.
pub(super) struct Idle {
    pub io: ClientIo,
    /// The bytes of a next request hyper had read and not parsed.
    pub unread: Bytes,
    /// Given back as its response ended, because requests wait (not after a quiet period).
    pub at_once: bool,
}

/// The end of a hyper connection in error `e`: a head hyper's parser refused (it has answered
/// `400`, `431` or `414` itself, and closes) is logged and counted as the launcher's own
/// refusals are, its access-log line without a target (hyper keeps none); anything else (a
/// client gone mid-request, a failed write) is only a debug line.
fn refused_by_hyper(e: &hyper::Error, ctx: &ConnContext, since: Instant) {
    let Some(answer) = refused::of_hyper(e, ctx.cfg.max_head) else {
        debug!("connection from {}: {e}", ctx.peer);
        return;
    };
    info!(
        "connection from {}: a request head refused by hyper ({e}): answered {}, closed",
        ctx.peer,
        answer.status().as_u16()
    );
    ctx.front.counters.count(&answer, None);
    refused::log_hypers(&ctx.front.access_log, &ctx.peer, &answer, since);
}

/// One hyper connection on the socket, until the client is done, the drain ends it (`None`), or
/// it is idle and may be parked (see `park`): then hyper gives the socket back.
pub(super) async fn serve_until_idle(
    io: ClientIo,
    unread: Bytes,
    early: Option<Early>,
    ctx: &ConnContext,
    activity: &Arc<Activity>,
    drain: &mut watch::Receiver<bool>,
    quiet: &mut Quiet,
) -> Option<Idle> {
    let (front, cfg, peer) = (ctx.front.clone(), ctx.cfg.clone(), ctx.peer.clone());
    let tracker = activity.clone();
    // The first request hyper reads is the one the lobby admitted, if it did.
    let early = Cell::new(early);
    let fd = io.get_ref().as_raw_fd();
    let permits = ctx.pipelined.clone();
    // The last look at the client's send queue (`unread::Seen`): none yet on this turn.
    let seen = Cell::new(None::<unread::Seen>);
    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let guard = tracker.begin(!req.body().is_end_stream());
        let (front, cfg) = (front.clone(), cfg.clone());
        let early = early.take();
        let peer = peer.clone();
        let pipelined = (early.is_none() && tracker.pipelined()).then(|| permits.clone());
        // Its earlier answers unread: no slot until the client takes them (`unread`); one
        // admitted by the lobby has its slot already. The kernel is asked only when what was
        // written since the last look could have put the queue over the bound.
        let written = tracker.written();
        let unread_over = early.is_none() && unread::Seen::may_be_over(seen.get(), written) && {
            let unread = unread::unread_bytes(fd);
            seen.set(Some(unread::Seen { written, unread }));
            unread > unread::UNREAD_AT_MOST
        };
        if !unread_over && pipelined.is_none() {
            // The common case: the pipeline's future itself, in hyper's one future slot.
            return Served::Now {
                fut: Box::pin(handle(front, cfg, peer, req, early, tracked(guard))),
            };
        }
        // Rare (a client that pipelines, or leaves its answers unread): boxed, so hyper's slot
        // is not sized for the waiting as well.
        Served::Later {
            fut: Box::pin(async move {
                if unread_over && !unread::wait(fd, cfg.write_timeout).await {
                    front
                        .counters
                        .write_timeout_closes
                        .fetch_add(1, Ordering::Relaxed);
                    debug!(
                        "connection from {peer}: its answers unread for writeTimeoutSeconds: closed"
                    );
                    return Err(std::io::Error::from(std::io::ErrorKind::TimedOut));
                }
                // Sent without waiting for its answer: one of a few such at once, of all
                // clients, so a crowd of pipelining clients can't take every slot in turn after
                // turn.
                let permit = match pipelined {
                    Some(p) => p.acquire_owned().await.ok(),
                    None => None,
                };
                let resp = handle(front, cfg, peer, req, early, tracked(guard)).await;
                drop(permit);
                match resp {
                    Ok(r) => Ok(r),
                    Err(never) => match never {},
                }
            }),
        }
    });
    let builder = server_builder(ctx.cfg.max_head);
    // A new connection (none of its requests served yet) is given back as its first response
    // ends: see `park`'s notes.
    let first = activity.snapshot().started == 0;
    quiet.served_anew(activity.snapshot());
    let stream = TokioIo::new(ParkIo::new(io, unread, activity.clone()));
    // Boxed, so that while parked this task holds none of it.
    let mut conn = Box::pin(builder.serve_connection(stream, svc));
    let _served = ServedGauge::new(ctx.served());
    let header = ctx.cfg.header_read_timeout;
    // The park's look: the product's timer for when an idle connection is next looked at (a
    // period, reset after each look), not a wait.
    let look = tokio::time::sleep(park_after(ctx.served().load(Ordering::Relaxed), header));
    tokio::pin!(look);
    // The select below polls every branch at every wake of the task (twice a request): the
    // look's timer and the drain's watch are polled for real once each (which registers their
    // wakers) and then only when they may be ready, `is_elapsed` or `has_changed`, not polled
    // for nothing on every wake.
    let mut look_armed = false;
    let peek = drain.clone();
    let mut at_once = false;
    // An upgrade's drain: parked (then handed over by the lobby) as soon as it is idle, its
    // request in progress answered as ever, with no `Connection: close`.
    let mut handing = ctx.handover.collecting() && *drain.borrow();
    loop {
        tokio::select! {
            // hyper first: a request the lobby admitted is read on the first poll, so a drain
            // that has begun finds it in progress (answered, then closed), not an idle
            // connection to close unanswered.
            biased;
            r = poll_fn(|cx| match conn.as_mut().poll(cx) {
                Poll::Ready(r) => Poll::Ready(Some(r)),
                // Looked at each time hyper is done for now, so as a response ends: one atomic
                // load while nothing waits.
                Poll::Pending
                    if (handing
                        || first
                        || park_at_once(
                            ctx.served().load(Ordering::Relaxed),
                            ctx.front.admission.has_waiters(),
                        ))
                        && quiet.look(activity.snapshot(), 0, Duration::ZERO) == Look::Park =>
                {
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            }) => {
                let Some(r) = r else {
                    // In a crowd, requests wait for a process: this connection's next one would
                    // likely wait too (see `park_at_once`).
                    at_once = park_at_once(
                        ctx.served().load(Ordering::Relaxed),
                        ctx.front.admission.has_waiters(),
                    );
                    break;
                };
                if let Err(e) = r {
                    // Its head came after the last answer (or the accept).
                    let since = activity.instant(activity.snapshot().last_end_ms);
                    refused_by_hyper(&e, ctx, since);
                }
                return None;
            }
            _ = async {
                let mut changed = std::pin::pin!(drain.changed());
                let mut armed = false;
                poll_fn(|cx| {
                    if armed && matches!(peek.has_changed(), Ok(false)) {
                        return Poll::Pending;
                    }
                    armed = true;
                    changed.as_mut().poll(cx)
                })
                .await
            }, if !handing => {
                if ctx.handover.collecting() {
                    // An upgrade: hyper is looked at again at once (the branch above), and
                    // given back once idle.
                    handing = true;
                    continue;
                }
                // Idle: closed at once; a request in progress: answered, then closed (STOP-2, 3).
                conn.as_mut().graceful_shutdown();
                if let Err(e) = conn.as_mut().await {
                    debug!("connection from {} while draining: {e}", ctx.peer);
                }
                return None;
            }
            () = poll_fn(|cx| {
                if look_armed && !look.is_elapsed() {
                    return Poll::Pending;
                }
                look_armed = true;
                look.as_mut().poll(cx)
            }) => {
                look_armed = false;
                let now = Instant::now();
                let after = park_after(ctx.served().load(Ordering::Relaxed), header);
                match quiet.look(activity.snapshot(), activity.ms(now), after) {
                    Look::Park => break,
                    Look::Again(wait) => look.as_mut().reset(now + wait),
                }
            }
        }
    }
    // hyper's state is idle (see `park`): this closes it without writing anything.
    conn.as_mut().graceful_shutdown();
    if let Err(e) = poll_fn(|cx| conn.as_mut().poll_without_shutdown(cx)).await {
        debug!("connection from {} while parking: {e}", ctx.peer);
        return None;
    }
    let parts = Pin::into_inner(conn).into_parts();
    let (io, rest) = parts.io.into_inner().into_inner();
    // Copied, never kept as is: even empty, hyper's `read_buf` holds its whole 8 KB buffer.
    let unread = if parts.read_buf.is_empty() && rest.is_empty() {
        Bytes::new()
    } else {
        let mut all = BytesMut::with_capacity(parts.read_buf.len() + rest.len());
        all.extend_from_slice(&parts.read_buf);
        all.extend_from_slice(&rest);
        all.freeze()
    };
    Some(Idle {
        io,
        unread,
        at_once,
    })
}
