//! Where the launcher reaches a process told to listen on `bindAddress` (ROLE-9, DEC-40): the
//! address itself, loopback for `0.0.0.0` or `::`, or, for a host name, every address the system
//! resolves it to, in the resolver's order. A process resolves the name for itself (Node 17 and
//! later take the first address the system lists, `::1` or `127.0.0.1`; older Node and other
//! servers may take another), so the launcher can't know which one it listens on: it tries them
//! in turn and keeps the one that answers (`proxy::forward::pool`). Used by the settings (a name
//! that resolves to nothing is refused at start) and the plan.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};

/// The addresses to try, first the one to try first; never empty. `Err`: why a name gives none.
pub(crate) fn addresses(bind: &str) -> Result<Vec<IpAddr>, String> {
    if let Ok(ip) = bind.parse::<IpAddr>() {
        return Ok(vec![connectable(ip)]);
    }
    // The system's resolver, as the processes use: /etc/hosts for `localhost` and the names an
    // operator puts there. Port 0: only the addresses are wanted.
    let found = (bind, 0)
        .to_socket_addrs()
        .map_err(|e| format!("cannot be resolved: {e}"))?;
    let mut ips: Vec<IpAddr> = Vec::new();
    for ip in found.map(|a| connectable(a.ip())) {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    if ips.is_empty() {
        return Err("resolves to no address".to_string());
    }
    Ok(ips)
}

/// A process listening on every interface is reached on loopback.
fn connectable(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_itself_and_every_interface_is_loopback() {
        // spec: ROLE-9, DEC-40
        let one = |s: &str| addresses(s).unwrap();
        assert_eq!(one("10.0.0.5"), vec!["10.0.0.5".parse::<IpAddr>().unwrap()]);
        assert_eq!(one("0.0.0.0"), vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
        assert_eq!(one("::"), vec![IpAddr::V6(Ipv6Addr::LOCALHOST)]);
        assert_eq!(one("::1"), vec![IpAddr::V6(Ipv6Addr::LOCALHOST)]);
    }

    #[test]
    fn a_name_gives_what_the_system_resolves_it_to_once_each() {
        // spec: DEC-40. `localhost` is in every /etc/hosts; whether it gives ::1 too is the
        // host's, so only what it must give is asserted.
        let ips = addresses("localhost").expect("localhost resolves");
        assert!(ips.iter().all(|ip| ip.is_loopback()), "{ips:?}");
        let mut unique = ips.clone();
        unique.dedup();
        assert_eq!(unique.len(), ips.len(), "{ips:?}");
    }

    #[test]
    fn a_name_that_resolves_to_nothing_says_so() {
        // spec: DEC-40. `.invalid` never resolves (RFC 6761).
        let e = addresses("no-such-host.invalid").unwrap_err();
        assert!(e.contains("resolve"), "{e}");
    }
}
