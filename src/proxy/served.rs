//! Who answered a request, carried on its response (an extension, never sent): the process that
//! served it, or that the launcher's own answer concerns (a `504` naming tx1, the `404` for
//! tx1's cache-ids while it restarts), and whether the answer is the launcher's own refusal.
//! At the end of the pipeline, one step reads it: the request's duration goes into its class's
//! histogram, and `servedByHeader` names the process. The launcher's own refusals name none,
//! unless they concern one (a `504`, a `502`, the `404` for a cache-id whose issuer restarts).

use std::net::IpAddr;
use std::time::Duration;

use http::{HeaderValue, Method, Response};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::forward::body::{BodyEnd, NotifyOnEnd};
use super::forward::headers::{is_loopback, X_FORWARDED_FOR};
use super::forward::{Peer, ProxyBody};
use super::front::Front;
use super::listener::ListenerSettings;
use super::route::{Target, TxDemand};
use crate::logs::access_log::{self, AccessLog, Record};
use crate::process::ProcessId;
use crate::proxy::observed::{OutcomeClass, RouteClass};

/// What the response says of who answered.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Served {
    /// The process that answered, or that the launcher's own answer names.
    pub process: Option<ProcessId>,
    /// The launcher refused the request itself, asking no process (`503`s, the `404` for a lost
    /// cache-id, `400`s, `408`, `431`); not its `502`/`504` for a process that failed.
    pub refused: bool,
    /// The launcher's own answer's reason (`Answer::reason`).
    pub own: Option<&'static str>,
    /// How long it waited in the launcher for a process.
    pub queued: Option<Duration>,
    /// From sending it to the process to the process's response head.
    pub first_byte: Option<Duration>,
}

/// Marks `resp` as answered by (or naming) `process`.
pub fn by(resp: Response<ProxyBody>, process: ProcessId) -> Response<ProxyBody> {
    mark(resp, |s| s.process = Some(process))
}

/// Marks `resp` as the answer of `process`, which began `first_byte` after it was sent, the
/// request having waited `queued` for it: only when the header or the access log will say so
/// (the mark is an allocation, which a forwarded answer otherwise does without).
pub fn answered(
    cfg: &ListenerSettings,
    resp: Response<ProxyBody>,
    process: ProcessId,
    queued: Option<Duration>,
    first_byte: Duration,
) -> Response<ProxyBody> {
    if cfg.served_by.is_none() && !access_log::is_on() {
        return resp;
    }
    mark(resp, |s| {
        s.process = Some(process);
        s.queued = queued;
        s.first_byte = Some(first_byte);
    })
}

fn mark(mut resp: Response<ProxyBody>, f: impl FnOnce(&mut Served)) -> Response<ProxyBody> {
    let ext = resp.extensions_mut();
    match ext.get_mut::<Served>() {
        Some(s) => f(s),
        None => {
            let mut s = Served::default();
            f(&mut s);
            ext.insert(s);
        }
    }
    resp
}

/// What the access log needs of a request's head, taken before it is rewritten; None (and
/// nothing taken) while the access log is off.
pub struct Pending {
    log: std::sync::Arc<AccessLog>,
    client: String,
    method: Method,
    target: String,
}

/// The head's part of the request's access log line, if there is an access log.
pub fn access(parts: &http::request::Parts, peer: &Peer) -> Option<Pending> {
    let log = access_log::get()?;
    let target = if log.query {
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    } else {
        parts.uri.path()
    };
    Some(Pending {
        log,
        client: client_address(&parts.headers, peer.addr.ip()).to_string(),
        method: parts.method.clone(),
        target: target.to_string(),
    })
}

/// The client's address: the peer's, or, from a loopback peer (the nginx on the same host, the
/// one the launcher trusts, as for `X-Forwarded-Proto`), the last `X-Forwarded-For` entry, the
/// address that nginx saw, when it is an address.
pub fn client_address(headers: &http::HeaderMap, peer: IpAddr) -> IpAddr {
    if !is_loopback(peer) {
        return peer.to_canonical();
    }
    headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .next_back()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|v| v.trim().parse::<IpAddr>().ok())
        .map_or(peer.to_canonical(), |ip| ip.to_canonical())
}

/// The route class of a tx request: by its cache-id first (`owner`), then its lane.
pub fn tx_class(demand: &TxDemand) -> RouteClass {
    match demand.target {
        Target::Owner(_) | Target::UnknownPrefix | Target::Affinity(_) => RouteClass::Owner,
        Target::LeastLoaded if demand.lane == super::lane::Lane::Fast => RouteClass::Fast,
        Target::LeastLoaded => RouteClass::Tx,
    }
}

/// The request's last step before its answer goes out: its duration recorded by class, and the
/// process that answered (or that the launcher's answer concerns) named in `servedByHeader`.
pub fn finish(
    front: &Front,
    cfg: &ListenerSettings,
    class: RouteClass,
    started: Instant,
    access: Option<Pending>,
    mut resp: Response<ProxyBody>,
) -> Response<ProxyBody> {
    let served = resp.extensions().get::<Served>().copied();
    let refused = served.is_some_and(|s| s.refused);
    if let (Some(name), Some(p)) = (&cfg.served_by, served.and_then(|s| s.process)) {
        if let Ok(v) = HeaderValue::from_str(front.roster.code(p)) {
            resp.headers_mut().insert(name.clone(), v);
        }
    }
    let outcome = OutcomeClass::of(resp.status().as_u16(), refused);
    front
        .counters
        .observed
        .record(class, outcome, started.elapsed());
    if let Some(pending) = access {
        let served = served.unwrap_or_default();
        let status = resp.status().as_u16();
        let process = served.process.map(|p| front.roster.code(p).to_string());
        resp = resp.map(|body| {
            NotifyOnEnd::new(body, move |end: BodyEnd| {
                pending.log.write(&Record {
                    client: &pending.client,
                    method: pending.method.as_str(),
                    target: &pending.target,
                    status,
                    bytes: end.bytes,
                    process: process.as_deref(),
                    queued: served.queued,
                    first_byte: served.first_byte,
                    total: started.elapsed(),
                    refusal: served.own,
                });
            })
            .boxed_unsync()
        });
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_is_the_last_forwarded_for_entry_only_from_a_loopback_peer() {
        let mut h = http::HeaderMap::new();
        h.append(X_FORWARDED_FOR, HeaderValue::from_static("10.0.0.1"));
        h.append(
            X_FORWARDED_FOR,
            HeaderValue::from_static("198.51.100.1, 203.0.113.9 "),
        );
        let lo: IpAddr = "127.0.0.1".parse().expect("ip");
        let far: IpAddr = "192.0.2.5".parse().expect("ip");
        assert_eq!(client_address(&h, lo).to_string(), "203.0.113.9");
        assert_eq!(
            client_address(&h, far),
            far,
            "a far peer's header is not believed"
        );
        let mapped: IpAddr = "::ffff:192.0.2.5".parse().expect("ip");
        assert_eq!(client_address(&h, mapped), far, "written as IPv4");
        let mut junk = http::HeaderMap::new();
        junk.insert(X_FORWARDED_FOR, HeaderValue::from_static("a\" b=c"));
        assert_eq!(client_address(&junk, lo), lo, "no address: the peer's");
        assert_eq!(client_address(&http::HeaderMap::new(), lo), lo);
    }
}
