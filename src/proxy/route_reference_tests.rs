//! The one-pass reading of a target (`decode_path`, `Shape`) against the passes it replaced,
//! kept here as they were: the same route or the same refusal for any target, of every byte
//! class a target may hold (`%`-escapes good and bad, `?`, `#`, `..`, `$closure`, `info`,
//! `syndication`, endpoints in any case, nested and at their boundaries).

use super::*;
use proptest::prelude::*;

/// The routing as it was before the one pass (4eec402).
fn route_by_passes(t: &RouteTable, req: &RequestHead<'_>) -> Result<Route, BadTarget> {
    let path = decode_path_by_passes(req.target)?;
    let Some(rest) = t.tx_rest(&path) else {
        return Ok(Route::Master);
    };
    let closure = segments(rest).any(|s| s.eq_ignore_ascii_case(b"$closure"));
    if (closure && !t.shared_closure) || is_master_page(rest) {
        return Ok(Route::Master);
    }
    let counted = req.method != Method::OPTIONS;
    let lane = if counted {
        lane_of(req.method, rest, req.content_length, t.fast_lane_max_bytes)
    } else {
        Lane::Normal
    };
    let target = match req.cache_id {
        Some(id) if !closure => t.cache_target(id),
        _ => Target::LeastLoaded,
    };
    Ok(Route::Tx(TxDemand {
        target,
        lane,
        counted,
    }))
}

fn is_master_page(rest: &str) -> bool {
    let Some(b) = segments(rest).find(|s| !s.is_empty()) else {
        return false;
    };
    b.eq_ignore_ascii_case(b"info")
        || (b.len() >= 11 && b[..11].eq_ignore_ascii_case(b"syndication"))
}

fn segments(path: &str) -> impl Iterator<Item = &[u8]> {
    path.as_bytes().split(|&b| b == b'/')
}

fn decode_path_by_passes(target: &str) -> Result<Cow<'_, str>, BadTarget> {
    let raw = target.as_bytes();
    if raw.first() != Some(&b'/') {
        return Err(BadTarget::NotOriginForm);
    }
    let path = match raw.iter().position(|&b| b == b'?') {
        Some(q) => &raw[..q],
        None => raw,
    };
    if raw.iter().any(|&b| b <= b' ' || b >= 0x7f || b == b'#') {
        return Err(BadTarget::ForbiddenByte);
    }
    let decoded = if path.contains(&b'%') {
        Cow::Owned(percent_decode(path)?)
    } else {
        Cow::Borrowed(&target[..path.len()])
    };
    if segments(&decoded).any(|s| s == b"..") {
        return Err(BadTarget::DotDotSegment);
    }
    Ok(decoded)
}

fn table(endpoints: &[&str], flags: u8) -> RouteTable {
    let mut s = Settings::default();
    s.tx.endpoints = endpoints.iter().map(|e| e.to_string()).collect();
    s.cluster.shared_cache = flags & 1 != 0;
    s.cluster.cache_affinity = flags & 2 != 0;
    s.cluster.shared_closure = flags & 4 != 0;
    s.cluster.fast_lane_max_bytes = 1024;
    RouteTable::new(
        &s,
        &[
            (ProcessId(0), "m0"),
            (ProcessId(1), "tx1"),
            (ProcessId(2), "tx2"),
        ],
    )
}

/// Pieces a target is made of: path segments and their escapes, and query bits.
const PIECES: &[&str] = &[
    "/",
    "/",
    "/",
    "r4",
    "R4",
    "r4x",
    "tx",
    "r5",
    "metadata",
    "$closure",
    "$CLOSURE",
    "%24closure",
    "info",
    "INFO",
    "syndication",
    "Syndication.xml",
    "syndicat",
    "..",
    "%2e%2e",
    "%2E.",
    ".",
    "%2F",
    "%2f..",
    "?",
    "?x=/../",
    "#",
    " ",
    "%",
    "%2",
    "%zz",
    "%ff",
    "%C3%A9",
    "\u{e9}",
    "CodeSystem",
    "$lookup",
    "$validate-code",
    "ValueSet",
    "$expand",
    "a",
    "%41",
    "\u{7f}",
    "&",
    "=",
    "_",
    "~",
];

proptest! {
    #[test]
    fn one_pass_routes_every_target_as_the_passes_did(
        pieces in prop::collection::vec(0..PIECES.len(), 0..10),
        lead in prop::sample::select(vec!["/", "", "*", "//", "/r4", "/tx/r5/", "/R4/"]),
        endpoints in prop::sample::select(vec![
            vec!["/r4"], vec!["/r4", "/tx/r5"], vec!["/r4/", "/r4/sub"], vec!["/tx/r5", "/tx"],
            vec![],
        ]),
        flags in 0u8..8,
        method in prop::sample::select(vec![Method::GET, Method::POST, Method::OPTIONS, Method::HEAD]),
        cache_id in prop::sample::select(vec![None, Some("tx1.a"), Some("m0.x"), Some("zz.q")]),
        content_length in prop::option::of(0u64..2048),
    ) {
        // spec: ROUTE-1a, ROUTE-1b, ROUTE-1c, ROUTE-2a
        let t = table(&endpoints, flags);
        let mut target = lead.to_string();
        for p in pieces {
            target.push_str(PIECES[p]);
        }
        let head = RequestHead {
            method: &method,
            target: &target,
            cache_id: cache_id.map(str::as_bytes),
            content_length,
        };
        prop_assert_eq!(t.route(&head), route_by_passes(&t, &head), "{:?}", target);
    }
}

#[test]
fn the_shape_of_a_path_after_its_endpoint() {
    let shape = |path: &str, rest_at: Option<usize>| Shape::of(path.as_bytes(), rest_at);
    let s = shape("/r4/info/$closure", Some(3));
    assert!(s.master_page && s.closure && !s.dot_dot);
    // Before the endpoint's end nothing counts but a `..`.
    let s = shape("/$closure/info/..", Some(14));
    assert!(!s.master_page && !s.closure && s.dot_dot);
    assert_eq!(shape("/r4", Some(3)), Shape::default());
    assert!(!shape("/r4//x/info", Some(3)).master_page);
    assert!(shape("/r4//syndicationX", Some(3)).master_page);
}
