//! The IPC channel between the launcher and each process it starts: a `socketpair` whose child
//! end is the child's fd 3, spoken as newline-delimited JSON, the framing Node.js uses for
//! `process.send()` with `NODE_CHANNEL_SERIALIZATION_MODE=json`. `codec` is pure bytes ↔ lines,
//! `message` the typed messages (the contract is cluster.md ("The IPC protocol")), `channel` the sockets.

pub mod channel;
pub mod codec;
#[cfg(test)]
mod codec_fuzz;
pub mod message;

pub use channel::{Channel, ChannelReceiver, ChannelSender, Received};
pub use codec::{CodecError, Frame, LineDecoder, MAX_LINE_BYTES};
pub use message::{FromChild, RequestCounts, ToChild, PROTOCOL_VERSION};
