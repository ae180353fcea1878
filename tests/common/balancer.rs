//! Three hosts (`hostPrefix` a, b and c, each with `lameDuckSeconds`) behind a balancer on
//! loopback, as haproxy.md and nginx.md configure one: host b stopped under load loses no
//! request (DEC-88), its ids then get `cache-id-unknown` from another host; host c killed
//! outright, its ids get `cache-id-unknown` from host a and new sessions go to host a at once.
//! Shared by the HAProxy and the nginx tests.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The host code part of a cache-id or instance code: `atx1.x.y` → `atx1`.
pub fn issuer(id: &str) -> &str {
    id.split('.').next().unwrap_or("")
}

/// Sessions started through the balancer at `front` until every host in `hosts` has some (at
/// least `3 * hosts.len()`), each id its host's.
pub fn sessions_on_every_host(front: SocketAddr, hosts: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    poll("sessions on every host", secs(30), || {
        let r = request(front, "POST", "/r4/$cache-control", &[], b"{}");
        if r.status == 200 {
            let id = r.header("x-cache-id").unwrap_or("").to_string();
            assert_eq!(issuer(&id), r.served_by(), "{id}");
            ids.push(id);
        }
        let seen: std::collections::BTreeSet<char> =
            ids.iter().filter_map(|i| i.chars().next()).collect();
        (hosts.chars().all(|h| seen.contains(&h)) && ids.len() >= 3 * hosts.len()).then_some(())
    });
    ids
}

/// Host b stopped with its lame duck under load through `front`, then host c killed outright;
/// `ids` are sessions on every host.
pub fn a_lame_duck_stop_and_a_kill_behind(
    front: SocketAddr,
    b: &mut Cluster,
    c: &mut Cluster,
    ids: &[String],
) {
    let addr = front;
    // Load (new sessions and host a's and c's sessions) while host b stops with its lame duck.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let served = Arc::new(Mutex::new(std::collections::BTreeMap::<String, u64>::new()));
    let kept: Vec<String> = ids
        .iter()
        .filter(|i| !i.starts_with('b'))
        .cloned()
        .collect();
    let workers: Vec<_> = (0..4)
        .map(|n| {
            let (stop, failures, served, kept) =
                (stop.clone(), failures.clone(), served.clone(), kept.clone());
            std::thread::spawn(move || {
                let mut i = n;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let r = if i % 2 == 0 {
                        let id = &kept[i % kept.len()];
                        let r = request(
                            addr,
                            "GET",
                            "/r4/CodeSystem/$lookup",
                            &[("X-Cache-Id", id)],
                            b"",
                        );
                        if r.status == 200 && r.served_by() != issuer(id) {
                            failures
                                .lock()
                                .expect("lock")
                                .push(format!("{id} on {}", r.served_by()));
                        }
                        r
                    } else {
                        request(addr, "GET", "/r4/metadata", &[], b"")
                    };
                    if r.status != 200 {
                        failures
                            .lock()
                            .expect("lock")
                            .push(format!("{} {}", r.status, r.text()));
                    }
                    let host = r
                        .served_by()
                        .chars()
                        .next()
                        .map(String::from)
                        .unwrap_or_default();
                    *served.lock().expect("lock").entry(host).or_default() += 1;
                }
            })
        })
        .collect();
    wait_until("load on host b", secs(10), || {
        served
            .lock()
            .expect("lock")
            .get("b")
            .is_some_and(|n| *n > 3)
    });
    let mark = b.mark();
    b.signal(15); // SIGTERM
    b.wait_for_after(mark, "lame duck over", secs(30));
    assert_eq!(b.wait_exit(secs(30)).code(), Some(0));
    // A little more load with host b gone, then the tally.
    let before = served.lock().expect("lock").values().sum::<u64>();
    wait_until("more requests with host b gone", secs(10), || {
        served.lock().expect("lock").values().sum::<u64>() > before + 20
    });
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("load thread");
    }
    let failures = failures.lock().expect("lock").clone();
    let served = served.lock().expect("lock").clone();
    eprintln!("served by host during b's stop: {served:?}");
    assert!(failures.is_empty(), "{} lost: {failures:?}", failures.len());

    // Host b gone: its ids get cache-id-unknown from another host; the others carry on.
    for (id, r) in lookups_of(front, ids, 'b') {
        assert!(r.is_cache_id_unknown(), "{id}: {} {}", r.status, r.text());
        assert!(!r.served_by().starts_with('b'), "{id}: {}", r.served_by());
    }

    // Host c killed outright (SIGKILL: its processes go with it): its ids get cache-id-unknown
    // from host a, and new requests go to host a, at once, before any health check notices.
    c.signal(9);
    c.wait_exit(secs(10));
    wait_until("host c's port closed", secs(10), || !accepting(c.port));
    for (id, r) in lookups_of(front, ids, 'c') {
        assert!(r.is_cache_id_unknown(), "{id}: {} {}", r.status, r.text());
        assert!(r.served_by().starts_with('a'), "{id}: {}", r.served_by());
    }
    for _ in 0..6 {
        let r = request(front, "POST", "/r4/$cache-control", &[], b"{}");
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.served_by().starts_with('a'), "{}", r.served_by());
    }
}

/// A `$lookup` through `front` with each of host `host`'s ids, and its answer.
fn lookups_of<'a>(
    front: SocketAddr,
    ids: &'a [String],
    host: char,
) -> impl Iterator<Item = (&'a String, Response)> + 'a {
    ids.iter()
        .filter(move |i| i.starts_with(host))
        .map(move |id| {
            let r = request(
                front,
                "GET",
                "/r4/CodeSystem/$lookup",
                &[("X-Cache-Id", id)],
                b"",
            );
            (id, r)
        })
}
