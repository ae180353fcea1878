//! The access-log line of a request answered before any request exists to hang it on (a head
//! hyper would refuse, a head over `headerMaxKB`): written from the head's bytes as they came,
//! or, for a head hyper's parser refused on a connection it held, without them (hyper keeps
//! none), so that every refusal is logged as the launcher's other answers are.

use std::fmt::Write as _;

use tokio::time::Instant;

use crate::logs::access_log::{AccessLog, InForce, Record};
use crate::proxy::answer::Answer;
use crate::proxy::forward::Peer;

/// Bytes of a method or target written at most.
const AT_MOST: usize = 2048;

/// Writes the line of `answer`, given to the head at the start of `head` from `peer`, whose
/// reading began at `started`; nothing while the access log (`in_force`) is off.
pub fn log(in_force: &InForce, head: &[u8], peer: &Peer, answer: &Answer, started: Instant) {
    let Some(log) = in_force.get() else {
        return;
    };
    let line = head
        .iter()
        .position(|&b| b == b'\n')
        .map_or(head, |n| &head[..n]);
    let line = line.trim_ascii_start();
    let mut words = line.splitn(2, |&b| b == b' ');
    let method = printable(words.next().unwrap_or_default());
    let rest = words.next().unwrap_or_default();
    // The target ends at the last space (before the version), or at the line's end.
    let target = rest
        .iter()
        .rposition(|&b| b == b' ')
        .map_or(rest, |n| &rest[..n]);
    let target = if log.query {
        target
    } else {
        target
            .iter()
            .position(|&b| b == b'?')
            .map_or(target, |n| &target[..n])
    };
    let target = printable(target);
    let method = if method.is_empty() { "-" } else { &method };
    let bytes = answer.outcome().to_bytes().len() as u64;
    write(&log, peer, (method, &target), answer, bytes, started);
}

/// Writes the line of `answer`, written by hyper itself (a status line, no body) to a head its
/// parser refused: without a method or target (hyper keeps none of the head).
pub fn log_hypers(in_force: &InForce, peer: &Peer, answer: &Answer, started: Instant) {
    if let Some(log) = in_force.get() {
        write(&log, peer, ("-", "-"), answer, 0, started);
    }
}

fn write(
    log: &AccessLog,
    peer: &Peer,
    (method, target): (&str, &str),
    answer: &Answer,
    bytes: u64,
    started: Instant,
) {
    log.write(&Record {
        client: &peer.addr.ip().to_canonical().to_string(),
        method,
        target,
        status: answer.status().as_u16(),
        bytes,
        process: None,
        queued: None,
        first_byte: None,
        total: started.elapsed(),
        refusal: Some(answer.reason()),
    });
}

/// The answer hyper wrote for a head its parser refused, read from the error it ended the
/// connection with (`None`: not such an error). hyper writes a `400` for a bad method, target,
/// version or header, a `431` for a head over its buffer or with over 100 headers, a `414` for
/// a target over its bound, and nothing for an HTTP/2 preface or its own internal error.
pub fn of_hyper(e: &hyper::Error, max_head: usize) -> Option<Answer> {
    if !e.is_parse() || e.is_parse_status() || e.is_parse_version_h2() {
        return None;
    }
    // hyper tells these apart only by their text.
    let text = e.to_string();
    if e.is_parse_too_large() {
        return Some(if text.contains("URI") {
            Answer::TargetTooLong
        } else {
            Answer::HeadTooLarge {
                max_kb: (max_head / 1024) as u64,
            }
        });
    }
    if text.contains("internal error") {
        return None;
    }
    Some(Answer::BadHead("a request head hyper's parser refused"))
}

/// `raw` as the log may show it: what is not printable ASCII (a control byte, a space, a
/// non-ASCII byte, `%` itself is kept) percent-encoded, so a line can't be split or forged; at
/// most `AT_MOST` bytes.
fn printable(raw: &[u8]) -> String {
    let mut s = String::with_capacity(raw.len().min(AT_MOST));
    for &b in raw.iter().take(AT_MOST) {
        if b.is_ascii_graphic() {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::Bytes;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What hyper's server, set up as the listener's, ends a connection sent `raw` (then the
    /// end of sending, if `end`) with, and what it wrote back.
    async fn hyper_on(raw: &[u8], max_head: usize, end: bool) -> (Option<hyper::Error>, String) {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let svc = hyper::service::service_fn(|_req| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(
                http_body_util::Empty::<Bytes>::new(),
            ))
        });
        let conn = crate::proxy::conn::hyper_phase::server_builder(max_head)
            .serve_connection(hyper_util::rt::TokioIo::new(server), svc);
        let _ = client.write_all(raw).await;
        if end {
            let _ = client.shutdown().await;
        }
        // A head hyper takes leaves it waiting for the next: not ended.
        let wait = std::time::Duration::from_secs(5);
        let ended = tokio::time::timeout(wait, conn)
            .await
            .ok()
            .and_then(|r| r.err());
        let mut wrote = Vec::new();
        let _ = tokio::time::timeout(wait, client.read_to_end(&mut wrote)).await;
        (ended, String::from_utf8_lossy(&wrote).into_owned())
    }

    #[tokio::test]
    async fn a_head_hypers_parser_refuses_is_counted_with_the_status_hyper_wrote() {
        // spec: DEC-38
        let max_head = 128 * 1024;
        let many = "X-N: 1\r\n".repeat(100);
        let long = "a".repeat(70_000);
        let cases = [
            "GET /a?q=\"x\" HTTP/1.1\r\nHost: a\r\n\r\n".to_string(),
            "GET /a HTTP/1.2\r\nHost: a\r\n\r\n".to_string(),
            "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 3\r\n\r\n{}".to_string(),
            format!("GET /a HTTP/1.1\r\nHost: a\r\n{many}\r\n"),
            format!("GET /{long} HTTP/1.1\r\nHost: a\r\n\r\n"),
        ];
        let mut statuses = Vec::new();
        for raw in &cases {
            let (ended, wrote) = hyper_on(raw.as_bytes(), max_head, false).await;
            let head = &raw[..raw.len().min(40)];
            let e = ended.unwrap_or_else(|| panic!("{head:?}: hyper took it"));
            let answer = of_hyper(&e, max_head).unwrap_or_else(|| panic!("{head:?}: {e:?}"));
            let status = answer.status().as_u16();
            assert!(
                wrote.starts_with(&format!("HTTP/1.1 {status} ")),
                "{e}: counted {status}, hyper wrote {wrote:?}"
            );
            statuses.push(status);
        }
        assert_eq!(statuses, [400, 400, 400, 431, 414]);
        // Not refusals: a client gone mid-head, or after a whole request.
        for raw in [
            "GET /a HTTP/1.1\r\nHo",
            "GET /a HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            let (ended, _) = hyper_on(raw.as_bytes(), max_head, true).await;
            assert!(
                ended.as_ref().and_then(|e| of_hyper(e, max_head)).is_none(),
                "{ended:?}"
            );
        }
    }

    #[test]
    fn what_is_not_printable_is_percent_encoded() {
        assert_eq!(
            printable(b"/a?q=\"x\"\t\x7f\xc3\xa4"),
            "/a?q=\"x\"%09%7F%C3%A4"
        );
        assert_eq!(printable(&[b'a'; 5000]).len(), AT_MOST);
    }
}
