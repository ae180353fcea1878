//! Watches a starting child for its own listening socket, so a server that never speaks the IPC
//! channel is still found ready. Looks at 50 ms, then at doubling intervals up to 1 s, until the
//! child's process tree listens on its address and port, the child is settled (it spoke on its
//! channel, or exited), or `/proc` can't be read. A socket on the port held by any other process
//! never counts (LAUNCH-4) and is named in one WARNING per start.
//!
//! The socket found is reported only after [`SOCKET_GRACE`] with the child still unsettled: a
//! child that speaks the protocol is ready only on its `ready` (LAUNCH-3, DEC-27), and one that
//! sends `ready` as it begins to listen may be seen listening a moment before its message
//! arrives. The shell checks again, on the report, that nothing came on the channel.
//!
//! A server found listening on every interface (`0.0.0.0`, `::`) when told to listen on
//! `bindAddress` alone can be reached around the launcher, bypassing its queue and fast lane: one
//! WARNING per process start names it, whether the socket was seen here or the process said
//! `ready` on its channel (then [`check_exposure`] looks once more).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::system::listen::{self, Look};

/// How long a child must have listened, silent on its channel, before its socket makes it ready.
pub const SOCKET_GRACE: Duration = Duration::from_secs(1);

/// Set once the child needs no more watching; the watch ends at its next look. It also holds
/// whether the child's exposure was checked, so one process start gets one warning at most.
#[derive(Clone, Debug, Default)]
pub struct Settled(Arc<(AtomicBool, AtomicBool)>);

impl Settled {
    pub fn set(&self) {
        self.0 .0.store(true, Ordering::Release);
    }

    pub fn is_set(&self) -> bool {
        self.0 .0.load(Ordering::Acquire)
    }

    /// True the first time only: the caller checks the exposure.
    fn first_exposure_check(&self) -> bool {
        !self.0 .1.swap(true, Ordering::AcqRel)
    }
}

/// Where a child was told to listen and where the launcher reaches it.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    /// `bindAddress`; `None` when it is not an IP address (then nothing is checked).
    pub bind: Option<IpAddr>,
    pub wanted: SocketAddr,
}

/// Starts watching `pid` (the launcher's child) for a socket on `place.wanted`; `seen` is called
/// with the holder's pid (the child or a descendant) when it is found.
pub fn start(
    code: Arc<str>,
    pid: u32,
    place: Place,
    settled: Settled,
    seen: impl FnOnce(u32) + Send + 'static,
) {
    let wanted = place.wanted;
    tokio::spawn(async move {
        let mut interval = None;
        let mut warned = false;
        loop {
            let wait = listen::next_interval(interval);
            interval = Some(wait);
            tokio::time::sleep(wait).await;
            if settled.is_set() {
                return;
            }
            // Reading /proc blocks (briefly): off the runtime's worker.
            let name_others = !warned;
            let looked = tokio::task::spawn_blocking(move || {
                listen::look(Path::new("/"), pid, wanted, name_others)
            })
            .await;
            if settled.is_set() {
                return;
            }
            match looked {
                Ok(Ok(Look::Own { pid: holder, addr })) => {
                    debug!("{code}: pid {holder} listens on {wanted}");
                    if settled.first_exposure_check() {
                        warn_if_exposed(&code, holder, SocketAddr::new(addr, wanted.port()), place);
                    }
                    tokio::time::sleep(SOCKET_GRACE).await;
                    if !settled.is_set() {
                        seen(holder);
                    }
                    return;
                }
                Ok(Ok(Look::Others(others))) if !warned => {
                    warned = true;
                    let who: Vec<String> = others.iter().map(ToString::to_string).collect();
                    warn!(
                        "{code}: its port {} is taken by another process: {}; not counting that \
                         as {code} ready (an old process still shutting down, or another program)",
                        wanted.port(),
                        who.join("; ")
                    );
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    info!(
                        "{code}: cannot look for its listening socket ({e}); only its channel \
                         can say it is ready"
                    );
                    return;
                }
                Err(_) => return,
            }
        }
    });
}

/// Looks, once the child has said `ready` on its channel, whether it listens on every interface
/// (a few looks over about a second, should the socket show a moment after the message).
pub fn check_exposure(code: Arc<str>, pid: u32, place: Place, settled: Settled) {
    if place.bind.is_none_or(|b| b.is_unspecified()) || !settled.first_exposure_check() {
        return;
    }
    tokio::spawn(async move {
        let mut interval = None;
        for _ in 0..5 {
            let wanted = place.wanted;
            let looked = tokio::task::spawn_blocking(move || {
                listen::look(Path::new("/"), pid, wanted, false)
            })
            .await;
            if let Ok(Ok(Look::Own { pid: holder, addr })) = looked {
                warn_if_exposed(&code, holder, SocketAddr::new(addr, wanted.port()), place);
                return;
            }
            let wait = listen::next_interval(interval);
            interval = Some(wait);
            tokio::time::sleep(wait).await;
        }
    });
}

fn warn_if_exposed(code: &str, holder: u32, bound: SocketAddr, place: Place) {
    let Some(bind) = place.bind else { return };
    if listen::exposed(bound.ip(), bind) {
        let command = listen::command_of(Path::new("/"), holder);
        warn!(
            "{code}: pid {holder} ({command}) listens on {bound}, every interface, not only \
             server.cluster.bindAddress {bind}: it can be reached directly, bypassing the \
             launcher's queue and fast lane; make it listen on {bind} alone"
        );
    }
}
