//! Who answered a request, carried on its response (an extension, never sent): the process that
//! served it, or that the launcher's own answer concerns (a `504` naming tx1, the `404` for
//! tx1's cache-ids while it restarts), and whether the answer is the launcher's own refusal.
//! A leaf: the answer vocabulary (`answer`, `failure`) marks responses with it, and the
//! pipeline's last step (`finish`) reads it.

use std::time::Duration;

use http::Response;

use super::forward::ProxyBody;
use crate::process::ProcessId;

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

pub(super) fn mark(
    mut resp: Response<ProxyBody>,
    f: impl FnOnce(&mut Served),
) -> Response<ProxyBody> {
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
