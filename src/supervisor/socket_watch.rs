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

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::system::listen::{self, Look};

/// How long a child must have listened, silent on its channel, before its socket makes it ready.
pub const SOCKET_GRACE: Duration = Duration::from_secs(1);

/// Set once the child needs no more watching; the watch ends at its next look.
#[derive(Clone, Debug, Default)]
pub struct Settled(Arc<AtomicBool>);

impl Settled {
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Starts watching `pid` (the launcher's child) for a socket on `wanted`; `seen` is called with
/// the holder's pid (the child or a descendant) when it is found.
pub fn start(
    code: Arc<str>,
    pid: u32,
    wanted: SocketAddr,
    settled: Settled,
    seen: impl FnOnce(u32) + Send + 'static,
) {
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
                Ok(Ok(Look::Own { pid: holder })) => {
                    debug!("{code}: pid {holder} listens on {wanted}");
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
