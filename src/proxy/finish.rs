//! The request's last step before its answer goes out (`finish`): its duration recorded by
//! class, the process that answered (the `Served` mark) named in `servedByHeader`, and its
//! access log line written when its body ends. Also what that step needs taken earlier: the
//! head's part of the access log line (`access`), taken before the head is rewritten, and the
//! mark of a forwarded answer (`answered`), made only when something will read it.

use std::net::IpAddr;
use std::time::Duration;

use http::{HeaderValue, Method, Response};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::forward::body::{BodyEnd, NotifyOnEnd};
use super::forward::headers::X_FORWARDED_FOR;
use super::forward::{Peer, ProxyBody};
use super::listener::ListenerSettings;
use super::observed::{Observed, OutcomeClass, RouteClass};
use super::roster::Roster;
use super::route::{Target, TxDemand};
use super::served::{mark, Served};
use crate::logs::access_log::{AccessLog, InForce, Record};
use crate::process::ProcessId;

/// Marks `resp` as the answer of `process`, which began `first_byte` after it was sent, the
/// request having waited `queued` for it: only when the header or the access log will say so
/// (the mark is an allocation, which a forwarded answer otherwise does without).
pub fn answered(
    cfg: &ListenerSettings,
    access_log: &InForce,
    resp: Response<ProxyBody>,
    process: ProcessId,
    queued: Option<Duration>,
    first_byte: Duration,
) -> Response<ProxyBody> {
    if cfg.served_by.is_none() && !access_log.is_on() {
        return resp;
    }
    mark(resp, |s| {
        s.process = Some(process);
        s.queued = queued;
        s.first_byte = Some(first_byte);
    })
}

/// What the access log needs of a request's head, taken before it is rewritten; None (and
/// nothing taken) while the access log is off.
pub struct Pending {
    log: std::sync::Arc<AccessLog>,
    client: String,
    method: Method,
    target: String,
}

/// The head's part of the request's access log line, if there is an access log (`in_force`).
pub fn access(in_force: &InForce, parts: &http::request::Parts, peer: &Peer) -> Option<Pending> {
    let log = in_force.get()?;
    let target = if log.query {
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    } else {
        parts.uri.path()
    };
    let client = client_address(&parts.headers, peer.addr.ip(), &log.trusted_proxies).to_string();
    Some(Pending {
        log,
        client,
        method: parts.method.clone(),
        target: target.to_string(),
    })
}

/// The client's address: the peer's, or, from a peer the operator named a trusted proxy
/// (`trustedProxies`, DEC-85: nginx's `set_real_ip_from`), the last `X-Forwarded-For` entry,
/// the address that proxy saw, when it is an address. Anyone else's header is never believed:
/// any program on the host can reach loopback and send one.
pub fn client_address(headers: &http::HeaderMap, peer: IpAddr, trusted: &[IpAddr]) -> IpAddr {
    let peer = peer.to_canonical();
    if !trusted.contains(&peer) {
        return peer;
    }
    headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .next_back()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|v| v.trim().parse::<IpAddr>().ok())
        .map_or(peer, |ip| ip.to_canonical())
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
    roster: &Roster,
    observed: &Observed,
    cfg: &ListenerSettings,
    class: RouteClass,
    started: Instant,
    access: Option<Pending>,
    mut resp: Response<ProxyBody>,
) -> Response<ProxyBody> {
    let served = resp.extensions().get::<Served>().copied();
    let refused = served.is_some_and(|s| s.refused);
    if let (Some(name), Some(p)) = (&cfg.served_by, served.and_then(|s| s.process)) {
        if let Ok(v) = HeaderValue::from_str(roster.code(p)) {
            resp.headers_mut().insert(name.clone(), v);
        }
    }
    let outcome = OutcomeClass::of(resp.status().as_u16(), refused);
    observed.record(class, outcome, started.elapsed());
    if let Some(pending) = access {
        let served = served.unwrap_or_default();
        let status = resp.status().as_u16();
        let process = served.process.map(|p| roster.code(p).to_string());
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
    fn the_client_is_the_last_forwarded_for_entry_only_from_a_trusted_proxy() {
        // spec: DEC-85
        let mut h = http::HeaderMap::new();
        h.append(X_FORWARDED_FOR, HeaderValue::from_static("10.0.0.1"));
        h.append(
            X_FORWARDED_FOR,
            HeaderValue::from_static("198.51.100.1, 203.0.113.9 "),
        );
        let lo: IpAddr = "127.0.0.1".parse().expect("ip");
        let far: IpAddr = "192.0.2.5".parse().expect("ip");
        let trusted = [lo, far];
        assert_eq!(client_address(&h, lo, &trusted).to_string(), "203.0.113.9");
        assert_eq!(client_address(&h, far, &trusted).to_string(), "203.0.113.9");
        assert_eq!(client_address(&h, lo, &[]), lo, "none trusted: the peer");
        assert_eq!(
            client_address(&h, far, &[lo]),
            far,
            "not named: not believed"
        );
        let mapped: IpAddr = "::ffff:192.0.2.5".parse().expect("ip");
        assert_eq!(client_address(&h, mapped, &[lo]), far, "written as IPv4");
        assert_eq!(
            client_address(&h, mapped, &trusted).to_string(),
            "203.0.113.9",
            "an IPv4 proxy seen through an IPv6 socket is the one named"
        );
        let mut junk = http::HeaderMap::new();
        junk.insert(X_FORWARDED_FOR, HeaderValue::from_static("a\" b=c"));
        assert_eq!(
            client_address(&junk, lo, &trusted),
            lo,
            "no address: the peer's"
        );
        assert_eq!(client_address(&http::HeaderMap::new(), lo, &trusted), lo);
    }
}
