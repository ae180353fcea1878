//! The routing rules (spec "Routing", DEC-14): which process a request is for, and how it may
//! wait. A pure function of the request head and a table built once from the settings and the
//! processes' instance codes; the liveness of processes is the scheduler's business.
//!
//! Theory: paths are matched percent-decoded (`%24closure` is `$closure`, `%2F` is a `/`),
//! without the query. The special master paths (`$closure`, `syndication...`, `info`) and the
//! endpoints are matched ASCII case-insensitively, as Express matches routes: every doubt resolves
//! toward the master, which runs every module and so is never the wrong place, while a worker
//! given a master path answers an error. A cache-id selects a process only when the text before
//! its first `.` is exactly that process's code; anything else is an unknown prefix.

use std::borrow::Cow;

use http::Method;

use super::lane::{lane_of, Lane};
use crate::process::{ProcessId, ProcessSpec};
use crate::settings::Settings;

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// The master's own paths (rules 1, 2): straight to the master, neither waiting nor counting
    /// (QUEUE-10, QUEUE-11); `503` if the master isn't ready (LIMIT-1, LIMIT-2).
    Master,
    /// A tx request, for the scheduler.
    Tx(TxDemand),
}

/// What a tx request asks of the scheduler.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TxDemand {
    pub target: Target,
    pub lane: Lane,
    /// False for `OPTIONS`: it neither waits nor counts (DEC-11, QUEUE-12, QUEUE-13).
    pub counted: bool,
}

/// Which process may take a tx request.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// Rule 4: the tx process with the fewest outstanding; waits `queueSeconds`.
    LeastLoaded,
    /// Rule 3: only the issuer of the cache-id; `404` lost to a restart when it is down or
    /// draining; waits `ownerQueueSeconds` (QUEUE-6).
    Owner(ProcessId),
    /// Rule 3, a prefix no process has: any tx process, waiting `ownerQueueSeconds` (QUEUE-7).
    UnknownPrefix,
    /// `sharedCache` + `cacheAffinity`: the issuer while it is up (waiting `ownerQueueSeconds`
    /// when it is full, QUEUE-8), else rule 4.
    Affinity(ProcessId),
}

/// A request target the launcher won't route: the shell answers `400`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BadTarget {
    /// Not origin-form (`/...`): absolute-form, authority-form, empty.
    NotOriginForm,
    /// A byte not allowed in a request target (space, control, `#`, non-ASCII).
    ForbiddenByte,
    /// `%` not followed by two hex digits.
    BadPercentEncoding,
    /// The decoded path is not UTF-8.
    NotUtf8,
    /// A `..` segment after decoding.
    DotDotSegment,
}

impl std::fmt::Display for BadTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BadTarget::NotOriginForm => "the request target is not a path",
            BadTarget::ForbiddenByte => "the request target has a character not allowed in it",
            BadTarget::BadPercentEncoding => "the request target has a malformed %-escape",
            BadTarget::NotUtf8 => "the request target does not decode to UTF-8",
            BadTarget::DotDotSegment => "the request target has a '..' segment",
        })
    }
}

impl std::error::Error for BadTarget {}

/// The parts of a request the router reads.
#[derive(Copy, Clone, Debug)]
pub struct RequestHead<'a> {
    pub method: &'a Method,
    /// The request target as received: path, maybe `%`-escaped, maybe with `?query`.
    pub target: &'a str,
    /// The `X-Cache-Id` header's value, when present.
    pub cache_id: Option<&'a [u8]>,
    /// `Content-Length`, when the request has one (not chunked).
    pub content_length: Option<u64>,
}

/// The routing table: built once from the settings and the processes (again when either
/// changes).
#[derive(Clone, Debug)]
pub struct RouteTable {
    /// Endpoint paths, no trailing `/`, longest first so nested endpoints match the deepest.
    endpoints: Vec<String>,
    /// Instance codes (non-empty) and their processes.
    codes: Vec<(Vec<u8>, ProcessId)>,
    shared_cache: bool,
    cache_affinity: bool,
    shared_closure: bool,
    fast_lane_max_bytes: u64,
}

impl RouteTable {
    /// `processes`: every process's id and instance code (`m0`, `tx1`, ...).
    pub fn new(settings: &Settings, processes: &[(ProcessId, &str)]) -> RouteTable {
        let mut endpoints: Vec<String> = settings
            .tx
            .endpoints
            .iter()
            .map(|e| e.trim_end_matches('/').to_string())
            .filter(|e| e.starts_with('/'))
            .collect();
        endpoints.sort_by_key(|e| std::cmp::Reverse(e.len()));
        let codes = processes
            .iter()
            .filter(|(_, code)| !code.is_empty())
            .map(|(id, code)| (code.as_bytes().to_vec(), *id))
            .collect();
        let c = &settings.cluster;
        RouteTable {
            endpoints,
            codes,
            shared_cache: c.shared_cache,
            cache_affinity: c.cache_affinity,
            shared_closure: c.shared_closure,
            fast_lane_max_bytes: c.fast_lane_max_bytes,
        }
    }

    /// The table for the launcher's process specs.
    pub fn from_specs(settings: &Settings, specs: &[ProcessSpec]) -> RouteTable {
        let processes: Vec<(ProcessId, &str)> =
            specs.iter().map(|s| (s.id, s.code.as_str())).collect();
        RouteTable::new(settings, &processes)
    }

    /// Route one request.
    pub fn route(&self, req: &RequestHead<'_>) -> Result<Route, BadTarget> {
        let path = decode_path(req.target)?;
        let rest = self.tx_rest(&path);
        let shape = Shape::of(path.as_bytes(), rest.map(|r| path.len() - r.len()));
        if shape.dot_dot {
            return Err(BadTarget::DotDotSegment);
        }
        let Some(rest) = rest else {
            return Ok(Route::Master); // rule 2
        };
        let closure = shape.closure;
        if (closure && !self.shared_closure) || shape.master_page {
            return Ok(Route::Master); // rule 1
        }
        let counted = req.method != Method::OPTIONS;
        let lane = if counted {
            lane_of(
                req.method,
                rest,
                req.content_length,
                self.fast_lane_max_bytes,
            )
        } else {
            Lane::Normal
        };
        // $closure ignores the cache (DEC-14): with sharedClosure it goes by rule 4.
        let target = match req.cache_id {
            Some(id) if !closure => self.cache_target(id),
            _ => Target::LeastLoaded,
        };
        Ok(Route::Tx(TxDemand {
            target,
            lane,
            counted,
        }))
    }

    /// The path after the tx endpoint it is in (empty or starting with `/`), if any: inside only
    /// at a segment boundary (`/r4x` is not in `/r4`).
    fn tx_rest<'p>(&self, path: &'p str) -> Option<&'p str> {
        let bytes = path.as_bytes();
        self.endpoints.iter().find_map(|e| {
            let e = e.as_bytes();
            let inside = bytes.len() >= e.len()
                && bytes[..e.len()].eq_ignore_ascii_case(e)
                && (bytes.len() == e.len() || bytes[e.len()] == b'/');
            // An ASCII endpoint ends at a char boundary of `path` when it matched.
            inside.then(|| path.get(e.len()..)).flatten()
        })
    }

    /// Rule 3 and its options.
    fn cache_target(&self, id: &[u8]) -> Target {
        let owner = self.owner_of(id);
        match (self.shared_cache, self.cache_affinity, owner) {
            (false, _, Some(p)) => Target::Owner(p),
            (false, _, None) => Target::UnknownPrefix,
            (true, true, Some(p)) => Target::Affinity(p),
            (true, _, _) => Target::LeastLoaded,
        }
    }

    /// The process whose code is exactly the id's text before its first `.`.
    fn owner_of(&self, id: &[u8]) -> Option<ProcessId> {
        let id = id.trim_ascii();
        let dot = id.iter().position(|&b| b == b'.')?;
        let prefix = &id[..dot];
        self.codes
            .iter()
            .find(|(code, _)| code.as_slice() == prefix)
            .map(|(_, p)| *p)
    }
}

/// What routing reads of a path's segments, in one pass over its bytes, where three passes of
/// `split`, one for each, and two more over the target for `?` and `%` read every request's
/// path five times.
#[derive(Debug, Default, PartialEq, Eq)]
struct Shape {
    /// A `..` segment anywhere.
    dot_dot: bool,
    /// A `$closure` segment after the endpoint (ASCII case-insensitively).
    closure: bool,
    /// The first non-empty segment after the endpoint is `info` or starts with `syndication`.
    master_page: bool,
}

impl Shape {
    /// `rest_at`: where the path after the tx endpoint begins (at a `/`, or the end), if any.
    fn of(path: &[u8], rest_at: Option<usize>) -> Shape {
        let mut shape = Shape::default();
        let mut named_seen = false;
        let mut start = 0;
        for end in (0..=path.len()).filter(|&i| i == path.len() || path[i] == b'/') {
            let segment = &path[start..end];
            shape.dot_dot |= segment == b"..";
            // After the endpoint: the segments that start past the `/` it ends at.
            if rest_at.is_some_and(|r| start > r) {
                shape.closure |= segment.eq_ignore_ascii_case(b"$closure");
                if !named_seen && !segment.is_empty() {
                    named_seen = true;
                    shape.master_page = segment.eq_ignore_ascii_case(b"info")
                        || (segment.len() >= 11
                            && segment[..11].eq_ignore_ascii_case(b"syndication"));
                }
            }
            start = end + 1;
        }
        shape
    }
}

/// The percent-decoded path of an origin-form target, without its query: the target's own
/// bytes when it has no `%` (almost every one), else a decoded copy. (Its `..` segments are
/// `Shape`'s to find.) One pass over the target says where the query starts, whether the path
/// has a `%`, and whether any byte is one a target may not have.
fn decode_path(target: &str) -> Result<Cow<'_, str>, BadTarget> {
    let raw = target.as_bytes();
    if raw.first() != Some(&b'/') {
        return Err(BadTarget::NotOriginForm);
    }
    let mut query = None;
    let mut percent = false;
    for (i, &b) in raw.iter().enumerate() {
        match TARGET_BYTE[b as usize] {
            PLAIN => {}
            FORBIDDEN => return Err(BadTarget::ForbiddenByte),
            QUESTION => {
                query.get_or_insert(i);
            }
            _ => percent |= query.is_none(),
        }
    }
    let path = &target[..query.unwrap_or(raw.len())];
    if percent {
        Ok(Cow::Owned(percent_decode(path.as_bytes())?))
    } else {
        // Bytes 0x21 to 0x7e only (checked above): ASCII, and so UTF-8 as it is.
        Ok(Cow::Borrowed(path))
    }
}

/// What each byte is to `decode_path`: a space, a control, `#` and non-ASCII are forbidden.
const TARGET_BYTE: [u8; 256] = {
    let mut t = [PLAIN; 256];
    let mut b = 0;
    while b < 256 {
        if b <= b' ' as usize || b >= 0x7f || b == b'#' as usize {
            t[b] = FORBIDDEN;
        }
        b += 1;
    }
    t[b'?' as usize] = QUESTION;
    t[b'%' as usize] = PERCENT;
    t
};
const PLAIN: u8 = 0;
const FORBIDDEN: u8 = 1;
const QUESTION: u8 = 2;
const PERCENT: u8 = 3;

fn percent_decode(path: &[u8]) -> Result<String, BadTarget> {
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        if path[i] == b'%' {
            let hi = path.get(i + 1).and_then(|&b| hex(b));
            let lo = path.get(i + 2).and_then(|&b| hex(b));
            match (hi, lo) {
                (Some(h), Some(l)) => out.push(h << 4 | l),
                _ => return Err(BadTarget::BadPercentEncoding),
            }
            i += 3;
        } else {
            out.push(path[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| BadTarget::NotUtf8)
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "route_reference_tests.rs"]
mod reference_tests;
