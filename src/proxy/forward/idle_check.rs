//! Whether a connection to a process is fit to carry another request: a look at its socket,
//! the framing of the response it carried, and the pool's trust in a process that has written
//! bytes outside any response.
//!
//! Why look: HTTP/1.1 has no way to tell which request a response answers but its order, so a
//! byte the process wrote after a response had ended (a second or late response, a `408` on an
//! idle connection, more than its `Content-Length`, a body after a `204` or a `HEAD`) would be
//! read as the answer to the next request on that connection, that request's own answer as the
//! one after it, and so on: other clients' answers.
//!
//! Which look (DEC-67): the reactor's view is free, and stale by at most the loop turn it is in
//! (tokio polls the I/O driver between batches of tasks); `recv(MSG_PEEK | MSG_DONTWAIT)` asks the
//! kernel, whatever the reactor knows, and costs a system call on every reuse (DEC-67). A
//! connection handed on within [`REACTOR_TRUSTED_FOR`] of its answer is taken on the reactor's
//! word, as HAProxy, nginx, hyper and pingora take every idle connection; one idle longer is asked
//! of the kernel, so a stray written later than that, or while the runtime was held up, is always
//! seen before the connection is used. The reactor's word costs nothing only because tokio forgets
//! a socket's readiness when a read leaves it drained (a read shorter than the buffer, or
//! `EAGAIN`); when it says "readable", the kernel is asked what came.
//!
//! Why distrust: no look can be made after the request is written. Bytes that arrive after it
//! (a stray response written a moment after the answer, while the next request is on its way)
//! cannot be told from the answer by any HTTP/1.1 client. So a process once seen writing
//! outside a response has its connections used for one request each (a fresh connection per
//! request) until it restarts: what it writes after an answer then reaches no one.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{recv, MsgFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

use crate::proxy::http1::response_head::Head;

/// What an idle connection's socket holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Nothing to read, and open: fit for a request.
    Quiet,
    /// Bytes the process wrote with no request to answer: never used, and the process is
    /// distrusted.
    Stray,
    /// The process closed it (end of stream or reset): never used.
    Closed,
}

/// How long after its answer an idle connection is handed on on the reactor's word
/// ([`look_as_the_reactor_knows`]); idle longer, the kernel is asked ([`look`]). Longer than a
/// loop turn under load (61 tasks of a few µs each between polls of the I/O driver), so a
/// connection whose stray the reactor has had a turn to see is asked of the kernel only when the
/// runtime was held up; shorter than the gaps of a light load, where the system call costs
/// nothing that matters.
pub const REACTOR_TRUSTED_FOR: Duration = Duration::from_millis(1);

/// Whether a connection idle for `idle_for` is asked of the kernel, or taken on the reactor's
/// word: asked once it has been idle `trusted_for` (the pool's [`REACTOR_TRUSTED_FOR`]).
pub fn asks_the_kernel(idle_for: Duration, trusted_for: Duration) -> bool {
    idle_for >= trusted_for
}

/// A look at `stream` without waiting and without taking anything off it.
pub fn look(stream: &TcpStream) -> Idle {
    match peek(stream) {
        Ok(idle) => idle,
        Err(_) => Idle::Quiet,
    }
}

/// A look at `stream` as far as the reactor knows: no system call while the reactor has seen
/// nothing come since the socket was last read dry; when it has, the kernel says what came (or
/// that nothing did, and the reactor's mark is cleared, so the next look costs nothing again).
pub fn look_as_the_reactor_knows(stream: &TcpStream) -> Idle {
    match stream.try_io(Interest::READABLE, || peek(stream)) {
        Ok(idle) => idle,
        Err(_) => Idle::Quiet,
    }
}

#[cfg(test)]
thread_local! {
    /// The kernel looks this thread has made: what the tests count to see one not made.
    pub static PEEKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// `recv(MSG_PEEK | MSG_DONTWAIT)` of one byte: `WouldBlock` for nothing to read (which clears
/// the reactor's mark inside `try_io`).
fn peek(stream: &TcpStream) -> io::Result<Idle> {
    #[cfg(test)]
    PEEKS.with(|p| p.set(p.get() + 1));
    let mut probe = [0u8; 1];
    // `recv` on the stream's own descriptor, which the stream keeps open while borrowed. The
    // socket is non-blocking (tokio's) and MSG_DONTWAIT makes sure: this never waits.
    match recv(
        stream.as_raw_fd(),
        &mut probe,
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(0) => Ok(Idle::Closed),
        Ok(_) => Ok(Idle::Stray),
        Err(Errno::EAGAIN) => Err(io::ErrorKind::WouldBlock.into()),
        // Interrupted: nothing learnt, and the reactor's mark is kept for the next look.
        Err(Errno::EINTR) => Ok(Idle::Quiet),
        // Reset, or anything else: of no use.
        Err(_) => Ok(Idle::Closed),
    }
}

/// How the pool treats a process's connections after what it has seen of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trust {
    /// Connections go back to the pool after a clean response.
    #[default]
    Reuse,
    /// The process wrote outside a response once: one request per connection until it
    /// restarts (the pool's `clear`).
    OneRequestEach,
}

impl Trust {
    /// The trust after seeing `idle` on one of the process's connections, and whether it has
    /// just been lost (to log it once).
    pub fn after(self, idle: Idle) -> (Trust, bool) {
        match (self, idle) {
            (Trust::Reuse, Idle::Stray) => (Trust::OneRequestEach, true),
            (t, _) => (t, false),
        }
    }

    pub fn reuses(self) -> bool {
        self == Trust::Reuse
    }
}

/// Whether a head framed its body the ordinary way. After an odd one the pool does not reuse the
/// connection (hyper's client would; the differential test holds `UpstreamConn` to hyper's
/// rules, the pool is stricter): a `204` announcing a body (RFC 9110 §8.6 and RFC 9112
/// §6.1 forbid both headers there), whose process may well write that body after it.
pub fn usual_framing(head: &Head) -> bool {
    let headers = &head.parts.headers;
    if head.parts.status == http::StatusCode::NO_CONTENT {
        let announces = headers
            .get(http::header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
            || head.transfer_encoding;
        return !announces;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    #[test]
    fn a_stray_byte_costs_the_process_its_reuse_once_and_for_good() {
        // spec: DEC-35
        let (t, lost) = Trust::Reuse.after(Idle::Quiet);
        assert_eq!((t, lost), (Trust::Reuse, false));
        // A close is a process's right (its keep-alive timeout): no distrust.
        assert_eq!(Trust::Reuse.after(Idle::Closed), (Trust::Reuse, false));
        let (t, lost) = Trust::Reuse.after(Idle::Stray);
        assert_eq!((t, lost), (Trust::OneRequestEach, true));
        assert_eq!(t.after(Idle::Stray), (Trust::OneRequestEach, false));
        assert_eq!(t.after(Idle::Quiet), (Trust::OneRequestEach, false));
        assert!(!t.reuses());
    }

    #[test]
    fn a_204_announcing_a_body_is_not_reused() {
        let usual = |raw: &str| {
            let mut buf = bytes::BytesMut::from(raw);
            let head = crate::proxy::http1::response_head::parse(&mut buf, &http::Method::GET);
            usual_framing(&head.unwrap().unwrap())
        };
        assert!(usual("HTTP/1.1 204 No Content\r\n\r\n"));
        assert!(usual(
            "HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"
        ));
        assert!(usual("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"));
        assert!(usual(
            "HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\n"
        ));
        assert!(!usual(
            "HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n"
        ));
        assert!(!usual(
            "HTTP/1.1 204 No Content\r\ntransfer-encoding: chunked\r\n\r\n"
        ));
    }

    /// The look sees bytes the reactor has not been asked about: the stream is never polled
    /// after they arrive, so its readiness is stale, yet they are seen, and left in place.
    #[tokio::test]
    async fn the_look_sees_bytes_and_closes_whatever_the_reactor_knows() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (mut server, _) = l.accept().await.unwrap();
        assert_eq!(look(&client), Idle::Quiet);
        server.write_all(b"HTTP/1.1 408 ").await.unwrap();
        server.flush().await.unwrap();
        // Loopback delivers before `write` returns; the look is a system call, no waiting.
        assert_eq!(look(&client), Idle::Stray);
        assert_eq!(look(&client), Idle::Stray, "the byte stays in the socket");
        drop(server);
        let client2 = TcpStream::connect(addr).await.unwrap();
        let (server2, _) = l.accept().await.unwrap();
        drop(server2);
        // The FIN may be a moment behind the close: wait on it, bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while look(&client2) == Idle::Quiet {
            assert!(std::time::Instant::now() < deadline, "close never seen");
            tokio::task::yield_now().await;
        }
        assert_eq!(look(&client2), Idle::Closed);
    }

    fn peeks() -> usize {
        PEEKS.with(std::cell::Cell::get)
    }

    /// Yields (each yield lets the runtime poll its I/O driver) until `done`, within 5 s.
    async fn until(mut done: impl FnMut() -> bool, what: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}: never seen");
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn a_connection_idle_past_the_reactors_turn_is_asked_of_the_kernel() {
        // spec: DEC-67
        let t = REACTOR_TRUSTED_FOR;
        assert!(!asks_the_kernel(Duration::ZERO, t));
        assert!(!asks_the_kernel(t - Duration::from_nanos(1), t));
        assert!(asks_the_kernel(t, t));
        assert!(asks_the_kernel(Duration::from_secs(3), t));
        assert!(asks_the_kernel(Duration::ZERO, Duration::ZERO));
    }

    /// The reactor's look makes no system call while the reactor has seen nothing come; it sees
    /// bytes and a close once the reactor has had a turn, and leaves the bytes in place. The
    /// process's side is a std socket, so nothing but this test's yields turns the reactor.
    #[tokio::test(flavor = "current_thread")]
    async fn the_reactors_look_asks_the_kernel_only_once_the_reactor_has_seen_something_come() {
        // spec: DEC-67
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = l.accept().unwrap();
        let before = peeks();
        assert_eq!(look_as_the_reactor_knows(&client), Idle::Quiet);
        assert_eq!(
            peeks(),
            before,
            "a socket nothing came on is not asked of the kernel"
        );
        std::io::Write::write_all(&mut server, b"HTTP/1.1 408 ").unwrap();
        // No turn of the reactor since: its word is still "nothing", the kernel's is not.
        assert_eq!(look_as_the_reactor_knows(&client), Idle::Quiet);
        assert_eq!(look(&client), Idle::Stray);
        until(
            || look_as_the_reactor_knows(&client) == Idle::Stray,
            "the stray",
        )
        .await;
        assert_eq!(look(&client), Idle::Stray, "the byte stays in the socket");
        drop(server);
        let client2 = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        drop(l.accept().unwrap());
        until(
            || look_as_the_reactor_knows(&client2) == Idle::Closed,
            "the close",
        )
        .await;
    }

    /// A read that fills its buffer exactly leaves the reactor's mark set though the socket is
    /// now empty: the look asks the kernel once, hears nothing, and clears the mark, so the next
    /// look is free again.
    #[tokio::test(flavor = "current_thread")]
    async fn a_stale_mark_costs_one_kernel_look_and_is_cleared() {
        // spec: DEC-67
        use tokio::io::AsyncReadExt;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = l.accept().unwrap();
        std::io::Write::write_all(&mut server, b"12345678").unwrap();
        let mut exact = [0u8; 8];
        client.read_exact(&mut exact).await.unwrap();
        let before = peeks();
        assert_eq!(look_as_the_reactor_knows(&client), Idle::Quiet);
        assert_eq!(peeks(), before + 1, "the mark was set: the kernel is asked");
        assert_eq!(look_as_the_reactor_knows(&client), Idle::Quiet);
        assert_eq!(
            peeks(),
            before + 1,
            "the mark was cleared by the empty look"
        );
    }
}
