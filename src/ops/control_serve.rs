//! The control socket's service: one request line read, one answer line written, per
//! connection, at most `CONTROL_AT_MOST` connections at once (`control_conns`, DEC-72). The
//! socket's file and its life are `control_socket.rs`; the protocol is `control_proto.rs`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tracing::{debug, info};

use super::admin::Admin;
use super::control_conns::{Admit, Conns};
use super::control_proto::{self as proto, Command, Level, MAX_LINE};
use super::upgrade_desk::UpgradeDesk;
use crate::proxy::conn_limit::CONTROL_AT_MOST;

/// How long a client may take to send its request line.
const READ_WAIT: Duration = Duration::from_secs(10);

/// The connections open and how to close each (DEC-72).
struct Open {
    conns: Conns,
    tasks: std::collections::HashMap<u64, tokio::task::AbortHandle>,
}

type Shared = Arc<std::sync::Mutex<Open>>;

fn lock(open: &Shared) -> std::sync::MutexGuard<'_, Open> {
    open.lock().unwrap_or_else(|p| p.into_inner())
}

/// Takes a connection out of the count when its task ends, however it ends (closed to make
/// room included).
struct Gone(Shared, u64);

impl Drop for Gone {
    fn drop(&mut self) {
        let mut open = lock(&self.0);
        open.tasks.remove(&self.1);
        open.conns.gone(self.1);
    }
}

/// Serves the control socket until the process exits, at most `CONTROL_AT_MOST` connections at
/// once (`control_conns`).
pub(crate) async fn serve(listener: UnixListener, admin: Arc<Admin>, desk: UpgradeDesk) {
    let open: Shared = Arc::new(std::sync::Mutex::new(Open {
        conns: Conns::new(CONTROL_AT_MOST),
        tasks: Default::default(),
    }));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: a failed accept fails again at once, so pause rather
            // than spin (the socket's backlog holds the clients meanwhile).
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        // Held while the task is spawned and recorded, so its end is never seen before it.
        let mut held = lock(&open);
        let mut closing = None;
        let id = match held.conns.admit() {
            Admit::Refused => {
                let line = proto::answer_line(&proto::error(&format!(
                    "{CONTROL_AT_MOST} control connections are at work: try again in a moment"
                )));
                let _ = stream.try_write(line.as_bytes());
                continue;
            }
            Admit::In(id) => id,
            Admit::InClosing { id, close } => {
                closing = held.tasks.remove(&close);
                debug!(
                    "control socket: {CONTROL_AT_MOST} connections open: closed the oldest one \
                     that sent no request"
                );
                id
            }
        };
        let (admin, desk, gone) = (admin.clone(), desk.clone(), Gone(open.clone(), id));
        let task = tokio::spawn(async move {
            let heard = || lock(&gone.0).conns.heard(gone.1);
            if let Err(e) = exchange(stream, &admin, &desk, heard).await {
                debug!("control socket connection: {e}");
            }
            drop(gone);
        });
        held.tasks.insert(id, task.abort_handle());
        drop(held);
        // Its end takes the lock (`Gone`): asked for once it is free.
        if let Some(task) = closing {
            task.abort();
        }
    }
}

/// One request line read (bounded in size and time), one answer line written; `heard` is
/// called once the line is in.
async fn exchange(
    mut stream: UnixStream,
    admin: &Admin,
    desk: &UpgradeDesk,
    heard: impl FnOnce(),
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(128);
    let mut chunk = [0u8; 256];
    let read = async {
        while !buf.contains(&b'\n') && buf.len() < MAX_LINE {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n.min(MAX_LINE - buf.len())]);
        }
        io::Result::Ok(())
    };
    let answer = match tokio::time::timeout(READ_WAIT, read).await {
        Err(_) => proto::error("no request line within 10 s"),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(())) => match proto::request_line(&buf).and_then(proto::parse) {
            Err(why) => proto::error(&why),
            Ok(command) => {
                heard();
                if command.level() == Level::Action {
                    // Who acted, for the log: the kernel's word for the peer.
                    let who = stream
                        .peer_cred()
                        .map(|c| format!("uid {}, pid {}", c.uid(), c.pid().unwrap_or(0)))
                        .unwrap_or_else(|_| "an unknown peer".into());
                    info!("control socket: {line:?} from {who}", line = command.name());
                }
                answer(command, admin, desk).await
            }
        },
    };
    stream
        .write_all(proto::answer_line(&answer).as_bytes())
        .await?;
    stream.shutdown().await
}

/// A command's answer: one arm per command.
async fn answer(command: Command, admin: &Admin, desk: &UpgradeDesk) -> Value {
    match command {
        Command::Help => proto::help(),
        Command::Status => admin.status_value().await,
        Command::UpgradeState => desk.state(),
        Command::Upgrade => {
            if desk.ask() {
                json!({"upgrade": "asked"})
            } else {
                proto::error("an upgrade is already asked for")
            }
        }
        Command::Scale(ask) => scale(ask, admin, desk).await,
        Command::Restart => restart(admin, desk).await,
    }
}

/// `scale`: the supervisor's decision, once made (the change begun, or the refusal). Refused
/// during an upgrade, which hands over a steady cluster, and once the stop has begun (DEC-49).
async fn scale(ask: crate::supervisor::scale::Ask, admin: &Admin, desk: &UpgradeDesk) -> Value {
    if let Some(why) = desk.busy() {
        return proto::error(&format!("{why}: the worker count stays"));
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    let s = crate::supervisor::Scale {
        ask,
        by: "fhircluster scale".into(),
        reply: Some(reply),
    };
    let gone = || proto::error("the launcher is stopping");
    if admin
        .control
        .send(crate::supervisor::Control::Scale(s))
        .await
        .is_err()
    {
        return gone();
    }
    match answer.await {
        Ok(Ok((from, to))) => json!({"scale": {"from": from, "to": to}}),
        Ok(Err(why)) => proto::error(&why),
        Err(_) => gone(),
    }
}

/// `restart`: every process in turn, answered once the rolling restart is over (the client
/// waits on the connection meanwhile). Refused during an upgrade, as `scale` is (DEC-49).
async fn restart(admin: &Admin, desk: &UpgradeDesk) -> Value {
    if let Some(why) = desk.busy() {
        return proto::error(&format!("{why}: nothing restarted"));
    }
    let (done, over) = tokio::sync::oneshot::channel();
    let control = crate::supervisor::Control::Restart(done);
    if admin.control.send(control).await.is_err() {
        return proto::error("the supervisor has ended");
    }
    match over.await {
        Ok(Ok(())) => json!({"restart": "done"}),
        Ok(Err(why)) => proto::error(&why),
        Err(_) => proto::error("the launcher stopped before the restart was over"),
    }
}
