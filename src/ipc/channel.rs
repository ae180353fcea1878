//! The channel's sockets, both sides. The launcher makes a `socketpair`, keeps its end
//! (close-on-exec) and hands the other to the child as fd 3 with `NODE_CHANNEL_FD=3` and
//! `NODE_CHANNEL_SERIALIZATION_MODE=json`, so a Node.js child has `process.send()` and
//! `process.on('message')` with no code of its own. The child also gets `PR_SET_PDEATHSIG`
//! (SIGTERM) so it hears of a launcher killed by SIGKILL even before it sees the channel close.
//!
//! EOF is an event ([`Received::Closed`]), not an error: it is how each side learns the other
//! has gone. The two calls that need `unsafe` (the child's setup between fork and exec, taking
//! the inherited fd over) are in `system::ffi`.

use std::collections::HashSet;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{OwnedFd, RawFd};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use super::codec::{decode, encode, CodecError, Frame, LineDecoder};
use super::message::{FromChild, Message, ToChild};

/// The fd the child's end becomes in the child.
pub(crate) const CHILD_FD: RawFd = 3;

/// Makes the pair: (launcher's end, child's end), both close-on-exec; [`prepare_child`] makes the
/// child's end fd 3 (without close-on-exec) in the child only, so no other child inherits it.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{socketpair as nix_socketpair, AddressFamily, SockFlag, SockType};
    let (a, b) = nix_socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    Ok((a, b))
}

/// Sets up `cmd` so the child gets `child_end` as fd 3, the Node channel environment, and
/// SIGTERM when the launcher dies.
///
/// `child_end` moves into `cmd` and stays open in the launcher until `cmd` is dropped: drop the
/// command right after spawning, or the launcher never sees EOF when the child dies.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that spawned the child exits, so spawn from a
/// thread that lives as long as the launcher (`supervisor::spawner`; not a
/// `spawn_blocking` thread).
pub fn prepare_child(cmd: &mut std::process::Command, child_end: OwnedFd) {
    cmd.env("NODE_CHANNEL_FD", CHILD_FD.to_string());
    cmd.env("NODE_CHANNEL_SERIALIZATION_MODE", "json");
    crate::system::ffi::child_gets_fd_and_death_signal(cmd, child_end, CHILD_FD, libc::SIGTERM);
}

/// What a receive gives.
#[derive(Debug, PartialEq)]
pub enum Received<T> {
    Message(T),
    /// A message type this side doesn't know; `first_time` is true once per type name, so the
    /// caller logs each unknown type once.
    Unknown {
        type_name: String,
        first_time: bool,
    },
    /// A line that was skipped; the channel goes on.
    Error(CodecError),
    /// The peer closed its end (or the socket failed): nothing more will come.
    Closed,
}

/// Both halves of one end of the channel. `In` is what this side receives.
pub struct Channel<In, Out> {
    pub receiver: ChannelReceiver<In>,
    pub sender: ChannelSender<Out>,
}

/// The launcher's end: receives [`FromChild`], sends [`ToChild`].
pub type LauncherChannel = Channel<FromChild, ToChild>;
/// The child's end: receives [`ToChild`], sends [`FromChild`].
pub type ChildChannel = Channel<ToChild, FromChild>;

impl<In: Message, Out: Message> Channel<In, Out> {
    /// Wraps an fd (either end). Must be called inside a tokio runtime.
    pub(crate) fn from_fd(fd: OwnedFd) -> io::Result<Channel<In, Out>> {
        let std = std::os::unix::net::UnixStream::from(fd);
        std.set_nonblocking(true)?;
        let (r, w) = UnixStream::from_std(std)?.into_split();
        Ok(Channel {
            receiver: ChannelReceiver {
                read: r,
                decoder: LineDecoder::new(),
                ready: std::collections::VecDeque::new(),
                seen_unknown: HashSet::new(),
                closed: false,
                _in: PhantomData,
            },
            sender: ChannelSender {
                write: w,
                _out: PhantomData,
            },
        })
    }

    pub async fn send(&mut self, msg: &Out) -> io::Result<()> {
        self.sender.send(msg).await
    }

    pub async fn recv(&mut self) -> Received<In> {
        self.receiver.recv().await
    }

    pub fn split(self) -> (ChannelReceiver<In>, ChannelSender<Out>) {
        (self.receiver, self.sender)
    }
}

/// The launcher's side over its end of a [`socketpair`].
pub fn launcher(fd: OwnedFd) -> io::Result<LauncherChannel> {
    Channel::from_fd(fd)
}

/// The launcher's side over an end taken over in an in-place upgrade: `unread` (read by the
/// old program, not yet parsed) comes first.
pub(crate) fn launcher_resumed(fd: OwnedFd, unread: &[u8]) -> io::Result<LauncherChannel> {
    let mut c = Channel::from_fd(fd)?;
    let mut out = Vec::new();
    c.receiver.decoder.feed(unread, &mut out);
    c.receiver.ready.extend(out);
    Ok(c)
}

/// The two halves back as one fd, and what was read and not yet parsed, for an in-place
/// upgrade. Call between receives (a receive hands out every parsed item before it reads).
pub(crate) fn launcher_handed_over(
    receiver: ChannelReceiver<FromChild>,
    sender: ChannelSender<ToChild>,
) -> io::Result<(OwnedFd, Vec<u8>)> {
    let mut receiver = receiver;
    let mut unread = Vec::new();
    // Parsed and not yet handed out (none between receives): written back as lines.
    for item in receiver.ready.drain(..).flatten() {
        if let Ok(line) = serde_json::to_vec(&item.value) {
            unread.extend_from_slice(&line);
            unread.push(b'\n');
        }
    }
    unread.extend(receiver.decoder.take_partial());
    let stream = receiver
        .read
        .reunite(sender.write)
        .map_err(|_| io::Error::other("the channel's halves are not one socket's"))?;
    let std = stream.into_std()?;
    Ok((OwnedFd::from(std), unread))
}

/// The child's side: the fd named by `NODE_CHANNEL_FD`, or `None` when it isn't set (started by
/// hand: the process runs without a channel). Call once, inside a tokio runtime.
pub fn from_env() -> io::Result<Option<ChildChannel>> {
    let Ok(value) = std::env::var("NODE_CHANNEL_FD") else {
        return Ok(None);
    };
    let fd: RawFd = value.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "NODE_CHANNEL_FD is not a number",
        )
    })?;
    // The fd must be an open socket before we take ownership of it.
    let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).map_err(io::Error::from)?;
    if nix::sys::socket::getsockname::<nix::sys::socket::UnixAddr>(fd).is_err() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "NODE_CHANNEL_FD is not a Unix socket",
        ));
    }
    // Keep it from this process's own children.
    let cloexec = nix::fcntl::FdFlag::from_bits_truncate(flags) | nix::fcntl::FdFlag::FD_CLOEXEC;
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(cloexec)).map_err(io::Error::from)?;
    // Inherited for this purpose; from_env is called once.
    let owned = crate::system::ffi::adopt_inherited(fd)?;
    Channel::from_fd(owned).map(Some)
}

/// The receiving half.
pub struct ChannelReceiver<In> {
    read: OwnedReadHalf,
    decoder: LineDecoder,
    ready: std::collections::VecDeque<Result<Frame, CodecError>>,
    seen_unknown: HashSet<String>,
    closed: bool,
    _in: PhantomData<fn() -> In>,
}

impl<In: Message> ChannelReceiver<In> {
    /// The next item; [`Received::Closed`] at EOF and on every call after. Cancel-safe: a
    /// receive dropped mid-read loses nothing already read.
    pub async fn recv(&mut self) -> Received<In> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return match item.and_then(decode_known::<In>) {
                    Ok((m, _)) if !m.is_unknown() => Received::Message(m),
                    Ok((_, type_name)) => {
                        let first_time = self.seen_unknown.insert(type_name.clone());
                        Received::Unknown {
                            type_name,
                            first_time,
                        }
                    }
                    Err(e) => Received::Error(e),
                };
            }
            if self.closed {
                return Received::Closed;
            }
            let mut buf = [0u8; 16 * 1024];
            match self.read.read(&mut buf).await {
                Ok(0) | Err(_) => self.closed = true,
                Ok(n) => {
                    let mut out = Vec::new();
                    self.decoder.feed(&buf[..n], &mut out);
                    self.ready.extend(out);
                }
            }
        }
    }
}

fn decode_known<In: Message>(frame: Frame) -> Result<(In, String), CodecError> {
    let name = frame.type_name.clone();
    decode::<In>(frame).map(|m| (m, name))
}

/// The sending half.
pub struct ChannelSender<Out> {
    write: OwnedWriteHalf,
    _out: PhantomData<fn(Out)>,
}

impl<Out: Message> ChannelSender<Out> {
    /// Writes one message as one line. An error means the peer has gone.
    pub async fn send(&mut self, msg: &Out) -> io::Result<()> {
        let bytes = encode(msg).map_err(io::Error::other)?;
        self.write.write_all(&bytes).await
    }
}
