//! The listener: one HTTP/1.1 server on `server.port`, every interface. Each request goes through
//! the same named steps: refuse what is never proxied, route, rewrite the headers, then either
//! straight to the master (its own paths) or through admission to a tx process, and answer.
//! On stop it drains: no new connections, idle keep-alive connections closed, requests in
//! progress given `drainSeconds` to finish (STOP-1..4).

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use super::conn::{serve_client, ConnContext};
use super::forward::{
    buffered, compact_head, prepare_request, refuse_unsupported, streamed, Peer, ProxyBody,
    SendFailure,
};
use super::front::{Decision, Front, Ticket};
use super::lobby::Early;
use super::outcome::Answer;
use super::route::{RequestHead, Route, Target, TxDemand};
use super::scheduler::{Finish, Refusal};
use crate::process::ProcessId;

/// How long a request whose cache-id issuer failed under it waits to hear whether the issuer
/// exited (the supervisor learns of an exit within milliseconds).
const OWNER_EXIT_GRACE: Duration = Duration::from_secs(1);

/// Timeouts and limits of the client side.
#[derive(Clone, Debug)]
pub struct ListenerSettings {
    /// `writeTimeoutSeconds`: a client that takes none of its response this long is cut off.
    pub write_timeout: Duration,
    /// How long a client may take to send a request's head (slow-header clients).
    pub header_read_timeout: Duration,
    /// `drainSeconds`.
    pub drain: Duration,
    /// `queueSeconds` and `ownerQueueSeconds`, for the wording of a queue refusal.
    pub queue: Duration,
    pub owner_queue: Duration,
}

/// The listener's settings, changeable while it serves (reload): a connection takes those in
/// force when it is accepted; the drain reads them when it begins.
#[derive(Debug)]
pub struct LiveListenerSettings(RwLock<ListenerSettings>);

impl LiveListenerSettings {
    pub fn new(cfg: ListenerSettings) -> Arc<LiveListenerSettings> {
        Arc::new(LiveListenerSettings(RwLock::new(cfg)))
    }

    pub fn get(&self) -> ListenerSettings {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set(&self, cfg: ListenerSettings) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = cfg;
    }
}

/// Serves until `shutdown` turns true, then drains and returns.
/// At most one line per this long about failing accepts.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(60);

pub async fn serve(
    listener: TcpListener,
    front: Arc<Front>,
    cfg: ListenerSettings,
    shutdown: watch::Receiver<bool>,
) {
    serve_live(listener, front, LiveListenerSettings::new(cfg), shutdown).await;
}

/// As `serve`, with settings that may change while it serves.
pub async fn serve_live(
    listener: TcpListener,
    front: Arc<Front>,
    live: Arc<LiveListenerSettings>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Turned true when the drain begins: every connection, served or parked, hears it.
    let (drain_tx, drain_rx) = watch::channel(false);
    // Connections served by hyper (not parked): a crowd of them is parked sooner.
    let served = Arc::new(AtomicUsize::new(0));
    let trimmer = Arc::new(super::trim::Trimmer::default());
    let trimming = tokio::spawn(trimmer.clone().run());
    // Every connection's task, so those still running when the drain is over can be ended.
    let mut conns = JoinSet::new();
    // Accept failures: when the last was logged, and how many since (a run of them can flap as
    // descriptors come and go, so it is once a minute, not once a run).
    let mut accept_errors: (Option<tokio::time::Instant>, u64) = (None, 0);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let ctx = ConnContext {
                        front: front.clone(),
                        cfg: Arc::new(live.get()),
                        peer: Peer::new(peer),
                        served: served.clone(),
                        trimmer: trimmer.clone(),
                    };
                    conns.spawn(serve_client(stream, ctx, drain_rx.clone()));
                }
                Err(e) => {
                    // Out of file descriptors (or another passing failure): back off and go on,
                    // logging at most once a minute.
                    let now = tokio::time::Instant::now();
                    match accept_errors {
                        (Some(at), ref mut since) if now.duration_since(at) < ACCEPT_LOG_EVERY => {
                            *since += 1;
                        }
                        (_, since) => {
                            let more = if since > 0 {
                                format!(" ({since} more since the last line)")
                            } else {
                                String::new()
                            };
                            warn!("accepting connections failed: {e}; retrying{more}");
                            accept_errors = (Some(now), 0);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            // Reaps the tasks of connections that have ended.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    front.stop();
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
}

/// One request, from its head to the answer, its body given to `wrap` (the connection's
/// bookkeeping). Routed and admitted here, when hyper hands the request over, before the future
/// exists: what the future keeps is only what the forwarding needs (a queued request holds it
/// while it waits), and a request that must wait has let go of hyper's read buffer before hyper
/// reads on to watch for the client hanging up (see `compact`).
pub(super) fn handle<B>(
    front: Arc<Front>,
    cfg: Arc<ListenerSettings>,
    peer: Peer,
    req: Request<Incoming>,
    early: Option<Early>,
    wrap: impl FnOnce(ProxyBody) -> B,
) -> impl Future<Output = Result<Response<B>, Infallible>> {
    let routed = route_request(&front, &peer, req, early);
    async move {
        let (is_tx, resp) = match routed {
            Routed::Answer(resp) => return Ok(resp.map(wrap)),
            Routed::Master(req) => (false, to_master(&front, req).await),
            Routed::Tx(tx) => (true, to_tx(&front, &cfg, tx).await),
        };
        front.counters.answered(is_tx, resp.status().as_u16());
        Ok(resp.map(wrap))
    }
}

/// Where a request goes, decided from its head alone.
enum Routed {
    /// Answered by the launcher itself (refused, a bad target).
    Answer(Response<ProxyBody>),
    Master(Request<Incoming>),
    Tx(Admitted),
}

/// A tx request submitted to the scheduler, its decision to come.
struct Admitted {
    demand: TxDemand,
    /// Boxed: the forwarding future moves it through several states, and each would otherwise
    /// keep room for the whole request.
    req: Box<Request<Incoming>>,
    cache_id: String,
    ticket: Ticket,
    decision: oneshot::Receiver<Decision>,
}

/// `early`: the request's admission if the lobby made it (see `lobby`); one that does not match
/// the route is dropped, which cancels it.
fn route_request(
    front: &Arc<Front>,
    peer: &Peer,
    req: Request<Incoming>,
    early: Option<Early>,
) -> Routed {
    let (mut parts, body) = req.into_parts();
    if let Some(refusal) = refuse_unsupported(&parts) {
        return Routed::Answer(refusal);
    }
    // Absolute-form and authority-form targets are passed whole, so the router refuses them.
    let target = if parts.uri.scheme().is_some() || parts.uri.authority().is_some() {
        Cow::Owned(parts.uri.to_string())
    } else {
        Cow::Borrowed(parts.uri.path_and_query().map_or("", |p| p.as_str()))
    };
    let content_length = if parts.headers.contains_key(TRANSFER_ENCODING) {
        None
    } else {
        parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let cache_id = parts.headers.get("x-cache-id").cloned();
    let head = RequestHead {
        method: &parts.method,
        target: &target,
        cache_id: cache_id.as_ref().map(|v| v.as_bytes()),
        content_length,
    };
    let route = match front.route(&head) {
        Ok(r) => r,
        Err(bad) => return Routed::Answer(Answer::BadTarget(bad).respond()),
    };
    drop(target); // its borrow of the target ends before the head is rewritten
    prepare_request(&mut parts, peer);
    let req = Request::from_parts(parts, body);
    match route {
        Route::Master => Routed::Master(req),
        Route::Tx(demand) => {
            let mut req = Box::new(req);
            let (ticket, decision) = match early {
                Some(e) if e.demand == demand => (e.ticket, e.decision),
                _ => front.admit(&demand),
            };
            if decision.is_empty() {
                // It waits: it should hold no more than it needs meanwhile.
                compact_head(&mut req);
            }
            Routed::Tx(Admitted {
                demand,
                req,
                cache_id: cache_id
                    .as_ref()
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                    .unwrap_or_default(),
                ticket,
                decision,
            })
        }
    }
}

/// The master's own paths: straight there, neither waiting nor counting, streamed only as fast
/// as the client takes it (STREAM-3).
async fn to_master(front: &Arc<Front>, req: Request<Incoming>) -> Response<ProxyBody> {
    if !front.master_ready() {
        front
            .counters
            .refused_master_down
            .fetch_add(1, Ordering::Relaxed);
        return Answer::MasterNotReady.respond();
    }
    let master = ProcessId::MASTER;
    // Boxed: see `to_tx`.
    match Box::pin(
        front.upstreams[master.index()].try_send_with_timeout(req, front.upstream_timeout()),
    )
    .await
    {
        Ok(resp) => streamed(resp, |_| {}),
        Err(failure) => upstream_failed(front, master, &failure.error),
    }
}

/// A tx request: admission, then the process the scheduler picks; its response read whole as
/// fast as it comes, so the slot frees when the process is done, not when the client is
/// (STREAM-1, STREAM-2).
// The request is moved out of its box by each send, so one handed back needs a new box (the
// lint's `*req = back` would write into a box that is gone).
#[allow(clippy::replace_box)]
async fn to_tx(front: &Arc<Front>, cfg: &ListenerSettings, tx: Admitted) -> Response<ProxyBody> {
    let Admitted {
        demand,
        mut req,
        cache_id,
        mut ticket,
        mut decision,
    } = tx;
    loop {
        let Ok(d) = decision.await else {
            // The scheduler dropped the request without a decision: only while stopping.
            ticket.settled();
            return Answer::Stopping.respond();
        };
        let process = match d {
            Decision::Go(p) => p,
            Decision::Refused(reason) => {
                ticket.settled();
                return refused(front, cfg, reason, &cache_id);
            }
            Decision::Fail(p) if demand.target == Target::Owner(p) => {
                // Nothing was sent: the issuer refused the connection, so it is down before the
                // supervisor has noticed (just killed, say). Its caches are gone either way,
                // and the client must hear so, not a 502 it can't act on (ROUTE-3b).
                ticket.settled();
                return lost_to_restart(front, p, cache_id);
            }
            Decision::Fail(p) => {
                ticket.settled();
                front.counters.bad_gateway.fetch_add(1, Ordering::Relaxed);
                front.counters.lose(p, 1);
                return Answer::BadGateway {
                    code: front.code(p).to_string(),
                }
                .respond();
            }
        };
        ticket.dispatched();
        let upstream = &front.upstreams[process.index()];
        let downs = front.downs(process);
        // Boxed, as the reading of the response: what a request holds while it waits in the
        // queue is the size of this future, and sending is by far its largest state.
        match Box::pin(upstream.try_send_with_timeout(*req, front.upstream_timeout())).await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                return match Box::pin(buffered(resp)).await {
                    Ok(resp) => {
                        ticket.finish(Finish::Responded { status });
                        resp
                    }
                    Err(e) => {
                        ticket.finish(Finish::Failed);
                        upstream_failed(front, process, &e)
                    }
                };
            }
            Err(SendFailure {
                request: Some(back),
                error,
            }) => {
                debug!(
                    "{}: not sent ({error}); trying another process",
                    front.code(process)
                );
                req = Box::new(back);
                decision = ticket.retry();
            }
            Err(SendFailure { error, .. }) => {
                let timed_out = error.is_timeout();
                ticket.finish(if timed_out {
                    Finish::TimedOut
                } else {
                    Finish::Failed
                });
                if !timed_out
                    && demand.target == Target::Owner(process)
                    && Box::pin(front.went_down_since(process, downs, OWNER_EXIT_GRACE)).await
                {
                    // The issuer died under the request (killed a moment before, its socket
                    // reset before the supervisor heard): its caches are gone (ROUTE-3b).
                    return lost_to_restart(front, process, cache_id);
                }
                return upstream_failed(front, process, &error);
            }
        }
    }
}

fn upstream_failed(
    front: &Front,
    process: ProcessId,
    error: &super::forward::ForwardError,
) -> Response<ProxyBody> {
    let code = front.code(process).to_string();
    if error.client_body_failed() {
        // The client's body broke (bad chunking, gone mid-body): not the process's failure, so
        // neither counted against it nor logged as one, which a hostile client could flood.
        debug!("{code}: the client's request body failed: {error}; answered 400");
        return Answer::BadRequestBody.respond();
    }
    if error.is_timeout() {
        front
            .counters
            .gateway_timeout
            .fetch_add(1, Ordering::Relaxed);
        front.counters.lose(process, 0);
        let secs = front.upstream_timeout().as_secs_f64();
        warn!("{code}: no response began within {secs} s (upstreamTimeoutSeconds); answered 504");
        Answer::GatewayTimeout { code, secs }.respond()
    } else {
        front.counters.bad_gateway.fetch_add(1, Ordering::Relaxed);
        front.counters.lose(process, 1);
        warn!("{code}: {error}; answered 502");
        Answer::BadGateway { code }.respond()
    }
}

/// A request for a cache-id whose issuer is down or died under it: `404 cache-id-unknown`,
/// counted once against the issuer for the daily report (EVENT-8), however the launcher learned
/// it was gone (the scheduler knew, the connection was refused, or it died mid-request).
fn lost_to_restart(front: &Front, owner: ProcessId, cache_id: String) -> Response<ProxyBody> {
    front.counters.cache_id_lost.fetch_add(1, Ordering::Relaxed);
    front.counters.lose(owner, 2);
    Answer::CacheIdLost { cache_id }.respond()
}

fn refused(
    front: &Front,
    cfg: &ListenerSettings,
    reason: Refusal,
    cache_id: &str,
) -> Response<ProxyBody> {
    let c = &front.counters;
    let answer = match reason {
        Refusal::QueueTimeout { owner_wait } => {
            c.refused_queue.fetch_add(1, Ordering::Relaxed);
            let waited = if owner_wait {
                cfg.owner_queue
            } else {
                cfg.queue
            };
            Answer::QueueTimeout {
                waited_secs: waited.as_secs_f64(),
            }
        }
        Refusal::OwnerGone(owner) => return lost_to_restart(front, owner, cache_id.to_string()),
        Refusal::NoProcessReady => {
            c.refused_no_process.fetch_add(1, Ordering::Relaxed);
            Answer::NoProcessReady
        }
        Refusal::Stopping => {
            c.refused_stopping.fetch_add(1, Ordering::Relaxed);
            Answer::Stopping
        }
    };
    answer.respond()
}
