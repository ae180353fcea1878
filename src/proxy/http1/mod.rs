//! The project's own HTTP/1 codec, used by everything on the request path that is not hyper's
//! server: the lobby's request-head reader and the head check before hyper (`conn`), and the
//! upstream client (`forward::upstream_conn`). Sans-I/O: no tokio, no sockets; bytes in, heads,
//! framing and body steps out, so each piece is tested at every split and fuzzed
//! (`fuzz_tests.rs`).
//!
//! * [`request_head`]: a client's request head, read by hyper's server's rules (what it refuses,
//!   how the body is framed, and what the lobby routes by);
//! * [`response_head`]: a process's response head, by hyper's client's rules, its hop-by-hop
//!   headers left out (each name's role in `names`);
//! * [`decode`]: one body [`decode::Decoder`] for every framing (length, chunked, to the close;
//!   none for `HEAD`, `1xx`, `204`, `304`), the chunked coding in [`chunked`];
//! * [`encode`]: a request's framing, its head's bytes and its body's [`encode::Encoder`];
//! * [`limits`]: the one set of limits (header count, head size, target length) the lobby, the
//!   client and hyper's builder all take.

pub mod chunked;
pub mod decode;
pub mod encode;
pub mod limits;
mod names;
pub mod request_head;
pub mod response_head;

#[cfg(test)]
mod fuzz_tests;

/// The header a client names its cache by (`forward::headers` passes it on); here so that the
/// codec stands alone (the fuzz target in `tests/fuzz/` builds it without the rest of the crate).
pub const X_CACHE_ID: http::HeaderName = http::HeaderName::from_static("x-cache-id");

/// Where `part`, a slice httparse gave, lies in `head`: `None` when it is no slice of `head`.
/// httparse's slices are of the buffer it parsed, except its static `""` for a reason phrase
/// that is missing or holds obs-text; so an address is never subtracted unchecked (that took
/// the launcher down on `HTTP/1.1 200\r\n`). An empty part is empty wherever it sits.
fn span_in(head: &[u8], part: &[u8]) -> Option<(usize, usize)> {
    if part.is_empty() {
        return Some((0, 0));
    }
    let start = (part.as_ptr() as usize).checked_sub(head.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= head.len()).then_some((start, end))
}
