//! The new program's side of an in-place upgrade: what it takes over from the state the old
//! one handed over (`upgrade::state`): its listening sockets, the idle client connections, the
//! guardian, the cooldowns and the supervisor's part, each fd adopted (close-on-exec again).

use std::os::fd::{OwnedFd, RawFd};

use crate::process::ProcessId;
use crate::proxy::conn::HandedClient;
use crate::supervisor::ShellHandover;
use crate::upgrade::exec;
use crate::upgrade::state::{capture_instant, Handover};

/// What the new program takes over, read from the state the old one handed over.
pub(super) struct Resume {
    pub(super) handover: Handover,
    /// The idle client connections, adopted at once (`new`) and served once the listener is.
    clients: std::sync::Mutex<Vec<HandedClient>>,
    /// The listeners the program before bound for these settings, adopted at once (`new`):
    /// taken by their address (`take_prebound`); those not taken close with this.
    prebound: std::sync::Mutex<Vec<(std::net::TcpListener, Option<std::net::SocketAddr>)>>,
}

impl Resume {
    /// The state, with its client connections adopted at once: close-on-exec again before any
    /// process can be started (a child holding one would keep it open after the launcher closes
    /// it, and the client would never see the close).
    pub(super) fn new(handover: Handover) -> Resume {
        let clients = std::sync::Mutex::new(Resume::client_conns(&handover));
        let prebound = handover
            .prebound
            .iter()
            .filter_map(|&fd| {
                let l = std::net::TcpListener::from(Resume::fd(fd)?);
                let at = l.local_addr().ok();
                Some((l, at))
            })
            .collect();
        Resume {
            handover,
            clients,
            prebound: std::sync::Mutex::new(prebound),
        }
    }

    /// The listener bound for these settings that `wanted` takes (by its address), once.
    pub(super) fn take_prebound(
        &self,
        wanted: impl Fn(std::net::SocketAddr) -> bool,
    ) -> Option<(std::net::TcpListener, std::net::SocketAddr)> {
        let mut all = self.prebound.lock().unwrap_or_else(|p| p.into_inner());
        let addresses: Vec<_> = all.iter().map(|(_, at)| *at).collect();
        match crate::upgrade::listeners::pick(&addresses, wanted) {
            crate::upgrade::listeners::Pick::Handed(i) => {
                let (l, at) = all.remove(i);
                Some((l, at?))
            }
            crate::upgrade::listeners::Pick::Bind => None,
        }
    }

    /// The idle client connections handed over (once; then none).
    pub(super) fn take_client_conns(&self) -> Vec<HandedClient> {
        std::mem::take(&mut *self.clients.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The state's fd, adopted (close-on-exec again).
    fn fd(fd: RawFd) -> Option<OwnedFd> {
        exec::adopt_fd(fd).ok()
    }

    pub(super) fn client_listener(&self) -> Option<std::net::TcpListener> {
        Resume::fd(self.handover.client_fd).map(std::net::TcpListener::from)
    }

    pub(super) fn admin_listener(&self) -> Option<std::net::TcpListener> {
        Resume::fd(self.handover.admin_fd?).map(std::net::TcpListener::from)
    }

    pub(super) fn agent_listener(&self) -> Option<std::net::TcpListener> {
        Resume::fd(self.handover.agent_fd?).map(std::net::TcpListener::from)
    }

    /// The idle client connections handed over, each with the bytes read ahead of its next
    /// request; one whose fd is not open (or not a socket) is left out.
    fn client_conns(handover: &Handover) -> Vec<HandedClient> {
        let at = capture_instant(
            handover.captured_monotonic_ms,
            crate::ops::notify::monotonic_usec() / 1000,
            crate::clock::now_std(),
        );
        handover
            .client_conns
            .iter()
            .filter_map(|c| {
                let stream = std::net::TcpStream::from(Resume::fd(c.fd)?);
                // Not a connected socket (an fd number reused for something else): closed.
                stream.peer_addr().ok()?;
                let idle = std::time::Duration::from_millis(c.idle_ms);
                Some(HandedClient {
                    stream,
                    unread: bytes::Bytes::from(c.unread.clone()),
                    idle_since: at.checked_sub(idle).unwrap_or(at),
                })
            })
            .collect()
    }

    pub(super) fn control_listener(&self) -> Option<crate::ops::control_socket::Inherited> {
        let fd = Resume::fd(self.handover.control_fd?)?;
        Some(crate::ops::control_socket::Inherited {
            listener: std::os::unix::net::UnixListener::from(fd),
            file: self.handover.control_file,
        })
    }

    /// The run's mark and the guardian, taken over.
    pub(super) fn tree(&self, kill_after: std::time::Duration) {
        let guardian = self
            .handover
            .guardian
            .as_ref()
            .and_then(|g| Some((g, Resume::fd(g.fd)?)));
        crate::tree::run::resume(&self.handover.mark, kill_after, guardian);
    }

    /// The capture's instant on this program's clock.
    fn captured_at(&self) -> std::time::Instant {
        let mono_now = crate::ops::notify::monotonic_usec() / 1000;
        capture_instant(
            self.handover.captured_monotonic_ms,
            mono_now,
            crate::clock::now_std(),
        )
    }

    /// The front door's cooldowns that were running, each with its end on this program's clock.
    pub(super) fn cooldowns(&self) -> Vec<(ProcessId, std::time::Instant)> {
        let at = self.captured_at();
        self.handover
            .cooldowns
            .iter()
            .map(|c| {
                (
                    ProcessId(c.id),
                    at + std::time::Duration::from_millis(c.left_ms),
                )
            })
            .collect()
    }

    /// The supervisor's part, its fds adopted.
    pub(super) fn shell(&self) -> ShellHandover {
        let h = &self.handover;
        let at = self.captured_at();
        let children = h
            .children
            .iter()
            .filter_map(|c| c.resume(Resume::fd))
            .collect();
        ShellHandover {
            at,
            lifecycle: h.lifecycle.clone(),
            children,
            shell: h.shell.clone(),
            mailbox: h.mailbox.clone(),
            keeper: h.keeper.clone(),
        }
    }
}
