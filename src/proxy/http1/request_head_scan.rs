//! A request head's bytes read by httparse's grammar, as hyper's server calls it (default
//! settings: one space between the request line's parts, no space before a header's colon, no
//! folded lines, nothing invalid skipped): the same `Partial`, the same error at the same byte,
//! the same parts (a value's surrounding spaces and tabs left out). Written out so that the head
//! check reads each header as it is found, with no header array to fill and read again, which
//! was most of the check's cost (DEC-65).
//! Held to httparse at every prefix of generated heads (`request_head_http_tests.rs`).
//!
//! Sans-I/O: a cursor over the bytes.

use httparse::Error;

use super::Span;

/// Why a scan stopped before the head's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// The bytes end inside the head, nothing refused so far.
    Partial,
    /// httparse's error, and whether the method was read (a `Token` error is then the target's).
    Bad(Error, bool),
}

/// The request line.
#[derive(Clone, Copy, Debug)]
pub(super) struct Line {
    pub method: Span,
    pub target: Span,
    /// The target is a path of `PathAndQuery`'s plain path bytes only (ASCII, no `?`, no `#`):
    /// one `http::Uri` takes.
    pub plain: bool,
    /// The minor version: 0 or 1.
    pub version: u8,
}

/// A cursor over a head: its request line, then its header lines one at a time.
pub(super) struct Scanner<'a> {
    buf: &'a [u8],
    at: usize,
    headers: usize,
}

impl<'a> Scanner<'a> {
    pub fn new(buf: &'a [u8]) -> Scanner<'a> {
        Scanner {
            buf,
            at: 0,
            headers: 0,
        }
    }

    /// Where the cursor is: after the head's last line, the head's length.
    pub fn at(&self) -> usize {
        self.at
    }

    #[inline(always)]
    fn peek(&self) -> Result<u8, Stop> {
        self.buf.get(self.at).copied().ok_or(Stop::Partial)
    }

    #[inline(always)]
    fn next(&mut self) -> Result<u8, Stop> {
        let b = self.peek()?;
        self.at += 1;
        Ok(b)
    }

    /// Past the bytes of `class` from the cursor.
    #[inline(always)]
    fn skip(&mut self, class: &[bool; 256]) {
        let rest = &self.buf[self.at..];
        let n = rest
            .iter()
            .position(|&b| !class[usize::from(b)])
            .unwrap_or(rest.len());
        self.at += n;
    }

    /// Past a value's bytes: eight at a time while none is a control byte (tab included) or
    /// DEL, then one at a time.
    #[inline(always)]
    fn skip_value(&mut self) {
        const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
        const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
        while let Some(block) = self.buf.get(self.at..self.at + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(block);
            let w = u64::from_ne_bytes(w);
            // A byte under 0x20 (`hasless`), or a DEL (a zero byte of `w ^ 0x7f..`).
            let low = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
            let del = (w ^ (ONES * 0x7f)).wrapping_sub(ONES) & !(w ^ (ONES * 0x7f)) & HIGH;
            if low | del != 0 {
                break;
            }
            self.at += 8;
        }
        self.skip(&VALUE);
    }

    /// The LF of a CRLF whose CR was read; `err` if another byte follows the CR.
    #[inline(always)]
    fn lf(&mut self, err: Error) -> Result<(), Stop> {
        match self.next()? {
            b'\n' => Ok(()),
            _ => Err(Stop::Bad(err, true)),
        }
    }

    /// The request line, after any empty lines (httparse's `skip_empty_lines`, `parse_method`,
    /// `parse_uri`, `parse_version`, `newline!`).
    #[inline(always)]
    pub fn request_line(&mut self) -> Result<Line, Stop> {
        loop {
            match self.peek()? {
                b'\r' => {
                    self.at += 1;
                    match self.next()? {
                        b'\n' => {}
                        _ => return Err(Stop::Bad(Error::NewLine, false)),
                    }
                }
                b'\n' => self.at += 1,
                _ => break,
            }
        }
        let start = self.at;
        if self.buf[start..].starts_with(b"GET ") {
            // The most usual method, told at once (as httparse tells it).
            self.at += 4;
        } else {
            if !TOKEN[usize::from(self.next()?)] {
                return Err(Stop::Bad(Error::Token, false));
            }
            self.skip(&TOKEN);
            if self.next()? != b' ' {
                return Err(Stop::Bad(Error::Token, false));
            }
        }
        let method = (start, self.at - 1);
        let start = self.at;
        // Most targets are a plain path: read once, it needs no second look.
        self.skip(&PLAIN);
        let plain_end = self.at;
        self.skip(&URI);
        let end = self.at;
        if self.next()? != b' ' || end == start {
            return Err(Stop::Bad(Error::Token, true));
        }
        let target = &self.buf[start..end];
        let plain = plain_end == end && target[0] == b'/';
        if !plain && !target.is_ascii() && std::str::from_utf8(target).is_err() {
            return Err(Stop::Bad(Error::Token, true));
        }
        let version = self.version()?;
        match self.next()? {
            b'\r' => self.lf(Error::NewLine)?,
            b'\n' => {}
            _ => return Err(Stop::Bad(Error::NewLine, true)),
        }
        Ok(Line {
            method,
            target: (start, end),
            plain,
            version,
        })
    }

    #[inline(always)]
    fn version(&mut self) -> Result<u8, Stop> {
        const V: &[u8; 7] = b"HTTP/1.";
        if let Some(v) = self.buf.get(self.at..self.at + 8) {
            self.at += 8;
            let mut w = [0u8; 8];
            w.copy_from_slice(v);
            return match &w {
                b"HTTP/1.1" => Ok(1),
                b"HTTP/1.0" => Ok(0),
                _ => Err(Stop::Bad(Error::Version, true)),
            };
        }
        // Fewer than 8 bytes: a wrong one is told at once, a right start is partial.
        for &want in V {
            if self.next()? != want {
                return Err(Stop::Bad(Error::Version, true));
            }
        }
        Err(Stop::Partial)
    }

    /// The next header line's name and value (`None`: the empty line that ends the head), as
    /// httparse's `parse_headers_iter_uninit` reads it; an empty value's span is `(0, 0)`.
    #[inline(always)]
    pub fn header(&mut self) -> Result<Option<(&'a [u8], Span)>, Stop> {
        let bad_name = Stop::Bad(Error::HeaderName, true);
        let bad_value = Stop::Bad(Error::HeaderValue, true);
        let start = self.at;
        match self.next()? {
            b'\r' => return self.lf(Error::NewLine).map(|()| None),
            b'\n' => return Ok(None),
            b if !TOKEN[usize::from(b)] => return Err(bad_name),
            _ => {}
        }
        self.skip(&TOKEN);
        let name = &self.buf[start..self.at];
        if self.next()? != b':' {
            return Err(bad_name);
        }
        let mut b = self.next()?;
        while b == b' ' || b == b'\t' {
            b = self.next()?;
        }
        let value = if VALUE[usize::from(b)] {
            let start = self.at - 1;
            self.skip_value();
            let end = self.at;
            match self.next()? {
                b'\r' => self.lf(Error::HeaderValue)?,
                b'\n' => {}
                _ => return Err(bad_value),
            }
            let v = &self.buf[start..end];
            let kept = v
                .iter()
                .rposition(|&b| b != b' ' && b != b'\t')
                .map_or(0, |p| p + 1);
            (start, start + kept)
        } else {
            match b {
                b'\r' => self.lf(Error::HeaderValue)?,
                b'\n' => {}
                _ => return Err(bad_value),
            }
            (0, 0)
        };
        if self.headers == super::MAX_HEADERS {
            return Err(Stop::Bad(Error::TooManyHeaders, true));
        }
        self.headers += 1;
        Ok(Some((name, value)))
    }
}

/// A table of the bytes `$p` matches.
macro_rules! byte_map {
    ($p:pat) => {{
        let mut t = [false; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = matches!(i as u8, $p);
            i += 1;
        }
        t
    }};
}

/// httparse's `TOKEN_MAP`: a method's and a header name's bytes (RFC 9110 `tchar`).
const TOKEN: [bool; 256] = byte_map!(
    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9'
        | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+'
        | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
);

/// The bytes of a plain path: httparse's `URI_MAP` and `PathAndQuery`'s path bytes, ASCII,
/// no `?` or `#` (`request_head::PATH`'s `VALID` below 0x80).
pub(super) const PLAIN: [bool; 256] = byte_map!(
    0x21 | 0x24..=0x3B | 0x3D | 0x40..=0x5F | 0x61..=0x7A | 0x7C | 0x7E | b'"' | b'{' | b'}'
);

/// httparse's `URI_MAP`: visible ASCII and every byte over 0x7f.
pub(super) const URI: [bool; 256] = byte_map!(b'!'..=0x7e | 0x80..=0xff);

/// httparse's `HEADER_VALUE_MAP`: tab, space, visible ASCII, obs-text.
const VALUE: [bool; 256] = byte_map!(b'\t' | b' '..=0x7e | 0x80..=0xff);
