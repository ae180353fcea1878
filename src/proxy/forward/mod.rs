//! Forwarding a request to a process and its response back: the launcher's own HTTP/1.1 client
//! for the upstream leg (the connection, on the codec of `proxy::http1`), the
//! per-process keep-alive pool with its upstream timeout, header rewriting on both legs, the client's request body (read
//! ahead or passed on as it arrives), buffered and streamed response bodies, the client
//! connection's write timeout, and the requests refused outright. The listener calls these;
//! routing and admission are decided before.

pub mod body;
pub mod client_body;
pub mod compact;
pub mod error;
pub mod headers;
mod idle_check;
pub(crate) mod live;
pub mod liveness;
mod outgoing;
pub mod pool;
mod reach;
pub mod refuse;
mod replay;
mod timed;
mod upstream_body;
mod upstream_conn;
mod upstream_error;
pub mod write_timeout;

#[cfg(test)]
pub(crate) mod differential_tests;
#[cfg(test)]
mod e2e_tests;
#[cfg(test)]
mod test_support;

pub use body::{buffered, full, streamed, Buffered, ProxyBody};
pub use client_body::{AheadError, Arrival, ClientBody};
pub use compact::compact_head;
pub use error::{ForwardError, SendFailure};
#[cfg(test)]
pub use headers::X_CACHE_ID;
pub use headers::{check_looked_host, prepare_request, Looked, Peer};
pub use pool::Upstream;
pub use refuse::is_unsupported;
pub use write_timeout::WriteTimeoutIo;

/// The error type of boxed bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
