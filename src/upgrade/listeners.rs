//! Which listening sockets an in-place upgrade hands over, and which of them the new program
//! serves on (DEC-70). A changed `server.port`, `listenAddress` or `adminAddress` is bound by
//! the old program before anything is given up, so a port another program holds refuses the
//! upgrade (one line, nothing changed) instead of stopping the new program after the `execve`;
//! the new program finds each listener it needs among those handed over by its address. Should
//! it still have to bind one and fail (a state from a program that did not bind it), the
//! listener in force is kept and the setting is recorded as it is in force. One move can't be
//! bound first: the same port on another address (`listenAddress` `127.0.0.1` to every
//! interface, say) overlaps the listener in force, which the kernel refuses while it listens;
//! the new program then closes the old one first and, should the new one fail, binds the old
//! address again. Pure: addresses in, choices out; the shell binds, adopts and closes.

use std::net::{IpAddr, SocketAddr};

/// Whether a listener at `at` is `server.port` as `listen` asks it (`None`: every interface,
/// `::` with IPv4 mapped, or `0.0.0.0` on a host without IPv6).
pub(crate) fn serves_client(at: SocketAddr, port: u16, listen: Option<IpAddr>) -> bool {
    at.port() == port && listen.map_or(at.ip().is_unspecified(), |a| a == at.ip())
}

/// The client port's setting as a listener at `at` has it in force: its port, and its address
/// (`None` for every interface).
pub(crate) fn client_in_force(at: SocketAddr) -> (u16, Option<IpAddr>) {
    let ip = at.ip();
    (at.port(), (!ip.is_unspecified()).then_some(ip))
}

/// What the old program binds for the new settings before the `execve`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ToBind {
    /// `server.port` and `listenAddress`, when the listener in force is not them and is on
    /// another port.
    pub client: Option<(u16, Option<IpAddr>)>,
    /// `adminAddress`, when set, not the one in force, and on another port.
    pub admin: Option<SocketAddr>,
}

/// Whether a listener for `port` would overlap the one in force at `at` (the same port): then
/// it can't be bound while that one listens, and the old one goes first.
pub(crate) fn overlaps(at: Option<SocketAddr>, port: u16) -> bool {
    at.is_some_and(|a| a.port() == port)
}

/// What the settings to come need bound beyond the listeners in force (`client_at`,
/// `admin_at`: where they are).
pub(crate) fn to_bind(
    client_at: Option<SocketAddr>,
    admin_at: Option<SocketAddr>,
    port: u16,
    listen: Option<IpAddr>,
    admin: Option<SocketAddr>,
) -> ToBind {
    ToBind {
        client: (!client_at.is_some_and(|at| serves_client(at, port, listen))
            && !overlaps(client_at, port))
        .then_some((port, listen)),
        admin: admin.filter(|&a| admin_at != Some(a) && !overlaps(admin_at, a.port())),
    }
}

/// The new program's choice for one listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pick {
    /// The one at this index among those handed over.
    Handed(usize),
    /// None is: bind it (and should that fail after an upgrade, keep the one in force).
    Bind,
}

/// Among the listeners handed over (their addresses), the first one `wanted` takes.
pub(crate) fn pick(handed: &[Option<SocketAddr>], wanted: impl Fn(SocketAddr) -> bool) -> Pick {
    handed
        .iter()
        .position(|at| at.is_some_and(&wanted))
        .map_or(Pick::Bind, Pick::Handed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().expect("ip"))
    }

    #[test]
    fn the_client_listener_is_the_setting_when_port_and_address_are() {
        // spec: DEC-70
        assert!(serves_client(a("[::]:3000"), 3000, None));
        assert!(serves_client(a("0.0.0.0:3000"), 3000, None));
        assert!(!serves_client(a("[::]:3000"), 3001, None));
        assert!(serves_client(a("127.0.0.1:3000"), 3000, ip("127.0.0.1")));
        // Every interface is not loopback alone, either way.
        assert!(!serves_client(a("127.0.0.1:3000"), 3000, None));
        assert!(!serves_client(a("[::]:3000"), 3000, ip("127.0.0.1")));
        assert!(serves_client(a("[::]:3000"), 3000, ip("::")));
    }

    #[test]
    fn the_setting_in_force_is_read_back_from_the_listener() {
        assert_eq!(client_in_force(a("[::]:3000")), (3000, None));
        assert_eq!(client_in_force(a("0.0.0.0:80")), (80, None));
        assert_eq!(client_in_force(a("127.0.0.1:81")), (81, ip("127.0.0.1")));
        // What is read back is served by the listener it was read from.
        for at in ["[::]:3000", "0.0.0.0:80", "127.0.0.1:81", "[::1]:82"] {
            let (port, listen) = client_in_force(a(at));
            assert!(serves_client(a(at), port, listen), "{at}");
        }
    }

    #[test]
    fn only_what_changed_is_bound_before_the_execve() {
        // spec: DEC-70
        let (client, admin) = (Some(a("[::]:3000")), Some(a("127.0.0.1:9000")));
        let same = to_bind(client, admin, 3000, None, admin);
        assert_eq!(same, ToBind::default());
        let port = to_bind(client, admin, 3001, None, admin);
        assert_eq!(port.client, Some((3001, None)));
        assert_eq!(port.admin, None);
        // The same port on another address overlaps the listener in force: not bound first.
        let listen = to_bind(client, admin, 3000, ip("127.0.0.1"), admin);
        assert_eq!(listen.client, None);
        let wider = to_bind(client, admin, 3000, None, Some(a("0.0.0.0:9000")));
        assert_eq!(wider.admin, None);
        assert!(overlaps(client, 3000) && !overlaps(client, 3001) && !overlaps(None, 3000));
        let moved = to_bind(client, admin, 3000, None, Some(a("127.0.0.1:9001")));
        assert_eq!(moved.admin, Some(a("127.0.0.1:9001")));
        assert_eq!(moved.client, None);
        // Turned on: bound; turned off: nothing to bind.
        assert_eq!(
            to_bind(client, None, 3000, None, admin).admin,
            Some(a("127.0.0.1:9000"))
        );
        assert_eq!(to_bind(client, admin, 3000, None, None).admin, None);
    }

    #[test]
    fn the_new_program_takes_a_handed_listener_by_its_address_else_binds() {
        // spec: DEC-70
        let handed = [Some(a("[::]:3000")), None, Some(a("[::]:3001"))];
        assert_eq!(
            pick(&handed, |at| serves_client(at, 3000, None)),
            Pick::Handed(0)
        );
        assert_eq!(
            pick(&handed, |at| serves_client(at, 3001, None)),
            Pick::Handed(2)
        );
        assert_eq!(
            pick(&handed, |at| serves_client(at, 3002, None)),
            Pick::Bind
        );
        assert_eq!(pick(&[], |_| true), Pick::Bind);
    }
}
