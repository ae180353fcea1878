//! HAProxy's agent-check on `agentAddress` (DEC-89): one line per connection, then the
//! connection is closed. The line (`readiness::agent_line`) is the host's readiness and its
//! weight from its free tx slots, so HAProxy sends new sessions to the hosts with room and
//! stops sending them to one that is stopping before its health check would notice.
//!
//! The line is a few bytes written to a socket just accepted: it fits the socket's empty send
//! buffer, so it is written at once in the accept loop (on the socket as std has it: tokio's
//! own write would wait for the reactor to report it writable first), with no task per
//! connection and nothing that grows.

use std::time::Duration;

use tokio::net::TcpListener;
use tracing::debug;

use super::readiness::{agent_line, HostState};
use crate::proxy::front::Front;

/// Answers every connection on `listener` until the process exits.
pub async fn serve(listener: TcpListener, front: std::sync::Arc<Front>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, say: the next check retries; no busy loop meanwhile.
                debug!("agent: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let line = agent_line(&HostState::of(&front));
        let written = stream
            .into_std()
            .and_then(|s| std::io::Write::write_all(&mut &s, line.as_bytes()));
        if let Err(e) = written {
            debug!("agent: writing the line: {e}");
        }
        // Dropped: closed, which ends HAProxy's read of the line.
    }
}
