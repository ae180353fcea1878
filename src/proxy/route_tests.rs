//! The routing table's tests: every rule under every option combination (OPT-3..10), the
//! endpoints' boundaries, encodings and hostile input; a property test that nothing panics and a
//! cache-id selects only the process whose code it names.

use super::*;
use proptest::prelude::*;

const M0: ProcessId = ProcessId(0);
const TX1: ProcessId = ProcessId(1);
const TX2: ProcessId = ProcessId(2);

fn table(shared_cache: bool, cache_affinity: bool, shared_closure: bool) -> RouteTable {
    let mut s = Settings::default();
    s.tx.endpoints = vec!["/r4".into(), "/tx/r5".into()];
    s.cluster.shared_cache = shared_cache;
    s.cluster.cache_affinity = cache_affinity;
    s.cluster.shared_closure = shared_closure;
    RouteTable::new(&s, &[(M0, "m0"), (TX1, "tx1"), (TX2, "tx2")])
}

fn route(t: &RouteTable, method: Method, target: &str, cache_id: Option<&str>) -> Route {
    t.route(&RequestHead {
        method: &method,
        target,
        cache_id: cache_id.map(str::as_bytes),
        content_length: None,
    })
    .unwrap_or_else(|e| panic!("{target}: {e}"))
}

fn tx(target: Target) -> Route {
    Route::Tx(TxDemand {
        target,
        lane: Lane::Normal,
        counted: true,
    })
}

fn all_combinations() -> Vec<RouteTable> {
    let mut v = Vec::new();
    for sc in [false, true] {
        for aff in [false, true] {
            for cl in [false, true] {
                v.push(table(sc, aff, cl));
            }
        }
    }
    v
}

#[test]
fn master_pages_go_to_the_master_in_every_combination() {
    // spec: ROUTE-1b, ROUTE-1c, ROUTE-2a, OPT-2, QUEUE-10, DEC-24
    for t in all_combinations() {
        for target in [
            "/",
            "/packages",
            "/xig/x",
            "/dashboard",
            "/health",
            "/r4x",
            "/r4x/$lookup",
            "/tx",
            "/tx/r4",
            "/r5/CodeSystem",
            "//r4/CodeSystem",
            "/r4/syndication",
            "/r4/syndication/feed.atom",
            "/r4/syndication?x=1",
            "/tx/r5/syndication.xml",
            "/r4/info/vsac",
            "/r4/info",
            "/r4//info/x",
            "/r4/INFO/vsac",
            "/r4%2Finfo/vsac",
            "/r4/%69nfo/vsac",
            "/R4/Syndication",
        ] {
            for m in [Method::GET, Method::POST, Method::OPTIONS] {
                assert_eq!(
                    route(&t, m, target, Some("tx1.a.b")),
                    Route::Master,
                    "{target}"
                );
            }
        }
    }
}

#[test]
fn closure_goes_to_the_master_unless_shared_closure() {
    // spec: ROUTE-1a, ROUTE-5a, OPT-4, OPT-6, OPT-8, OPT-10, QUEUE-14, LIMIT-1, DEC-14
    for target in [
        "/r4/$closure",
        "/r4/%24closure",
        "/r4/%24CLOSURE?x=1",
        "/tx/r5/$closure",
        "/r4//$closure",
        "/r4/$closure/",
        "/R4/$Closure",
    ] {
        for sc in [false, true] {
            for aff in [false, true] {
                let t = table(sc, aff, false);
                assert_eq!(route(&t, Method::POST, target, None), Route::Master);
                assert_eq!(
                    route(&t, Method::POST, target, Some("tx2.a.b")),
                    Route::Master
                );
                let t = table(sc, aff, true);
                assert_eq!(
                    route(&t, Method::POST, target, None),
                    tx(Target::LeastLoaded)
                );
                // the cache-id is ignored by $closure (DEC-14)
                assert_eq!(
                    route(&t, Method::POST, target, Some("tx2.a.b")),
                    tx(Target::LeastLoaded),
                    "{target}"
                );
            }
        }
    }
}

#[test]
fn cache_id_routing_by_combination() {
    // spec: ROUTE-3a, ROUTE-3c, ROUTE-5b, ROUTE-5c, OPT-3, OPT-5, OPT-7, OPT-9, QUEUE-9
    for closure in [false, true] {
        for aff in [false, true] {
            // sharedCache off: the issuer, whatever cacheAffinity says (OPT-3, OPT-7)
            let t = table(false, aff, closure);
            let r = |id| route(&t, Method::POST, "/r4/ValueSet/$expand", Some(id));
            assert_eq!(r("tx2.mhp4x2k9.4f0c"), tx(Target::Owner(TX2)));
            assert_eq!(r("m0.x.y"), tx(Target::Owner(M0)));
            assert_eq!(r("tx9.x.y"), tx(Target::UnknownPrefix));
            assert_eq!(r("tx2"), tx(Target::UnknownPrefix)); // DEC-14: no '.'
                                                             // sharedCache on (OPT-5, OPT-9)
            let t = table(true, aff, closure);
            let r = |id| route(&t, Method::POST, "/r4/ValueSet/$expand", Some(id));
            let issuer = if aff {
                Target::Affinity(TX2)
            } else {
                Target::LeastLoaded
            };
            assert_eq!(r("tx2.mhp4x2k9.4f0c"), tx(issuer));
            assert_eq!(r("tx9.x.y"), tx(Target::LeastLoaded));
            assert_eq!(r("nodot"), tx(Target::LeastLoaded));
        }
    }
}

#[test]
fn other_tx_requests_go_to_the_least_loaded() {
    // spec: ROUTE-2b, ROUTE-4a, ROUTE-3a
    for t in all_combinations() {
        for target in [
            "/r4",
            "/r4/",
            "/r4?x",
            "/r4/CodeSystem",
            "/r4/CodeSystem?url=http://loinc.org",
            "/r4/ValueSet/$expand?url=x",
            "/tx/r5/CodeSystem/x",
            "/r4/information",
            "/r4/CodeSystem/info",
            "/R4/CodeSystem",
            "/r4/./CodeSystem",
        ] {
            assert_eq!(
                route(&t, Method::GET, target, None),
                tx(Target::LeastLoaded),
                "{target}"
            );
        }
    }
}

#[test]
fn the_lane_is_in_the_route_and_uses_the_content_length() {
    // spec: LANE-7, LANE-8, LANE-9, LANE-10, CONF-23
    let t = table(false, false, false);
    let lane = |m: Method, target: &str, len: Option<u64>| match t.route(&RequestHead {
        method: &m,
        target,
        cache_id: None,
        content_length: len,
    }) {
        Ok(Route::Tx(d)) => d.lane,
        other => panic!("{target}: {other:?}"),
    };
    assert_eq!(lane(Method::GET, "/r4/metadata", None), Lane::Fast);
    assert_eq!(
        lane(Method::GET, "/r4/metadata?mode=terminology", None),
        Lane::Fast
    );
    assert_eq!(
        lane(Method::GET, "/r4/CodeSystem/%24lookup?code=1", None),
        Lane::Fast
    );
    assert_eq!(
        lane(Method::HEAD, "/tx/r5/ValueSet/x/$validate-code", None),
        Lane::Fast
    );
    assert_eq!(
        lane(Method::POST, "/r4/CodeSystem/$validate-code", Some(450)),
        Lane::Fast
    );
    assert_eq!(
        lane(Method::POST, "/r4/CodeSystem/$validate-code", Some(5000)),
        Lane::Normal
    );
    assert_eq!(
        lane(Method::POST, "/r4/CodeSystem/$validate-code", None),
        Lane::Normal
    );
    assert_eq!(
        lane(Method::GET, "/r4/ValueSet/$expand", None),
        Lane::Normal
    );
    assert_eq!(
        lane(Method::GET, "/r4/CodeSystem/loinc", None),
        Lane::Normal
    );
    let mut s = Settings::default();
    s.tx.endpoints = vec!["/r4".into()];
    s.cluster.fast_lane_max_bytes = 0;
    let t0 = RouteTable::new(&s, &[(M0, "m0")]);
    let r = t0.route(&RequestHead {
        method: &Method::POST,
        target: "/r4/$lookup",
        cache_id: None,
        content_length: Some(0),
    });
    assert!(matches!(r, Ok(Route::Tx(d)) if d.lane == Lane::Normal));
}

#[test]
fn options_is_routed_by_the_same_rules_but_not_counted() {
    // spec: DEC-11, QUEUE-12, QUEUE-13
    let t = table(false, false, false);
    let r = route(
        &t,
        Method::OPTIONS,
        "/r4/CodeSystem/$lookup",
        Some("tx1.a.b"),
    );
    assert_eq!(
        r,
        Route::Tx(TxDemand {
            target: Target::Owner(TX1),
            lane: Lane::Normal,
            counted: false
        })
    );
    assert_eq!(
        route(&t, Method::OPTIONS, "/r4/$closure", None),
        Route::Master
    );
}

#[test]
fn bad_targets_are_refused() {
    // spec: DEC-31 (an unroutable target is the launcher's own 400)
    let t = table(false, false, false);
    let bad = |target: &str| {
        t.route(&RequestHead {
            method: &Method::GET,
            target,
            cache_id: None,
            content_length: None,
        })
    };
    assert_eq!(bad(""), Err(BadTarget::NotOriginForm));
    assert_eq!(bad("*"), Err(BadTarget::NotOriginForm));
    assert_eq!(bad("http://x/r4"), Err(BadTarget::NotOriginForm));
    assert_eq!(bad("/r4%2F.."), Err(BadTarget::DotDotSegment));
    assert_eq!(bad("/r4/../packages"), Err(BadTarget::DotDotSegment));
    assert_eq!(bad("/r4/%2e%2e/packages"), Err(BadTarget::DotDotSegment));
    assert_eq!(bad("/r4/%zz"), Err(BadTarget::BadPercentEncoding));
    assert_eq!(bad("/r4/%2"), Err(BadTarget::BadPercentEncoding));
    assert_eq!(bad("/r4/%ff"), Err(BadTarget::NotUtf8));
    assert_eq!(bad("/r4/a b"), Err(BadTarget::ForbiddenByte));
    assert_eq!(bad("/r4/a#b"), Err(BadTarget::ForbiddenByte));
    assert_eq!(bad("/r4/\u{e9}"), Err(BadTarget::ForbiddenByte));
    // a `..` in the query is not a path segment
    assert!(bad("/r4/CodeSystem?x=/../").is_ok());
    assert!(bad("/r4/%C3%A9").is_ok());
}

#[test]
fn hostile_cache_ids_never_select_a_process() {
    // spec: ROUTE-3c, DEC-14
    let t = table(false, false, false);
    let long = format!("tx1{}.x", "1".repeat(100_000));
    let hostile: [&[u8]; 11] = [
        b"",
        b".",
        b".tx1",
        b"TX1.a.b",
        b"tx1\r\n.a",
        b"tx\xff1.a",
        b"\xe2\x80\x8btx1.a",
        b"tx1 x.a",
        b"tx.1.a",
        long.as_bytes(),
        b"tx1",
    ];
    for id in hostile {
        let r = t.route(&RequestHead {
            method: &Method::GET,
            target: "/r4/CodeSystem",
            cache_id: Some(id),
            content_length: None,
        });
        assert_eq!(
            r,
            Ok(tx(Target::UnknownPrefix)),
            "{:?}",
            String::from_utf8_lossy(id)
        );
    }
    // surrounding whitespace is not part of the value
    assert_eq!(
        route(&t, Method::GET, "/r4/CodeSystem", Some(" tx1.a.b ")),
        tx(Target::Owner(TX1))
    );
}

proptest! {
    #[test]
    fn routing_never_panics_and_a_prefix_selects_only_its_process(
        target in "\\PC{0,40}",
        raw in proptest::collection::vec(any::<u8>(), 0..40),
        id in proptest::collection::vec(any::<u8>(), 0..40),
        code in prop::sample::select(vec!["m0", "tx1", "tx2", "tx3", "", "TX1"]),
        sep in prop::sample::select(vec![".", "", ". ", "..", "\r\n."]),
        flags in 0u8..8,
        method in prop::sample::select(vec![Method::GET, Method::POST, Method::OPTIONS, Method::HEAD]),
    ) {
        let t = table(flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
        let mut cache_id = code.as_bytes().to_vec();
        cache_id.extend_from_slice(sep.as_bytes());
        cache_id.extend_from_slice(&id);
        let raw_target = format!("/r4/{}", String::from_utf8_lossy(&raw));
        for tg in [target.as_str(), raw_target.as_str()] {
            let r = t.route(&RequestHead {
                method: &method,
                target: tg,
                cache_id: Some(&cache_id),
                content_length: Some(10),
            });
            if let Ok(Route::Tx(d)) = r {
                if let Target::Owner(p) | Target::Affinity(p) = d.target {
                    let named = ["m0", "tx1", "tx2"][p.index()];
                    let prefix = cache_id.trim_ascii();
                    prop_assert!(prefix.starts_with(named.as_bytes()));
                    prop_assert_eq!(prefix.get(named.len()), Some(&b'.'));
                }
            }
        }
    }
}
