//! The listeners the launcher serves on: bound at start; after an in-place upgrade, taken over
//! by their address from those the program before handed over (the ones in force, and those it
//! bound for the new settings, `upgrade::listeners`), else bound now. After an upgrade a
//! listener for a changed setting that can't be had never stops the launcher (DEC-70): the one
//! in force is kept, closed only once its successor is had, with a `WARNING`, and the setting
//! in force is written back into the settings the launcher runs with (so `/status`, the next
//! reload and the next upgrade see what is served).

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tracing::{info, warn};

use super::resume::Resume;
use crate::ops::client_port::{self, Bound};
use crate::settings::Settings;
use crate::supervisor::test_hook;
use crate::upgrade::listeners::{client_in_force, serves_client};

/// The client listener for `server.port` as `listenAddress` asks. After an upgrade, when it
/// can't be had, the one in force is kept and `settings` say so.
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
    let wanted = |at| serves_client(at, port, listen);
    let new = test_hook::failing("setup-listen")
        .map_err(std::io::Error::other)
        .and_then(|()| match r.take_prebound(wanted) {
            Some((l, at)) => adopted(l, at, "bound before the upgrade"),
            None => client_port::bind(listen, port),
        });
    match (new, old) {
        (Ok(bound), old) => {
            if let Some((_, at)) = old {
                info!("upgrade: server.port or listenAddress changed: closing {at}");
            }
            Ok(bound)
        }
        (Err(e), Some((l, at))) => {
            let on = listen.map_or(String::new(), |a| format!(" on {a}"));
            warn!(
                "server.port {port}{on}: cannot listen: {e}: kept as it was, listening on {at} \
                 (a reload tries again)"
            );
            (settings.port, settings.cluster.listen_address) = client_in_force(at);
            adopted(l, at, "kept across the upgrade")
        }
        (Err(e), None) => Err(e),
    }
}

/// The launcher's own endpoint's listener (`None`: `adminAddress` unset, or after an upgrade
/// none to be had). After an upgrade, when the new address can't be had, the one in force is
/// kept (or none), and `settings` say so.
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
    let old = r.admin_listener().and_then(located);
    let new = match old {
        Some((l, at)) if at == addr => return Ok(Some(tokio_listener(l)?)),
        _ => match test_hook::failing("setup-admin").map_err(std::io::Error::other) {
            Err(e) => Err(e),
            Ok(()) => match r.take_prebound(|at| at == addr) {
                Some((l, _)) => tokio_listener(l),
                None => TcpListener::bind(addr).await,
            },
        },
    };
    match (new, old) {
        (Ok(l), _) => Ok(Some(l)),
        (Err(e), Some((l, at))) => {
            warn!(
                "{}: {e}: kept as it was, on http://{at} (a reload tries again)",
                cannot()
            );
            settings.cluster.admin_address = Some(at);
            Ok(Some(tokio_listener(l)?))
        }
        (Err(e), None) => {
            warn!(
                "{}: {e}: running without the launcher's own endpoints (a reload tries again)",
                cannot()
            );
            settings.cluster.admin_address = None;
            Ok(None)
        }
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
