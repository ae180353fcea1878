//! One request's way through the front door, in the same named steps for every request:
//!
//! 1. **route**: refuse what is never proxied (and a `Host` RFC 9112 refuses), and find where the
//!    request goes by the route table, or take the lobby's route of it (it is routed once);
//! 2. **rewrite** its headers for the process (a request admitted as it arrives is rewritten
//!    just after step 3, so that one that waits has its head compacted first: see `compact`);
//! 3. **admit** a tx request to the scheduler (its small body read ahead first), or take up the
//!    lobby's admission of it; the master's own paths go straight on;
//! 4. **pick**: the scheduler's decision, a process or a refusal;
//! 5. **forward** it, offered to another process when nothing of it was sent;
//! 6. **respond**: a tx response read whole as fast as it comes (streamed while the budget is
//!    full), the master's streamed;
//! 7. **record**: the scheduler hears how it ended, the answer is counted.
//!
//! Any step may end the request with a `Failure`; `failure::fail` alone picks the launcher's own
//! answer to it, counts it and logs it. One rule at the end, whatever the answer: if the client
//! had not sent its whole body when the request ended, the answer says `Connection: close`
//! (hyper stops reading a body nobody reads, and closes the connection; the client must know not
//! to send another request on it).

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::header::HeaderValue;
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::time::Instant;
use tracing::{debug, info};

use super::admission::{Early, Ticket};
use super::answer::Answer;
use super::death;
use super::failure::{fail, fail_respond, Failure};
use super::finish;
use super::forward::{
    buffered, check_looked_host, compact_head, is_unsupported, prepare_request, streamed,
    AheadError, Arrival, Buffered, ClientBody, ForwardError, Looked, Peer, ProxyBody, SendFailure,
};
use super::front::Front;
use super::handled::{Answering, Handled, Rest};
use super::listener_settings::ListenerSettings;
use super::route::{RequestHead, Route, Target, TxDemand};
use super::scheduler::{Finish, Refusal};
use super::verdict::Decision;
use super::verdict::Verdict;
use crate::process::ProcessId;
use crate::proxy::observed::RouteClass;
use crate::settings::{key, paths};

/// How long a request whose process failed under it waits to hear whether the process exited
/// (the supervisor learns of an exit within milliseconds): a cache-id's issuer, or the process
/// a GET came back from unanswered (DEC-33, DEC-73).
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// One request, from its head to the answer, its body given to `wrap` (the connection's
/// bookkeeping) with whether the client's body had all been read by then. Routed and admitted
/// here, when hyper hands the request over, before the future exists: what the future keeps is
/// only what the forwarding needs (a queued request holds it while it waits), and a request that
/// must wait has let go of hyper's read buffer before hyper reads on to watch for the client
/// hanging up (see `compact`). A tx request whose body is still to be read is admitted once it
/// has been (see `ClientBody::read_ahead`).
///
/// The future is built of parts that each hold their state once (`Handled`, `Answering`, and
/// the steps as blocks that use what they capture in place): an `async` block or `fn` that
/// moves what it holds into an awaited future keeps both (rust-lang/rust#62958). It is boxed
/// per request (see `conn::hyper_phase`), and its size is that allocation's, made and freed for
/// every request and held by every queued one: built so, it is about half what one `async`
/// block holding it all was.
pub(super) fn handle<B, W>(
    front: Arc<Front>,
    cfg: Arc<ListenerSettings>,
    peer: Peer,
    req: Request<Incoming>,
    early: Option<Early>,
    wrap: W,
) -> impl Future<Output = Result<Response<B>, Infallible>>
where
    W: FnOnce(ProxyBody, bool) -> B,
{
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let access = finish::access(&front.access_log, &parts, &peer);
    let (body, arrival) = ClientBody::arriving(body);
    let routed = route(&front, &peer, parts, body, early);
    let class = routed.class();
    let answering = match routed {
        Routed::Answer(answer) => Answering::Now {
            resp: Some(answer.respond()),
        },
        Routed::Master(req) => Answering::Master {
            fut: to_master(front.clone(), cfg.clone(), req, arrival.clone()),
        },
        Routed::Tx(tx) => Answering::Tx {
            fut: to_tx(front.clone(), cfg.clone(), tx, arrival.clone()),
        },
        // Boxed: the reading exists only until the request is admitted, and a queued
        // request's future would otherwise keep room for it.
        Routed::ReadFirst(r) => Answering::ReadFirst {
            fut: Box::pin(read_then_answer(
                front.clone(),
                cfg.clone(),
                *r,
                arrival.clone(),
            )),
        },
    };
    Handled::new(
        answering,
        Rest {
            front,
            cfg,
            started,
            access,
            arrival,
            class,
            wrap,
        },
    )
}

/// A tx request whose body is read first: read, admitted, then steps 4 to 7.
async fn read_then_answer(
    front: Arc<Front>,
    cfg: Arc<ListenerSettings>,
    unread: Unread,
    arrival: Option<Arrival>,
) -> Response<ProxyBody> {
    match read_first(&front, &cfg, unread).await {
        Ok(tx) => to_tx(front, cfg, tx, arrival).await,
        Err(answer) => answer.respond(),
    }
}

/// Where a request goes, decided from its head alone. (Not boxed: it lives only until the
/// request's future first runs, and boxing the master's requests would cost an allocation each.)
#[allow(clippy::large_enum_variant)]
enum Routed {
    /// Answered by the launcher itself (refused, a bad target).
    Answer(Answer),
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
            Routed::Tx(a) => finish::tx_class(&a.demand),
            Routed::ReadFirst(u) => finish::tx_class(&u.demand),
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
    decision: Verdict,
}

/// A tx request routed, its body still to read.
struct Unread {
    demand: TxDemand,
    req: Request<ClientBody>,
    cache_id: String,
}

/// Steps 1 to 3: route, rewrite the headers, admit. `early`: the request's route and admission
/// if the lobby made them (see `lobby`): taken as they are, the request not routed again. The
/// lobby's reading of the head is hyper's by construction (both are the codec's rules, and
/// `conn::lobby_differential_tests` holds what routing reads, method, target, `x-cache-id` and
/// `Content-Length`, to hyper's parts), so the lobby's route is the one this would find.
fn route(
    front: &Arc<Front>,
    peer: &Peer,
    mut parts: http::request::Parts,
    body: ClientBody,
    early: Option<Early>,
) -> Routed {
    if is_unsupported(&parts) {
        return Routed::Answer(fail(front, Failure::Unsupported));
    }
    // The lobby admits one `Host` only, but not its value: a bad one is refused here (dropping
    // the admission cancels it).
    let looked = Looked::of(&parts.headers);
    if let Err(why) = check_looked_host(&parts, &looked) {
        return Routed::Answer(fail(front, Failure::BadHost { why, from: peer }));
    }
    let cache_id = looked.cache_id.cloned();
    let (demand, early) = match early {
        // The lobby read the whole request, routed it and admitted it.
        Some(e) => (e.demand, Some((e.ticket, e.decision))),
        None => match routed(front, &parts, &looked) {
            Ok(Some(demand)) => (demand, None),
            Ok(None) => {
                prepare_request(&mut parts, peer);
                return Routed::Master(Request::from_parts(parts, body));
            }
            Err(answer) => return Routed::Answer(answer),
        },
    };
    let cache_id = cache_id
        .as_ref()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let (ticket, decision) = match early {
        Some(admission) => admission,
        None if !http_body::Body::is_end_stream(&body) => {
            prepare_request(&mut parts, peer);
            let req = Request::from_parts(parts, body);
            return Routed::ReadFirst(Box::new(Unread {
                demand,
                req,
                cache_id,
            }));
        }
        None => front.admit(&demand),
    };
    // Compacted before the rewriting, so that only what hyper read is copied (the rewriting's
    // own values, `X-Forwarded-For` shared by the connection's requests, are not hyper's).
    compact_if_waiting(&mut parts, &decision);
    prepare_request(&mut parts, peer);
    let req = Box::new(Request::from_parts(parts, body));
    Routed::Tx(Admitted {
        demand,
        req,
        cache_id,
        ticket,
        decision,
    })
}

/// Step 1's route table, for a request the lobby did not route: its demand if it is a tx
/// request, `None` for the master's own paths; `looked`: what routing reads of `parts`'
/// headers, in one pass. (The lobby's differential test holds the lobby's routing to this.)
pub(crate) fn routed(
    front: &Arc<Front>,
    parts: &http::request::Parts,
    looked: &Looked<'_>,
) -> Result<Option<TxDemand>, Answer> {
    let target = match (parts.uri.scheme(), parts.uri.authority()) {
        // Absolute-form (RFC 9112 §3.2.2): routed by its path; its authority becomes `Host`.
        (Some(_), Some(_)) => Cow::Borrowed(parts.uri.path_and_query().map_or("/", |p| p.as_str())),
        // Authority-form is for CONNECT alone: passed whole, so the router refuses it.
        (_, Some(_)) => Cow::Owned(parts.uri.to_string()),
        _ => Cow::Borrowed(parts.uri.path_and_query().map_or("", |p| p.as_str())),
    };
    let content_length = if looked.transfer_encoding {
        None
    } else {
        looked
            .content_length
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let head = RequestHead {
        method: &parts.method,
        target: &target,
        cache_id: looked.cache_id.map(HeaderValue::as_bytes),
        content_length,
    };
    match front.route(&head) {
        Ok(Route::Tx(demand)) => Ok(Some(demand)),
        Ok(Route::Master) => Ok(None),
        Err(bad) => Err(fail(front, Failure::BadTarget(bad))),
    }
}

/// A request that waits (its decision not made at once) should hold no more than it needs
/// meanwhile: nothing of hyper's read buffer (see `compact`).
fn compact_if_waiting(parts: &mut http::request::Parts, decision: &Verdict) {
    if decision.is_empty() {
        compact_head(&mut parts.uri, &mut parts.headers);
    }
}

/// Step 3 for a tx request with a body: reads it ahead (up to 64 KB, within
/// `headerTimeoutSeconds`), so a client still sending holds no process's slot, then admits it.
/// A body that doesn't come in time is the client's `408`, counted against no process.
async fn read_first(
    front: &Arc<Front>,
    cfg: &ListenerSettings,
    unread: Unread,
) -> Result<Admitted, Answer> {
    let Unread {
        demand,
        req,
        cache_id,
    } = unread;
    let (mut parts, body) = req.into_parts();
    let timeout = cfg.header_read_timeout;
    let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
    let body = match body.read_ahead(&front.budget, deadline).await {
        Ok(body) => body,
        Err(AheadError::TimedOut) => {
            let late = Failure::BodyLate {
                waited: timeout,
                setting: key(paths::cluster::header_timeout),
            };
            return Err(fail(front, late));
        }
        Err(AheadError::Failed(e)) => return Err(fail(front, Failure::BodyFailed(&e))),
    };
    let (ticket, decision) = front.admit(&demand);
    compact_if_waiting(&mut parts, &decision);
    Ok(Admitted {
        demand,
        req: Box::new(Request::from_parts(parts, body)),
        cache_id,
        ticket,
        decision,
    })
}

/// Steps 5 and 6 for the master's own paths: straight there, taking no slot, streamed only as
/// fast as the client takes it (STREAM-3). While no master is ready (restarting, or draining
/// for a reload's restart) such a request waits for the next one up to `queueSeconds`, as a tx
/// request waits for a slot, then gets the 503 (DEC-34); while the launcher stops nothing
/// waits. Each is counted in flight on the master until its response has ended, so the
/// master's drain lets it finish before the SIGTERM.
// Not an `async fn`: one keeps its arguments twice (rust-lang/rust#62958; see `handle`).
#[allow(clippy::manual_async_fn)]
fn to_master(
    front: Arc<Front>,
    cfg: Arc<ListenerSettings>,
    req: Request<ClientBody>,
    arrival: Option<Arrival>,
) -> impl Future<Output = Response<ProxyBody>> {
    // What it captures is used in place (see `handle`).
    async move {
        front.counters.master_paths.observe(req.uri().path());
        if !front.roster.master_ready() && !master_in_time(&front).await {
            let resp = fail(&front, Failure::MasterNotReady).respond();
            record(&front, RouteClass::Master, &resp);
            return resp;
        }
        let master = ProcessId::MASTER;
        let in_flight = MasterInFlight::new(&front);
        let bytes_in = http_body::Body::size_hint(req.body()).lower();
        let sent = Instant::now();
        // Boxed: see `to_tx`.
        let resp = match Box::pin(front.upstreams[master.index()].try_send_with_timeout(
            req,
            front.upstream_timeout(),
            sent,
        ))
        .await
        {
            Ok(resp) => {
                let first_byte = sent.elapsed();
                if let Some(c) = front.counters.processes.get(master.index()) {
                    c.answered(resp.status().as_u16(), first_byte, bytes_in);
                }
                // The bytes passed on are counted as the body ends (the guard holds the front).
                let resp = streamed(resp, move |end| {
                    if let Some(c) = in_flight.0.counters.processes.get(master.index()) {
                        c.sent_out(end.bytes);
                    }
                    drop(in_flight)
                });
                finish::answered(&cfg, &front.access_log, resp, master, None, first_byte)
            }
            Err(failure) => fail_respond(
                &front,
                forward_failed(&front, master, &failure.error, arrival.as_ref()),
            ),
        };
        record(&front, RouteClass::Master, &resp);
        resp
    }
}

/// Waits up to `queueSeconds` for a master to be ready; false when none is by then, or the
/// launcher is stopping.
async fn master_in_time(front: &Front) -> bool {
    if front.admission.is_stopping() {
        return false;
    }
    let mut news = front.roster.news();
    let ready = news.wait_for(|n| n.master_ready);
    let wait = front.admission.queue_wait();
    matches!(tokio::time::timeout(wait, ready).await, Ok(Ok(_))) && !front.admission.is_stopping()
}

/// One request on the master's own paths in flight, until dropped.
struct MasterInFlight(Arc<Front>);

impl MasterInFlight {
    fn new(front: &Arc<Front>) -> MasterInFlight {
        front.master_paths_in_flight.fetch_add(1, Ordering::AcqRel);
        MasterInFlight(front.clone())
    }
}

impl Drop for MasterInFlight {
    fn drop(&mut self) {
        self.0.master_path_ended();
    }
}

/// Steps 4 to 7 for a tx request: the process the scheduler picks, the forwarding, and its
/// response read whole as fast as it comes, so the slot frees when the process is done, not when
/// the client is (STREAM-1, STREAM-2), unless the budget for what the launcher holds is full:
/// then it is passed on as the client takes it, and the slot frees when the client has it all.
// The request is moved out of its box by each send, so one handed back needs a new box (the
// lint's `*req = back` would write into a box that is gone).
#[allow(clippy::replace_box)]
fn to_tx(
    front: Arc<Front>,
    cfg: Arc<ListenerSettings>,
    tx: Admitted,
    arrival: Option<Arrival>,
) -> impl Future<Output = Response<ProxyBody>> {
    let class = finish::tx_class(&tx.demand);
    // Taken apart here, not in the block: what it captures is used in place (see `handle`).
    let Admitted {
        demand,
        mut req,
        cache_id,
        mut ticket,
        mut decision,
    } = tx;
    async move {
        let resp = loop {
            // Pick.
            let process = match picked((&mut decision).await, &demand, &cache_id) {
                Ok(p) => p,
                Err(failure) => {
                    // The scheduler ended it already: nothing to report.
                    ticket.settled();
                    break fail_respond(&front, failure);
                }
            };
            // One clock read for the wait's end and the send's start.
            let sent = Instant::now();
            let (queued, first) = ticket.dispatched_at(sent);
            if first {
                front.counters.queue_wait.record(queued);
            }
            let bytes_in = http_body::Body::size_hint(req.body()).lower();
            let upstream = &front.upstreams[process.index()];
            let downs = front.roster.downs(process);
            // Forward. Boxed, as the reading of the response: what a request holds while it waits
            // in the queue is the size of this future, and sending is by far its largest state.
            let error = match Box::pin(upstream.try_send_with_timeout(
                *req,
                front.upstream_timeout(),
                sent,
            ))
            .await
            {
                // Respond, record.
                Ok(resp) => {
                    let first_byte = sent.elapsed();
                    let status = resp.status().as_u16();
                    let counters = front.counters.processes.get(process.index());
                    let resp = match Box::pin(buffered(resp, &front.budget)).await {
                        Ok(Buffered::Whole(resp)) => {
                            let done = Instant::now();
                            ticket.finish_at(Finish::Responded { status }, done);
                            if let Some(c) = counters {
                                let out = http_body::Body::size_hint(resp.body()).lower();
                                c.answered(status, done.saturating_duration_since(sent), bytes_in);
                                c.sent_out(out);
                            }
                            resp
                        }
                        // The budget is full: the slot is held until the client has it all.
                        Ok(Buffered::Streaming(resp)) => {
                            if let Some(c) = counters {
                                c.answered(status, sent.elapsed(), bytes_in);
                            }
                            let front = front.clone();
                            streamed(resp, move |end| {
                                ticket.finish(Finish::Responded { status });
                                if let Some(c) = front.counters.processes.get(process.index()) {
                                    c.sent_out(end.bytes);
                                }
                            })
                        }
                        Err(error) => {
                            ticket.finish(Finish::Failed);
                            let failure = Failure::Upstream {
                                process,
                                error: &error,
                            };
                            fail_respond(&front, failure)
                        }
                    };
                    break finish::answered(
                        &cfg,
                        &front.access_log,
                        resp,
                        process,
                        Some(queued),
                        first_byte,
                    );
                }
                // A request its cache-id's issuer closed on unanswered goes nowhere else: the
                // issuer's fate decides, as for any failure (ROUTE-3b, DEC-33).
                Err(SendFailure {
                    request: Some(_),
                    error,
                }) if error.unanswered() && demand.target == Target::Owner(process) => error,
                Err(SendFailure {
                    request: Some(back),
                    error,
                }) => {
                    if error.unanswered() {
                        // How it ended, once the supervisor has heard: a process that ended by
                        // itself keeps the request (DEC-73); one shot from outside, or alive,
                        // sends it on (DEC-33), and one gone down is no longer picked.
                        let ended = Box::pin(front.roster.ending_since(process, downs, EXIT_GRACE))
                            .await
                            .flatten();
                        if let Some(ending) = ended.filter(|e| !death::send_again(Some(*e))) {
                            ticket.finish(Finish::Failed);
                            let kept = Failure::MayHaveEndedIt { process, ending };
                            break fail_respond(&front, kept);
                        }
                        // spec: DEC-33
                        info!(
                            "{}: {error}; sending the {} once to another process",
                            front.roster.code(process),
                            back.method()
                        );
                    } else {
                        debug!(
                            "{}: not sent ({error}); trying another process",
                            front.roster.code(process)
                        );
                    }
                    front
                        .counters
                        .observed
                        .retries
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    req = Box::new(back);
                    decision = ticket.retry();
                    continue;
                }
                Err(SendFailure { error, .. }) => error,
            };
            // Record: a timeout is the process's, for its cooldown; the client's late body is not.
            // (In a block: what it finds is not kept across the wait below.)
            let (timed_out, on_issuer) = {
                let whose = forward_failed(&front, process, &error, arrival.as_ref());
                let timed_out =
                    matches!(whose, Failure::Upstream { error, .. } if error.is_timeout());
                let theirs = matches!(whose, Failure::Upstream { .. });
                let on_issuer = theirs && !timed_out && demand.target == Target::Owner(process);
                (timed_out, on_issuer)
            };
            ticket.finish(if timed_out {
                Finish::TimedOut
            } else {
                Finish::Failed
            });
            if on_issuer && Box::pin(front.roster.went_down_since(process, downs, EXIT_GRACE)).await
            {
                // The issuer died under the request (killed a moment before, its socket reset
                // before the supervisor heard): its caches are gone (ROUTE-3b).
                let gone = Failure::IssuerGone {
                    owner: process,
                    cache_id: &cache_id,
                };
                break fail_respond(&front, gone);
            }
            break fail_respond(
                &front,
                forward_failed(&front, process, &error, arrival.as_ref()),
            );
        };
        record(&front, class, &resp);
        resp
    }
}

/// Step 4: the scheduler's decision, the process to send to or why there is none.
fn picked<'a>(
    decided: Option<Decision>,
    demand: &TxDemand,
    cache_id: &'a str,
) -> Result<ProcessId, Failure<'a>> {
    match decided {
        Some(Decision::Go(p)) => Ok(p),
        Some(Decision::Refused(reason)) => Err(Failure::Refused { reason, cache_id }),
        // Nothing was sent: the issuer refused the connection, so it is down before the
        // supervisor has noticed (just killed, say). Its caches are gone either way, and the
        // client must hear so, not a 502 it can't act on (ROUTE-3b).
        Some(Decision::Fail(p)) if demand.target == Target::Owner(p) => {
            Err(Failure::IssuerGone { owner: p, cache_id })
        }
        Some(Decision::Fail(p)) => Err(Failure::NotSent(p)),
        // The scheduler dropped the request without a decision: only while stopping.
        None => Err(Failure::Refused {
            reason: Refusal::Stopping,
            cache_id,
        }),
    }
}

/// What a failed forward to `process` was: the client's, when no response began in time while
/// its body was still arriving (the process could not have answered a request it did not have),
/// else the process's.
fn forward_failed<'a>(
    front: &Front,
    process: ProcessId,
    error: &'a ForwardError,
    arrival: Option<&Arrival>,
) -> Failure<'a> {
    if error.is_timeout() && arrival.is_some_and(|a| !a.is_complete()) {
        Failure::BodyLate {
            waited: front.upstream_timeout(),
            setting: key(paths::cluster::upstream_timeout),
        }
    } else {
        Failure::Upstream { process, error }
    }
}

/// Step 7: the answer counted by route and status class.
fn record(front: &Front, route: RouteClass, resp: &Response<ProxyBody>) {
    front.counters.answered(route, resp.status().as_u16());
}
