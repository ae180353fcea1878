//! The one set of HTTP/1 limits on the path: the lobby's head reader, the head check before
//! hyper, hyper's server builder and the upstream client all take them from here, so that what
//! one takes the others take (they were kept equal by hand: 64 headers in the lobby against 100
//! in hyper and in the client).

/// Header lines a head may have at most: hyper's `DEFAULT_MAX_HEADERS`, on both legs. More is a
/// `431` from the client, a `502` from a process.
pub const MAX_HEADERS: usize = 100;

/// The longest request target: hyper's `MAX_URI_LEN`; longer is its `414`.
pub const MAX_TARGET: usize = (u16::MAX - 1) as usize;

/// The smallest read buffer hyper's server takes (its `MINIMUM_MAX_BUFFER_SIZE`).
const HYPER_MIN_BUF: usize = 8192;

/// The largest read from a process's connection, and so its longest response head (hyper's
/// `max_buf_size` was the same bound). See `forward::upstream_conn` for why 64 KB.
pub const UPSTREAM_READ_AT_MOST: usize = 64 << 10;

/// The longest request head, in bytes, for `headerMaxKB`.
pub fn max_head(header_max_kb: u64) -> usize {
    usize::try_from(header_max_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
}

/// hyper's server's `max_buf_size` for a longest head of `max_head` bytes: the same bound, or
/// hyper's least.
pub fn hyper_max_buf(max_head: usize) -> usize {
    max_head.max(HYPER_MIN_BUF)
}
