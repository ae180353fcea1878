//! nginx.md's configurations, run: the one-host block taken out of nginx.md with its
//! placeholders filled in, the many-hosts one as `fhircluster print nginx --host ...` prints it
//! (nginx.md's many-hosts block is that text for its example hosts, held so by the binary's
//! tests), and a real nginx (`common/nginx.rs`: a foreground process with its own prefix
//! directory, stopped by its pid) runs each in front of real fhircluster instances. The
//! one-host configuration passes requests and headers as the page says; the many-hosts one routes
//! cache-ids to the host that issued them, `$closure` to the designated master host, and a stopped
//! host's ids to another host, which answers `cache-id-unknown`; with fhircluster stopped, nginx
//! answers a FHIR `503` with `Retry-After` instead of its HTML `502`, while fhircluster's own
//! `503`s pass through as sent; beside Debian's stock configuration and default site, the
//! printed file takes its `--server-name`, or every name once the default site is removed.
//! Documentation that is tested cannot drift. Without nginx installed these tests fail, saying
//! so.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::json;

const SIGTERM: i32 = 15;

fn nginx_md() -> String {
    crate_file("nginx.md")
}

pub(crate) fn block(title: &str) -> String {
    fenced_block(&nginx_md(), "nginx.md", "nginx", title)
}

pub(crate) fn host(c: &Cluster) -> String {
    format!("127.0.0.1:{}", c.port)
}

#[test]
fn every_nginx_md_configuration_waits_longer_than_upstream_timeout() {
    // nginx's own timeouts must not fire before fhircluster's 504 (upstreamTimeoutSeconds, 60).
    for title in ["one-host.conf", "many-hosts.conf"] {
        let b = block(title);
        for directive in ["proxy_read_timeout", "proxy_send_timeout"] {
            let secs: Vec<u64> = b
                .lines()
                .filter_map(|l| l.split('#').next()?.trim().strip_prefix(directive))
                .filter_map(|v| v.trim().trim_end_matches(';').strip_suffix('s'))
                .filter_map(|v| v.trim().parse().ok())
                .collect();
            assert!(!secs.is_empty(), "{title} has no {directive}");
            assert!(secs.iter().all(|s| *s > 60), "{title} {directive} {secs:?}");
        }
        for needed in [
            "keepalive ",
            "proxy_http_version 1.1;",
            "proxy_set_header Connection \"\";",
            "proxy_request_buffering on;",
            "X-Forwarded-For $proxy_add_x_forwarded_for;",
            "X-Forwarded-Proto $scheme;",
        ] {
            assert!(b.contains(needed), "{title} lacks {needed:?}");
        }
    }
}

#[test]
fn one_host_conf_passes_requests_buffered_bodies_and_forwarded_headers() {
    // spec: EDGE-1, EDGE-6
    let c = cluster().workers(1).start();
    let nginx = Nginx::start(&block("one-host.conf"), &[("{{FHIRCLUSTER}}", host(&c))]);

    let r = nginx.request(
        "GET",
        "/r4/metadata",
        &[("X-Forwarded-For", "203.0.113.9")],
        b"",
    );
    assert_eq!(r.status, 200, "{}\n{}", r.text(), nginx.error_log());
    assert!(!r.served_by().is_empty(), "a process answered");
    let xff = r.header("x-sim-forwarded-for").unwrap_or("");
    assert!(
        xff.starts_with("203.0.113.9, 127.0.0.1"),
        "the client's chain first, then nginx's view, then fhircluster's: {xff:?}"
    );
    assert_eq!(r.header("x-sim-forwarded-proto"), Some("http"));

    // A chunked body is read whole by nginx and arrives with a Content-Length.
    let body = b"{\"resourceType\":\"Parameters\"}";
    let raw = format!(
        "POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/fhir+json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
        body.len(),
        String::from_utf8_lossy(body)
    );
    let r = raw_request(nginx.addr, raw.as_bytes(), Duration::from_secs(20));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("x-sim-content-length"),
        Some(body.len().to_string().as_str()),
        "{:?}",
        r.headers
    );
    assert_ne!(r.header("x-sim-chunked"), Some("true"), "{:?}", r.headers);

    // The master's paths too.
    assert_eq!(
        nginx.request("GET", "/dashboard", &[], b"").served_by(),
        "m0"
    );
}

#[test]
fn the_printed_nginx_config_is_nginx_mds_and_nginx_runs_it_in_front_of_the_launcher() {
    // `fhircluster print nginx` with the launcher's port from its settings: nginx -t passes it
    // (Nginx::start runs it first), and requests pass through it to the launcher.
    let c = cluster().workers(1).start();
    let port = c.port.to_string();
    let out = run_bounded(
        Command::new(LAUNCHER).args(["--port", &port, "print", "nginx", "--listen", "80"]),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(0), "print nginx: {}", out.all());
    let printed = out.stdout;
    assert!(
        printed.contains(&format!("server {};", host(&c))),
        "the upstream is the launcher's port on loopback:\n{printed}"
    );
    // nginx.md's block with its placeholders filled in, nothing else but the comment on top.
    let expected = block("one-host.conf")
        .replace("{{FHIRCLUSTER}}", &host(&c))
        .replace("{{LISTEN}}", "80")
        .replace("{{SERVER_NAME}}", "_");
    assert!(printed.ends_with(&expected), "{printed}\n---\n{expected}");
    // Run on a free port of the test's (Nginx::start fills {{LISTEN}} in), not 80.
    let nginx = Nginx::start(&printed.replace("listen 80;", "listen {{LISTEN}};"), &[]);
    let r = nginx.request("GET", "/r4/metadata", &[], b"");
    assert_eq!(r.status, 200, "{}\n{}", r.text(), nginx.error_log());
}

/// What `fhircluster print nginx --host PREFIX=ADDRESS ...` prints for `hosts` (nginx.md's
/// many-hosts block for its example hosts), listening where `Nginx::start` says.
fn print_many(hosts: &[(&str, String)]) -> String {
    let mut cmd = Command::new(LAUNCHER);
    cmd.args(["print", "nginx"]);
    for (prefix, addr) in hosts {
        cmd.arg("--host").arg(format!("{prefix}={addr}"));
    }
    let out = run_bounded(&mut cmd, Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "print nginx --host: {}", out.all());
    out.stdout.replace("listen 80;", "listen {{LISTEN}};")
}

#[test]
fn many_hosts_conf_routes_cache_ids_to_their_host_closure_to_the_master_host_and_a_down_hosts_ids_to_cache_id_unknown(
) {
    // spec: ROUTE-3a, ROUTE-3c, ROUTE-1a, ROUTE-2a (one level up, across hosts: cache-ids to
    // their issuer's host, `$closure` and the master's pages to the master host's master)
    let a = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "hostPrefix": "a" } } }))
        .start();
    let mut b = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "hostPrefix": "b" } } }))
        .start();
    let nginx = Nginx::start(&print_many(&[("a", host(&a)), ("b", host(&b))]), &[]);

    // Sessions started through nginx land on both hosts (least_conn across them).
    let mut ids = Vec::new();
    for _ in 0..8 {
        let r = nginx.request("POST", "/r4/$cache-control", &[], b"{}");
        assert_eq!(r.status, 200, "{}\n{}", r.text(), nginx.error_log());
        let id = r.header("x-cache-id").unwrap_or("").to_string();
        assert_eq!(issuer(&id), r.served_by(), "{id}");
        ids.push(id);
    }
    let on =
        |h: char| -> Vec<String> { ids.iter().filter(|i| i.starts_with(h)).cloned().collect() };
    let (ids_a, ids_b) = (on('a'), on('b'));
    assert!(
        !ids_a.is_empty() && !ids_b.is_empty(),
        "sessions on both hosts: {ids:?}"
    );
    assert_eq!(ids_a.len() + ids_b.len(), ids.len(), "{ids:?}");

    // Each id goes to the process that issued it, on its host, every time.
    for id in &ids {
        for _ in 0..2 {
            let r = nginx.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", id)], b"");
            assert_eq!(
                (r.status, r.served_by()),
                (200, issuer(id)),
                "{id}: {}",
                r.text()
            );
        }
    }
    // $closure and the master's pages: the designated master host's master.
    for path in ["/r4/$closure", "/r4/ConceptMap/$closure"] {
        let r = nginx.request("POST", path, &[], b"{}");
        assert_eq!(r.served_by(), "am0", "{path}: {} {}", r.status, r.text());
    }
    assert_eq!(
        nginx.request("GET", "/dashboard", &[], b"").served_by(),
        "am0"
    );

    // Host b stops: its ids get cache-id-unknown from host a; host a's ids carry on.
    b.signal(SIGTERM);
    assert_eq!(b.wait_exit(Duration::from_secs(30)).code(), Some(0));
    for id in &ids_b {
        let r = nginx.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", id)], b"");
        assert!(
            r.is_cache_id_unknown(),
            "{id}: {} {}\n{}",
            r.status,
            r.text(),
            nginx.error_log()
        );
        assert!(
            r.served_by().starts_with('a'),
            "{id} answered by host a: {:?}",
            r.served_by()
        );
        // A POST (not idempotent) is passed to the backup too: it was never sent to host b.
        let r = nginx.request(
            "POST",
            "/r4/CodeSystem/$validate-code",
            &[
                ("X-Cache-Id", id),
                ("Content-Type", "application/fhir+json"),
            ],
            b"{\"resourceType\":\"Parameters\"}",
        );
        assert!(
            r.is_cache_id_unknown(),
            "POST {id}: {} {}",
            r.status,
            r.text()
        );
    }
    for id in &ids_a {
        let r = nginx.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", id)], b"");
        assert_eq!((r.status, r.served_by()), (200, issuer(id)), "{id}");
    }
    for _ in 0..4 {
        let r = nginx.request("GET", "/r4/metadata", &[], b"");
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.served_by().starts_with('a'), "{:?}", r.served_by());
    }
    drop(nginx);
}

#[test]
fn one_host_conf_answers_a_fhir_503_while_fhircluster_is_down_and_passes_its_own_503s_on() {
    let mut c = cluster()
        .workers(1)
        .env("SIM_REFUSE_tx1", "1")
        .env("SIM_REFUSE_m0", "1")
        .start();
    let nginx = Nginx::start(&block("one-host.conf"), &[("{{FHIRCLUSTER}}", host(&c))]);

    // fhircluster up, its processes refusing: their 503 reaches the client as sent.
    let direct = c.get("/r4/CodeSystem/$lookup");
    assert_eq!(direct.status, 503, "{}", direct.text());
    let via = nginx.request("GET", "/r4/CodeSystem/$lookup", &[], b"");
    assert_eq!(via.status, 503, "{}", via.text());
    assert!(
        !via.text().contains("not answering"),
        "nginx replaced fhircluster's own 503: {}",
        via.text()
    );
    assert!(
        !via.served_by().is_empty(),
        "a process's own refusal: {:?}",
        via.headers
    );

    // fhircluster stopped: nginx can't connect, and answers the FHIR 503 itself.
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(30)).code(), Some(0));
    for (method, path) in [
        ("GET", "/r4/metadata"),
        ("POST", "/r4/ValueSet/$expand"),
        ("GET", "/dashboard"),
    ] {
        let r = nginx.request(method, path, &[], b"{}");
        assert_eq!(
            r.status,
            503,
            "{method} {path}: {}\n{}",
            r.text(),
            nginx.error_log()
        );
        assert_eq!(r.header("retry-after"), Some("5"), "{:?}", r.headers);
        assert!(
            r.header("content-type")
                .is_some_and(|t| t.starts_with("application/fhir+json")),
            "{:?}",
            r.headers
        );
        let v: serde_json::Value = serde_json::from_str(&r.text())
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {}", r.text()));
        assert_eq!(v["resourceType"], "OperationOutcome", "{v}");
        assert_eq!(v["issue"][0]["code"], "transient", "{v}");
        assert_eq!(v["issue"][0]["severity"], "error", "{v}");
    }
}

#[test]
fn many_hosts_conf_a_lame_duck_stop_under_load_loses_nothing_and_a_killed_hosts_ids_are_unknown() {
    // spec: DEC-88, ROUTE-3a (one level up). The printed many-hosts configuration (`print nginx
    // --host`) in front of three launchers: host b stopped under load with its lame duck loses
    // no request, host c killed outright sends its ids to cache-id-unknown and new sessions on.
    let launcher = |prefix: &str| {
        cluster()
            .workers(1)
            .config(json!({ "server": { "cluster": {
                "hostPrefix": prefix, "lameDuckSeconds": 4, "drainSeconds": 5
            } } }))
            .start()
    };
    let (a, mut b, mut c) = (launcher("a"), launcher("b"), launcher("c"));
    let nginx = Nginx::start(
        &print_many(&[("a", host(&a)), ("b", host(&b)), ("c", host(&c))]),
        &[],
    );
    let ids = sessions_on_every_host(nginx.addr, "abc");
    a_lame_duck_stop_and_a_kill_behind(nginx.addr, &mut b, &mut c, &ids);
    drop(nginx);
    drop(a);
}

#[test]
fn many_hosts_conf_answers_a_fhir_503_when_no_host_answers() {
    let mut a = cluster().workers(1).start();
    let nowhere = format!("127.0.0.1:{}", free_port());
    let nginx = Nginx::start(&print_many(&[("a", host(&a)), ("b", nowhere)]), &[]);
    a.signal(SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(30)).code(), Some(0));
    for path in ["/r4/metadata", "/dashboard"] {
        let r = nginx.request("GET", path, &[], b"");
        assert_eq!(r.status, 503, "{path}: {}\n{}", r.text(), nginx.error_log());
        assert_eq!(r.header("retry-after"), Some("5"), "{:?}", r.headers);
        let v: serde_json::Value = serde_json::from_str(&r.text())
            .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {}", r.text()));
        assert_eq!(v["resourceType"], "OperationOutcome", "{v}");
    }
}

/// `GET /r4/metadata` through nginx for the site named `host` (the request's `Host`).
fn get_for(nginx: &Nginx, host: &str) -> Response {
    let raw = format!("GET /r4/metadata HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    raw_request(nginx.addr, raw.as_bytes(), Duration::from_secs(20))
}

/// `fhircluster --port P print nginx` with `args`, its output (exit 0).
fn print_nginx(c: &Cluster, args: &[&str]) -> String {
    let port = c.port.to_string();
    let out = run_bounded(
        Command::new(LAUNCHER)
            .args(["--port", &port, "print", "nginx"])
            .args(args)
            .env_remove("FHIRSMITH_DATA_DIR"),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(0), "print nginx: {}", out.all());
    out.stdout
}

#[test]
fn beside_debians_default_site_the_printed_config_takes_its_server_name_or_every_name_once_the_default_site_is_gone(
) {
    let c = cluster().workers(1).start();
    let port = free_port();
    let listen = port.to_string();
    let printed = print_nginx(
        &c,
        &["--listen", &listen, "--server-name", "fhir.example.org"],
    );
    assert!(
        printed.contains("server_name fhir.example.org;"),
        "{printed}"
    );
    // The printed comment says what to do with the default site.
    let comment: String = printed.lines().filter(|l| l.starts_with('#')).collect();
    assert!(comment.contains("sites-enabled/default"), "{printed}");

    let debian = DebianNginx::new(&printed, port);
    let nginx = debian.start();
    let ours = get_for(&nginx, "fhir.example.org");
    assert_eq!(ours.status, 200, "{}\n{}", ours.text(), nginx.error_log());
    assert!(!ours.served_by().is_empty(), "{:?}", ours.headers);
    // Another name: Debian's default site, as before (nginx's own 404).
    let other = get_for(&nginx, "other.example.org");
    assert_eq!(other.status, 404, "{}", other.text());
    assert!(other.served_by().is_empty(), "{:?}", other.headers);
    drop(nginx);

    // Without a name and with the default site removed (the other way the comment gives),
    // every request is fhircluster's.
    let printed = print_nginx(&c, &["--listen", &listen]);
    let debian = DebianNginx::new(&printed, port);
    std::fs::remove_file(debian.prefix.path().join("sites-enabled/default"))
        .expect("remove the default site");
    let nginx = debian.start();
    for host in ["fhir.example.org", "203.0.113.1", "localhost"] {
        let r = get_for(&nginx, host);
        assert_eq!(r.status, 200, "{host}: {}\n{}", r.text(), nginx.error_log());
        assert!(!r.served_by().is_empty(), "{host}: {:?}", r.headers);
    }
}
