//! HAProxy's agent-check on `agentAddress` (DEC-89) with the real binary: one line a connection,
//! then closed. `down` while the master starts, `up ready 100%` once ready, the weight falling
//! with the slots taken by slow requests, `drain` from a stop's first moment (its lame duck).

use crate::common;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::*;
use serde_json::json;

const SIGTERM: i32 = 15;

/// The agent's answer on 127.0.0.1:`port`: everything it sends before it closes; None when
/// nothing listens there.
pub fn agent_line(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

#[test]
fn the_agent_says_down_then_up_with_the_free_share_of_slots_then_drain() {
    // spec: DEC-89, DEC-88
    let agent = free_port();
    let mut c = cluster()
        .workers(1)
        .env("SIM_START_DELAY_MS_m0", "2000")
        .env("SIM_COST_EXPAND_MS", "4000")
        .config(json!({ "server": { "cluster": {
            "agentAddress": format!("127.0.0.1:{agent}"),
            // Two processes (the master serves tx too), 2 slots each: 4 in all.
            "maxOutstanding": 2,
            "fastLaneExtra": 0,
            "normalMinSlots": 0,
            "lameDuckSeconds": 60
        } } }))
        .spawn();
    let first = poll("the agent's first line", secs(10), || agent_line(agent));
    assert!(
        c.line_index("m0: ready").is_none(),
        "the start delay is over already"
    );
    assert_eq!(first, "down\n", "while the master starts");

    c.wait_for("tx1: ready", secs(20));
    c.wait_until_listening(secs(10));
    poll("up ready 100%", secs(5), || {
        (agent_line(agent)? == "up ready 100%\n").then_some(())
    });

    // Two slow requests take half the slots.
    let addr = c.addr();
    let slow: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || request(addr, "GET", "/r4/ValueSet/$expand", &[], b"")))
        .collect();
    let mut seen = Vec::new();
    poll("up ready 50% with two slow requests", secs(5), || {
        let line = agent_line(agent)?;
        seen.push(line.clone());
        (line == "up ready 50%\n").then_some(())
    });
    for t in slow {
        assert_eq!(t.join().expect("slow request").status, 200);
    }

    // A stop: drain at once (its lame duck: still serving).
    c.signal(SIGTERM);
    poll("drain once stopping", secs(5), || {
        (agent_line(agent)? == "drain\n").then_some(())
    });
    assert_eq!(c.get("/r4/metadata").status, 200, "served in the lame duck");
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
}

#[test]
fn the_agents_socket_is_kept_across_an_in_place_upgrade_refusing_no_check() {
    // spec: DEC-89 (agentAddress kept across an upgrade, as adminAddress is)
    use crate::upgrade::Bin;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let bin = Bin::new();
    let agent = free_port();
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "agentAddress": format!("127.0.0.1:{agent}")
        } } }))
        .start_wrapped(&bin.wrap());
    poll("up ready", secs(5), || {
        (agent_line(agent)? == "up ready 100%\n").then_some(())
    });
    // HAProxy's checks, as often as a thread can make them, through the upgrade.
    let stop = Arc::new(AtomicBool::new(false));
    let (answered, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let checker = {
        let (stop, answered, refused) = (stop.clone(), answered.clone(), refused.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match agent_line(agent) {
                    Some(line) if line.ends_with('\n') => answered.fetch_add(1, Ordering::Relaxed),
                    _ => refused.fetch_add(1, Ordering::Relaxed),
                };
            }
        })
    };
    bin.replace_with(std::path::Path::new(LAUNCHER));
    let mark = c.mark();
    unsafe_kill(c.child.id() as i32, libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    let kept = c.wait_for_after(mark, "HAProxy's agent-check", secs(10));
    let before = answered.load(Ordering::Relaxed);
    wait_until("checks answered after the upgrade", secs(10), || {
        answered.load(Ordering::Relaxed) > before + 5
    });
    stop.store(true, Ordering::Relaxed);
    checker.join().expect("checker");
    assert_eq!(
        refused.load(Ordering::Relaxed),
        0,
        "checks refused or unanswered during the upgrade ({} answered)",
        answered.load(Ordering::Relaxed)
    );
    assert!(kept.contains("kept across the upgrade"), "{kept}");
}
