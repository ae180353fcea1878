//! nginx's configurations as `fhircluster print nginx` prints them. One host: the block nginx.md
//! gives (and `tests/ops_nginx.rs` runs), taken from nginx.md itself so the two never differ,
//! with its placeholders filled in: `{{LISTEN}}` with what nginx listens on, `{{FHIRCLUSTER}}`
//! with `server.port` on the address it listens on (loopback when that is every interface).
//! Many hosts (`--host`, repeated): made here from the hosts, and nginx.md's many-hosts block is
//! this text for its example hosts (a test holds the two together).

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::hosts::{cache_id_regex, Hosts};
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

/// The many-hosts configuration: a pool per host (the others its backups), one for the least
/// busy host, one for the designated master host, the `map` from a cache-id's prefix to its
/// host's pool, and a pair of locations per tx endpoint.
pub(super) fn render_many(
    listen: &str,
    server_name: &str,
    hosts: &Hosts,
    endpoints: &[String],
    master_code: &str,
) -> String {
    let all = &hosts.hosts;
    let master = &all[hosts.master];
    let mut out = String::from(MANY_HEAD);
    let _ = write!(
        out,
        "# The designated master host: $closure, syndication, info pages, everything outside the\n\
         # tx endpoints.\nupstream fhir_master {{\n    server {};\n    keepalive 16;\n}}\n\n\
         # Tx requests without a cache-id (or with one no host issued): the least busy host.\n\
         upstream fhir_any {{\n    least_conn;\n",
        master.addr
    );
    for h in all {
        let _ = writeln!(out, "    server {};", h.addr);
    }
    out.push_str(
        "    keepalive 32;\n}\n\n# A cache-id goes to its host; while that host is down, to another, \
         which answers\n# cache-id-unknown for a prefix it doesn't have.\n",
    );
    for h in all {
        let _ = write!(
            out,
            "upstream fhir_host_{} {{\n    server {};\n",
            h.prefix, h.addr
        );
        for o in all.iter().filter(|o| o.prefix != h.prefix) {
            let _ = writeln!(out, "    server {} backup;", o.addr);
        }
        out.push_str("    keepalive 16;\n}\n\n");
    }
    let _ = writeln!(
        out,
        "# The host prefix, then the process code ({master_code} or tx1, tx2 ...), then \".\".\n\
         map $http_x_cache_id $fhir_tx_pool {{\n    default fhir_any;"
    );
    for h in all {
        let _ = writeln!(
            out,
            "    \"~{}\" fhir_host_{};",
            cache_id_regex(&h.prefix, master_code),
            h.prefix
        );
    }
    let _ = write!(
        out,
        "}}\n\nserver {{\n    listen {listen};\n    server_name {server_name};\n{MANY_SERVER}"
    );
    for e in endpoints {
        let _ = write!(
            out,
            "\n    # Rule 1: the master's paths inside {e}.\n\
             \x20   location ~ ^{e}/(.*\\$closure|syndication|info/) {{\n\
             \x20       proxy_pass http://fhir_master;\n    }}\n\n\
             \x20   # Rules 3 and 4: tx requests, by cache-id or to the least busy host.\n\
             \x20   location {e}/ {{\n        proxy_pass http://$fhir_tx_pool;\n    }}\n"
        );
    }
    out.push_str(MANY_TAIL);
    out.push_str(DOWN_PAGE);
    out
}

const MANY_HEAD: &str = "\
# nginx in front of many fhircluster hosts (nginx.md, many hosts), as printed by
# `fhircluster print nginx --host ...`. It goes inside nginx's http { }; install, then check
# and reload nginx:
#   fhircluster print nginx --host ... > /etc/nginx/conf.d/fhircluster.conf && nginx -t && nginx -s reload
";

pub(super) const MANY_SERVER: &str = "    # ssl_certificate ...; ssl_certificate_key ...;

    client_max_body_size 50m;

    proxy_http_version 1.1;
    proxy_set_header Connection \"\";
    proxy_set_header Host $host;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_set_header X-Forwarded-Host $host;
    proxy_request_buffering on;
    proxy_connect_timeout 2s;
    proxy_read_timeout 90s;          # longer than upstreamTimeoutSeconds (60)
    proxy_send_timeout 90s;
    proxy_next_upstream error;       # only a host nginx could not reach (nginx.md, Retries)
";

const MANY_TAIL: &str = "
    # Rule 2: everything else is the master's.
    location / {
        proxy_pass http://fhir_master;
    }
";

/// The FHIR answer when no host answers, and the server block's end.
pub(super) const DOWN_PAGE: &str = "
    # No host answering: a FHIR 503, not nginx's HTML 502 (see the one-host configuration).
    error_page 502 503 504 = @fhircluster_down;
    location @fhircluster_down {
        default_type application/fhir+json;
        add_header Retry-After 5 always;
        return 503 '{\"resourceType\":\"OperationOutcome\",\"issue\":[{\"severity\":\"error\",\"code\":\"transient\",\"diagnostics\":\"The terminology server is not answering (fhircluster is stopped or restarting). Try again shortly.\"}]}';
    }
}
";

/// nginx.md's many-hosts block (title `many-hosts.conf`), as written there.
#[cfg(test)]
fn many_hosts_block() -> &'static str {
    const MANY: &str = "```nginx title=\"many-hosts.conf\"";
    let Some(start) = NGINX_MD.find(MANY).map(|i| i + MANY.len() + 1) else {
        return "";
    };
    let body = &NGINX_MD[start..];
    &body[..body.find("\n```").map_or(body.len(), |e| e + 1)]
}

#[cfg(test)]
mod tests {
    use super::super::hosts::parse;
    use super::*;

    #[test]
    fn nginx_mds_many_hosts_block_is_what_print_nginx_prints_for_its_example_hosts() {
        let specs = [
            "a=10.0.0.11:3000".to_string(),
            "b=10.0.0.12:3000".to_string(),
        ];
        let hosts = parse(&specs, None, &Settings::default()).expect("hosts");
        let printed = render_many("80", NO_NAME, &hosts, &["/r4".to_string()], "m0");
        let block = many_hosts_block();
        assert!(!block.is_empty(), "nginx.md has no many-hosts.conf block");
        assert!(
            printed.ends_with(block),
            "nginx.md's many-hosts block differs from the printed one:\n{printed}"
        );
        for line in [
            "    server 10.0.0.12:3000 backup;\n",
            "    \"~^b(m0|tx[0-9]+)\\.\" fhir_host_b;\n",
            "upstream fhir_master {\n    server 10.0.0.11:3000;\n",
        ] {
            assert!(printed.contains(line), "{line:?} in:\n{printed}");
        }
    }

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
