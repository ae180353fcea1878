//! HAProxy in front of one or many fhircluster hosts, as `fhircluster print haproxy` prints it
//! (haproxy.md explains each part; `tests/ops_haproxy.rs` runs it): a whole `haproxy.cfg`
//! routing as nginx.md's many-hosts configuration does, with `/readyz` on each host's
//! `adminAddress` as the health check and each host's weight from its agent (`agentAddress`,
//! DEC-89). Pure: the hosts and the tx endpoints in, the text out.

use std::fmt::Write;

use super::hosts::{cache_id_regex, Hosts};

/// What the configuration is made from.
pub(super) struct Farm<'a> {
    /// HAProxy's `bind` argument (`:80`, `10.0.0.1:443 ssl crt /etc/haproxy/site.pem`).
    pub listen: &'a str,
    pub hosts: &'a Hosts,
    /// `modules.tx.endpoints` (`/r4`).
    pub endpoints: &'a [String],
    /// The master's instance code (`modules.tx.instanceCode`, `m0`), after each prefix.
    pub master_code: &'a str,
}

/// Why a host can't go in: HAProxy's health check needs its `adminAddress`.
pub(super) fn check(hosts: &Hosts) -> Result<(), String> {
    match hosts.hosts.iter().find(|h| h.admin.is_none()) {
        Some(h) => Err(format!(
            "host {:?}: no admin port for the health check (/readyz): set \
             server.cluster.adminAddress, or give --host {}={},admin=PORT",
            h.name(),
            h.prefix,
            h.addr
        )),
        None => Ok(()),
    }
}

/// The configuration's text.
pub(super) fn render(f: &Farm<'_>) -> String {
    let mut out = String::from(HEAD);
    let _ = writeln!(out, "frontend fhir\n    bind {}", f.listen);
    out.push_str(FRONTEND_HEADERS);
    out.push_str(
        "    # Rules 1 and 2 (cluster.md, Routing): the master's paths inside the tx endpoints, \
         and\n    # everything outside them, to the designated master host.\n",
    );
    for e in f.endpoints {
        let _ = writeln!(out, "    acl tx_path path {e}");
        let _ = writeln!(out, "    acl tx_path path_beg {e}/");
        let _ = writeln!(
            out,
            "    acl master_path path_reg '^{e}/(.*(\\$|%24)closure|syndication|info/)'"
        );
    }
    out.push_str(
        "    use_backend fhir_tx if tx_path !master_path\n    default_backend fhir_master\n\n",
    );
    let master = &f.hosts.hosts[f.hosts.master];
    out.push_str("backend fhir_master\n    option httpchk GET /readyz\n");
    let _ = writeln!(
        out,
        "    server {} {}{}\n",
        master.name(),
        master.addr,
        check_of(master)
    );
    out.push_str(TX_BACKEND);
    for h in &f.hosts.hosts {
        let _ = writeln!(
            out,
            "    use-server {} if {{ req.hdr(x-cache-id) -m reg '{}' }}",
            h.name(),
            cache_id_regex(&h.prefix, f.master_code)
        );
    }
    for h in &f.hosts.hosts {
        let agent = h.agent.map_or_else(
            || " # no agentAddress: a fixed weight".to_string(),
            |p| format!(" agent-check agent-port {p} agent-inter 2s"),
        );
        let _ = writeln!(
            out,
            "    server {} {} weight 100{}{agent}",
            h.name(),
            h.addr,
            check_of(h)
        );
    }
    out
}

/// A server's health check: `/readyz` on its admin port, every 2 s, down after 3 failures.
fn check_of(h: &super::hosts::Host) -> String {
    h.admin.map_or_else(String::new, |p| {
        format!(" check port {p} inter 2s fall 3 rise 2")
    })
}

const HEAD: &str = "\
# HAProxy in front of fhircluster (haproxy.md), as printed by `fhircluster print haproxy`.
# A whole haproxy.cfg; check it, then reload HAProxy:
#   haproxy -c -f /etc/haproxy/haproxy.cfg && systemctl reload haproxy
global
    maxconn 4096

defaults
    mode http
    option http-keep-alive
    # X-Forwarded-For: fhircluster appends the address it sees to the client's chain.
    option forwardfor
    timeout connect 5s
    timeout client 90s
    # Longer than upstreamTimeoutSeconds (60): fhircluster answers 504 itself first.
    timeout server 90s
    timeout http-request 30s
    timeout http-keep-alive 10s
    timeout check 5s
    # Resend only what reached no host (its connection failed); the last try goes to another
    # host. Never on a status or a timeout: a process may have had the request (nginx.md,
    # Retries).
    retries 2
    retry-on conn-failure
    option redispatch 1

";

const FRONTEND_HEADERS: &str = "    http-request set-header X-Forwarded-Proto https if { ssl_fc }
    http-request set-header X-Forwarded-Proto http unless { ssl_fc }
    http-request set-header X-Forwarded-Host %[req.hdr(host)]
";

const TX_BACKEND: &str = "\
# Rules 3 and 4, one level up: a cache-id to the host whose prefix begins it, any other tx
# request to the host with the fewest connections for its weight (its agent's free share).
backend fhir_tx
    balance leastconn
    option httpchk GET /readyz
    # A cache-id's request goes to its host even while that host drains, is at its lowest
    # weight or fails its health check (its lame duck): the cache lives there (option
    # persist; use-server is the only persistence here). A host that can't be reached: the
    # retry goes to another host (option redispatch), which answers cache-id-unknown.
    option persist
";

#[cfg(test)]
mod tests {
    use super::super::hosts::Host;
    use super::*;

    fn host(prefix: &str, addr: &str, agent: Option<u16>) -> Host {
        Host {
            prefix: prefix.into(),
            addr: addr.into(),
            admin: Some(9100),
            agent,
        }
    }

    #[test]
    fn every_host_is_a_server_with_its_check_agent_and_cache_id_rule() {
        let hosts = Hosts {
            hosts: vec![
                host("a", "10.0.0.11:3000", Some(9101)),
                host("ab", "10.0.0.12:3000", None),
            ],
            master: 1,
        };
        let text = render(&Farm {
            listen: ":80",
            hosts: &hosts,
            endpoints: &["/r4".to_string(), "/r5".to_string()],
            master_code: "m0",
        });
        for line in [
            "    bind :80\n",
            "    acl tx_path path_beg /r5/\n",
            "    acl master_path path_reg '^/r4/(.*(\\$|%24)closure|syndication|info/)'\n",
            "backend fhir_master\n    option httpchk GET /readyz\n    server ab 10.0.0.12:3000 check port 9100",
            "    use-server a if { req.hdr(x-cache-id) -m reg '^a(m0|tx[0-9]+)\\.' }\n",
            "    use-server ab if { req.hdr(x-cache-id) -m reg '^ab(m0|tx[0-9]+)\\.' }\n",
            "    server a 10.0.0.11:3000 weight 100 check port 9100 inter 2s fall 3 rise 2 agent-check agent-port 9101 agent-inter 2s\n",
            "    server ab 10.0.0.12:3000 weight 100 check port 9100 inter 2s fall 3 rise 2 # no agentAddress",
            "    option persist\n",
            "    retry-on conn-failure\n",
            "    balance leastconn\n",
        ] {
            assert!(text.contains(line), "{line:?} in:\n{text}");
        }
    }

    #[test]
    fn a_host_without_an_admin_port_is_refused_naming_the_setting() {
        let mut h = host("a", "h:3000", None);
        h.admin = None;
        let e = check(&Hosts {
            hosts: vec![h],
            master: 0,
        })
        .expect_err("no admin port");
        assert!(
            e.contains("adminAddress") && e.contains("admin=PORT"),
            "{e}"
        );
    }
}
