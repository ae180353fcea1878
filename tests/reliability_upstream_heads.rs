//! A hostile upstream's response heads, through the real launcher: a process (a raw Python
//! server, `tests/fixtures/raw-status-server.py`) answering with a status line without a reason
//! phrase, with UTF-8 or non-UTF-8 obs-text in it, an interim head without one, an unsolicited
//! `101 Switching Protocols`, and `Content-Length` lists and repeats. The launcher must never
//! exit; each client gets the answer (the reason as received, one `Content-Length`) or the
//! launcher's own `502`, and the next request is served. (Issue #25, defects 1, 6 and 7: one
//! status line without a reason took the whole service down.) Prints its figures on a
//! `RELIABILITY` line (README, Reliability).

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::*;

const RAW: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/raw-status-server.py"
);
const WAIT: Duration = Duration::from_secs(20);

/// A response exactly as the client received it.
#[derive(Debug)]
struct Raw {
    status_line: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Raw {
    fn status(&self) -> u16 {
        self.status_line
            .get(9..12)
            .and_then(|c| std::str::from_utf8(c).ok())
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    fn all(&self, name: &str) -> Vec<&[u8]> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
            .collect()
    }
}

/// One request on a fresh connection (`Connection: close`), its answer read byte for byte; `None`
/// when the connection failed or closed before a whole answer.
fn exchange(addr: SocketAddr, method: &str, target: &str, body: &[u8]) -> Option<Raw> {
    let s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(WAIT)).ok()?;
    let mut r = BufReader::new(s);
    exchange_on(&mut r, addr, method, target, body, true)
}

/// One request on the connection `r` reads (kept alive unless `close`), its answer read byte for
/// byte (by its `Content-Length`, its chunks, or to the close).
fn exchange_on(
    r: &mut BufReader<TcpStream>,
    addr: SocketAddr,
    method: &str,
    target: &str,
    body: &[u8],
    close: bool,
) -> Option<Raw> {
    let connection = if close { "close" } else { "keep-alive" };
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: {connection}\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    r.get_mut().write_all(head.as_bytes()).ok()?;
    r.get_mut().write_all(body).ok()?;
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).ok()?;
    let status_line = line.strip_suffix(b"\r\n")?.to_vec();
    let mut headers = Vec::new();
    loop {
        let mut h = Vec::new();
        r.read_until(b'\n', &mut h).ok()?;
        let h = h.strip_suffix(b"\r\n")?;
        if h.is_empty() {
            break;
        }
        let colon = h.iter().position(|&b| b == b':')?;
        let name = String::from_utf8_lossy(&h[..colon]).into_owned();
        headers.push((name, h[colon + 1..].trim_ascii().to_vec()));
    }
    let mut raw = Raw {
        status_line,
        headers,
        body: Vec::new(),
    };
    let length = raw
        .all("content-length")
        .first()
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse::<usize>().ok());
    let chunked = raw
        .all("transfer-encoding")
        .iter()
        .any(|v| v.eq_ignore_ascii_case(b"chunked"));
    if let Some(n) = length {
        raw.body.resize(n, 0);
        r.read_exact(&mut raw.body).ok()?;
    } else if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            raw.body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut raw.body).ok()?;
    }
    Some(raw)
}

/// What a client must get for each scripted answer: the status, the status line's reason as
/// received (`None`: not looked at), the body. A `502` is the launcher's own (an
/// OperationOutcome).
struct Expect {
    answer: &'static str,
    status: u16,
    reason: Option<&'static [u8]>,
    body: &'static [u8],
}

const EXPECTED: &[Expect] = &[
    Expect {
        answer: "noreason",
        status: 200,
        reason: None,
        body: b"ok",
    },
    Expect {
        answer: "utf8",
        status: 404,
        reason: Some("N\u{e3}o encontrado".as_bytes()),
        body: b"not found",
    },
    Expect {
        answer: "obstext",
        status: 200,
        reason: Some(b"\xff\xfeOK"),
        body: b"ok",
    },
    Expect {
        answer: "interim",
        status: 201,
        reason: None,
        body: b"ok",
    },
    // RFC 9110 §15.2.2: a 101 answers only an Upgrade, which the launcher never passes on.
    Expect {
        answer: "switch",
        status: 502,
        reason: None,
        body: b"",
    },
    // RFC 9110 §8.6: one length, sent as one value.
    Expect {
        answer: "cllist",
        status: 200,
        reason: None,
        body: b"hello",
    },
    Expect {
        answer: "clrepeat",
        status: 200,
        reason: None,
        body: b"hello",
    },
    Expect {
        answer: "cldiffer",
        status: 502,
        reason: None,
        body: b"",
    },
];

/// Why `got` is not what `e` wants, if it is not.
fn wrong(e: &Expect, got: &Raw) -> Option<String> {
    let what = || {
        format!(
            "{}: {:?}",
            e.answer,
            String::from_utf8_lossy(&got.status_line)
        )
    };
    if got.status() != e.status {
        return Some(format!("{} (wanted {})", what(), e.status));
    }
    if e.status == 502 {
        let outcome = String::from_utf8_lossy(&got.body).contains("OperationOutcome");
        return (!outcome).then(|| format!("{}: not the launcher's own 502", what()));
    }
    if let Some(reason) = e.reason {
        let mut line = b"HTTP/1.1 ".to_vec();
        line.extend_from_slice(&got.status_line[9..12]);
        line.push(b' ');
        line.extend_from_slice(reason);
        if got.status_line != line {
            return Some(format!(
                "{}: the reason was not passed on as received",
                what()
            ));
        }
    }
    let lengths = got.all("content-length");
    if lengths.len() != 1 || lengths[0] != e.body.len().to_string().as_bytes() {
        return Some(format!("{}: Content-Length {lengths:?}", what()));
    }
    (got.body != e.body).then(|| format!("{}: body {:?}", what(), got.body))
}

#[test]
fn hostile_status_lines_and_lengths_never_bring_the_launcher_down() {
    // spec: LAUNCH-9 (the answer or a 502, never the service down), LAUNCH-8
    let script = format!("exec python3 {RAW} \"$PORT\"");
    let mut c = cluster().workers(1).command(&["sh", "-c", &script]).start();
    for code in ["m0", "tx1"] {
        c.wait_for(&format!("{code}: ready on port"), WAIT);
    }
    const ROUNDS: usize = 3;
    // A tx route, a route any process serves, and a POST with a body.
    let targets = [
        ("GET", format!("{}&answer=", common::LOOKUP)),
        ("GET", "/r4/metadata?answer=".to_string()),
        ("POST", "/r4/CodeSystem/$lookup?answer=".to_string()),
    ];
    let (mut requests, mut faults, mut lost) = (0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        for e in EXPECTED {
            let (method, prefix) = &targets[(round + faults as usize) % targets.len()];
            let target = format!("{prefix}{}", e.answer);
            let body: &[u8] = if *method == "POST" {
                br#"{"resourceType":"Parameters"}"#
            } else {
                b""
            };
            faults += 1;
            requests += 1;
            match exchange(c.addr(), method, &target, body) {
                Some(got) => failures.extend(wrong(e, &got)),
                None => {
                    lost += 1;
                    failures.push(format!("{method} {target}: no answer"));
                }
            }
            // The launcher is still there and the next request is served.
            assert!(
                matches!(c.child.try_wait(), Ok(None)),
                "the launcher exited after {method} {target}: {failures:?}\n{}",
                c.log_lines().join("\n")
            );
            requests += 1;
            match exchange(c.addr(), "GET", common::LOOKUP, b"") {
                Some(next) if next.status() == 200 => {}
                other => {
                    lost += 1;
                    failures.push(format!("after {target}: next request got {other:?}"));
                }
            }
        }
    }
    // Again on one kept-alive client connection: each answer, then a plain request, in turn.
    let kept = TcpStream::connect(c.addr()).expect("connect to the launcher");
    kept.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let mut kept = BufReader::new(kept);
    for e in EXPECTED {
        let target = format!("{}&answer={}", common::LOOKUP, e.answer);
        faults += 1;
        requests += 2;
        match exchange_on(&mut kept, c.addr(), "GET", &target, b"", false) {
            Some(got) => failures.extend(wrong(e, &got)),
            None => {
                lost += 1;
                failures.push(format!("kept-alive GET {target}: no answer"));
                break;
            }
        }
        match exchange_on(&mut kept, c.addr(), "GET", common::LOOKUP, b"", false) {
            Some(next) if next.status() == 200 => {}
            other => {
                lost += 1;
                failures.push(format!("kept-alive, after {target}: {other:?}"));
                break;
            }
        }
    }
    assert!(
        matches!(c.child.try_wait(), Ok(None)),
        "the launcher exited: {failures:?}\n{}",
        c.log_lines().join("\n")
    );
    report_figures(
        "hostile_status_lines_and_lengths_never_bring_the_launcher_down",
        "a process answering status lines without a reason, with UTF-8 and non-UTF-8 obs-text, \
         an interim head without one, an unsolicited 101, Content-Length lists, repeats and \
         disagreements; each followed by a plain request, on fresh client connections and on \
         one kept alive",
        faults,
        requests,
        lost,
        "launcher never exited; each answer passed on (reason as received, one Content-Length) \
         or the launcher's own 502; every next request served",
    );
    assert!(
        failures.is_empty(),
        "{failures:#?}\n{}",
        c.log_lines().join("\n")
    );
    assert_eq!(lost, 0);
}

#[test]
fn an_answers_own_headers_reach_the_client_as_they_came_and_its_hop_by_hop_ones_do_not() {
    // spec: LAUNCH-9 (a malformed head is the launcher's 502, never the service down). RFC 9110
    // §7.6.1 (hop-by-hop headers stop here), RFC 6265 §3 (each Set-Cookie line on its own).
    let script = format!("exec python3 {RAW} \"$PORT\"");
    let mut c = cluster().workers(1).command(&["sh", "-c", &script]).start();
    for code in ["m0", "tx1"] {
        c.wait_for(&format!("{code}: ready on port"), WAIT);
    }
    let (mut requests, mut lost) = (0u64, 0u64);
    let mut failures = Vec::new();
    for target in [
        format!("{}&answer=headers", common::LOOKUP),
        "/r4/metadata?answer=headers".to_string(),
    ] {
        requests += 1;
        let Some(got) = exchange(c.addr(), "GET", &target, b"") else {
            lost += 1;
            failures.push(format!("{target}: no answer"));
            continue;
        };
        let want: [(&str, &[&[u8]]); 6] = [
            ("set-cookie", &[b"a=1; Path=/", b"b=2"]),
            ("vary", &[b"Accept", b"Origin, Accept-Encoding"]),
            ("x-odd_name.v2", &[b"kept"]),
            ("content-length", &[b"2"]),
            ("x-hop", &[]),
            ("keep-alive", &[]),
        ];
        for (name, values) in want {
            if got.all(name) != values {
                failures.push(format!("{target}: {name}: {:?}", got.all(name)));
            }
        }
        // The client's leg has its own `Connection` (hyper's), never the process's.
        let theirs = |v: &&[u8]| {
            String::from_utf8_lossy(v)
                .to_ascii_lowercase()
                .contains("x-hop")
        };
        if got.all("connection").iter().any(theirs) {
            failures.push(format!("{target}: connection: {:?}", got.all("connection")));
        }
        if got.status() != 200 || got.body != b"ok" {
            failures.push(format!(
                "{target}: {:?}",
                String::from_utf8_lossy(&got.status_line)
            ));
        }
    }
    requests += 1;
    let target = format!("{}&answer=obsfold", common::LOOKUP);
    match exchange(c.addr(), "GET", &target, b"") {
        Some(got) if got.status() == 502 => {}
        other => failures.push(format!("{target}: {other:?}")),
    }
    assert!(
        matches!(c.child.try_wait(), Ok(None)),
        "the launcher exited: {failures:?}"
    );
    report_figures(
        "an_answers_own_headers_reach_the_client_as_they_came_and_its_hop_by_hop_ones_do_not",
        "a process answering two Set-Cookie lines, a Vary list, an odd name, a header its \
         Connection names and Keep-Alive (tx and master routes), then a folded header line",
        1,
        requests,
        lost,
        "each header passed on as it came, the hop-by-hop ones dropped, the fold the \
         launcher's own 502, the launcher up",
    );
    assert!(
        failures.is_empty(),
        "{failures:#?}\n{}",
        c.log_lines().join("\n")
    );
    assert_eq!((requests, lost), (3, 0));
}
