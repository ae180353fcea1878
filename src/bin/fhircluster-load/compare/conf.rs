//! The nginx and HAProxy configurations the comparison runs: each proxy in its own temporary
//! directory, on loopback ports picked at run time, in the foreground, with one front port per
//! site (the raw run's one upstream, the surge's cluster, the fast upstream).
//!
//! nginx as `nginx.md` recommends (`least_conn`, keep-alive to the upstreams, HTTP/1.1 with an
//! empty `Connection`, request buffering on); HAProxy as the Airbnb write-up describes it
//! (`balance leastconn`, `maxconn 16` per server, `timeout queue 1s`).

use std::fmt::Write as _;
use std::path::Path;

/// One front port and the servers behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The upstream's (nginx) or backend's (HAProxy) name: letters only.
    pub name: String,
    pub front: u16,
    pub upstreams: Vec<u16>,
}

/// What one proxy runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConf {
    pub sites: Vec<Site>,
    /// Worker processes (nginx) or threads (HAProxy).
    pub threads: u32,
    /// HAProxy's connections at most (its `global maxconn`): above the most clients a run
    /// opens. It sizes HAProxy's file descriptors (about two a connection).
    pub max_connections: u32,
}

impl ProxyConf {
    /// The front port of the site named `name`.
    pub fn front(&self, name: &str) -> Option<u16> {
        self.sites.iter().find(|s| s.name == name).map(|s| s.front)
    }
}

/// nginx's configuration, with every path it writes under `dir`.
pub fn nginx(dir: &Path, p: &ProxyConf) -> String {
    let mut http = String::new();
    for site in &p.sites {
        let _ = writeln!(http, "    upstream {} {{\n        least_conn;", site.name);
        for port in &site.upstreams {
            let _ = writeln!(http, "        server 127.0.0.1:{port};");
        }
        let _ = writeln!(http, "        keepalive 32;\n    }}");
    }
    for site in &p.sites {
        let _ = write!(
            http,
            "    server {{
        listen 127.0.0.1:{port} backlog=16384;
        client_max_body_size 50m;
        location / {{
            proxy_pass http://{name};
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_request_buffering on;
            proxy_read_timeout 90s;
            proxy_send_timeout 90s;
        }}
    }}
",
            port = site.front,
            name = site.name
        );
    }
    frame(dir, p.threads, "nginx", "error", &http)
}

/// An nginx configuration around `http` (the inside of its `http` block): in the foreground,
/// `workers` worker processes, its pid file `dir/{name}.pid` and error log `dir/{error}.log`,
/// every temporary path under `dir`, no access log.
pub fn frame(dir: &Path, workers: u32, name: &str, error: &str, http: &str) -> String {
    let d = dir.display();
    format!(
        "daemon off;
worker_processes {workers};
pid {d}/{name}.pid;
error_log {d}/{error}.log warn;
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
{http}}}
",
        workers = workers.max(1),
    )
}

/// HAProxy's configuration (run with `-db`: in the foreground, nothing written elsewhere).
pub fn haproxy(p: &ProxyConf) -> String {
    let mut sites = String::new();
    for site in &p.sites {
        let _ = write!(
            sites,
            "
frontend {name}
    bind 127.0.0.1:{front}
    default_backend {name}

backend {name}
    balance leastconn
",
            name = site.name,
            front = site.front
        );
        for (i, port) in site.upstreams.iter().enumerate() {
            let _ = writeln!(sites, "    server p{i} 127.0.0.1:{port} maxconn 16");
        }
    }
    format!(
        "global
    maxconn {maxconn}
    nbthread {threads}

defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 90s
    timeout server 90s
    timeout queue 1s
{sites}",
        maxconn = p.max_connections.max(1),
        threads = p.threads.max(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf() -> ProxyConf {
        ProxyConf {
            sites: vec![
                Site {
                    name: "raw".into(),
                    front: 9001,
                    upstreams: vec![9101],
                },
                Site {
                    name: "surge".into(),
                    front: 9002,
                    upstreams: vec![9201, 9202, 9203],
                },
            ],
            threads: 1,
            max_connections: 4096,
        }
    }

    #[test]
    fn nginx_runs_in_the_foreground_in_its_own_directory_with_least_conn() {
        let c = nginx(Path::new("/tmp/x"), &conf());
        assert!(c.starts_with("daemon off;"));
        assert!(c.contains("pid /tmp/x/nginx.pid;"));
        assert!(c.contains("error_log /tmp/x/error.log"));
        assert!(c.contains("listen 127.0.0.1:9001"));
        assert!(c.contains("listen 127.0.0.1:9002"));
        let surge = c.split("upstream surge").nth(1).unwrap_or_default();
        assert!(surge.contains("least_conn;"));
        assert_eq!(surge.matches("server 127.0.0.1:92").count(), 3);
        assert_eq!(c.matches("keepalive 32;").count(), 2);
        assert!(c.contains("proxy_pass http://raw;"));
        assert!(c.contains("proxy_set_header Connection \"\";"));
        // Every temp path is under the directory, none in a system location.
        for line in c.lines().filter(|l| l.contains("_path ")) {
            assert!(line.contains("/tmp/x/"), "{line}");
        }
        assert_eq!(c.matches('{').count(), c.matches('}').count());
        assert_eq!(conf().front("surge"), Some(9002));
        assert_eq!(conf().front("fast"), None);
    }

    #[test]
    fn haproxy_caps_each_server_and_times_the_queue_out() {
        let c = haproxy(&ProxyConf {
            threads: 2,
            ..conf()
        });
        assert!(c.contains("timeout queue 1s"));
        assert!(c.contains("maxconn 4096\n    nbthread 2\n"));
        assert_eq!(c.matches("balance leastconn").count(), 2);
        assert_eq!(c.matches("maxconn 16").count(), 4);
        assert!(c.contains("server p2 127.0.0.1:9203 maxconn 16"));
        assert!(c.contains("bind 127.0.0.1:9001"));
        assert!(c.contains("frontend surge\n    bind 127.0.0.1:9002\n    default_backend surge"));
        assert!(!c.contains("daemon"));
    }
}
