//! Where `server.port` listens, with the real binaries (LAUNCH-6: "every interface"). By
//! default IPv6 and IPv4 alike: it answers on 127.0.0.1 and on [::1] (where the host has IPv6;
//! where it has none, the launcher says it listens on IPv4 alone). With
//! `server.cluster.listenAddress` (or `--listen-address`, `FHIRSMITH_LISTEN_ADDRESS`) only there:
//! `127.0.0.1` answers on loopback and on no other address. The start line says where.

use crate::common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use common::*;
use serde_json::json;

const SIGTERM: i32 = 15;

fn v6_loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv6Addr::LOCALHOST, port))
}

/// Whether a connection to `addr` is refused (nothing listens there).
fn refused(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_err()
}

/// The address this host would send from to the outside (a UDP "connect" sends nothing), if it
/// has one that isn't loopback.
fn outward_ipv4() -> Option<Ipv4Addr> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    s.connect((Ipv4Addr::new(192, 0, 2, 1), 9)).ok()?;
    match s.local_addr().ok()?.ip() {
        IpAddr::V4(a) if !a.is_loopback() && !a.is_unspecified() => Some(a),
        _ => None,
    }
}

#[test]
fn by_default_it_answers_on_ipv4_and_on_ipv6_loopback() {
    // spec: LAUNCH-15 (every interface, IPv6 as well as IPv4), LAUNCH-6
    let mut c = cluster().workers(1).start();
    let line = c.wait_for("listening on port", Duration::from_secs(5));
    assert_eq!(c.get("/r4/metadata").status, 200, "127.0.0.1");
    // What this host offers, found as the launcher finds it: a dual-stack socket on `::`.
    let host_has_ipv6 = TcpListener::bind((Ipv6Addr::UNSPECIFIED, 0)).is_ok();
    let host_has_v6_loopback = TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok();
    if host_has_ipv6 {
        assert!(
            line.ends_with(&format!(
                "listening on port {} on every interface (IPv6 and IPv4)",
                c.port
            )),
            "{line}"
        );
    } else {
        eprintln!("NOTE: this host has no IPv6: checking the IPv4-only fallback instead");
        assert!(
            line.contains("every interface (IPv4 only)"),
            "no IPv6 here, so IPv4 alone: {line}"
        );
        let why = c.wait_for("this host has no IPv6", Duration::from_secs(1));
        assert!(why.contains("IPv4 alone"), "{why}");
    }
    if host_has_v6_loopback {
        let r = request(v6_loopback(c.port), "GET", "/r4/metadata", &[], b"");
        assert_eq!(r.status, 200, "[::1]: {}", r.text());
        let r = request(v6_loopback(c.port), "GET", "/dashboard", &[], b"");
        assert_eq!(r.status, 200, "[::1], a master path: {}", r.text());
    } else {
        eprintln!(
            "NOTE: this host has no IPv6 loopback address (::1): [::1] was not tried; the \
             start line was checked above"
        );
    }
    if let Some(ip) = outward_ipv4() {
        let r = request(
            SocketAddr::from((ip, c.port)),
            "GET",
            "/r4/metadata",
            &[],
            b"",
        );
        assert_eq!(r.status, 200, "{ip}: {}", r.text());
    }
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));
}

#[test]
fn listen_address_127_0_0_1_answers_on_loopback_only() {
    // spec: LAUNCH-15 ("unless told an address")
    let mut c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"listenAddress": "127.0.0.1"}}}))
        .start();
    let line = c.wait_for("listening on port", Duration::from_secs(5));
    assert!(
        line.ends_with(&format!("listening on port {} on 127.0.0.1", c.port)),
        "{line}"
    );
    assert_eq!(c.get("/r4/metadata").status, 200);
    assert!(
        refused(v6_loopback(c.port)),
        "[::1]:{} answered with listenAddress 127.0.0.1",
        c.port
    );
    if let Some(ip) = outward_ipv4() {
        assert!(
            refused(SocketAddr::from((ip, c.port))),
            "{ip}:{} answered with listenAddress 127.0.0.1",
            c.port
        );
    }
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));
}

#[test]
fn the_flag_and_the_environment_set_it_too_and_a_bad_one_stops_the_start() {
    // The environment: IPv6 loopback only, where the host has it.
    if TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok() {
        let mut c = cluster()
            .workers(0)
            .env("FHIRSMITH_LISTEN_ADDRESS", "::1")
            .spawn();
        let line = c.wait_for("listening on port", Duration::from_secs(20));
        assert!(line.ends_with(" on ::1"), "{line}");
        let r = request(v6_loopback(c.port), "GET", "/r4/metadata", &[], b"");
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(refused(c.addr()), "127.0.0.1 answered with ::1 only");
        c.signal(SIGTERM);
        assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));
    } else {
        eprintln!("NOTE: no IPv6 loopback on this host: FHIRSMITH_LISTEN_ADDRESS=::1 not tried");
    }
    // The flag, over the environment.
    let mut c = cluster()
        .workers(0)
        .env("FHIRSMITH_LISTEN_ADDRESS", "::1")
        .arg("--listen-address")
        .arg("127.0.0.1")
        .start();
    let line = c.wait_for("listening on port", Duration::from_secs(5));
    assert!(line.ends_with(" on 127.0.0.1"), "{line}");
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));

    // A bad one: one line naming the setting, exit 1, nothing started.
    let dir = tempfile::tempdir().expect("data dir");
    let out = run_bounded(
        launcher_command(dir.path()).args(["--listen-address", "localhost", "--check"]),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(
        out.stderr.contains("server.cluster.listenAddress")
            && out.stderr.contains("--listen-address"),
        "{}",
        out.all()
    );
}
