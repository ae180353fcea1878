//! The Prometheus text format's floor: the histogram every layer that times something fills
//! (`histogram.rs`), the helpers that write a family and its series (`text.rs`), and this
//! process's own figures (`process_self.rs`). The request path, the supervisor and `/metrics`
//! stand on it; it imports none of them.

pub(crate) mod histogram;
pub(crate) mod process_self;
pub(crate) mod text;
