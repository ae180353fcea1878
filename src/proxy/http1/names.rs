//! The header names a process's answer usually carries, told by their bytes, and what each one
//! is to the response-head reader: a name that frames the body, one that concerns only this hop
//! (RFC 9110 §7.6.1), or any other.
//!
//! Why a table of our own: `HeaderName::from_bytes` lowercases a name into a buffer and then
//! matches it against every standard name, for five or six names an answer. Here the length
//! picks a few candidates and one comparison decides, ASCII case-insensitively, to the same
//! `http::header` constant; a name not in the table goes to `from_bytes` as before. The
//! table holds what nginx and Node (Express) write, the hop-by-hop names whatever their
//! frequency (the reader drops those, so they must all be known here), and a few custom names
//! made once (`X-Powered-By`: `from_bytes` copies a custom name into a new allocation).

use http::header::{self, HeaderName, InvalidHeaderName};

/// What a header line is to the reader of a response head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Any header passed on as it came.
    Plain,
    /// `Content-Length`: frames the body.
    ContentLength,
    /// `Transfer-Encoding`: frames the body, and is hop-by-hop.
    TransferEncoding,
    /// `Connection`: keep-alive, the names of other hop-by-hop headers, and itself hop-by-hop.
    Connection,
    /// `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Upgrade`: this hop's alone.
    HopByHop,
    /// A header named `close`, which `Connection: close` names (there almost never is one).
    Close,
}

const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");
const X_POWERED_BY: HeaderName = HeaderName::from_static("x-powered-by");

/// `name`'s `HeaderName` and role. The name is a token (httparse has checked it); one that is no
/// valid header name is `from_bytes`'s error, as before. (Inlined: a call returned the name and
/// role through memory, a third of its cost.)
#[inline(always)]
pub fn name_of(name: &[u8]) -> Result<(HeaderName, Role), InvalidHeaderName> {
    if let Some(known) = known(name) {
        return Ok(known);
    }
    let name = HeaderName::from_bytes(name)?;
    let role = if name.as_str() == "close" {
        Role::Close
    } else {
        Role::Plain
    };
    Ok((name, role))
}

/// The table: by length, then by the bytes.
fn known(name: &[u8]) -> Option<(HeaderName, Role)> {
    use header::*;
    use Role::*;
    let is = |lower: &[u8]| eq_lower(name, lower);
    let found = match name.len() {
        2 if is(b"te") => (TE, HopByHop),
        3 if is(b"age") => (AGE, Plain),
        3 if is(b"via") => (VIA, Plain),
        4 if is(b"date") => (DATE, Plain),
        4 if is(b"etag") => (ETAG, Plain),
        4 if is(b"vary") => (VARY, Plain),
        4 if is(b"link") => (LINK, Plain),
        5 if is(b"allow") => (ALLOW, Plain),
        6 if is(b"server") => (SERVER, Plain),
        6 if is(b"pragma") => (PRAGMA, Plain),
        7 if is(b"expires") => (EXPIRES, Plain),
        7 if is(b"upgrade") => (UPGRADE, HopByHop),
        7 if is(b"trailer") => (TRAILER, HopByHop),
        8 if is(b"location") => (LOCATION, Plain),
        10 if is(b"connection") => (CONNECTION, Connection),
        10 if is(b"keep-alive") => (KEEP_ALIVE, HopByHop),
        10 if is(b"set-cookie") => (SET_COOKIE, Plain),
        11 if is(b"retry-after") => (RETRY_AFTER, Plain),
        12 if is(b"content-type") => (CONTENT_TYPE, Plain),
        12 if is(b"x-powered-by") => (X_POWERED_BY, Plain),
        13 if is(b"cache-control") => (CACHE_CONTROL, Plain),
        13 if is(b"last-modified") => (LAST_MODIFIED, Plain),
        13 if is(b"accept-ranges") => (ACCEPT_RANGES, Plain),
        14 if is(b"content-length") => (CONTENT_LENGTH, ContentLength),
        16 if is(b"content-encoding") => (CONTENT_ENCODING, Plain),
        16 if is(b"content-language") => (CONTENT_LANGUAGE, Plain),
        16 if is(b"content-location") => (CONTENT_LOCATION, Plain),
        16 if is(b"proxy-connection") => (PROXY_CONNECTION, HopByHop),
        16 if is(b"www-authenticate") => (WWW_AUTHENTICATE, Plain),
        17 if is(b"transfer-encoding") => (TRANSFER_ENCODING, TransferEncoding),
        19 if is(b"content-disposition") => (CONTENT_DISPOSITION, Plain),
        22 if is(b"x-content-type-options") => (X_CONTENT_TYPE_OPTIONS, Plain),
        25 if is(b"strict-transport-security") => (STRICT_TRANSPORT_SECURITY, Plain),
        27 if is(b"access-control-allow-origin") => (ACCESS_CONTROL_ALLOW_ORIGIN, Plain),
        _ => return None,
    };
    Some(found)
}

/// `name` is `lower` (lowercase ASCII letters and `-`) but for ASCII case: eight bytes at a
/// time, each of `name`'s letters lowercased by setting its `0x20` bit, a `-` taken as it is (the
/// mask has the bit only where `lower` has a letter, so nothing else can pass for one), fewer
/// steps than a byte at a time.
#[inline(always)]
fn eq_lower(name: &[u8], lower: &[u8]) -> bool {
    if name.len() != lower.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| {
        let mut w = [0u8; 8];
        let n = (s.len() - at).min(8);
        w[..n].copy_from_slice(&s[at..at + n]);
        u64::from_le_bytes(w)
    };
    let mut diff = 0;
    let mut at = 0;
    while at < name.len() {
        let l = word(lower, at);
        // A letter has the 0x40 bit, `-` and the padding do not: 0x20 where a letter is.
        let case = (l & 0x4040_4040_4040_4040) >> 1;
        diff |= (word(name, at) | case) ^ l;
        at += 8;
    }
    diff == 0
}

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
