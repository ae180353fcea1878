//! The listeners the launcher serves on: bound at start; after an in-place upgrade, taken over
//! by their address from those the program before handed over (the ones in force, and those it
//! bound for the new settings, `upgrade::listeners`), else bound now. After an upgrade a
//! listener for a changed setting that can't be had never stops the launcher (DEC-70): the one
//! in force is kept, closed only once its successor is had (or, on the same port, where the two
//! would overlap, bound again), with a `WARNING`, and the setting
//! in force is written back into the settings the launcher runs with (so `/status`, the next
//! reload and the next upgrade see what is served).

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tracing::{info, warn};

use super::resume::Resume;
use crate::ops::client_port::{self, Bound};
use crate::settings::Settings;
use crate::test_hooks;
use crate::upgrade::listeners::{client_in_force, overlaps, serves_client};

/// The client listener for `server.port` as `listenAddress` asks. After an upgrade, when it
/// can't be had, the one in force is kept (or bound again) and `settings` say so.
pub(super) fn client(settings: &mut Settings, resume: Option<&Resume>) -> std::io::Result<Bound> {
    let (port, listen) = (settings.port, settings.cluster.listen_address);
    let Some(r) = resume else {
        return client_port::bind(listen, port);
    };
    let old = match r.client_listener().and_then(located) {
        Some((l, at)) if serves_client(at, port, listen) => {
            return adopted(l, at, "kept across the upgrade")
        }
        other => other,
    };
    let prebound = r.take_prebound(|at| serves_client(at, port, listen));
    let fault = test_hooks::failing("setup-listen").map_err(std::io::Error::other);
    let (old, closed) = give_way(old, port, prebound.is_some());
    let new = fault.and_then(|()| match prebound {
        Some((l, at)) => adopted(l, at, "bound before the upgrade"),
        None => client_port::bind(listen, port),
    });
    let e = match new {
        Ok(bound) => {
            if let Some(at) = old.map(|(_, at)| at).or(closed) {
                info!("upgrade: server.port or listenAddress changed: closing {at}");
            }
            return Ok(bound);
        }
        Err(e) => e,
    };
    let on = listen.map_or(String::new(), |a| format!(" on {a}"));
    let cannot = format!("server.port {port}{on}: cannot listen: {e}");
    let (kept, at) = match (old, closed) {
        (Some((l, at)), _) => (adopted(l, at, "kept across the upgrade")?, at),
        (None, Some(at)) => {
            let (p, l) = client_in_force(at);
            (client_port::bind(l, p)?, at)
        }
        (None, None) => return Err(e),
    };
    warn!("{cannot}: kept as it was, listening on {at} (a reload tries again)");
    (settings.port, settings.cluster.listen_address) = client_in_force(at);
    Ok(kept)
}

/// The launcher's own endpoint's listener (`None`: `adminAddress` unset, or after an upgrade
/// none to be had). After an upgrade, when the new address can't be had, the one in force is
/// kept (or bound again, or none), and `settings` say so.
pub(super) async fn admin(
    settings: &mut Settings,
    resume: Option<&Resume>,
) -> Result<Option<TcpListener>> {
    let Some(addr) = settings.cluster.admin_address else {
        return Ok(None);
    };
    let cannot = || format!("server.cluster.adminAddress {addr}: cannot listen");
    let Some(r) = resume else {
        return Ok(Some(TcpListener::bind(addr).await.with_context(cannot)?));
    };
    let old = match r.admin_listener().and_then(located) {
        Some((l, at)) if at == addr => return Ok(Some(tokio_listener(l)?)),
        other => other,
    };
    let prebound = r.take_prebound(|at| at == addr);
    let fault = test_hooks::failing("setup-admin").map_err(std::io::Error::other);
    let (old, closed) = give_way(old, addr.port(), prebound.is_some());
    let new = match (fault, prebound) {
        (Err(e), _) => Err(e),
        (Ok(()), Some((l, _))) => tokio_listener(l),
        (Ok(()), None) => TcpListener::bind(addr).await,
    };
    let e = match new {
        Ok(l) => return Ok(Some(l)),
        Err(e) => e,
    };
    let kept = match (old, closed) {
        (Some((l, at)), _) => Some((tokio_listener(l)?, at)),
        (None, Some(at)) => TcpListener::bind(at).await.ok().map(|l| (l, at)),
        (None, None) => None,
    };
    settings.cluster.admin_address = kept.as_ref().map(|(_, at)| *at);
    match kept {
        Some((l, at)) => {
            warn!(
                "{}: {e}: kept as it was, on http://{at} (a reload tries again)",
                cannot()
            );
            Ok(Some(l))
        }
        None => {
            warn!(
                "{}: {e}: running without the launcher's own endpoints (a reload tries again)",
                cannot()
            );
            Ok(None)
        }
    }
}

/// The listener in force, unless the new one is to be bound on its port: the two would overlap
/// (the kernel refuses the new one while the old listens), so the old one is closed first and
/// only its address kept, to be bound again should the new one fail.
fn give_way(
    old: Option<(std::net::TcpListener, SocketAddr)>,
    port: u16,
    prebound: bool,
) -> (
    Option<(std::net::TcpListener, SocketAddr)>,
    Option<SocketAddr>,
) {
    match old {
        Some((l, at)) if !prebound && overlaps(Some(at), port) => {
            drop(l);
            (None, Some(at))
        }
        other => (other, None),
    }
}

/// A listener handed over, with its address (`None`: not a listening TCP socket).
fn located(l: std::net::TcpListener) -> Option<(std::net::TcpListener, SocketAddr)> {
    let at = l.local_addr().ok()?;
    Some((l, at))
}

fn tokio_listener(l: std::net::TcpListener) -> std::io::Result<TcpListener> {
    l.set_nonblocking(true)?;
    TcpListener::from_std(l)
}

fn adopted(l: std::net::TcpListener, at: SocketAddr, how: &str) -> std::io::Result<Bound> {
    Ok(Bound {
        listener: tokio_listener(l)?,
        place: format!("{at} ({how})"),
        note: None,
    })
}
