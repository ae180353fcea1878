//! One child process: spawned with its IPC channel as fd 3, its output tagged, and small tasks
//! that turn what happens to it into supervisor events (a message, the channel's end, its
//! listening socket seen, the exit). Messages go to the child through a bounded queue and a
//! writer task, so a child that stops reading its channel can never block the supervisor.
//!
//! A child leads a process group of its own and carries the run's mark (`tree`); it has ended
//! when everything in its group or with its mark has too: what outlives it (a server under a
//! wrapper shell, a helper it started) gets `SIGTERM`, then `SIGKILL` after `killSeconds`, before
//! its exit is reported, so a restart never finds its port still taken.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{info, warn};

use crate::ipc::channel::{self, ChannelReceiver, ChannelSender, Received};
use crate::ipc::message::{FromChild, ToChild};
use crate::log_throttle::LogThrottle;
use crate::process::{ProcessId, ProcessSpec};
use crate::supervisor::lifecycle::Exit;
use crate::supervisor::output::{until_set, OutputSink, Stream};
use crate::supervisor::socket_watch::{self, Place, Settled};
use crate::supervisor::spawner;
use crate::tree::exit_watch;
use crate::tree::members::{self, Mark, Wanted, TREE_VAR};
use crate::tree::{guardian, subreaper, sweep};

mod handover;
pub(crate) use handover::Carried;

/// Messages waiting to be written to a child before further ones are dropped.
const SEND_QUEUE: usize = 1024;
/// How long after a child's exit its channel may take to yield its last messages (a worker's
/// final request counts are written just before it exits).
const LAST_WORDS: Duration = Duration::from_secs(1);

/// A child writing garbage on its channel gets one log line per this long, not one per line
/// (so it can flood neither the log nor the supervisor's event queue), carrying how many were
/// skipped since.
const BAD_LINE_REPORT_EVERY: Duration = Duration::from_secs(10);

/// What happens to a child, tagged with its place and generation so a late event from a
/// replaced child is recognised and ignored.
#[derive(Debug)]
pub enum ChildEvent {
    Message(FromChild),
    /// A type the launcher doesn't know (logged once per type).
    Unknown {
        type_name: String,
        first_time: bool,
    },
    /// A bad line on the channel, skipped.
    BadLine(String),
    /// The child closed its end of the channel (it may still be running: not an exit).
    ChannelClosed,
    /// A socket on its address and port is held by the child or a descendant: ready, for a
    /// child that doesn't say so on its channel.
    ListeningSeen,
    Exited(Exit),
    /// Everything queued before this marker has been written (or the child is gone).
    Flushed,
    /// A message sent with [`ChildHandle::send_tracked`] was written whole to the channel.
    Written {
        receipt: u64,
    },
}

#[derive(Debug)]
pub struct Tagged {
    pub id: ProcessId,
    pub generation: u64,
    pub event: ChildEvent,
}

enum Outgoing {
    Msg(ToChild),
    /// A message whose successful write is reported (`ChildEvent::Written`).
    Tracked(ToChild, u64),
    Flush,
}

/// The supervisor's hold on a running child.
pub struct ChildHandle {
    pub pid: u32,
    pub generation: u64,
    outgoing: mpsc::Sender<Outgoing>,
    watching: Settled,
    code: Arc<str>,
    place: Place,
    signalled: Arc<Signalled>,
    /// Turned true to take the child's fds back from its tasks (`hand_over`).
    handover: watch::Sender<bool>,
    returns: Returns,
}

/// What the exit task and the signals share.
#[derive(Default)]
struct Signalled {
    /// The child itself has been reaped: its pid may name another process now.
    reaped: AtomicBool,
    /// Its group has had SIGTERM (an asked-for stop).
    termed: AtomicBool,
}

impl ChildHandle {
    /// Queues a message; false when it was dropped (the queue is full or the child is gone).
    pub fn send(&self, msg: ToChild) -> bool {
        self.outgoing.try_send(Outgoing::Msg(msg)).is_ok()
    }

    /// Queues a message whose successful write is reported as `ChildEvent::Written { receipt }`
    /// (what is queued is not yet delivered); false when it was not queued.
    pub fn send_tracked(&self, msg: ToChild, receipt: u64) -> bool {
        self.outgoing
            .try_send(Outgoing::Tracked(msg, receipt))
            .is_ok()
    }

    /// Asks for a `Flushed` event once everything queued so far is written.
    pub fn flush(&self) -> bool {
        self.outgoing.try_send(Outgoing::Flush).is_ok()
    }

    /// Stops looking for its listening socket (it said it is ready on its channel), after one
    /// more look at where it listens (every interface, when it was told one address?).
    pub fn stop_watching(&self) {
        self.watching.set();
        socket_watch::check_exposure(
            self.code.clone(),
            self.pid,
            self.place,
            self.watching.clone(),
        );
    }

    /// Signals the child's process group (it leads its own, see `spawn`), so a server under a
    /// wrapper shell that doesn't `exec` stops with the shell instead of living on, orphaned,
    /// on its port. Falls back to the pid alone should the group be gone.
    pub fn signal(&self, sig: Signal) {
        // The group id cannot name another group while it has members (the kernel doesn't reuse
        // it); the pid alone is used only while the child is unreaped, so it is still ours.
        // ESRCH (already gone) needs nothing done.
        if sig == Signal::SIGTERM {
            self.signalled.termed.store(true, Ordering::Release);
        }
        if let Ok(pid) = i32::try_from(self.pid) {
            if kill(Pid::from_raw(-pid), sig).is_err()
                && !self.signalled.reaped.load(Ordering::Acquire)
            {
                let _ = kill(Pid::from_raw(pid), sig);
            }
        }
    }
}

/// Starts `spec`'s process, forked from the spawner thread (`spawner`: the thread its
/// `PR_SET_PDEATHSIG` is tied to lives as long as the launcher, across an in-place upgrade).
/// Call inside the runtime. `kill_after` (`killSeconds`) bounds how long what outlives the
/// child may take to stop.
pub fn spawn(
    spec: &ProcessSpec,
    generation: u64,
    first_message: ToChild,
    events: mpsc::UnboundedSender<Tagged>,
    output: &OutputSink,
    kill_after: Duration,
) -> io::Result<ChildHandle> {
    let (ours, theirs) = channel::socketpair()?;
    let program = spec
        .argv
        .first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(&spec.argv[1..])
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own process group: a Ctrl-C in a terminal (SIGINT to the foreground group) reaches
        // the launcher alone, which then stops the processes in order. Under systemd
        // (KillMode=mixed) the final SIGKILL still reaches the whole cgroup.
        .process_group(0);
    // systemd's notify variables are the launcher's alone.
    for var in crate::tree::members::NOTIFY_ENV {
        cmd.env_remove(var);
    }
    let mark = crate::tree::run::current().map(|r| members::mark(&r.mark, generation));
    if let Some(m) = &mark {
        cmd.env(TREE_VAR, m);
    }
    channel::prepare_child(&mut cmd, theirs);
    // The child's end closes in the launcher as the spawner drops `cmd`, or the child's exit
    // would never show as EOF.
    let mut child = spawner::spawn(cmd, |cmd| {
        subreaper::spawn_known(|| {
            let child = cmd.spawn()?;
            let pid = child.id();
            Ok((child, pid))
        })
    })?;
    let pid = child.id();
    guardian::watch(pid);
    let stdout = child.stdout.take().map(OwnedFd::from);
    let stderr = child.stderr.take().map(OwnedFd::from);
    // Waited for by pid (`exit_watch`), like a child taken over in an upgrade.
    drop(child);
    let fresh = Carried {
        pid,
        generation,
        channel: ours,
        unread: Vec::new(),
        stdout: stdout.map(|fd| (fd, Vec::new())),
        stderr: stderr.map(|fd| (fd, Vec::new())),
        queued: vec![first_message],
        exit_seen: false,
    };
    attach_to(spec, fresh, true, events, output, kill_after)
}

/// An output pipe given back, with the line it had begun.
type PipeBack = oneshot::Receiver<Option<(pipe::Receiver, Vec<u8>)>>;

/// What a child's tasks give back when asked ([`ChildHandle::hand_over`]).
struct Returns {
    writer: oneshot::Receiver<(ChannelSender<ToChild>, Vec<ToChild>)>,
    reader: oneshot::Receiver<ChannelReceiver<FromChild>>,
    stdout: Option<PipeBack>,
    stderr: Option<PipeBack>,
    /// Whether the exit task had seen (and reaped) the exit when it was stopped.
    exit: oneshot::Receiver<bool>,
}

/// Takes over a child (or starts on a fresh one): its output forwarded, its channel read and
/// written, its exit watched by pid; `watch_socket` for a child not yet ready (its listening
/// socket may say it is).
pub(crate) fn attach_to(
    spec: &ProcessSpec,
    a: Carried,
    watch_socket: bool,
    events: mpsc::UnboundedSender<Tagged>,
    output: &OutputSink,
    kill_after: Duration,
) -> io::Result<ChildHandle> {
    let Carried {
        pid,
        generation,
        exit_seen,
        ..
    } = a;
    static REAPING: std::sync::Once = std::sync::Once::new();
    REAPING.call_once(subreaper::reap_on_sigchld);
    // Its exit is this program's to reap, never the subreaper's (a no-op for a fresh child).
    // One already reaped (given back after a handover it died in) is not watched again: the
    // task that reaped it reports its exit.
    if !exit_seen {
        subreaper::known(pid);
    }
    let mark = crate::tree::run::current().map(|r| members::mark(&r.mark, generation));
    let (handover, stop) = watch::channel(false);
    let code: Arc<str> = Arc::from(spec.code.as_str());
    let forward = |piped: Option<(OwnedFd, Vec<u8>)>, stream| {
        let (fd, carried) = piped?;
        let pipe = pipe::Receiver::from_owned_fd(fd).ok()?;
        let (tx, rx) = oneshot::channel();
        let task = output
            .clone()
            .forward_until(code.clone(), stream, pipe, carried, stop.clone());
        tokio::spawn(async move {
            let _ = tx.send(task.await);
        });
        Some(rx)
    };
    let stdout = forward(a.stdout, Stream::Stdout);
    let stderr = forward(a.stderr, Stream::Stderr);

    let id = spec.id;
    let tag = move |event| Tagged {
        id,
        generation,
        event,
    };
    let (mut receiver, mut sender) = channel::launcher_resumed(a.channel, &a.unread)?.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(SEND_QUEUE.max(a.queued.len()));
    for m in a.queued {
        let _ = out_tx.try_send(Outgoing::Msg(m));
    }

    // Writer: a child that stops reading stalls only this task. A message is never cut by a
    // handover: the stop is heard only between writes.
    let ev = events.clone();
    let mut writer_stop = stop.clone();
    let (writer_tx, writer_rx) = oneshot::channel();
    tokio::spawn(async move {
        let mut broken = false;
        loop {
            let item = tokio::select! {
                item = out_rx.recv() => item,
                () = until_set(&mut writer_stop) => {
                    let mut left = Vec::new();
                    while let Ok(item) = out_rx.try_recv() {
                        // A tracked write's receipt is not carried: the events stay in the
                        // outbox until the master confirms them.
                        if let Outgoing::Msg(m) | Outgoing::Tracked(m, _) = item {
                            left.push(m);
                        }
                    }
                    let _ = writer_tx.send((sender, left));
                    return;
                }
            };
            let Some(item) = item else { return };
            match item {
                Outgoing::Msg(m) if !broken => broken = sender.send(&m).await.is_err(),
                Outgoing::Tracked(m, receipt) if !broken => {
                    broken = sender.send(&m).await.is_err();
                    if !broken {
                        let _ = ev.send(tag(ChildEvent::Written { receipt }));
                    }
                }
                Outgoing::Msg(_) | Outgoing::Tracked(..) => {}
                Outgoing::Flush => {
                    let _ = ev.send(tag(ChildEvent::Flushed));
                }
            }
        }
    });

    // Reader: every message, then the channel's end.
    let (eof_tx, eof_rx) = oneshot::channel::<()>();
    let ev = events.clone();
    let mut reader_stop = stop.clone();
    let (reader_tx, reader_rx) = oneshot::channel();
    tokio::spawn(async move {
        let mut bad = LogThrottle::new(BAD_LINE_REPORT_EVERY);
        loop {
            let received = tokio::select! {
                r = receiver.recv() => r,
                () = until_set(&mut reader_stop) => {
                    let _ = reader_tx.send(receiver);
                    return;
                }
            };
            let event = match received {
                Received::Message(m) => ChildEvent::Message(m),
                // Only the first of each unknown type is logged, so the rest need not be queued.
                Received::Unknown {
                    type_name,
                    first_time: true,
                } => ChildEvent::Unknown {
                    type_name,
                    first_time: true,
                },
                Received::Unknown { .. } => continue,
                Received::Error(e) => match bad.event(crate::clock::now_std()) {
                    Some(0) => ChildEvent::BadLine(e.to_string()),
                    Some(n) => ChildEvent::BadLine(format!("{e} (and {n} more bad lines skipped)")),
                    None => continue,
                },
                Received::Closed => break,
            };
            if ev.send(tag(event)).is_err() {
                return;
            }
        }
        let _ = ev.send(tag(ChildEvent::ChannelClosed));
        let _ = eof_tx.send(());
        // The channel is still the child's (and a handover's, given back should it fail):
        // handed back when asked, dropped with the handle.
        if reader_stop.wait_for(|s| *s).await.is_ok() {
            let _ = reader_tx.send(receiver);
        }
    });

    // Its listening socket, while it starts.
    let watching = Settled::default();
    // With a host name for bindAddress, looked for on the first address it resolves to only: a
    // server that speaks the channel is found ready by its message wherever it listens, and one
    // that doesn't is found where Node 17+ listens; the connections try every address (DEC-40).
    let place = Place {
        bind: spec.bind_address.parse().ok(),
        wanted: spec.connect_addr,
    };
    if watch_socket {
        let ev = events.clone();
        socket_watch::start(code.clone(), pid, place, watching.clone(), move |_holder| {
            let _ = ev.send(tag(ChildEvent::ListeningSeen));
        });
    } else {
        watching.set();
    }

    // Exit: reported once what it left behind has ended, and after the channel's last words,
    // so a worker's final counts come first. A handover stops the watch before the reap only.
    let exited = watching.clone();
    let signalled = Arc::new(Signalled::default());
    signalled.reaped.store(exit_seen, Ordering::Release);
    let shared = signalled.clone();
    let left_code = code.clone();
    let mut exit_stop = stop;
    // Says, once asked to stop, whether the exit was seen first (then this task reports it).
    let (exit_tx, exit_rx) = oneshot::channel();
    tokio::spawn(async move {
        if exit_seen {
            let _ = exit_tx.send(true);
            return;
        }
        let exit = tokio::select! {
            exit = exit_watch::exited(pid) => exit,
            () = until_set(&mut exit_stop) => {
                let _ = exit_tx.send(false);
                return;
            }
        };
        shared.reaped.store(true, Ordering::Release);
        let _ = exit_tx.send(true);
        subreaper::forget(pid);
        exited.set();
        let termed = shared.termed.load(Ordering::Acquire);
        let _ = tokio::task::spawn_blocking(move || {
            end_what_it_left(&left_code, pid, mark, kill_after, termed)
        })
        .await;
        guardian::unwatch(pid);
        let _ = tokio::time::timeout(LAST_WORDS, eof_rx).await;
        let _ = events.send(tag(ChildEvent::Exited(exit)));
    });

    Ok(ChildHandle {
        pid,
        generation,
        outgoing: out_tx,
        watching,
        code,
        place,
        signalled,
        handover,
        returns: Returns {
            writer: writer_rx,
            reader: reader_rx,
            stdout,
            stderr,
            exit: exit_rx,
        },
    })
}

/// Ends what child `pid` left running: its process group and what carries its `mark`.
/// Blocks: run it off the runtime.
fn end_what_it_left(
    code: &str,
    pid: u32,
    mark: Option<String>,
    kill_after: Duration,
    termed: bool,
) {
    let wanted = Wanted {
        groups: BTreeSet::from([pid]),
        mark: mark.map_or(Mark::None, Mark::Exactly),
        except: vec![std::process::id()],
    };
    let root = Path::new("/");
    let swept = sweep::end(&wanted, kill_after, termed, |pids| {
        let who = members::describe(root, pids, 8);
        let secs = kill_after.as_secs_f64();
        if termed {
            info!("{code}: its own process has exited; waiting for {who} (SIGKILL after {secs} s)");
        } else {
            warn!(
                "{code}: exited, leaving {who} behind; stopping (SIGTERM, SIGKILL after {secs} s)"
            );
        }
    });
    if !swept.left.is_empty() {
        warn!(
            "{code}: still running after SIGKILL, given up: {}",
            members::describe(root, &swept.left, 8)
        );
    }
}
