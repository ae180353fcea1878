//! One client connection's life: its next request read by the lobby (see `lobby`: a tx request
//! that must wait waits there, outside hyper), then served by hyper; when it has been idle for
//! about a second, parked outside hyper (hyper's state dropped, only the socket and this task
//! kept) until the client sends again, then the lobby and a new hyper connection on the same
//! socket. The client sees no difference: no `Connection: close`, no byte lost (see `park` for
//! when it is safe).
//!
//! A connection outside hyper keeps the rules of one hyper holds: it is closed on drain (STOP-2)
//! unless it has a request admitted (answered, STOP-3), and `headerTimeoutSeconds` after it was
//! accepted or gave its last response if the client sends nothing (hyper's header timer starts
//! when a connection is new or goes idle; outside hyper, it is this task's deadline). The write
//! timeout (STREAM-4) is on the stream, which is kept across parks.

use std::cell::Cell;
use std::future::poll_fn;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use hyper::body::Body as _;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use super::forward::{Peer, WriteTimeoutIo};
use super::front::Front;
use super::listener::ListenerSettings;
use super::lobby::{self, Early, Leave};
use super::outcome::Answer;
use super::park::{park_after, Activity, Look, ParkIo, Quiet, TrackedBody};
use super::pipeline::handle;
use crate::deadline::Later;

type ClientIo = WriteTimeoutIo<TcpStream>;

/// What a connection needs from the listener.
pub struct ConnContext {
    pub front: Arc<Front>,
    pub cfg: Arc<ListenerSettings>,
    pub peer: Peer,
    /// Connections being served by hyper now (not parked), all the listener's.
    pub served: Arc<AtomicUsize>,
    /// Told of each park, to hand the memory back after a crowd.
    pub trimmer: Arc<super::trim::Trimmer>,
}

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

enum Served {
    Done,
    Parked { io: ClientIo, unread: Bytes },
}

/// Serves the client on `stream` until it closes, fails or the drain closes it.
pub async fn serve_client(stream: TcpStream, ctx: ConnContext, mut drain: watch::Receiver<bool>) {
    let mut io = WriteTimeoutIo::new(
        stream,
        ctx.cfg.write_timeout,
        ctx.front.counters.write_timeout_closes.clone(),
    );
    let activity = Arc::new(Activity::new(Instant::now()));
    let mut quiet = Quiet::default();
    let mut unread = Bytes::new();
    loop {
        // hyper's header timer starts when a connection is new or goes idle; `Activity` counts
        // from the accept.
        let idle_since = activity.instant(activity.snapshot().last_end_ms);
        let header = ctx.cfg.header_read_timeout;
        let deadline = (!header.is_zero()).then(|| idle_since.later(header));
        let entered = lobby::enter(
            io.get_ref(),
            unread,
            &ctx.front,
            deadline,
            &mut drain,
            ctx.cfg.max_head,
        )
        .await;
        let early = match entered {
            Leave::Gone => return,
            Leave::Close => {
                let _ = io.shutdown().await;
                return;
            }
            Leave::HeadTooLarge => {
                let c = &ctx.front.counters;
                c.heads_too_large.fetch_add(1, Ordering::Relaxed);
                let max_kb = (ctx.cfg.max_head >> 10) as u64;
                // Boxed: its read buffer would otherwise be room in every connection's task.
                Box::pin(answer_and_close(io, Answer::HeadTooLarge { max_kb })).await;
                return;
            }
            Leave::Serve {
                unread: bytes,
                early,
            } => {
                unread = bytes;
                early
            }
        };
        if *drain.borrow() && early.is_none() {
            // Not yet a request of hyper's: closed as hyper closes an idle connection. One
            // admitted here is answered (in the queue, a drain refuses it).
            let _ = io.shutdown().await;
            return;
        }
        // Boxed: the serving state is large, and the task must be small while parked.
        let serving = Box::pin(serve_until_idle(
            io, unread, early, &ctx, &activity, &mut drain, &mut quiet,
        ));
        match serving.await {
            Served::Done => return,
            Served::Parked {
                io: back,
                unread: bytes,
            } => {
                if bytes.is_empty() {
                    debug!("connection from {}: idle, parked", ctx.peer);
                    ctx.trimmer.parked();
                } else {
                    // A next request had begun to arrive: read on at once, bytes in front.
                    debug!(
                        "connection from {}: idle with {} bytes of a next request; served again",
                        ctx.peer,
                        bytes.len()
                    );
                }
                io = back;
                unread = bytes;
            }
        }
    }
}

/// How long a closing connection's unread bytes are read and dropped, at most.
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// Answers a client the launcher won't read on (a head too large), then closes: our side is
/// shut, and what the client still sends is read and dropped for a while, so the close doesn't
/// reset the connection before the client has read the answer (as nginx's lingering close).
async fn answer_and_close(mut io: ClientIo, answer: Answer) {
    use tokio::io::AsyncReadExt;
    if io.write_all(&answer.to_http1()).await.is_err() || io.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let until = Instant::now() + LINGER;
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, io.read(&mut sink)).await {
        if n == 0 {
            break;
        }
    }
}

/// One hyper connection on the socket, until the client is done, the drain ends it, or it has
/// been idle a whole period (then hyper gives the socket back).
async fn serve_until_idle(
    io: ClientIo,
    unread: Bytes,
    early: Option<Early>,
    ctx: &ConnContext,
    activity: &Arc<Activity>,
    drain: &mut watch::Receiver<bool>,
    quiet: &mut Quiet,
) -> Served {
    let (front, cfg, peer) = (ctx.front.clone(), ctx.cfg.clone(), ctx.peer.clone());
    let tracker = activity.clone();
    // The first request hyper reads is the one the lobby admitted, if it did.
    let early = Cell::new(early);
    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let guard = tracker.begin(!req.body().is_end_stream());
        let (front, cfg) = (front.clone(), cfg.clone());
        // Boxed: hyper keeps one future slot per connection for its whole life, sized for the
        // service's future; the forwarding future is large, so an idle keep-alive connection
        // would hold it. Boxed, it exists only while a request is in flight.
        Box::pin(handle(
            front,
            cfg,
            peer.clone(),
            req,
            early.take(),
            move |b| TrackedBody::new(b, guard),
        ))
    });
    let mut builder = http1::Builder::new();
    // A head over `headerMaxKB` on a connection hyper holds gets hyper's own `431` (no body:
    // hyper writes it itself) and a close; one on a connection the lobby reads gets the
    // OperationOutcome. hyper takes no less than 8 KB.
    builder
        .timer(TokioTimer::new())
        .keep_alive(true)
        .max_buf_size(ctx.cfg.max_head.max(8192));
    if !ctx.cfg.header_read_timeout.is_zero() {
        builder.header_read_timeout(ctx.cfg.header_read_timeout);
    }
    quiet.served_anew(activity.snapshot());
    let stream = TokioIo::new(ParkIo::new(io, unread, activity.clone()));
    // Boxed, so that while parked this task holds none of it.
    let mut conn = Box::pin(builder.serve_connection(stream, svc));
    let _served = ServedGauge::new(&ctx.served);
    let look = tokio::time::sleep(park_after(ctx.served.load(Ordering::Relaxed)));
    tokio::pin!(look);
    loop {
        tokio::select! {
            // hyper first: a request the lobby admitted is read on the first poll, so a drain
            // that has begun finds it in progress (answered, then closed), not an idle
            // connection to close unanswered.
            biased;
            r = conn.as_mut() => {
                if let Err(e) = r {
                    debug!("connection from {}: {e}", ctx.peer);
                }
                return Served::Done;
            }
            _ = drain.changed() => {
                // Idle: closed at once; a request in progress: answered, then closed (STOP-2, 3).
                conn.as_mut().graceful_shutdown();
                if let Err(e) = conn.as_mut().await {
                    debug!("connection from {} while draining: {e}", ctx.peer);
                }
                return Served::Done;
            }
            () = &mut look => {
                let now = Instant::now();
                let after = park_after(ctx.served.load(Ordering::Relaxed));
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
        return Served::Done;
    }
    let parts = std::pin::Pin::into_inner(conn).into_parts();
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
    Served::Parked { io, unread }
}
