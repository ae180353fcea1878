//! The nginx and HAProxy configurations the comparison runs: each proxy in its own temporary
//! directory, on loopback ports picked at run time, in the foreground, with one front port for
//! the raw-overhead run (one upstream) and one for the surge (every process of the cluster).
//!
//! nginx as `nginx.md` recommends (`least_conn`, keep-alive to the upstreams, HTTP/1.1 with an
//! empty `Connection`, request buffering on); HAProxy as the Airbnb write-up describes it
//! (`balance leastconn`, `maxconn 16` per server, `timeout queue 1s`).

use std::fmt::Write as _;
use std::path::Path;

/// Where one proxy listens and what it sends to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyPorts {
    /// Front port of the raw run.
    pub raw_front: u16,
    /// The one upstream of the raw run.
    pub raw_upstream: u16,
    /// Front port of the surge.
    pub surge_front: u16,
    /// The cluster's processes, for the surge.
    pub surge_upstreams: Vec<u16>,
    /// Worker processes (nginx) or threads (HAProxy).
    pub threads: u32,
}

/// nginx's configuration, with every path it writes under `dir`.
pub fn nginx(dir: &Path, p: &ProxyPorts) -> String {
    let d = dir.display();
    let mut upstreams = String::new();
    let _ = writeln!(
        upstreams,
        "    upstream raw {{\n        server 127.0.0.1:{};\n        keepalive 32;\n    }}",
        p.raw_upstream
    );
    let _ = writeln!(upstreams, "    upstream surge {{\n        least_conn;");
    for port in &p.surge_upstreams {
        let _ = writeln!(upstreams, "        server 127.0.0.1:{port};");
    }
    let _ = writeln!(upstreams, "        keepalive 32;\n    }}");
    let server = |port: u16, upstream: &str| {
        format!(
            "    server {{
        listen 127.0.0.1:{port} backlog=16384;
        client_max_body_size 50m;
        location / {{
            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_request_buffering on;
            proxy_read_timeout 90s;
            proxy_send_timeout 90s;
        }}
    }}
"
        )
    };
    format!(
        "daemon off;
worker_processes {threads};
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{
    worker_connections 16384;
}}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
{upstreams}{raw}{surge}}}
",
        threads = p.threads.max(1),
        raw = server(p.raw_front, "raw"),
        surge = server(p.surge_front, "surge"),
    )
}

/// HAProxy's configuration (run with `-db`: in the foreground, nothing written elsewhere).
pub fn haproxy(p: &ProxyPorts) -> String {
    let mut surge_servers = String::new();
    for (i, port) in p.surge_upstreams.iter().enumerate() {
        let _ = writeln!(surge_servers, "    server p{i} 127.0.0.1:{port} maxconn 16");
    }
    format!(
        "global
    maxconn 4096
    nbthread {threads}

defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 90s
    timeout server 90s
    timeout queue 1s

frontend raw
    bind 127.0.0.1:{raw_front}
    default_backend raw

backend raw
    balance leastconn
    server p0 127.0.0.1:{raw_upstream} maxconn 16

frontend surge
    bind 127.0.0.1:{surge_front}
    default_backend surge

backend surge
    balance leastconn
{surge_servers}",
        threads = p.threads.max(1),
        raw_front = p.raw_front,
        raw_upstream = p.raw_upstream,
        surge_front = p.surge_front,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports() -> ProxyPorts {
        ProxyPorts {
            raw_front: 9001,
            raw_upstream: 9101,
            surge_front: 9002,
            surge_upstreams: vec![9201, 9202, 9203],
            threads: 1,
        }
    }

    #[test]
    fn nginx_runs_in_the_foreground_in_its_own_directory_with_least_conn() {
        let c = nginx(Path::new("/tmp/x"), &ports());
        assert!(c.starts_with("daemon off;"));
        assert!(c.contains("pid /tmp/x/nginx.pid;"));
        assert!(c.contains("error_log /tmp/x/error.log"));
        assert!(c.contains("listen 127.0.0.1:9001"));
        assert!(c.contains("listen 127.0.0.1:9002"));
        let surge = c.split("upstream surge").nth(1).unwrap_or_default();
        assert!(surge.contains("least_conn;"));
        assert_eq!(surge.matches("server 127.0.0.1:92").count(), 3);
        assert!(c.contains("keepalive 32;"));
        assert!(c.contains("proxy_set_header Connection \"\";"));
        // Every temp path is under the directory, none in a system location.
        for line in c.lines().filter(|l| l.contains("_path ")) {
            assert!(line.contains("/tmp/x/"), "{line}");
        }
        assert_eq!(c.matches('{').count(), c.matches('}').count());
    }

    #[test]
    fn haproxy_caps_each_server_and_times_the_queue_out() {
        let c = haproxy(&ports());
        assert!(c.contains("timeout queue 1s"));
        assert_eq!(c.matches("balance leastconn").count(), 2);
        assert_eq!(c.matches("maxconn 16").count(), 4);
        assert!(c.contains("server p2 127.0.0.1:9203 maxconn 16"));
        assert!(c.contains("bind 127.0.0.1:9001"));
        assert!(!c.contains("daemon"));
    }
}
