//! Who answered a request, carried on its response (an extension, never sent): the process that
//! served it, or that the launcher's own answer concerns (a `504` naming tx1, the `404` for
//! tx1's cache-ids while it restarts), and whether the answer is the launcher's own refusal.
//! At the end of the pipeline, one step reads it: the request's duration goes into its class's
//! histogram, and `servedByHeader` names the process. The launcher's own refusals name none,
//! unless they concern one (a `504`, a `502`, the `404` for a cache-id whose issuer restarts).

use http::{HeaderValue, Response};
use tokio::time::Instant;

use super::forward::ProxyBody;
use super::front::Front;
use super::listener::ListenerSettings;
use super::route::{Target, TxDemand};
use crate::ops::observed::{OutcomeClass, RouteClass};
use crate::process::ProcessId;

/// What the response says of who answered.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Served {
    /// The process that answered, or that the launcher's own answer names.
    pub process: Option<ProcessId>,
    /// The launcher refused the request itself, asking no process (`503`s, the `404` for a lost
    /// cache-id, `400`s, `408`, `431`); not its `502`/`504` for a process that failed.
    pub refused: bool,
}

/// Marks `resp` as answered by (or naming) `process`.
pub fn by(mut resp: Response<ProxyBody>, process: ProcessId) -> Response<ProxyBody> {
    let ext = resp.extensions_mut();
    match ext.get_mut::<Served>() {
        Some(s) => s.process = Some(process),
        None => {
            ext.insert(Served {
                process: Some(process),
                refused: false,
            });
        }
    }
    resp
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
    mut resp: Response<ProxyBody>,
) -> Response<ProxyBody> {
    let served = resp.extensions().get::<Served>().copied();
    let refused = served.is_some_and(|s| s.refused);
    if let (Some(name), Some(p)) = (&cfg.served_by, served.and_then(|s| s.process)) {
        if let Ok(v) = HeaderValue::from_str(front.code(p)) {
            resp.headers_mut().insert(name.clone(), v);
        }
    }
    let outcome = OutcomeClass::of(resp.status().as_u16(), refused);
    front
        .counters
        .observed
        .record(class, outcome, started.elapsed());
    resp
}
