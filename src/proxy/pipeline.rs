//! One request's way through the front door, in the same named steps for every request: refuse
//! what is never proxied (and a `Host` RFC 9112 refuses), route, rewrite the headers, then
//! either straight to the master (its own paths) or, for a tx process, read a small body ahead,
//! admit, send and answer.
//!
//! Whatever the answer, one rule at the end: if the client had not sent its whole body when the
//! request ended, the answer says `Connection: close` (hyper stops reading a body nobody reads,
//! and closes the connection; the client must know not to send another request on it).

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::forward::{
    buffered, check_host, compact_head, prepare_request, refuse_unsupported, streamed, AheadError,
    Arrival, Buffered, ClientBody, Peer, ProxyBody, SendFailure,
};
use super::front::{Decision, Front, Ticket};
use super::listener::ListenerSettings;
use super::lobby::Early;
use super::outcome::Answer;
use super::route::{RequestHead, Route, Target, TxDemand};
use super::scheduler::{Finish, Refusal};
use super::served;
use crate::ops::observed::RouteClass;
use crate::process::ProcessId;

/// How long a request whose cache-id issuer failed under it waits to hear whether the issuer
/// exited (the supervisor learns of an exit within milliseconds).
const OWNER_EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// One request, from its head to the answer, its body given to `wrap` (the connection's
/// bookkeeping). Routed and admitted here, when hyper hands the request over, before the future
/// exists: what the future keeps is only what the forwarding needs (a queued request holds it
/// while it waits), and a request that must wait has let go of hyper's read buffer before hyper
/// reads on to watch for the client hanging up (see `compact`). A tx request whose body is still
/// to be read is admitted once it has been (see `ClientBody::read_ahead`).
pub(super) fn handle<B>(
    front: Arc<Front>,
    cfg: Arc<ListenerSettings>,
    peer: Peer,
    req: Request<Incoming>,
    early: Option<Early>,
    wrap: impl FnOnce(ProxyBody) -> B,
) -> impl Future<Output = Result<Response<B>, Infallible>> {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let access = served::access(&parts, &peer);
    let (body, arrival) = ClientBody::arriving(body);
    let routed = route_request(&front, &peer, parts, body, early);
    let class = routed.class();
    async move {
        let resp = match routed {
            Routed::Answer(resp) => resp,
            Routed::Master(req) => {
                let resp = to_master(&front, &cfg, req, arrival.as_ref()).await;
                front.counters.answered(false, resp.status().as_u16());
                resp
            }
            Routed::Tx(tx) => tx_answer(&front, &cfg, tx, arrival.as_ref()).await,
            // Boxed: the reading exists only until the request is admitted, and a queued
            // request's future would otherwise keep room for it.
            Routed::ReadFirst(r) => match Box::pin(read_first(&front, &cfg, *r)).await {
                Ok(tx) => tx_answer(&front, &cfg, tx, arrival.as_ref()).await,
                Err(resp) => resp,
            },
        };
        let resp = served::finish(&front, &cfg, class, started, access, resp);
        Ok(answer(resp, arrival.as_ref()).map(wrap))
    }
}

async fn tx_answer(
    front: &Arc<Front>,
    cfg: &ListenerSettings,
    tx: Admitted,
    arrival: Option<&Arrival>,
) -> Response<ProxyBody> {
    let resp = to_tx(front, cfg, tx, arrival).await;
    front.counters.answered(true, resp.status().as_u16());
    resp
}

/// The answer as the client gets it: `Connection: close` when its body was not read to the end.
fn answer(mut resp: Response<ProxyBody>, arrival: Option<&Arrival>) -> Response<ProxyBody> {
    if arrival.is_some_and(|a| !a.is_complete()) {
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// Where a request goes, decided from its head alone.
enum Routed {
    /// Answered by the launcher itself (refused, a bad target).
    Answer(Response<ProxyBody>),
    Master(Request<ClientBody>),
    Tx(Admitted),
    /// A tx request whose body is to be read before it is admitted.
    ReadFirst(Box<Unread>),
}

impl Routed {
    /// How it is counted in the request duration histogram.
    fn class(&self) -> RouteClass {
        match self {
            Routed::Answer(_) => RouteClass::Other,
            Routed::Master(_) => RouteClass::Master,
            Routed::Tx(a) => served::tx_class(&a.demand),
            Routed::ReadFirst(u) => served::tx_class(&u.demand),
        }
    }
}

/// A tx request submitted to the scheduler, its decision to come.
struct Admitted {
    demand: TxDemand,
    /// Boxed: the forwarding future moves it through several states, and each would otherwise
    /// keep room for the whole request.
    req: Box<Request<ClientBody>>,
    cache_id: String,
    ticket: Ticket,
    decision: oneshot::Receiver<Decision>,
}

/// A tx request routed, its body still to read.
struct Unread {
    demand: TxDemand,
    req: Request<ClientBody>,
    cache_id: String,
}

/// `early`: the request's admission if the lobby made it (see `lobby`); one that does not match
/// the route is dropped, which cancels it.
fn route_request(
    front: &Arc<Front>,
    peer: &Peer,
    mut parts: http::request::Parts,
    body: ClientBody,
    early: Option<Early>,
) -> Routed {
    if let Some(refusal) = refuse_unsupported(&parts) {
        return Routed::Answer(refusal);
    }
    if let Err(why) = check_host(&parts) {
        debug!("a request from {peer} refused with 400: {why}");
        return Routed::Answer(Answer::BadHost(why).respond());
    }
    let target = match (parts.uri.scheme(), parts.uri.authority()) {
        // Absolute-form (RFC 9112 §3.2.2): routed by its path; its authority becomes `Host`.
        (Some(_), Some(_)) => Cow::Borrowed(parts.uri.path_and_query().map_or("/", |p| p.as_str())),
        // Authority-form is for CONNECT alone: passed whole, so the router refuses it.
        (_, Some(_)) => Cow::Owned(parts.uri.to_string()),
        _ => Cow::Borrowed(parts.uri.path_and_query().map_or("", |p| p.as_str())),
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
    let Route::Tx(demand) = route else {
        return Routed::Master(req);
    };
    let cache_id = cache_id
        .as_ref()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let (ticket, decision) = match early {
        // The lobby read the whole request, and admitted it.
        Some(e) if e.demand == demand => (e.ticket, e.decision),
        _ if !http_body::Body::is_end_stream(req.body()) => {
            return Routed::ReadFirst(Box::new(Unread {
                demand,
                req,
                cache_id,
            }))
        }
        _ => front.admit(&demand),
    };
    Routed::Tx(admitted(demand, Box::new(req), cache_id, ticket, decision))
}

fn admitted(
    demand: TxDemand,
    mut req: Box<Request<ClientBody>>,
    cache_id: String,
    ticket: Ticket,
    decision: oneshot::Receiver<Decision>,
) -> Admitted {
    if decision.is_empty() {
        // It waits: it should hold no more than it needs meanwhile.
        compact_head(&mut req);
    }
    Admitted {
        demand,
        req,
        cache_id,
        ticket,
        decision,
    }
}

/// Reads a tx request's body ahead (up to 64 KB, within `headerTimeoutSeconds`), so a client
/// still sending holds no process's slot, then admits it. A body that doesn't come in time is the
/// client's `408`, counted against no process.
async fn read_first(
    front: &Arc<Front>,
    cfg: &ListenerSettings,
    unread: Unread,
) -> Result<Admitted, Response<ProxyBody>> {
    let Unread {
        demand,
        req,
        cache_id,
    } = unread;
    let (parts, body) = req.into_parts();
    let timeout = cfg.header_read_timeout;
    let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
    let body = match body.read_ahead(&front.budget, deadline).await {
        Ok(body) => body,
        Err(AheadError::TimedOut) => {
            front
                .counters
                .request_timeouts
                .fetch_add(1, Ordering::Relaxed);
            debug!(
                "a client sent no whole request body within {} s (headerTimeoutSeconds); \
                 answered 408",
                timeout.as_secs_f64()
            );
            return Err(Answer::RequestTimeout.respond());
        }
        Err(AheadError::Failed(e)) => {
            debug!("a client's request body failed: {e}; answered 400");
            return Err(Answer::BadRequestBody.respond());
        }
    };
    let req = Box::new(Request::from_parts(parts, body));
    let (ticket, decision) = front.admit(&demand);
    Ok(admitted(demand, req, cache_id, ticket, decision))
}

/// The master's own paths: straight there, neither waiting nor counting, streamed only as fast
/// as the client takes it (STREAM-3).
async fn to_master(
    front: &Arc<Front>,
    cfg: &ListenerSettings,
    req: Request<ClientBody>,
    arrival: Option<&Arrival>,
) -> Response<ProxyBody> {
    front.counters.master_paths.observe(req.uri().path());
    if !front.master_ready() {
        front
            .counters
            .refused_master_down
            .fetch_add(1, Ordering::Relaxed);
        return Answer::MasterNotReady.respond();
    }
    let master = ProcessId::MASTER;
    let sent = Instant::now();
    // Boxed: see `to_tx`.
    match Box::pin(
        front.upstreams[master.index()].try_send_with_timeout(req, front.upstream_timeout()),
    )
    .await
    {
        Ok(resp) => {
            let resp = streamed(resp, |_| {});
            served::answered(cfg, resp, master, None, sent.elapsed())
        }
        Err(failure) if body_late(&failure.error, arrival) => client_late(front),
        Err(failure) => upstream_failed(front, master, &failure.error),
    }
}

/// A tx request: admission, then the process the scheduler picks; its response read whole as
/// fast as it comes, so the slot frees when the process is done, not when the client is
/// (STREAM-1, STREAM-2), unless the budget for what the launcher holds is full: then it is
/// passed on as the client takes it, and the slot frees when the client has it all.
// The request is moved out of its box by each send, so one handed back needs a new box (the
// lint's `*req = back` would write into a box that is gone).
#[allow(clippy::replace_box)]
async fn to_tx(
    front: &Arc<Front>,
    cfg: &ListenerSettings,
    tx: Admitted,
    arrival: Option<&Arrival>,
) -> Response<ProxyBody> {
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
                let code = front.code(p).to_string();
                return served::by(Answer::BadGateway { code }.respond(), p);
            }
        };
        let queued = ticket.dispatched();
        let sent = Instant::now();
        let upstream = &front.upstreams[process.index()];
        let downs = front.downs(process);
        // Boxed, as the reading of the response: what a request holds while it waits in the
        // queue is the size of this future, and sending is by far its largest state.
        match Box::pin(upstream.try_send_with_timeout(*req, front.upstream_timeout())).await {
            Ok(resp) => {
                let first_byte = sent.elapsed();
                let status = resp.status().as_u16();
                let resp = match Box::pin(buffered(resp, &front.budget)).await {
                    Ok(Buffered::Whole(resp)) => {
                        ticket.finish(Finish::Responded { status });
                        resp
                    }
                    // The budget is full: the slot is held until the client has it all.
                    Ok(Buffered::Streaming(resp)) => streamed(resp, move |_| {
                        ticket.finish(Finish::Responded { status });
                    }),
                    Err(e) => {
                        ticket.finish(Finish::Failed);
                        upstream_failed(front, process, &e)
                    }
                };
                return served::answered(cfg, resp, process, Some(queued), first_byte);
            }
            Err(SendFailure {
                request: Some(back),
                error,
            }) => {
                debug!(
                    "{}: not sent ({error}); trying another process",
                    front.code(process)
                );
                front
                    .counters
                    .observed
                    .retries
                    .fetch_add(1, Ordering::Relaxed);
                req = Box::new(back);
                decision = ticket.retry();
            }
            Err(SendFailure { error, .. }) if body_late(&error, arrival) => {
                // Not the process's failure: no cooldown, nothing counted against it.
                ticket.finish(Finish::Failed);
                return client_late(front);
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

/// No response began in time while the client was still sending its body: the process could not
/// have answered a request it did not have.
fn body_late(error: &super::forward::ForwardError, arrival: Option<&Arrival>) -> bool {
    error.is_timeout() && arrival.is_some_and(|a| !a.is_complete())
}

/// The client's `408` for a body that was still arriving at the upstream timeout.
fn client_late(front: &Front) -> Response<ProxyBody> {
    front
        .counters
        .request_timeouts
        .fetch_add(1, Ordering::Relaxed);
    debug!(
        "a client was still sending its request body after {} s (upstreamTimeoutSeconds); \
         answered 408",
        front.upstream_timeout().as_secs_f64()
    );
    Answer::RequestTimeout.respond()
}

/// The launcher's answer for a process that failed, naming it.
fn upstream_failed(
    front: &Front,
    process: ProcessId,
    error: &super::forward::ForwardError,
) -> Response<ProxyBody> {
    served::by(failed_answer(front, process, error), process)
}

fn failed_answer(
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
    served::by(Answer::CacheIdLost { cache_id }.respond(), owner)
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
