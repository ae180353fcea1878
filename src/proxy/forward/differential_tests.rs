//! The launcher's own upstream client against hyper's (`hyper::client::conn::http1`, the client
//! it replaces), fed the same generated response bytes (`differential_cases.rs`), valid and
//! hostile, split at random read boundaries or a byte or three at a time: both refuse, or both
//! give the same status, reason phrase, headers as the proxy passes them on, and body, and agree
//! on whether the connection could carry another request; when it could, a second request goes
//! on it and is held to the same. The process also records each request as it arrived: both
//! clients must write the same bytes (`GET`, `HEAD`, `POST` with a length or streamed chunked).
//!
//! The deliberate differences, each applied to hyper's outcome before the comparison
//! ([`as_ours`]), with its reason:
//!
//! 1. A response with both `Transfer-Encoding: chunked` and `Content-Length` is framed by its
//!    chunks by both, but only hyper would reuse its connection (RFC 9112 §6.3 item 3 calls it a
//!    sign of response splitting).
//! 2. A `101 Switching Protocols` is refused by ours (the launcher's `502`): the launcher never
//!    passes an `Upgrade` on, so the switch is unsolicited (RFC 9110 §15.2.2) and what follows on
//!    the connection is no HTTP/1.1. hyper gave the `101` to the caller, who passed it on with no
//!    `Upgrade` header.
//! 3. A reason phrase with obs-text (`Não encontrado`, `\xff\xfe`) goes on as received; hyper's
//!    client kept httparse's empty fallback for it.
//! 4. A `Content-Length` list (`5, 5`) or repeated lines go on as one value (RFC 9110 §8.6);
//!    differing lengths on a response whose framing never reads them (`HEAD`, `204`, `304`) are
//!    not passed on. hyper passed both on as they came.
//! 5. A head longer than the 64 KB read cap is refused by ours however its bytes arrive; hyper's
//!    `max_buf_size` bounded its buffer, not the head, and it took some 70 KB heads and refused
//!    others, by how the reads fell.
//! 6. A connection on which the process wrote anything after a response's framed end (a body
//!    on a `204`, `304` or `HEAD` answer, more than its `Content-Length`, a stray response) is
//!    never reused by ours: those bytes became the next request's answer (issue #25, defect 3).
//!    hyper's `ready()` said yes or no by how the reads fell. Ours is held to it as the pool
//!    checks a connection it takes out again (`observed_closed`), once the process has written
//!    all it will.
//! 7. After an HTTP/1.0 answer, hyper wrote the next request on that connection as HTTP/1.0
//!    with `Connection: keep-alive`; ours stays HTTP/1.1 (RFC 9110 §2.5: a client sends the
//!    highest version it conforms to; the processes are Node's HTTP/1.1 servers). A body of
//!    unknown size, which HTTP/1.0 cannot chunk, hyper then sent none of (found by the fuzzing
//!    in `http1::fuzz_tests`); ours sends it chunked: not compared from there.
//!
//! 1xx heads other than `101` (`100`, `102`, `103`, with headers or without reasons) are
//! skipped by both alike: no difference.
//!
//! Both run on a paused clock over an in-memory duplex: a timeout fires only once neither side
//! can make progress, which is how "the whole response has been seen and more is awaited" is
//! told, deterministically; the process then closes its end (a body read to the close ends).

#[path = "differential_cases.rs"]
mod cases;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::BodyExt;
use hyper::ext::ReasonPhrase;
use hyper_util::rt::TokioIo;
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::oneshot;

use super::headers::strip_hop_by_hop;
use super::test_support::Repeat;
use super::upstream_conn::{Home, UpstreamConn, UPSTREAM_READ_AT_MOST};
use cases::{as_our_request, final_line, one_length, switches, Req, Resp, STATUS_LINES};
pub(crate) use cases::{case, Case};

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// No response head (malformed, or the connection closed first).
    Refused,
    Answered {
        status: u16,
        /// The reason phrase the client is given, when it is not the usual one.
        reason: Option<Bytes>,
        headers: HeaderMap,
        /// The body, or `None` if it failed.
        body: Option<Bytes>,
        reusable: bool,
    },
}

/// What one client saw: an outcome per request sent, and the requests as the process read them.
type Seen = (Vec<Outcome>, Vec<Vec<u8>>);

/// Reads one request (head, then its body by `Content-Length` or to the last chunk) whole.
async fn read_request(s: &mut DuplexStream) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    while !seen.ends_with(b"\r\n\r\n") {
        seen.push(s.read_u8().await.ok()?);
    }
    let head = String::from_utf8_lossy(&seen).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    if let Some(n) = length {
        let at = seen.len();
        seen.resize(at + n, 0);
        s.read_exact(&mut seen[at..]).await.ok()?;
    } else if head.contains("transfer-encoding: chunked") {
        // The body is `x`s: the last chunk is the only `0` size line.
        while !seen.ends_with(b"\r\n0\r\n\r\n") {
            seen.push(s.read_u8().await.ok()?);
        }
    }
    Some(seen)
}

/// The process's end: for each request, reads it whole (recorded in `got`), then writes its
/// answer's pieces one by one; closes when told to, or once the answers are spent and it is
/// told to. (Bytes before a request would be a message the client never asked for.)
fn serve(
    mut server: DuplexStream,
    answers: Vec<Vec<Vec<u8>>>,
    mut close: oneshot::Receiver<()>,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
) {
    tokio::spawn(async move {
        for pieces in answers {
            let req = tokio::select! {
                r = read_request(&mut server) => r,
                _ = &mut close => return,
            };
            let Some(req) = req else {
                return;
            };
            got.lock().unwrap().push(req);
            for p in pieces {
                if server.write_all(&p).await.is_err() {
                    return;
                }
                tokio::task::yield_now().await;
            }
        }
        let _ = close.await;
    });
}

const PATIENCE: Duration = Duration::from_secs(5);

/// Waits for `f`; if it does not finish while everything else is idle, closes the process's
/// end and waits again.
async fn or_after_close<F: std::future::Future>(
    f: F,
    close: &mut Option<oneshot::Sender<()>>,
) -> F::Output {
    tokio::pin!(f);
    match tokio::time::timeout(PATIENCE, &mut f).await {
        Ok(out) => out,
        Err(_) => {
            drop(close.take());
            f.await
        }
    }
}

type Back = Arc<Mutex<Option<Box<UpstreamConn<DuplexStream>>>>>;

/// The pool's part: keeps the connection handed back, for the next request.
struct Recorder(Back);

impl Home<DuplexStream> for Recorder {
    fn take_back(&self, conn: Box<UpstreamConn<DuplexStream>>) {
        *self.0.lock().unwrap() = Some(conn);
    }
}

fn reason_of(ext: &http::Extensions) -> Option<Bytes> {
    ext.get::<ReasonPhrase>()
        .map(|p| Bytes::copy_from_slice(p.as_bytes()))
}

async fn ours(c: &Case) -> Seen {
    let (client, server) = tokio::io::duplex(1 << 20);
    let (close_tx, close_rx) = oneshot::channel();
    let mut close = Some(close_tx);
    let got = Arc::default();
    serve(server, answers(c), close_rx, Arc::clone(&got));
    let mut conn = Some(Box::new(UpstreamConn::new(client, 0)));
    let mut outcomes = Vec::new();
    for req in &c.reqs {
        let Some(mut on) = conn.take() else {
            break;
        };
        let method = req.method();
        let (mut parts, mut body) = req.request().into_parts();
        if on.write_request(&mut parts, &mut body).await.is_err() {
            outcomes.push(Outcome::Refused);
            break;
        }
        let Ok(head) = or_after_close(on.read_head(&method), &mut close).await else {
            outcomes.push(Outcome::Refused);
            break;
        };
        let back: Back = Arc::default();
        let home: Arc<dyn Home<DuplexStream>> = Arc::new(Recorder(Arc::clone(&back)));
        let (mut parts, body) = on.respond(head, Some(home)).into_parts();
        let body = or_after_close(body.collect(), &mut close)
            .await
            .ok()
            .map(|c| c.to_bytes());
        strip_hop_by_hop(&mut parts.headers);
        // As the pool takes it out again: after the process has written all it will (the
        // paused clock runs on only when nothing else can), a look at the socket, which
        // drops a connection with anything on it (stray bytes after a response's end).
        // The scenario, on the paused clock: time passes only once every task is idle.
        tokio::time::sleep(PATIENCE).await;
        conn = back.lock().unwrap().take();
        conn = conn.filter(|_| close.is_some());
        if conn.as_mut().is_some_and(|c| c.observed_closed()) {
            conn = None;
        }
        outcomes.push(Outcome::Answered {
            status: parts.status.as_u16(),
            reason: reason_of(&parts.extensions),
            headers: parts.headers,
            body,
            reusable: conn.is_some(),
        });
    }
    drop(close);
    let got = got.lock().unwrap().clone();
    (outcomes, got)
}

async fn theirs(c: &Case) -> Seen {
    let (client, server) = tokio::io::duplex(1 << 20);
    let (close_tx, close_rx) = oneshot::channel();
    let mut close = Some(close_tx);
    let got = Arc::default();
    serve(server, answers(c), close_rx, Arc::clone(&got));
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(UPSTREAM_READ_AT_MOST)
        .handshake::<_, Repeat>(TokioIo::new(client))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut outcomes = Vec::new();
    for req in &c.reqs {
        let Ok(resp) = or_after_close(sender.send_request(req.request()), &mut close).await else {
            outcomes.push(Outcome::Refused);
            break;
        };
        let (mut parts, body) = resp.into_parts();
        let body = or_after_close(body.collect(), &mut close)
            .await
            .ok()
            .map(|c| c.to_bytes());
        // Reusable: hyper says the connection is ready for another request (before any close).
        let reusable = close.is_some()
            && body.is_some()
            && matches!(
                tokio::time::timeout(PATIENCE, sender.ready()).await,
                Ok(Ok(()))
            );
        strip_hop_by_hop(&mut parts.headers);
        outcomes.push(Outcome::Answered {
            status: parts.status.as_u16(),
            reason: reason_of(&parts.extensions),
            headers: parts.headers,
            body,
            reusable,
        });
        if !reusable {
            break;
        }
    }
    drop(close);
    let got = got.lock().unwrap().clone();
    (outcomes, got)
}

fn answers(c: &Case) -> Vec<Vec<Vec<u8>>> {
    (0..c.resps.len()).map(|i| c.pieces(i)).collect()
}

/// hyper's outcomes as ours are meant to be: the deliberate differences of the module's notes,
/// applied in order; the list ends at the first request after which ours would not go on.
/// With how many requests are compared, when difference 7 ends the comparison early.
fn as_ours(c: &Case, hypers: Vec<Outcome>) -> (Vec<Outcome>, Option<usize>) {
    let mut out = Vec::new();
    let mut after_http_10 = false;
    for (i, ((resp, req), mut o)) in c.resps.iter().zip(&c.reqs).zip(hypers).enumerate() {
        // 7. After an HTTP/1.0 answer, a body of unknown size: hyper, writing HTTP/1.0, which
        // has no chunked coding, sent the request without it; ours sends it chunked. Not
        // compared from there.
        if after_http_10 && matches!(req, Req::PostStreamed(_)) {
            return (out, Some(i));
        }
        after_http_10 = final_line(STATUS_LINES[resp.status]).starts_with(b"HTTP/1.0");
        if let Outcome::Answered {
            status,
            reason,
            headers,
            reusable,
            ..
        } = &mut o
        {
            // 2 and 5. An unsolicited switch of protocols, or a head over the read cap: refused.
            if resp.too_large() || (*status == 101 && switches(resp.status)) {
                out.push(Outcome::Refused);
                break;
            }
            // 1. Chunked with a length, on a response whose body is read: never reused.
            let has_body = !matches!(*status, 204 | 304) && *req != Req::Head;
            if resp.te_and_cl() && has_body {
                *reusable = false;
            }
            // 6. Bytes after the response's end: never reused.
            if c.stray_after(i) {
                *reusable = false;
            }
            // 3. obs-text in the reason: as received.
            if resp.reason().iter().any(|&b| b >= 0x80) && reason.as_deref() == Some(b"") {
                *reason = Some(Bytes::copy_from_slice(resp.reason()));
            }
            // 4. One length, once.
            one_length(headers);
        }
        let goes_on = matches!(o, Outcome::Answered { reusable: true, .. });
        out.push(o);
        if !goes_on {
            break;
        }
    }
    (out, None)
}

/// Runs `f` on a paused clock, on one thread.
pub(crate) fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(f)
}

/// Holds our client to hyper's on `c`: panics with both outcomes where they differ.
pub(crate) fn compare(c: &Case) {
    let (mine, my_requests) = run(ours(c));
    let (hypers, their_requests) = run(theirs(c));
    let text = c.text();
    let (expected, cut) = as_ours(c, hypers);
    let (mine, my_requests): (Vec<Outcome>, Vec<Vec<u8>>) = match cut {
        Some(n) => (
            mine.into_iter().take(n).collect(),
            my_requests.into_iter().take(n).collect(),
        ),
        None => (mine, my_requests),
    };
    // Where ours stops (a deliberate difference), hyper's later requests are not compared.
    let their_requests: Vec<Vec<u8>> = their_requests
        .iter()
        .take(expected.len())
        .map(|r| as_our_request(r))
        .collect();
    assert!(
        mine == expected,
        "ours: {}\nhyper's, as ours should be: {}\nfor {text}",
        short(&mine),
        short(&expected)
    );
    assert!(
        my_requests == their_requests,
        "the requests differ: {} / {} for {text}",
        short(
            &my_requests
                .iter()
                .map(|r| String::from_utf8_lossy(r))
                .collect::<Vec<_>>()
        ),
        short(
            &their_requests
                .iter()
                .map(|r| String::from_utf8_lossy(r))
                .collect::<Vec<_>>()
        ),
    );
}

/// A value's debug text, its first 3,000 characters (a 70 KB header would drown the failure).
fn short<T: std::fmt::Debug>(t: &T) -> String {
    format!("{t:?}").chars().take(3000).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn our_client_frames_responses_as_hyper_does(c in case()) {
        compare(&c);
    }
}

#[test]
fn the_generator_reaches_the_cases_that_matter() {
    // A few fixed cases through the same comparison, so each kind is surely run.
    let resp = Resp {
        status: 0,
        headers: vec![],
        lf_only: false,
        body: b"hello world".to_vec(),
        chunk_style: 0,
        chunk_cuts: vec![3, 7],
    };
    let base = Case {
        resps: vec![resp.clone()],
        reqs: vec![Req::Get],
        junk_after: false,
        splits: vec![1, 5, 20, 40],
        trickle: false,
    };
    let one = |r: Resp| Case {
        resps: vec![r],
        ..base.clone()
    };
    for (headers, style) in [
        (vec![0], 0),
        (vec![8], 0),
        (vec![8], 1),
        (vec![8], 2),
        (vec![8], 3),
        (vec![8], 4),
        (vec![8, 0], 0),
        (vec![10], 0),
        (vec![5], 0),
        (vec![4], 0),
        (vec![0, 0], 0),
        (vec![19], 0),
        (vec![0, 11], 0),
        (vec![15], 0),
        (vec![16], 0),
        (vec![20], 0),
        (vec![21], 0),
        (vec![], 0),
    ] {
        compare(&one(Resp {
            headers,
            chunk_style: style,
            ..resp.clone()
        }));
    }
    // Every status line, with a length, and again trickled.
    for status in 0..cases::STATUS_LINES.len() {
        for trickle in [false, true] {
            compare(&Case {
                trickle,
                ..one(Resp {
                    status,
                    headers: vec![0],
                    ..resp.clone()
                })
            });
        }
    }
    compare(&one(Resp {
        status: 1,
        headers: vec![0, 12],
        ..resp.clone()
    }));
    // Keep-alive: a second request on the connection, after each kind of first answer.
    let big = Resp {
        headers: vec![0],
        body: vec![7; 150_000],
        ..resp.clone()
    };
    for (first, req) in [
        (vec![0], Req::Get),
        (vec![8], Req::Post(20)),
        (vec![4], Req::PostStreamed(3)),
        (vec![0], Req::Post(70_000)),
        (vec![0], Req::Head),
    ] {
        let first = Resp {
            headers: first,
            ..resp.clone()
        };
        compare(&Case {
            resps: vec![first, big.clone()],
            reqs: vec![req, Req::Get],
            ..base.clone()
        });
    }
    compare(&Case {
        reqs: vec![Req::Head],
        ..one(Resp {
            headers: vec![0],
            ..resp.clone()
        })
    });
    compare(&Case {
        junk_after: true,
        ..one(Resp {
            headers: vec![0],
            ..resp.clone()
        })
    });
    compare(&one(Resp {
        lf_only: true,
        headers: vec![8],
        ..resp
    }));
}
