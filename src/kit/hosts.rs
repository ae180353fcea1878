//! The hosts a balancer's printed configuration names (`--host PREFIX=ADDRESS[,admin=PORT]
//! [,agent=PORT]`, repeated): each host's `hostPrefix`, where its fhircluster's `server.port`
//! is reached, and its `adminAddress` and `agentAddress` ports (from the printing host's
//! settings unless given). The first is the designated master host unless `--master-host` names
//! another. Parsed and checked here, pure; `nginx` and `haproxy` render them.

use crate::settings::Settings;

/// One host behind the balancer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Host {
    /// Its `hostPrefix`: letters and digits, before every instance code of that host.
    pub prefix: String,
    /// `address:port` of its `server.port`, as the balancer reaches it.
    pub addr: String,
    /// Its `adminAddress` port (`/readyz`, the health check).
    pub admin: Option<u16>,
    /// Its `agentAddress` port (HAProxy's agent-check).
    pub agent: Option<u16>,
}

impl Host {
    /// Its server's name in a configuration: its prefix (`fhircluster` for a lone host without
    /// one).
    pub fn name(&self) -> &str {
        if self.prefix.is_empty() {
            "fhircluster"
        } else {
            &self.prefix
        }
    }
}

/// The hosts and which of them is the designated master host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hosts {
    pub hosts: Vec<Host>,
    /// Index into `hosts`.
    pub master: usize,
}

/// `a=10.0.0.11:3000,admin=9100,agent=9101`; `admin`/`agent` default to `defaults`'.
pub(crate) fn parse_host(spec: &str, defaults: (Option<u16>, Option<u16>)) -> Result<Host, String> {
    let bad = |why: &str| format!("--host {spec:?}: {why}");
    let mut parts = spec.split(',');
    let (prefix, addr) = parts
        .next()
        .and_then(|p| p.split_once('='))
        .ok_or_else(|| bad("give PREFIX=ADDRESS:PORT, e.g. a=10.0.0.11:3000"))?;
    check_prefix(prefix).map_err(|why| bad(&why))?;
    check_addr(addr).map_err(|why| bad(&why))?;
    let (mut admin, mut agent) = defaults;
    for part in parts {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| bad("after the address: admin=PORT or agent=PORT"))?;
        let port = value
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad(&format!("{key}={value}: a port 1-65535")))?;
        match key {
            "admin" => admin = Some(port),
            "agent" => agent = Some(port),
            _ => return Err(bad(&format!("{key}: only admin=PORT or agent=PORT"))),
        }
    }
    Ok(Host {
        prefix: prefix.to_string(),
        addr: addr.to_string(),
        admin,
        agent,
    })
}

/// Every `--host` given (at least one), each prefix once, and the master host among them.
pub(crate) fn parse(
    specs: &[String],
    master_host: Option<&str>,
    s: &Settings,
) -> Result<Hosts, String> {
    let defaults = (
        s.cluster.admin_address.map(|a| a.port()),
        s.cluster.agent_address.map(|a| a.port()),
    );
    let hosts = specs
        .iter()
        .map(|spec| parse_host(spec, defaults))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, h) in hosts.iter().enumerate() {
        if hosts[..i].iter().any(|o| o.prefix == h.prefix) {
            return Err(format!("--host: the prefix {:?} is given twice", h.prefix));
        }
    }
    let master = match master_host {
        None => 0,
        Some(p) => hosts
            .iter()
            .position(|h| h.prefix == p)
            .ok_or_else(|| format!("--master-host {p:?}: no --host has that prefix"))?,
    };
    if hosts.is_empty() {
        return Err("no --host given".to_string());
    }
    Ok(Hosts { hosts, master })
}

/// As `hostPrefix` is: 1 or more ASCII letters and digits (each host's must be set to tell
/// its cache-ids apart).
fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "the prefix {prefix:?} must be the host's hostPrefix: letters and digits"
        ));
    }
    Ok(())
}

/// `host:port` or `[v6]:port`, a name or an address, nothing a configuration line could read
/// otherwise.
fn check_addr(addr: &str) -> Result<(), String> {
    let port_ok = addr
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    let chars_ok = addr
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".-:[]_".contains(c));
    if !port_ok || !chars_ok {
        return Err(format!(
            "the address {addr:?} must be HOST:PORT (server.port on that host), e.g. 10.0.0.11:3000"
        ));
    }
    Ok(())
}

/// The regular expression (both nginx's and HAProxy's) for the cache-ids a host issued: its
/// prefix, then a process code (`master_code`, the master's instance code, or `tx<n>`), then
/// `.`. The process code right after the prefix keeps prefixes that begin alike (`a`, `ab`)
/// from catching each other's ids.
pub(crate) fn cache_id_regex(prefix: &str, master_code: &str) -> String {
    format!("^{prefix}({master_code}|tx[0-9]+)\\.")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regex_matches(re: &str, id: &str) -> bool {
        // The regex's shape is fixed: ^P(M|tx[0-9]+)\.
        let Some(rest) = re.strip_prefix('^') else {
            return false;
        };
        let (prefix, alt) = rest.split_once('(').unwrap_or_default();
        let master = alt.split('|').next().unwrap_or_default();
        let Some(after) = id.strip_prefix(prefix) else {
            return false;
        };
        let (code, _) = after.split_once('.').unwrap_or(("", ""));
        code == master
            || code
                .strip_prefix("tx")
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    }

    #[test]
    fn prefixes_that_begin_alike_never_catch_each_others_ids() {
        let a = cache_id_regex("a", "m0");
        let ab = cache_id_regex("ab", "m0");
        assert_eq!(a, "^a(m0|tx[0-9]+)\\.");
        assert!(regex_matches(&a, "atx1.mhp4x2k9.4f0c"));
        assert!(regex_matches(&a, "am0.x"));
        assert!(!regex_matches(&a, "abtx1.x"), "host ab's id");
        assert!(!regex_matches(&a, "abm0.x"), "host ab's master's id");
        assert!(regex_matches(&ab, "abtx12.x"));
        assert!(!regex_matches(&ab, "atx1.x"));
    }

    #[test]
    fn a_host_is_a_prefix_an_address_and_its_ports() {
        let h = parse_host("a=10.0.0.11:3000", (Some(9100), None)).expect("host");
        assert_eq!(
            h,
            Host {
                prefix: "a".into(),
                addr: "10.0.0.11:3000".into(),
                admin: Some(9100),
                agent: None
            }
        );
        let h =
            parse_host("b2=[::1]:3000,agent=9101,admin=9200", (Some(9100), None)).expect("host");
        assert_eq!((h.admin, h.agent), (Some(9200), Some(9101)));
        for bad in [
            "a",
            "=10.0.0.1:3000",
            "a-b=10.0.0.1:3000",
            "a=10.0.0.1",
            "a=10.0.0.1:0",
            "a=10.0.0.1:3000;",
            "a=host name:3000",
            "a=10.0.0.1:3000,admin=x",
            "a=10.0.0.1:3000,other=1",
        ] {
            assert!(parse_host(bad, (None, None)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_first_host_is_the_master_host_unless_named_and_a_prefix_is_given_once() {
        let s = Settings::default();
        let specs = vec!["a=h1:3000".to_string(), "b=h2:3000".to_string()];
        assert_eq!(parse(&specs, None, &s).expect("hosts").master, 0);
        assert_eq!(parse(&specs, Some("b"), &s).expect("hosts").master, 1);
        assert!(parse(&specs, Some("c"), &s).is_err());
        let twice = vec!["a=h1:3000".to_string(), "a=h2:3000".to_string()];
        assert!(parse(&twice, None, &s).is_err());
        assert!(parse(&[], None, &s).is_err());
    }
}
