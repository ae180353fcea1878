//! The pool's reuse against a process that writes outside its answers (issue #25, defect 3) and
//! one that closes a kept-alive connection as the next request arrives (DEC-33): scripted
//! servers on 127.0.0.1 in plain threads, so what they write is in the socket before the
//! launcher's next step, whatever its reactor has seen.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;

use http::Request;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;

use super::super::test_support::bounded;
use super::super::ForwardError;
use super::Upstream;

type Up = Upstream<Empty<Bytes>>;

fn get(path: &str) -> Request<Empty<Bytes>> {
    Request::get(path).body(Empty::new()).unwrap()
}

fn answer(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one request head; its path, or `None` at the end of the connection.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let path = line.split(' ').nth(1)?.to_string();
    loop {
        line.clear();
        if r.read_line(&mut line).ok()? == 0 || line == "\r\n" {
            break;
        }
    }
    Some(path)
}

/// A server in a thread running `script` on each connection it accepts (with its number).
fn server(script: impl Fn(usize, TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        let script = std::sync::Arc::new(script);
        for (n, s) in l.incoming().enumerate() {
            let Ok(s) = s else { return };
            let script = std::sync::Arc::clone(&script);
            thread::spawn(move || script(n, s));
        }
    });
    addr
}

/// Each request answered with its path.
fn echo(mut s: TcpStream) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    while let Some(path) = read_request(&mut r) {
        let _ = s.write_all(&answer(&path));
    }
}

async fn body_of(up: &Up, path: &str) -> Bytes {
    let resp = bounded("response", up.send(get(path))).await.unwrap();
    resp.into_body().collect().await.unwrap().to_bytes()
}

/// A process that answers its first request, writes a stray response when `go` comes (in its
/// own write, after the answer was read), says so on `wrote`, and then echoes each request's
/// target; every later connection only echoes.
fn stray_after_go() -> (SocketAddr, mpsc::Sender<()>, mpsc::Receiver<()>) {
    let (wrote_tx, wrote_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = std::sync::Mutex::new(Some(go_rx));
    let addr = server(move |n, mut s| {
        if n > 0 {
            return echo(s);
        }
        let mut r = BufReader::new(s.try_clone().unwrap());
        let first = read_request(&mut r).unwrap();
        s.write_all(&answer(&first)).unwrap();
        if let Some(go) = go_rx.lock().unwrap().take() {
            let _ = go.recv();
        }
        s.write_all(&answer("stray")).unwrap();
        let _ = wrote_tx.send(());
        echo(s);
    });
    (addr, go_tx, wrote_rx)
}

fn one_thread() -> tokio::runtime::Runtime {
    // One thread, so nothing polls the reactor while this task runs without yielding.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A stray response written after the answer was read, in its own write, reaches the socket
/// while the runtime is held up past the span the reactor's word is taken for: the reactor has
/// not marked the socket readable, so its word would hand the connection on, and the next
/// request would take the stray for its answer. The kernel's look at checkout sees it.
#[test]
fn a_late_stray_response_is_seen_at_checkout_whatever_the_reactor_knows() {
    // spec: DEC-58: the one look, at checkout, sees a stray written after the check-in.
    // spec: DEC-67: past REACTOR_TRUSTED_FOR after its answer, the kernel is asked.
    let (addr, go_tx, wrote_rx) = stray_after_go();
    one_thread().block_on(async {
        let up = Up::new(addr, 4);
        assert_eq!(body_of(&up, "/first").await, "/first");
        // The connection went back to the pool before its body's end reached this task.
        let answered = std::time::Instant::now();
        go_tx.send(()).unwrap();
        // The runtime's only thread held up (blocking, not yielding) while the stray arrives
        // unseen by the reactor...
        wrote_rx.recv().unwrap();
        let trusted = super::super::idle_check::REACTOR_TRUSTED_FOR;
        // ...for longer than the reactor's word is taken: a sleep that is the scenario itself.
        std::thread::sleep(trusted.saturating_sub(answered.elapsed()));
        assert_eq!(
            body_of(&up, "/second").await,
            "/second",
            "the stray taken as the answer"
        );
        assert!(
            !up.reuses(),
            "the process is no longer trusted with a second request"
        );
    });
}

/// Reused at once, on the reactor's word: the stray the reactor has had a turn to see is caught
/// as the kernel's look would, and the quiet connections before it cost no system call (the
/// reads that took their answers left tokio's readiness clear).
#[test]
fn a_quick_reuse_is_taken_on_the_reactors_word_which_still_sees_a_stray_it_was_told_of() {
    // spec: DEC-67
    use super::super::idle_check::PEEKS;
    let peeks = || PEEKS.with(std::cell::Cell::get);
    let (addr, go_tx, wrote_rx) = stray_after_go();
    one_thread().block_on(async {
        // The reactor's word for as long as the test takes, whatever this machine's pace.
        let up = Up::new(addr, 4).trusting_the_reactor_for(std::time::Duration::from_secs(3600));
        let echoed = Up::new(echo_server(), 4)
            .trusting_the_reactor_for(std::time::Duration::from_secs(3600));
        assert_eq!(body_of(&echoed, "/a").await, "/a");
        let before = peeks();
        for path in ["/b", "/c", "/d"] {
            assert_eq!(body_of(&echoed, path).await, path);
        }
        assert_eq!(
            peeks(),
            before,
            "a quiet reused connection was asked of the kernel"
        );
        assert!(echoed.reuses());

        assert_eq!(body_of(&up, "/first").await, "/first");
        go_tx.send(()).unwrap();
        // Waits without holding the runtime up, so the reactor turns as the stray arrives.
        let wrote = tokio::task::spawn_blocking(move || wrote_rx.recv());
        bounded("the stray written", wrote).await.unwrap().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        // Until the reactor has had its turn with the stray in the socket.
        while !up.reactor_saw_something() {
            assert!(
                std::time::Instant::now() < deadline,
                "the reactor never saw the stray"
            );
            tokio::task::yield_now().await;
        }
        assert_eq!(
            body_of(&up, "/second").await,
            "/second",
            "the stray taken as the answer"
        );
        assert!(!up.reuses(), "the process is still trusted");
    });
}

fn echo_server() -> SocketAddr {
    server(|_, s| echo(s))
}

/// Bytes past a response's framed end, in the same write: the connection is not reused, and
/// the process's connections carry one request each from then on; a restart (`clear`) trusts it
/// again.
#[tokio::test]
async fn bytes_past_the_framed_end_cost_the_process_its_reuse_until_it_restarts() {
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let a = std::sync::Arc::clone(&accepted);
    let addr = server(move |_, mut s| {
        a.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut r = BufReader::new(s.try_clone().unwrap());
        while let Some(path) = read_request(&mut r) {
            let mut out = answer(&path);
            if path == "/twice" {
                out.extend_from_slice(&answer("stray"));
            }
            let _ = s.write_all(&out);
        }
    });
    let up = Up::new(addr, 4);
    let count = || accepted.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(body_of(&up, "/a").await, "/a");
    assert_eq!(body_of(&up, "/b").await, "/b");
    assert_eq!(count(), 1, "a clean process's connection is reused");
    assert!(up.reuses());
    assert_eq!(body_of(&up, "/twice").await, "/twice");
    assert!(!up.reuses());
    for path in ["/c", "/d", "/e"] {
        assert_eq!(body_of(&up, path).await, path);
    }
    assert_eq!(count(), 4, "one connection per request once distrusted");
    up.clear();
    assert!(up.reuses());
    assert_eq!(body_of(&up, "/f").await, "/f");
    assert_eq!(body_of(&up, "/g").await, "/g");
    assert_eq!(count(), 5, "reused again after the restart");
}

/// A server that answers the first request of each connection and closes it as the second
/// arrives, without a byte of an answer: what a keep-alive timeout racing the next request does.
fn closes_on_the_second_request(_: usize, mut s: TcpStream) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    if let Some(path) = read_request(&mut r) {
        let _ = s.write_all(&answer(&path));
    }
    let _ = read_request(&mut r);
}

#[tokio::test]
async fn a_get_its_kept_alive_connection_closed_on_unanswered_goes_again_on_a_fresh_one() {
    // spec: DEC-33
    let addr = server(closes_on_the_second_request);
    let up = Up::new(addr, 4);
    for i in 0..20 {
        let path = format!("/{i}");
        assert_eq!(body_of(&up, &path).await, path);
    }
    // The first went on a fresh connection; every later one was written on a pooled connection
    // the process then closed, and sent again on a fresh one.
    assert_eq!(up.retried(), 19);
}

#[tokio::test]
async fn a_post_its_kept_alive_connection_closed_on_unanswered_is_spent() {
    // spec: LAUNCH-9, DEC-33
    let addr = server(closes_on_the_second_request);
    let up = Upstream::<Full<Bytes>>::new(addr, 4);
    let post = |b: &'static str| Request::post("/").body(Full::new(Bytes::from(b))).unwrap();
    let first = bounded("first", up.send(post("1"))).await.unwrap();
    first.into_body().collect().await.unwrap();
    let f = bounded("second", up.try_send(post("2"))).await.unwrap_err();
    assert!(matches!(f.error, ForwardError::Sent(_)), "{:?}", f.error);
    assert!(f.request.is_none());
    assert_eq!(up.retried(), 0);
}

#[tokio::test]
async fn a_get_whose_process_closed_unanswered_then_took_no_connection_is_unanswered() {
    // spec: DEC-33, DEC-73 (it went, and may be what ended the process: not "never sent")
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let mut r = BufReader::new(s.try_clone().unwrap());
        if let Some(path) = read_request(&mut r) {
            let _ = s.write_all(&answer(&path));
        }
        let _ = read_request(&mut r);
        // It dies with the second request: its listener goes first, then the connection.
        drop(l);
        drop(s);
    });
    let up = Up::new(addr, 4);
    assert_eq!(body_of(&up, "/first").await, "/first");
    let f = bounded("second", up.try_send(get("/second")))
        .await
        .unwrap_err();
    assert!(f.error.unanswered(), "{:?}", f.error);
    assert!(f.request.is_some(), "handed back for DEC-73 to judge");
}
