//! What a connection's task holds while it waits outside hyper: the size of its future, which
//! tokio keeps for the connection's whole life (parked, idle, or with a request waiting in the
//! lobby). Every byte here is a byte of each of 10,000 idle clients.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::phase::{serve_client, ConnContext};
use crate::proxy::forward::Peer;
use crate::proxy::listener_settings::ListenerSettings;

/// The connection's task at most, in bytes (a debug build's; a release build's was 1,304 at
/// 1,320 here). It was 1,456 with the lobby waiting on `TcpStream::readable` (a waiter of its
/// own in the future), 1,320 with the head's reading and routing kept in the lobby's scope while
/// the request waited, and, in the listener, some 250 more with the task an async block awaiting
/// this future (its arguments kept beside it). 1,112 with `serve_client` and `lobby::enter`
/// `async fn`s, each argument then kept twice (rust-lang/rust#62958); 808 without.
const TASK_AT_MOST: usize = 820;

#[tokio::test]
async fn a_connections_task_is_small_while_it_waits_outside_hyper() {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let client = TcpStream::connect(l.local_addr().expect("addr"))
        .await
        .expect("connect");
    let (stream, peer) = l.accept().await.expect("accept");
    let front = crate::proxy::front::test_front(1);
    let ctx = ConnContext {
        front: front.clone(),
        cfg: Arc::new(ListenerSettings {
            write_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            max_head: 32 * 1024,
            drain: Duration::from_secs(10),
            served_by: None,
        }),
        peer: Peer::new(peer),
        trimmer: Arc::default(),
        pipelined: super::pipelined_at_once(1),
        handover: Arc::new(super::Collector::new(10)),
        _open: front.counters.observed.accepted(),
    };
    let (_tx, drain) = tokio::sync::watch::channel(false);
    let task = serve_client(stream, bytes::Bytes::new(), Instant::now(), ctx, drain);
    let size = std::mem::size_of_val(&task);
    eprintln!("a connection's task: {size} bytes");
    assert!(size <= TASK_AT_MOST, "{size} bytes, over {TASK_AT_MOST}");
    drop((task, client));
}
