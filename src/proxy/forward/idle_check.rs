//! Whether a connection to a process is fit to carry another request: a real look at its
//! socket, the framing of the response it carried, and the pool's trust in a process that has
//! written bytes outside any response.
//!
//! Why a system call: HTTP/1.1 has no way to tell which request a response answers but its
//! order, so a byte the process wrote after a response had ended (a second or late response, a
//! `408` on an idle connection, more than its `Content-Length`, a body after a `204` or a `HEAD`)
//! would be read as the answer to the next request on that connection, that request's own answer
//! as the one after it, and so on: other clients' answers. Polling the tokio stream with a no-op
//! waker sees such bytes only if the reactor has already marked the socket readable, which a busy
//! runtime may not have done yet; `recv(MSG_PEEK | MSG_DONTWAIT)` asks the kernel, whatever the
//! reactor knows, and takes nothing off the socket.
//!
//! Why distrust: the look can only be made before the request is written. Bytes that arrive
//! after it (a stray response written a moment after the answer, while the next request is on
//! its way) cannot be told from the answer by any HTTP/1.1 client. So a process once seen writing
//! outside a response has its connections used for one request each (a fresh connection per
//! request) until it restarts: what it writes after an answer then reaches no one.

use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::sys::socket::{recv, MsgFlags};
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

/// A look at `stream` without waiting and without taking anything off it.
pub fn look(stream: &TcpStream) -> Idle {
    let mut probe = [0u8; 1];
    // `recv` on the stream's own descriptor, which the stream keeps open while borrowed. The
    // socket is non-blocking (tokio's) and MSG_DONTWAIT makes sure: this never waits.
    match recv(
        stream.as_raw_fd(),
        &mut probe,
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(0) => Idle::Closed,
        Ok(_) => Idle::Stray,
        Err(Errno::EAGAIN) | Err(Errno::EINTR) => Idle::Quiet,
        // Reset, or anything else: of no use.
        Err(_) => Idle::Closed,
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
}
