//! What each header name of a process's answer is to the response-head reader: a name that frames
//! the body, one that concerns only this hop (RFC 9110 §7.6.1), or any other.

use http::header::{HeaderName, InvalidHeaderName};

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

/// `name`'s `HeaderName` and role. The name is a token (httparse has checked it); one that is no
/// valid header name is `from_bytes`'s error.
pub fn name_of(name: &[u8]) -> Result<(HeaderName, Role), InvalidHeaderName> {
    let name = HeaderName::from_bytes(name)?;
    let role = match name.as_str() {
        "content-length" => Role::ContentLength,
        "transfer-encoding" => Role::TransferEncoding,
        "connection" => Role::Connection,
        "keep-alive" | "proxy-connection" | "te" | "trailer" | "upgrade" => Role::HopByHop,
        "close" => Role::Close,
        _ => Role::Plain,
    };
    Ok((name, role))
}
