//! The base URL a run is aimed at, and the refusal of anything that is not this machine.
//!
//! A load tool pointed at the wrong host is a denial-of-service attack, so only loopback
//! addresses are accepted (127.0.0.0/8, ::1, `localhost`), checked here before any socket opens.
//! `localhost` is taken as 127.0.0.1 without asking a resolver, which could answer otherwise.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Where requests go: the socket address, the `Host` header, and the path prefix every request
/// path is put under (empty, or `/something` with no trailing slash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub addr: SocketAddr,
    pub host_header: String,
    pub prefix: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    NotAUrl(String),
    NotHttp(String),
    NotLoopback(String),
    HasQuery,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::NotAUrl(why) => {
                write!(f, "the base is not a URL like http://127.0.0.1:8080: {why}")
            }
            TargetError::NotHttp(scheme) => {
                write!(
                    f,
                    "the base must be an http:// URL (got scheme {scheme:?}; TLS is not supported)"
                )
            }
            TargetError::NotLoopback(host) => write!(
                f,
                "refusing host {host:?}: the load tool only sends to this machine's loopback \
                 (127.0.0.0/8, ::1 or localhost)"
            ),
            TargetError::HasQuery => write!(f, "the base must not have a query string or fragment"),
        }
    }
}

impl std::error::Error for TargetError {}

/// Reads a base URL such as `http://127.0.0.1:8080` or `http://localhost:8080/fhir`.
pub fn parse_base(base: &str) -> Result<Target, TargetError> {
    let uri: http::Uri = base
        .parse()
        .map_err(|e: http::uri::InvalidUri| TargetError::NotAUrl(e.to_string()))?;
    let scheme = uri
        .scheme_str()
        .ok_or_else(|| TargetError::NotAUrl("no scheme".into()))?;
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(TargetError::NotHttp(scheme.to_string()));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| TargetError::NotAUrl("no host".into()))?;
    if authority.as_str().contains('@') {
        return Err(TargetError::NotAUrl("user info is not supported".into()));
    }
    if uri.query().is_some() || base.contains('#') {
        return Err(TargetError::HasQuery);
    }
    let host = authority.host();
    let ip = loopback_ip(host).ok_or_else(|| TargetError::NotLoopback(host.to_string()))?;
    let port = authority.port_u16().unwrap_or(80);
    let prefix = uri.path().trim_end_matches('/').to_string();
    Ok(Target {
        addr: SocketAddr::new(ip, port),
        host_header: authority.as_str().to_string(),
        prefix,
    })
}

/// The loopback address `host` names, or `None` when it names anything else.
fn loopback_ip(host: &str) -> Option<IpAddr> {
    if host.eq_ignore_ascii_case("localhost") {
        return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let ip: IpAddr = bare.parse().ok()?;
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => Some(ip),
        IpAddr::V6(v6) if v6.is_loopback() => Some(ip),
        // An IPv4-mapped ::ffff:127.x is still this machine.
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .filter(|v4| v4.is_loopback())
            .map(IpAddr::V4),
        IpAddr::V4(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_bases_are_accepted() {
        let t = parse_base("http://127.0.0.1:8080").expect("loopback");
        assert_eq!(t.addr, "127.0.0.1:8080".parse().expect("addr"));
        assert_eq!(
            (t.host_header.as_str(), t.prefix.as_str()),
            ("127.0.0.1:8080", "")
        );
        let t = parse_base("http://localhost:9000/fhir/").expect("localhost");
        assert_eq!(t.addr, "127.0.0.1:9000".parse().expect("addr"));
        assert_eq!(t.prefix, "/fhir");
        let t = parse_base("http://[::1]:81").expect("v6 loopback");
        assert_eq!(t.addr, "[::1]:81".parse().expect("addr"));
        assert_eq!(t.host_header, "[::1]:81");
        assert_eq!(
            parse_base("http://127.200.3.4").map(|t| t.addr.port()),
            Ok(80)
        );
        assert!(parse_base("HTTP://LOCALHOST:1").is_ok());
    }

    #[test]
    fn other_hosts_are_refused_with_a_clear_message() {
        for base in [
            "http://10.0.0.1:8080",
            "http://192.168.1.10",
            "http://172.16.0.1",
            "http://8.8.8.8",
            "http://0.0.0.0:8080",
            "http://example.com",
            "http://localhost.example.com",
            "http://[::]:80",
            "http://[2001:db8::1]",
            "http://128.0.0.1",
        ] {
            let err = parse_base(base).expect_err(base);
            assert!(matches!(err, TargetError::NotLoopback(_)), "{base}: {err}");
            assert!(
                err.to_string()
                    .contains("only sends to this machine's loopback"),
                "{err}"
            );
        }
    }

    #[test]
    fn malformed_or_unsupported_bases_are_refused() {
        assert!(matches!(
            parse_base("https://127.0.0.1"),
            Err(TargetError::NotHttp(_))
        ));
        assert!(matches!(
            parse_base("127.0.0.1:8080"),
            Err(TargetError::NotHttp(_) | TargetError::NotAUrl(_))
        ));
        assert!(matches!(
            parse_base("not a url"),
            Err(TargetError::NotAUrl(_))
        ));
        assert!(matches!(
            parse_base("http://user@127.0.0.1"),
            Err(TargetError::NotAUrl(_))
        ));
        assert_eq!(
            parse_base("http://127.0.0.1/?x=1"),
            Err(TargetError::HasQuery)
        );
    }
}
