//! A client connection's phases and the loop that takes it from one to the next (see [`Phase`]).
//! The client sees no difference between them: no `Connection: close`, no byte lost (see `park`
//! for when it is safe to leave hyper).
//!
//! A connection outside hyper keeps the rules of one hyper holds: it is closed on drain (STOP-2)
//! unless it has a request admitted (answered, STOP-3); in an upgrade's drain it is handed over
//! instead (`handed`). `headerTimeoutSeconds` is kept here
//! alone: a connection is closed that long after it was accepted or gave its last response if
//! no whole head has come (a connection idle in hyper is parked before then, `park::park_after`,
//! and hyper has no timer of its own). The write timeout (STREAM-4) is on the stream, which is
//! kept across parks.

use std::mem::ManuallyDrop;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use super::handed::{Collector, HandedClient};
use super::hyper_phase::serve_until_idle;
use super::lobby::{self, Leave};
use super::park::{Activity, Quiet};
use super::refused;
use crate::deadline::Later;
use crate::proxy::admission::Early;
use crate::proxy::answer::Answer;
use crate::proxy::failure::{fail, Failure};
use crate::proxy::forward::{Peer, WriteTimeoutIo};
use crate::proxy::front::Front;
use crate::proxy::listener_settings::ListenerSettings;
use crate::proxy::trim::Trimmer;

pub(super) type ClientIo = WriteTimeoutIo<TcpStream>;

/// What a connection needs from the listener.
pub struct ConnContext {
    pub front: Arc<Front>,
    pub cfg: Arc<ListenerSettings>,
    pub peer: Peer,
    /// Told of each park, to hand the memory back after a crowd.
    pub trimmer: Arc<Trimmer>,
    /// Permits for pipelined requests, shared by the listener's connections (`hyper_phase`).
    pub pipelined: Arc<tokio::sync::Semaphore>,
    /// Where idle connections go when the drain is an upgrade's (`handed`).
    pub handover: Arc<Collector>,
    /// Counts the connection open while its task lives.
    pub _open: crate::proxy::observed::OpenConnection,
}

impl ConnContext {
    /// Connections being served by hyper now (not parked), all the listener's. Reached through
    /// `front`, not kept: a field is 8 bytes in every connection's task.
    pub fn served(&self) -> &Arc<AtomicUsize> {
        &self.front.counters.observed.connections_served
    }
}

/// A client connection's phase. These are the transitions, and the only ones:
///
/// ```text
///   accepted ──► Lobby ──(no whole head in time, the drain, a head over headerMaxKB: 431,
///                  ▲  │    the client gone)──────────────────────────────────────► Closed
///                  │  │
///                  │  └─(a whole head; a tx request admitted and its decision made)─► Hyper
///                  │                                                                  │
///                  │     (the client done or failed, the drain)──────────► Closed ◄──┤
///                  │                                                                  │
///                  └─── Parked ◄──(idle about a second; at once: its first answer, or ─┘
///                                       requests wait in a crowd; see `park`)
/// ```
///
/// * **Lobby**: hyper does not hold the connection. The next request's head is read, and a tx
///   request is routed and admitted; one that must wait in the queue waits here, holding only its
///   bytes, its ticket and the socket (`lobby`). A connection with nothing sent holds no buffer.
/// * **Hyper**: hyper serves the socket, first the bytes the lobby read, its first request
///   taking the lobby's admission instead of asking again (`hyper_phase`).
/// * **Parked**: idle, hyper's state dropped (its buffers), only the socket and this task kept; the
///   bytes of a next request hyper had read go first. The lobby waits for the client's next
///   bytes.
/// * **Closed**: the task ends, and the socket is closed.
///
/// The socket and the bytes read ahead of the next request are the loop's, not the phase's: a
/// phase holding them would keep room for them twice while the loop waits, in every
/// connection's task.
enum Phase {
    Lobby,
    /// With the first request's admission, if the lobby made it. In a `ManuallyDrop` so that
    /// `Phase` needs no drop: the loop replaces the phase after waiting in it, and a phase that
    /// needs a drop would be kept for that drop while the loop waits, a few dozen bytes in every
    /// connection's task. Nothing waits between the lobby making one and the loop taking it out.
    Hyper(ManuallyDrop<Option<Early>>),
    /// `at_once`: as its response ended, because requests wait in the queue.
    Parked {
        at_once: bool,
    },
    Closed,
}

/// Serves the client on `stream` until it closes, fails or the drain closes it (or, in an
/// upgrade, hands it over); `unread`: bytes already read from it, and `since`: when it was
/// accepted or, handed over, went idle (the header timeout counts from then).
///
/// Not an `async fn`: one keeps each argument twice in its future, as it was passed and as the
/// body's own copy (rust-lang/rust#62958), some 200 bytes in every connection's task. The
/// block below uses what it captures in place, and what it needs made is made before it.
pub fn serve_client(
    stream: TcpStream,
    mut unread: Bytes,
    since: Instant,
    ctx: ConnContext,
    mut drain: watch::Receiver<bool>,
) -> impl std::future::Future<Output = ()> + Send {
    let mut io = WriteTimeoutIo::new(
        stream,
        ctx.cfg.write_timeout,
        ctx.front.counters.write_timeout_closes.clone(),
    );
    let activity = Arc::new(Activity::new(since));
    async move {
        let mut quiet = Quiet::default();
        let mut phase = Phase::Lobby;
        loop {
            phase = match phase {
                // The lobby's code is here, not in a function of its own: that function's future
                // would add its arguments to every connection's task.
                Phase::Lobby => {
                    // The header timeout runs from the accept or the last response (`Activity`
                    // counts from the accept).
                    let idle_since = activity.instant(activity.snapshot().last_end_ms);
                    let max_head = ctx.cfg.max_head;
                    let entered = Instant::now();
                    // Its arguments made in the call, and the call its own statement: what is made
                    // for it is then not kept (nor room for it) beside the lobby's future.
                    let leave = lobby::enter(
                        io.get_ref(),
                        // A `Vec`: taken as `Bytes`, the lobby's future would keep room for both.
                        Vec::from(std::mem::take(&mut unread)),
                        &ctx.front,
                        header_deadline(idle_since, ctx.cfg.header_read_timeout),
                        &mut drain,
                        max_head,
                    )
                    .await;
                    match leave {
                        Leave::Gone => Phase::Closed,
                        Leave::Close => {
                            let _ = io.shutdown().await;
                            Phase::Closed
                        }
                        Leave::Refused { why, head } => {
                            let answer = fail(&ctx.front, Failure::BadHead(why));
                            refused::log(&ctx.front.access_log, &head, &ctx.peer, &answer, entered);
                            drop(head);
                            Box::pin(answer_and_close(&mut io, answer)).await;
                            Phase::Closed
                        }
                        Leave::HeadTooLarge { head } => {
                            let answer = fail(&ctx.front, Failure::HeadTooLarge { max_head });
                            refused::log(&ctx.front.access_log, &head, &ctx.peer, &answer, entered);
                            drop(head);
                            // Boxed: its read buffer would otherwise be room in every connection's
                            // task.
                            Box::pin(answer_and_close(&mut io, answer)).await;
                            Phase::Closed
                        }
                        Leave::Drained { unread: bytes } => {
                            Box::pin(hand_over_or_close(io, bytes, idle_since, &ctx)).await;
                            return;
                        }
                        Leave::Serve {
                            unread: bytes,
                            early: None,
                        } if *drain.borrow() => {
                            // Not yet a request of hyper's: closed as hyper closes an idle
                            // connection, or handed over with its bytes (an upgrade). One admitted
                            // here is answered (in the queue, a drain refuses it).
                            Box::pin(hand_over_or_close(io, bytes, idle_since, &ctx)).await;
                            return;
                        }
                        Leave::Serve {
                            unread: bytes,
                            early,
                        } => {
                            unread = bytes;
                            Phase::Hyper(ManuallyDrop::new(early))
                        }
                    }
                }
                Phase::Hyper(early) => {
                    // Boxed: the serving state is large, and the task must be small while parked.
                    let serving = Box::pin(serve_until_idle(
                        io,
                        std::mem::take(&mut unread),
                        ManuallyDrop::into_inner(early),
                        &ctx,
                        &activity,
                        &mut drain,
                        &mut quiet,
                    ));
                    let Some(idle) = serving.await else {
                        // Closed: hyper had the socket, and has dropped it.
                        return;
                    };
                    (io, unread) = (idle.io, idle.unread);
                    Phase::Parked {
                        at_once: idle.at_once,
                    }
                }
                Phase::Parked { at_once } => {
                    if unread.is_empty() {
                        debug!("connection from {}: idle, parked", ctx.peer);
                        // Parked at once while requests wait is not a crowd going quiet: hyper's
                        // memory is taken again at the next request.
                        if !at_once {
                            ctx.trimmer.parked();
                        }
                    } else {
                        // A next request had begun to arrive: read on at once, bytes in front.
                        debug!(
                        "connection from {}: idle with {} bytes of a next request; served again",
                        ctx.peer,
                        unread.len()
                    );
                    }
                    Phase::Lobby
                }
                Phase::Closed => return,
            };
        }
    }
}

/// When a connection idle since `idle_since` is closed if no whole head has come, with the
/// header timeout `header` (zero: never).
fn header_deadline(idle_since: Instant, header: std::time::Duration) -> Option<Instant> {
    (!header.is_zero()).then(|| idle_since.later(header))
}

/// An idle connection that heard the drain: handed over with `unread` (the bytes read of its
/// next request) during an upgrade, closed otherwise or past the bound.
async fn hand_over_or_close(io: ClientIo, unread: Bytes, idle_since: Instant, ctx: &ConnContext) {
    if ctx.handover.collecting() {
        if let Ok(stream) = io.into_inner().into_std() {
            let idle_since = idle_since.into_std();
            let c = HandedClient {
                stream,
                unread,
                idle_since,
            };
            if let Err(refused) = ctx.handover.offer(c) {
                // Past the bound: closed.
                let _ = refused.stream.shutdown(std::net::Shutdown::Both);
            }
        }
        return;
    }
    let mut io = io;
    let _ = io.shutdown().await;
}

/// How long a closing connection's unread bytes are read and dropped, at most.
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// Answers a client the launcher won't read on (a head too large), then closes: our side is
/// shut, and what the client still sends is read and dropped for a while, so the close doesn't
/// reset the connection before the client has read the answer (as nginx's lingering close).
async fn answer_and_close(io: &mut ClientIo, answer: Answer) {
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
