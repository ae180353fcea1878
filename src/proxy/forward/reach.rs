//! The addresses a process may be reached at (DEC-40): one for an IP `bindAddress`, every address
//! a host name resolves to otherwise. A new connection tries the one that last answered first,
//! then the others in order, and keeps the first that takes it: each process resolves the name
//! for itself, so only a connection tells which address it listens on.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::TcpStream;
use tracing::info;

pub(super) struct Reach {
    /// Never empty; the first is the plan's `connect_addr`'s. The port is the pool's (a
    /// replacement beside the old process moves it, DEC-78).
    ips: Box<[IpAddr]>,
    /// The index of the address that took the last connection.
    at: AtomicUsize,
}

impl Reach {
    pub(super) fn new(first: IpAddr, also: impl IntoIterator<Item = IpAddr>) -> Reach {
        let ips: Vec<IpAddr> = std::iter::once(first).chain(also).collect();
        Reach {
            ips: ips.into_boxed_slice(),
            at: AtomicUsize::new(0),
        }
    }

    /// The address the process is reached at now on `port` (the `Host` of a request that has
    /// none).
    pub(super) fn now(&self, port: u16) -> SocketAddr {
        SocketAddr::new(
            self.ips[self.at.load(Ordering::Relaxed) % self.ips.len()],
            port,
        )
    }

    /// A connection to the process on `port`, from the address that last took one; `name` (its
    /// instance code) for the log line when another address takes over. The first address's
    /// error when none takes it.
    pub(super) async fn connect(&self, port: u16, name: &str) -> io::Result<TcpStream> {
        let at = self.at.load(Ordering::Relaxed) % self.ips.len();
        let first_error = match TcpStream::connect(SocketAddr::new(self.ips[at], port)).await {
            Ok(stream) => return Ok(stream),
            Err(e) => e,
        };
        for (i, ip) in self.ips.iter().enumerate().filter(|(i, _)| *i != at) {
            let addr = SocketAddr::new(*ip, port);
            if let Ok(stream) = TcpStream::connect(addr).await {
                self.at.store(i, Ordering::Relaxed);
                info!(
                    "{name}: reached at {addr} (bindAddress resolves to {}; {} refused: {first_error})",
                    self.list(),
                    SocketAddr::new(self.ips[at], port)
                );
                return Ok(stream);
            }
        }
        Err(first_error)
    }

    fn list(&self) -> String {
        let ips: Vec<String> = self.ips.iter().map(ToString::to_string).collect();
        ips.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn the_address_that_listens_takes_the_connection_and_keeps_the_next() {
        // spec: DEC-40. A process listening on the second address only (127.0.0.2: every
        // 127/8 address is loopback on Linux), the first refusing.
        let mut tries = 0;
        let (listener, first, second) = loop {
            let listener = TcpListener::bind("127.0.0.2:0").await.expect("bind");
            let port = listener.local_addr().expect("addr").port();
            let first: SocketAddr = ([127, 0, 0, 1], port).into();
            // The same port must refuse on 127.0.0.1 (another program may hold it there).
            if TcpStream::connect(first).await.is_err() {
                break (listener, first, SocketAddr::from(([127, 0, 0, 2], port)));
            }
            tries += 1;
            assert!(tries < 20, "no port free on 127.0.0.1 beside 127.0.0.2's");
        };
        let port = first.port();
        let reach = Reach::new(first.ip(), [second.ip()]);
        assert_eq!(reach.now(port), first);
        let conn = reach
            .connect(port, "tx1")
            .await
            .expect("the second address");
        assert_eq!(conn.peer_addr().expect("peer"), second);
        assert_eq!(reach.now(port), second, "kept for the next connection");
        reach.connect(port, "tx1").await.expect("again");
        drop(listener);
        let e = reach.connect(port, "tx1").await.expect_err("none listens");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }

    #[tokio::test]
    async fn one_address_is_tried_alone() {
        // spec: DEC-40
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let reach = Reach::new(addr.ip(), []);
        reach.connect(addr.port(), "m0").await.expect("connects");
        assert_eq!(reach.now(addr.port()), addr);
    }
}
