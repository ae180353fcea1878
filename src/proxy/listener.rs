//! The listener: one HTTP/1.1 server on `server.port`, every interface, each connection served
//! by `conn` and each request by `pipeline`. On stop it drains: no new connections, idle
//! keep-alive connections closed, requests in progress given `drainSeconds` to finish
//! (STOP-1..4). An upgrade's drain keeps idle connections instead, and gives them back with the
//! listener (`conn::handed`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use super::conn::{serve_client, Collector, ConnContext, HandedClient, HAND_OVER_AT_MOST};
use super::forward::Peer;
use super::front::Front;
use crate::log_throttle::LogThrottle;

/// How the launcher sets the listener up, and changes it on reload.
pub use super::listener_settings::{ListenerSettings, LiveListenerSettings};

/// At most one line per this long about failing accepts.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(60);

/// Why the listener stops serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// Serving.
    No,
    /// The launcher stops: the port closes, queued requests are refused, then the drain.
    Stop,
    /// An in-place upgrade: the drain with the port kept open and unaccepted (connections
    /// wait in the kernel's backlog for the new program) and the queue served on, then the
    /// listener is given back; `clients`: with the idle client connections (the new program
    /// takes them over), else they are closed as a stop's drain closes them.
    HandOver { clients: bool },
}

/// What an upgrade's drain gives back: the listener, and the idle client connections, to be
/// handed over (`conn::handed`).
pub struct Kept {
    pub listener: TcpListener,
    pub clients: Vec<HandedClient>,
}

/// Until the listener is asked to stop serving (or the asker has gone).
async fn until_asked(shutdown: &mut watch::Receiver<Shutdown>) {
    let _ = shutdown.wait_for(|s| *s != Shutdown::No).await.map(|_| ());
}

/// Serves until `shutdown` says otherwise, then drains and returns (the listener and the idle
/// client connections, for a handover); `live` may change while it serves. `clients`: client
/// connections handed over to this listener (by the program before, or by an upgrade that did
/// not happen), served again from the lobby.
pub async fn serve_live(
    listener: TcpListener,
    clients: Vec<HandedClient>,
    front: Arc<Front>,
    live: Arc<LiveListenerSettings>,
    mut shutdown: watch::Receiver<Shutdown>,
) -> Option<Kept> {
    // Turned true when the drain begins: every connection, served or parked, hears it.
    let (drain_tx, drain_rx) = watch::channel(false);
    let trimmer = Arc::new(super::trim::Trimmer::default());
    let trimming = tokio::spawn(trimmer.clone().run());
    // Pipelined requests routed at once, of all the listener's connections (`conn::hyper_phase`).
    let pipelined = super::conn::pipelined_at_once(front.upstreams.len().saturating_sub(1));
    // Every connection's task, so those still running when the drain is over can be ended.
    let mut conns = JoinSet::new();
    let handover = Arc::new(Collector::new(HAND_OVER_AT_MOST));
    // The last client's, whose `X-Forwarded-For` entry the next from its address shares.
    let mut last: Option<Peer> = None;
    let mut spawn = |conns: &mut JoinSet<()>, stream: TcpStream, peer, unread, since| {
        let _ = stream.set_nodelay(true);
        let peer = match &last {
            Some(p) => p.next(peer),
            None => Peer::new(peer),
        };
        last = Some(peer.clone());
        let ctx = ConnContext {
            front: front.clone(),
            cfg: live.shared(),
            peer,
            trimmer: trimmer.clone(),
            pipelined: pipelined.clone(),
            handover: handover.clone(),
            _open: front.counters.observed.accepted(),
        };
        // Served: no connection is closed at once for a limit (nginx's `handled`).
        let observed = &front.counters.observed;
        observed.connections_handled.fetch_add(1, Ordering::Relaxed);
        let drain = drain_rx.clone();
        // The connection's future is the task itself: an async block awaiting it would keep
        // its arguments beside it, about 250 bytes in every connection's task.
        conns.spawn(serve_client(stream, unread, since, ctx, drain));
    };
    let taken_back = clients.len();
    for c in clients {
        // A socket that no longer is one (the client gone meanwhile is read as such by the
        // lobby): closed.
        let resumed = c.stream.set_nonblocking(true).and_then(|()| {
            let peer = c.stream.peer_addr()?;
            Ok((tokio::net::TcpStream::from_std(c.stream)?, peer))
        });
        match resumed {
            Ok((stream, peer)) => {
                let since = tokio::time::Instant::from_std(c.idle_since);
                spawn(&mut conns, stream, peer, c.unread, since);
            }
            Err(e) => debug!("a client connection handed over: {e}; closed"),
        }
    }
    if taken_back > 0 {
        info!("serving {taken_back} client connection(s) handed over, as they were");
    }
    // Accept failures: a run of them can flap as descriptors come and go, so one line a
    // minute, not one a run.
    let mut accept_errors = LogThrottle::new(ACCEPT_LOG_EVERY);
    // At the limit the listener stops accepting until a connection ends (`conn_limit`).
    let at_most = super::conn_limit::client_connections(
        crate::system::open_files::soft_limit(),
        front.upstreams.len(),
    );
    info!(
        "client connections: up to {at_most} open at once (open-file limit {})",
        crate::system::open_files::soft_limit()
    );
    let mut at_limit = LogThrottle::new(ACCEPT_LOG_EVERY);
    let mut was_full = false;
    loop {
        let full = front.counters.observed.open() >= at_most;
        if full && !was_full {
            if let Some(since) = at_limit.event(crate::clock::now_std()) {
                let more = if since > 0 {
                    format!(" ({since} more times since the last line)")
                } else {
                    String::new()
                };
                warn!(
                    "client connections: at the limit of {at_most} open at once (from the \
                     open-file limit); new ones wait in the kernel's backlog until one \
                     ends{more}"
                );
            }
        }
        was_full = full;
        tokio::select! {
            accepted = listener.accept(), if !full => match accepted {
                Ok((stream, peer)) => {
                    let now = tokio::time::Instant::now();
                    spawn(&mut conns, stream, peer, bytes::Bytes::new(), now);
                }
                Err(e) => {
                    front.counters.observed.accept_errors.fetch_add(1, Ordering::Relaxed);
                    // Out of file descriptors (or another passing failure): back off and go on,
                    // logging at most once a minute.
                    if let Some(since) = accept_errors.event(crate::clock::now_std()) {
                        let more = if since > 0 {
                            format!(" ({since} more since the last line)")
                        } else {
                            String::new()
                        };
                        warn!("accepting connections failed: {e}; retrying{more}");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            // Reaps the tasks of connections that have ended.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            () = until_asked(&mut shutdown) => break,
        }
    }
    let asked = *shutdown.borrow();
    let handing_over = matches!(asked, Shutdown::HandOver { .. });
    let kept = if handing_over {
        if asked == (Shutdown::HandOver { clients: true }) {
            // From here, an idle connection hearing the drain is collected, not closed.
            handover.begin();
        }
        Some(listener)
    } else {
        drop(listener);
        front.admission.stop();
        None
    };
    let cfg = live.get();
    info!(
        "draining: no new connections; requests in progress have up to {} s",
        cfg.drain.as_secs_f64()
    );
    drain_tx.send_replace(true);
    let all_done = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(cfg.drain, all_done).await.is_err() {
        warn!(
            "drain: {} connection(s) with requests still in progress after {} s \
             (drainSeconds) were cut short",
            conns.len(),
            cfg.drain.as_secs_f64()
        );
    }
    // Ending a connection's task closes the client's connection and drops its request, which
    // ends the request on the process too (STOP-4).
    conns.shutdown().await;
    trimming.abort();
    let clients = handover.take();
    if handing_over {
        info!(
            "drain: {} idle client connection(s) to hand over",
            clients.len()
        );
    }
    kept.map(|listener| Kept { listener, clients })
}
