//! At start, before any process is started: is a port the plan needs already held? The public
//! port (`server.port`, on `listenAddress`, every interface by default), each process's port (`internalPort`, `internalPort + n`
//! on `bindAddress`) and the launcher's own endpoint (`adminAddress`). A held one stops the start
//! with one line naming the setting, the port and the holder's pid and command, where otherwise
//! the master would exit on every start with its port taken and the public port never open.
//!
//! Read from `/proc/net/tcp*` (`system::listen`), so nothing is bound to find out; where that
//! can't be read, nothing is checked here and a process that can't listen says so itself.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::Path;

use crate::plan::Plan;
use crate::settings::{paths, Settings};
use crate::system::listen::{self, Other};

/// A port the plan needs, and the setting it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    /// `server.port`, `server.cluster.internalPort (tx1's port, internalPort + 1)`, ...
    pub what: String,
    pub addr: SocketAddr,
}

/// Every port the plan needs at start.
pub fn needs(settings: &Settings, plan: &Plan) -> Vec<Need> {
    // Every interface (v4 and v6) unless `listenAddress` names one: then only a listener on that
    // address, or on every interface, is in the way.
    let public = settings
        .cluster
        .listen_address
        .unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    let mut out = vec![Need {
        what: paths::port.to_string(),
        addr: SocketAddr::new(public, settings.port),
    }];
    for (n, p) in plan.processes.iter().enumerate() {
        let Ok(ip) = p.bind_address.parse::<IpAddr>() else {
            continue;
        };
        let offset = if n == 0 {
            String::new()
        } else {
            format!(", internalPort + {n}")
        };
        out.push(Need {
            what: format!(
                "{} ({}'s port{offset})",
                paths::cluster::internal_port,
                p.code
            ),
            addr: SocketAddr::new(ip, p.port),
        });
    }
    for (what, addr) in [
        (
            paths::cluster::admin_address,
            settings.cluster.admin_address,
        ),
        (
            paths::cluster::agent_address,
            settings.cluster.agent_address,
        ),
    ] {
        out.extend(addr.map(|addr| Need {
            what: what.to_string(),
            addr,
        }));
    }
    out
}

/// One need held by `others`: `server.port 8080 is taken: pid 12 (nginx) listens on 0.0.0.0:8080`.
pub fn describe(need: &Need, others: &[Other]) -> String {
    let who: Vec<String> = others.iter().map(ToString::to_string).collect();
    let port = if need.addr.ip().is_unspecified() {
        need.addr.port().to_string()
    } else {
        need.addr.to_string()
    };
    format!("{} {port} is taken: {}", need.what, who.join("; "))
}

/// Ports the plan needs that are held: one `describe` line each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldPorts(pub Vec<String>);

/// `server.port 8080 is taken: ...; nothing was started`: one line for them all.
impl std::fmt::Display for HeldPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; nothing was started", self.0.join("; "))
    }
}

impl std::error::Error for HeldPorts {}

/// `Err` naming each held port and its holder, or `Ok` when every port is free (or
/// `/proc/net/tcp` can't be read).
pub fn refuse_held(root: &Path, needs: &[Need]) -> Result<(), HeldPorts> {
    let mut held = Vec::new();
    for need in needs {
        match listen::held_by(root, need.addr) {
            Ok(others) if !others.is_empty() => held.push(describe(need, &others)),
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    if held.is_empty() {
        Ok(())
    } else {
        Err(HeldPorts(held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_port_every_process_port_and_the_admin_address_are_needed() {
        let mut settings = Settings::default();
        settings.cluster.admin_address = Some("127.0.0.1:9100".parse().expect("addr"));
        let plan = crate::plan::replan(&settings, 2, String::new()).expect("a plan");
        let needs = needs(&settings, &plan);
        let shown: Vec<String> = needs
            .iter()
            .map(|n| format!("{} {}", n.what, n.addr))
            .collect();
        let base = settings.cluster.internal_port;
        assert_eq!(
            shown,
            [
                format!("server.port [::]:{}", settings.port),
                format!("server.cluster.internalPort (m0's port) 127.0.0.1:{base}"),
                format!(
                    "server.cluster.internalPort (tx1's port, internalPort + 1) 127.0.0.1:{}",
                    base + 1
                ),
                format!(
                    "server.cluster.internalPort (tx2's port, internalPort + 2) 127.0.0.1:{}",
                    base + 2
                ),
                "server.cluster.adminAddress 127.0.0.1:9100".to_string(),
            ]
        );
    }

    #[test]
    fn a_port_held_by_this_process_is_refused_naming_it() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let taken = l.local_addr().expect("addr");
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let free_addr = free.local_addr().expect("addr");
        drop(free);
        let needs = [
            Need {
                what: "server.port".into(),
                addr: SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), taken.port()),
            },
            Need {
                what: "server.cluster.adminAddress".into(),
                addr: free_addr,
            },
        ];
        let err = refuse_held(Path::new("/"), &needs)
            .expect_err("held")
            .to_string();
        let me = format!("pid {} (", std::process::id());
        assert!(
            err.starts_with(&format!("server.port {} is taken: ", taken.port())),
            "{err}"
        );
        assert!(err.contains(&me), "{err}");
        assert!(err.contains(&format!("listens on {taken}")), "{err}");
        assert!(err.ends_with("; nothing was started"), "{err}");
        assert!(!err.contains('\n'));
        assert_eq!(refuse_held(Path::new("/"), &needs[1..]), Ok(()));
        drop(l);
    }

    #[test]
    fn without_proc_net_nothing_is_refused() {
        let root = tempfile::tempdir().expect("dir");
        let need = Need {
            what: "server.port".into(),
            addr: "0.0.0.0:1".parse().expect("addr"),
        };
        assert_eq!(refuse_held(root.path(), &[need]), Ok(()));
    }
}
