//! Hostile and broken clients against the real binaries: headers trickled a byte at a time, a
//! client that never reads, malformed and smuggling HTTP, forged forwarding headers, hostile
//! `X-Cache-Id` values and `Upgrade` requests. Each is cut off, refused or answered plainly;
//! none reaches a process malformed, and none slows the clients that behave. Each test prints
//! its figures on a `RELIABILITY` line (see README, Reliability).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

fn codes(workers: u32) -> Vec<String> {
    std::iter::once("m0".to_string())
        .chain((1..=workers).map(|n| format!("tx{n}")))
        .collect()
}

/// Every process's own request count, summed.
fn answered_total(c: &Cluster, workers: u32) -> u64 {
    codes(workers).iter().map(|code| answered_by(c, code)).sum()
}

/// A read that waited for the launcher to close the connection: how long it took, or None when
/// the read timed out with the connection still open (any data or error counts as an end).
fn closed_after(read: std::io::Result<usize>, began: Instant) -> Option<Duration> {
    match read {
        Ok(_) => Some(began.elapsed()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            None
        }
        Err(_) => Some(began.elapsed()),
    }
}

/// Sends a client that trickles its request head one byte per `every`; returns how long until
/// the launcher closed the connection (None: still open after `give_up`).
fn trickle(addr: SocketAddr, every: Duration, give_up: Duration) -> Option<Duration> {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return Some(Duration::ZERO);
    };
    let began = Instant::now();
    let closed = Arc::new(AtomicBool::new(false));
    let mut reader = s.try_clone().ok()?;
    let flag = closed.clone();
    let watcher = std::thread::spawn(move || {
        let _ = reader.set_read_timeout(Some(give_up));
        let mut buf = [0u8; 512];
        let r = reader.read(&mut buf);
        flag.store(true, Ordering::SeqCst);
        closed_after(r, began)
    });
    let head = b"GET /r4/metadata HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for b in head.iter().cycle() {
        if closed.load(Ordering::SeqCst) || began.elapsed() > give_up {
            break;
        }
        if s.write_all(std::slice::from_ref(b)).is_err() {
            break;
        }
        // The pace is the scenario: one byte every `every`.
        std::thread::sleep(every);
    }
    watcher.join().ok().flatten()
}

#[test]
fn headers_sent_a_byte_at_a_time_are_cut_off_by_the_header_timeout_and_slow_nobody() {
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "headerTimeoutSeconds": 1 } } }))
        .start();
    let addr = c.addr();
    const SLOW: usize = 16;
    let slow = std::thread::spawn(move || {
        in_parallel(SLOW, move |_| {
            trickle(addr, Duration::from_millis(100), Duration::from_secs(8))
        })
    });
    // A client that connects and sends nothing at all.
    let silent = std::thread::spawn(move || {
        let began = Instant::now();
        let mut s = TcpStream::connect(addr).ok()?;
        let _ = s.set_read_timeout(Some(Duration::from_secs(8)));
        let mut buf = [0u8; 64];
        closed_after(s.read(&mut buf), began)
    });
    wait_until(
        "every slow client connected",
        Duration::from_secs(5),
        || clients_of(c.port) > SLOW,
    );
    let mut worst = Duration::ZERO;
    let mut normal = 0u64;
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(3) {
        let (r, took) = c.timed("GET", LOOKUP, &[], b"");
        assert_eq!(r.status, 200, "{}", r.text());
        worst = worst.max(took);
        normal += 1;
    }
    let cut: Vec<Option<Duration>> = slow.join().expect("slow clients");
    for t in &cut {
        let t = t.unwrap_or_else(|| panic!("a trickling client was never cut off: {cut:?}"));
        assert!(
            t >= Duration::from_millis(900) && t < Duration::from_millis(3000),
            "cut off after {t:?}, headerTimeoutSeconds is 1: {cut:?}"
        );
    }
    let silent = silent.join().expect("silent client");
    assert!(
        silent.is_some_and(|t| t < Duration::from_secs(4)),
        "a client that sends nothing is held open: {silent:?}"
    );
    assert!(
        worst < Duration::from_millis(750),
        "a normal client waited {worst:?} while {SLOW} trickled"
    );
    report_figures(
        "slow_headers",
        "16 clients trickling headers 1 byte/100 ms + 1 silent connection, headerTimeoutSeconds 1",
        SLOW as u64 + 1,
        normal,
        0,
        &format!(
            "all cut off in 0.9-3 s; normal client worst {} ms",
            worst.as_millis()
        ),
    );
}

#[test]
fn a_client_that_never_reads_is_cut_off_by_the_write_timeout_and_slows_nobody() {
    // spec: STREAM-4
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": { "writeTimeoutSeconds": 1 } } }))
        .start();
    // Four clients ask for 16 MiB tx responses and never read them.
    let mut stuck = Vec::new();
    for _ in 0..4 {
        let mut conn = Conn::open(c.addr()).expect("connect");
        conn.send("GET", &format!("{LOOKUP}&_sim_large_mb=16"), &[], b"", true)
            .expect("send");
        stuck.push(conn);
    }
    let began = Instant::now();
    let mut worst = Duration::ZERO;
    let mut normal = 0u64;
    while began.elapsed() < Duration::from_secs(3) {
        let (r, took) = c.timed("GET", LOOKUP, &[], b"");
        assert_eq!(r.status, 200);
        worst = worst.max(took);
        normal += 1;
    }
    // By now each was closed: what is left to read is what the kernel buffers held, then EOF.
    for conn in &mut stuck {
        let (read, ended) = conn.drain(Duration::from_secs(3));
        assert!(ended, "a client that never read is still connected");
        assert!(read < 16 << 20, "it got the whole response ({read} bytes)");
    }
    assert!(
        worst < Duration::from_millis(750),
        "normal client waited {worst:?}"
    );
    report_figures(
        "never_reads",
        "4 clients never reading 16 MiB responses, writeTimeoutSeconds 1",
        4,
        normal,
        0,
        &format!("all closed; normal client worst {} ms", worst.as_millis()),
    );
}

/// What the launcher did with one raw request: its status (0: none) and whether it then closed.
fn send_raw(addr: SocketAddr, raw: &[u8]) -> (u16, bool, String) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return (0, true, String::new());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = s.write_all(raw);
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break false
            }
            Err(_) => break true,
        }
    };
    let text = String::from_utf8_lossy(&all).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, closed, text)
}

#[test]
fn malformed_http_never_reaches_a_process_and_a_smuggled_request_is_never_forwarded() {
    let c = cluster().workers(1).start();
    let addr = c.addr();
    let big = "a".repeat(512 * 1024);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("Content-Length and Transfer-Encoding (smuggling)",
         b"POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /r4/metadata?smuggled=1 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("Transfer-Encoding then Content-Length",
         b"POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n0\r\n\r\nGET /r4/metadata?smuggled=2 HTTP/1.1\r\n\r\n".to_vec()),
        ("two different Content-Lengths",
         b"POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}GET /r4/metadata?smuggled=3 HTTP/1.1\r\n\r\n".to_vec()),
        ("a Content-Length list",
         b"POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 40\r\n\r\n{}".to_vec()),
        ("a negative Content-Length",
         b"POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}".to_vec()),
        ("Transfer-Encoding not ending in chunked",
         b"POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n2\r\n{}\r\n0\r\n\r\n".to_vec()),
        ("a bad chunk size",
         b"POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n".to_vec()),
        ("an overflowing chunk size",
         b"POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n{}\r\n0\r\n\r\n".to_vec()),
        ("an obs-folded header",
         b"GET /r4/metadata HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n".to_vec()),
        ("a header with no colon",
         b"GET /r4/metadata HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n".to_vec()),
        ("a space before the colon",
         b"GET /r4/metadata HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello".to_vec()),
        ("oversize headers (512 KiB)",
         format!("GET /r4/metadata HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n").into_bytes()),
        ("a request line with no version",
         b"GET /r4/metadata\r\nHost: x\r\n\r\n".to_vec()),
        ("an unknown HTTP version",
         b"GET /r4/metadata HTTP/9.9\r\nHost: x\r\n\r\n".to_vec()),
        ("a bad method token",
         b"G@T /r4/metadata HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("a NUL in the target",
         b"GET /r4/meta\x00data HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("a space in the target",
         b"GET /r4/meta data HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("binary garbage",
         (0u8..=255).rev().cycle().take(2000).collect()),
        ("an absolute-form target",
         b"GET http://evil.example/r4/metadata HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("CONNECT",
         b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n".to_vec()),
        ("an asterisk-form target",
         b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("a percent-escape cut short",
         b"GET /r4/CodeSystem/%zz HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
    ];
    let mut outcomes = Vec::new();
    for (i, (name, raw)) in cases.iter().enumerate() {
        let before = answered_total(&c, 1);
        let (status, closed, text) = send_raw(addr, raw);
        let after = answered_total(&c, 1);
        let reached = after.saturating_sub(before);
        let responses = text.matches("HTTP/1.1 ").count();
        outcomes.push(format!(
            "{name}: {status}{}",
            if closed { " closed" } else { "" }
        ));
        assert!(!text.contains("smuggled"), "{name}: {text}");
        assert!(responses <= 1, "{name}: more than one response:\n{text}");
        if i < 2 {
            // Both framings: hyper reads the body by Transfer-Encoding alone, never by the
            // Content-Length, and closes the connection after answering, as RFC 9112 §6.1
            // allows (it drops the Content-Length before the launcher sees the request, so the
            // launcher can't refuse it instead). The process gets one request, re-framed
            // chunked, with the empty body the chunked framing gave; the smuggled second
            // request is never read.
            assert!(
                reached <= 1,
                "{name}: {reached} requests reached a process:\n{text}"
            );
            assert!(closed, "{name}: the connection stayed open:\n{text}");
            assert!(text.contains("x-sim-body-length: 0"), "{name}:\n{text}");
            continue;
        }
        assert_eq!(reached, 0, "{name}: reached a process ({status}):\n{text}");
        assert!(
            (400..500).contains(&status) || status == 501 || (status == 0 && closed),
            "{name}: answered {status} (closed: {closed}):\n{text}"
        );
    }
    assert!(outcomes.iter().any(|o| o.contains("431")), "{outcomes:?}");
    // And the launcher is none the worse.
    assert_eq!(c.get(LOOKUP).status, 200);
    eprintln!("{}", outcomes.join("\n"));
    report_figures(
        "malformed_http",
        "malformed/smuggling requests: CL+TE, duplicate CL, bad chunks, obs-fold, 512 KiB headers, bad request lines, absolute-form, CONNECT",
        cases.len() as u64,
        cases.len() as u64,
        0,
        "each a 4xx/501 or closed; none reached a process except CL+TE (read by TE alone, then closed, as RFC 9112 allows); no smuggled second request",
    );
}

#[test]
fn forwarded_headers_are_trusted_only_from_loopback_and_for_is_appended() {
    // spec: EDGE-1, EDGE-2, EDGE-3, LAUNCH-6 (every interface: reached at a non-loopback address)
    let c = cluster().workers(1).start();
    let forged = [
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-For", "203.0.113.9"),
    ];
    // From loopback (the nginx on this host): the proto is believed, the chain appended to.
    let r = c.request("GET", LOOKUP, &forged, b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-sim-forwarded-proto"), Some("https"));
    assert_eq!(
        r.header("x-sim-forwarded-for"),
        Some("203.0.113.9, 127.0.0.1")
    );
    // From another address: a client in a network namespace of the test's own, reaching the
    // host at the non-loopback address of its end of a veth pair (so this runs on any host).
    let ns = NetNs::create().unwrap_or_else(|e| panic!("EDGE-3 end to end needs it: {e}"));
    let (addr, from) = (SocketAddr::from((ns.host, c.port)), ns.inside);
    let r = ns.run(move || request(addr, "GET", LOOKUP, &forged, b""));
    assert_eq!(r.status, 200, "via {addr}: {}", r.text());
    assert_eq!(
        r.header("x-sim-forwarded-proto"),
        Some("http"),
        "via {addr}"
    );
    assert_eq!(
        r.header("x-sim-forwarded-for"),
        Some(format!("203.0.113.9, {from}").as_str()),
        "via {addr}"
    );
    let tried = 2;
    report_figures(
        "forwarded_headers",
        "forged X-Forwarded-Proto/For from loopback and from a non-loopback address (a veth pair)",
        tried,
        tried,
        0,
        "proto replaced with http off loopback; For appended, never replaced",
    );
}

#[test]
fn hostile_cache_ids_select_no_process_by_accident_and_crash_nothing() {
    let c = cluster().workers(2).start();
    let addr = c.addr();
    let huge = format!("tx1.{}", "a".repeat(64 * 1024));
    let ids: Vec<(&str, Vec<u8>)> = vec![
        ("empty", b"".to_vec()),
        ("spaces only", b"   ".to_vec()),
        ("64 KiB", huge.into_bytes()),
        ("non-ASCII before the code", b"\xfftx1.abc.def".to_vec()),
        ("UTF-8 in the code", "tx\u{0661}.abc".as_bytes().to_vec()),
        ("obs-text NEL (0x85)", b"tx1\x85.abc".to_vec()),
        (
            "U+2028 line separator",
            "tx1\u{2028}.abc".as_bytes().to_vec(),
        ),
        ("a bare CR", b"tx1\r.abc".to_vec()),
        (
            "CR LF and an injected header",
            b"tx1.abc\r\nX-Injected: 1".to_vec(),
        ),
        ("a NUL", b"tx1\x00.abc".to_vec()),
        ("only a dot", b".".to_vec()),
        ("a code not running", b"tx9.abc.def".to_vec()),
        ("the master's code", b"m0.abc.def".to_vec()),
    ];
    let mut results = Vec::new();
    for (name, id) in &ids {
        let mut raw =
            format!("GET {LOOKUP} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Cache-Id: ")
                .into_bytes();
        raw.extend_from_slice(id);
        raw.extend_from_slice(b"\r\n\r\n");
        let r = raw_request(addr, &raw, Duration::from_secs(10));
        results.push(format!("{name}: {} {}", r.status, r.served_by()));
        assert!(
            [200, 400, 404, 431].contains(&r.status),
            "{name}: {} {}",
            r.status,
            r.text()
        );
        // Only an id that starts with a running process's code and a dot picks that process;
        // a 404 then is its cache-id-unknown, nothing else.
        if r.status == 404 {
            assert!(r.is_cache_id_unknown(), "{name}: {}", r.text());
        }
        if !id.starts_with(b"tx1.") && r.status == 200 {
            // Rotation may land on any process: what matters is that it was served at all.
            assert!(!r.served_by().is_empty(), "{name}");
        }
        assert!(
            c.get(LOOKUP).status == 200,
            "{name}: the launcher stopped serving"
        );
    }
    assert!(
        c.line_index("panicked").is_none(),
        "{}",
        c.log_lines().join("\n")
    );
    eprintln!("{}", results.join("\n"));
    report_figures(
        "hostile_cache_ids",
        "X-Cache-Id empty, 64 KiB, non-ASCII, obs-text, CR/LF, NUL, unknown codes",
        ids.len() as u64,
        ids.len() as u64 * 2,
        0,
        "each 200/400/404 cache-id-unknown/431; launcher kept serving",
    );
}

#[test]
fn upgrade_requests_are_answered_as_plain_http_and_the_connection_stays_http() {
    let c = cluster().workers(1).start();
    let mut conn = Conn::open(c.addr()).expect("connect");
    for upgrade in ["websocket", "h2c"] {
        conn.send(
            "GET",
            LOOKUP,
            &[
                ("Connection", "Upgrade, HTTP2-Settings"),
                ("Upgrade", upgrade),
                ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                ("Sec-WebSocket-Version", "13"),
                ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"),
            ],
            b"",
            true,
        )
        .expect("send");
        let r = conn.read();
        assert_eq!(r.status, 200, "{upgrade}: {}", r.text());
        assert!(r.header("upgrade").is_none(), "{upgrade}");
    }
    // Still plain HTTP/1.1 on the same connection.
    conn.send("GET", LOOKUP, &[], b"", false).expect("send");
    assert_eq!(conn.read().status, 200);
    report_figures(
        "upgrade",
        "Upgrade: websocket and h2c on a keep-alive connection",
        2,
        3,
        0,
        "200 as plain HTTP/1.1, no 101, connection stays HTTP",
    );
}
