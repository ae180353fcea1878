//! nginx's one-host configuration as `fhircluster print nginx` prints it: the block nginx.md
//! gives (and `tests/ops_nginx.rs` runs), taken from nginx.md itself so the two never differ,
//! with its placeholders filled in: `{{LISTEN}}` with what nginx listens on, `{{FHIRCLUSTER}}`
//! with `server.port` on the address it listens on (loopback when that is every interface).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::settings::Settings;

const NGINX_MD: &str = include_str!("../../nginx.md");
const OPENING: &str = "```nginx title=\"one-host.conf\"";

/// The one-host block of nginx.md, as written there (placeholders included).
pub(super) fn one_host_block() -> &'static str {
    let Some(start) = NGINX_MD.find(OPENING).map(|i| i + OPENING.len() + 1) else {
        return "";
    };
    let body = &NGINX_MD[start..];
    &body[..body.find("\n```").map_or(body.len(), |e| e + 1)]
}

/// Where nginx reaches fhircluster: `server.port` on `listenAddress`, or loopback when it
/// listens on every interface.
pub(super) fn upstream(s: &Settings) -> SocketAddr {
    let ip = s
        .cluster
        .listen_address
        .filter(|a| !a.is_unspecified())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    SocketAddr::new(ip, s.port)
}

/// `server_name` without `--server-name`: a name no client uses, so the block is chosen for a
/// request only when it is the default server of its `listen` (nginx.md).
pub(super) const NO_NAME: &str = "_";

/// The config's text.
pub(super) fn render(listen: &str, server_name: &str, upstream: &SocketAddr) -> String {
    format!(
        "\
# nginx in front of fhircluster (nginx.md, one host), as printed by `fhircluster print nginx`.
# It goes inside nginx's http {{ }}; install, then check and reload nginx:
#   fhircluster print nginx > /etc/nginx/conf.d/fhircluster.conf && nginx -t && nginx -s reload
# Debian's and Ubuntu's nginx come with a default site, /etc/nginx/sites-enabled/default
# (listen 80 default_server), which answers every request for a name no server block has,
# with nginx's own pages. Either print this with --server-name and the name clients use (then
# only requests for it come here), or remove the default site, so this block takes every
# request on its port: rm /etc/nginx/sites-enabled/default
{}",
        one_host_block()
            .replace("{{LISTEN}}", listen)
            .replace("{{SERVER_NAME}}", server_name)
            .replace("{{FHIRCLUSTER}}", &upstream.to_string())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_nginx_mds_whole_one_host_configuration() {
        let b = one_host_block();
        assert!(b.starts_with("upstream fhirsmith {"), "{b}");
        assert!(b.trim_end().ends_with('}') && !b.contains("```"), "{b}");
        assert!(b.contains("{{FHIRCLUSTER}}") && b.contains("{{LISTEN}}"));
        assert!(b.contains("server_name {{SERVER_NAME}};"), "{b}");
    }

    #[test]
    fn the_placeholders_are_filled_from_the_settings() {
        let mut s = Settings::default();
        assert_eq!(upstream(&s).to_string(), "127.0.0.1:3000");
        s.cluster.listen_address = Some("::1".parse().expect("ip"));
        s.port = 8080;
        let text = render("443 ssl", "fhir.example.org", &upstream(&s));
        assert!(text.contains("server [::1]:8080;"), "{text}");
        assert!(text.contains("listen 443 ssl;"), "{text}");
        assert!(text.contains("server_name fhir.example.org;"), "{text}");
        assert!(!text.contains("{{"), "{text}");
    }
}
