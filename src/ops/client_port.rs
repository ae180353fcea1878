//! Where `server.port` listens (`server.cluster.listenAddress`). Unset, it is every interface,
//! IPv6 and IPv4 alike, as Node's `listen(port)` in `cluster.js` is: one socket on `::` with
//! `IPV6_V6ONLY` off, which takes IPv4 clients as mapped addresses. On a host without IPv6 that
//! socket can't be had, and it is `0.0.0.0` alone, said in one line. An address given is used as
//! it is (`::` as dual-stack, as Node does; `0.0.0.0` is IPv4 only), so an operator whose nginx is
//! on the same host can keep the port on `127.0.0.1`.
//!
//! The choices (`plan`, `ipv6_missing`, `describe`) are pure; `bind` makes the socket.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use std::os::fd::AsRawFd;

use tokio::net::{TcpListener, TcpSocket};

/// What to listen on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// `::` with `IPV6_V6ONLY` off; `fallback`: `0.0.0.0` if the host has no IPv6.
    DualStack { fallback: bool },
    /// This address only (`0.0.0.0`: every IPv4 interface).
    Only(IpAddr),
}

/// The plan for `listenAddress` (None: unset).
pub fn plan(listen: Option<IpAddr>) -> Plan {
    match listen {
        None => Plan::DualStack { fallback: true },
        Some(IpAddr::V6(a)) if a.is_unspecified() => Plan::DualStack { fallback: false },
        Some(a) => Plan::Only(a),
    }
}

/// Whether a failure to make or bind the IPv6 socket means the host has no IPv6 (so IPv4 alone
/// will do), rather than a problem the operator must hear about (the port taken, say).
pub fn ipv6_missing(errno: Option<i32>) -> bool {
    matches!(
        errno,
        Some(libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT | libc::EADDRNOTAVAIL)
    )
}

/// Where it listens, for the start line: `every interface (IPv6 and IPv4)`, `127.0.0.1` ...
pub fn describe(plan: Plan, fell_back: bool) -> String {
    match (plan, fell_back) {
        (Plan::DualStack { .. }, false) => "every interface (IPv6 and IPv4)".to_string(),
        (Plan::DualStack { .. }, true) => "every interface (IPv4 only)".to_string(),
        (Plan::Only(IpAddr::V4(a)), _) if a.is_unspecified() => {
            "0.0.0.0 (every IPv4 interface)".to_string()
        }
        (Plan::Only(a), _) => a.to_string(),
    }
}

/// The listening socket, and the line saying where it listens (with the reason if IPv6 was not
/// to be had).
pub struct Bound {
    pub listener: TcpListener,
    pub place: String,
    pub note: Option<String>,
}

/// Binds `server.port` as `listen` asks.
pub fn bind(listen: Option<IpAddr>, port: u16) -> io::Result<Bound> {
    let p = plan(listen);
    match p {
        Plan::Only(a) => Ok(Bound {
            listener: listen_on(SocketAddr::new(a, port), false)?,
            place: describe(p, false),
            note: None,
        }),
        Plan::DualStack { fallback } => {
            match listen_on(
                SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
                true,
            ) {
                Ok(listener) => Ok(Bound {
                    listener,
                    place: describe(p, false),
                    note: None,
                }),
                Err(e) if fallback && ipv6_missing(e.raw_os_error()) => {
                    let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
                    Ok(Bound {
                        listener: listen_on(v4, false)?,
                        place: describe(p, true),
                        note: Some(format!(
                            "this host has no IPv6 ({e}): server.port listens on IPv4 alone"
                        )),
                    })
                }
                Err(e) => Err(e),
            }
        }
    }
}

/// A listening socket on `addr`, as `TcpListener::bind` makes one (`SO_REUSEADDR`, backlog
/// 1024), with `IPV6_V6ONLY` off when `dual_stack`.
fn listen_on(addr: SocketAddr, dual_stack: bool) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    if dual_stack {
        // The kernel's default (net.ipv6.bindv6only) may be either; say it.
        // The fd is the socket's own, open for this call.
        crate::system::ffi::set_ipv6_only(socket.as_raw_fd(), false)?;
    }
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_is_dual_stack_with_a_fallback_and_an_address_is_itself() {
        assert_eq!(plan(None), Plan::DualStack { fallback: true });
        assert_eq!(
            plan(Some("::".parse().expect("ip"))),
            Plan::DualStack { fallback: false }
        );
        for a in ["0.0.0.0", "127.0.0.1", "::1", "10.1.2.3"] {
            let ip: IpAddr = a.parse().expect("ip");
            assert_eq!(plan(Some(ip)), Plan::Only(ip), "{a}");
        }
    }

    #[test]
    fn only_a_missing_ipv6_falls_back() {
        assert!(ipv6_missing(Some(libc::EAFNOSUPPORT)));
        assert!(ipv6_missing(Some(libc::EADDRNOTAVAIL)));
        assert!(!ipv6_missing(Some(libc::EADDRINUSE)));
        assert!(!ipv6_missing(Some(libc::EACCES)));
        assert!(!ipv6_missing(None));
    }

    #[test]
    fn the_start_line_says_where() {
        assert_eq!(
            describe(plan(None), false),
            "every interface (IPv6 and IPv4)"
        );
        assert_eq!(describe(plan(None), true), "every interface (IPv4 only)");
        assert_eq!(
            describe(plan(Some("0.0.0.0".parse().expect("ip"))), false),
            "0.0.0.0 (every IPv4 interface)"
        );
        assert_eq!(
            describe(plan(Some("127.0.0.1".parse().expect("ip"))), false),
            "127.0.0.1"
        );
    }
}
