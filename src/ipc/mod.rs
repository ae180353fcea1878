//! The IPC channel between the launcher and each process it starts: a `socketpair` whose child
//! end is the child's fd 3, spoken as newline-delimited JSON, the framing Node.js uses for
//! `process.send()` with `NODE_CHANNEL_SERIALIZATION_MODE=json`. `codec` is pure bytes ↔ lines,
//! `message` the typed messages (the contract is cluster.md ("The IPC protocol")), `channel` the sockets.
//!
//! `channel` and `message` are public: `fhirsmith-sim` speaks the child's end through them, as
//! any child could, and the integration tests play either end.

pub mod channel;
pub(crate) mod codec;
#[cfg(test)]
mod codec_fuzz;
pub mod message;
