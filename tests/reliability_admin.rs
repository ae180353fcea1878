//! The launcher's own endpoint against a crowd: `/livez` and `/readyz` answer within a second
//! while hundreds of idle and trickling connections, opened again as soon as they are closed,
//! press on the admin listener from the probe's own address (DEC-76). Prints its figures on a
//! `RELIABILITY` line (see tests/reliability.md).

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

/// Connections of each kind the crowd holds.
const EACH: usize = 200;
/// How often the crowd looks at its connections: a trickling one sends a byte, a closed one is
/// opened again.
const ROUND: Duration = Duration::from_millis(250);
/// The most a health check may wait for its answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// One of the crowd's connections: silent, or sending a head that never ends a byte at a time.
struct Pest {
    stream: Option<TcpStream>,
    trickles: bool,
}

impl Pest {
    fn open(&mut self, admin: SocketAddr, opened: &AtomicU64) {
        self.stream = TcpStream::connect_timeout(&admin, ANSWER_WITHIN)
            .ok()
            .filter(|s| s.set_nonblocking(true).is_ok());
        if let Some(s) = &mut self.stream {
            opened.fetch_add(1, Ordering::Relaxed);
            if self.trickles {
                let _ = s.write(b"GET /livez HTTP/1.1\r\nX-Pest: ");
            }
        }
    }

    /// Whether the launcher has closed it (or answered it, which it does only as it closes).
    fn closed(&mut self) -> bool {
        let Some(s) = &mut self.stream else {
            return true;
        };
        let mut buf = [0u8; 512];
        let read = !matches!(s.read(&mut buf), Err(e) if e.kind() == ErrorKind::WouldBlock);
        read || (self.trickles && s.write(b"a").is_err())
    }
}

/// Holds `EACH` idle and `EACH` trickling connections on `admin`, each opened again once
/// closed, until `stop`; counts the connections opened and the rounds made over all of them.
fn crowd(admin: SocketAddr, stop: Arc<AtomicBool>, opened: Arc<AtomicU64>, rounds: Arc<AtomicU64>) {
    let mut pests: Vec<Pest> = (0..2 * EACH)
        .map(|i| Pest {
            stream: None,
            trickles: i % 2 == 1,
        })
        .collect();
    while !stop.load(Ordering::Relaxed) {
        for p in &mut pests {
            if p.closed() {
                p.open(admin, &opened);
            }
        }
        rounds.fetch_add(1, Ordering::Relaxed);
        // The crowd's pace, not a wait on a state.
        std::thread::sleep(ROUND);
    }
}

/// GET `path` on a fresh connection, as a health checker does: its status (0: not connected, or
/// no answer, within `ANSWER_WITHIN` each) and how long it took.
fn probe(admin: SocketAddr, path: &str) -> (u16, Duration) {
    let t = Instant::now();
    let status = TcpStream::connect_timeout(&admin, ANSWER_WITHIN)
        .ok()
        .and_then(|mut s| {
            s.set_read_timeout(Some(ANSWER_WITHIN)).ok()?;
            let head = format!("GET {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
            s.write_all(head.as_bytes()).ok()?;
            read_response(&mut std::io::BufReader::new(s))
        })
        .map_or(0, |r| r.status);
    (status, t.elapsed())
}

#[test]
fn health_checks_answer_within_a_second_under_a_crowd_of_idle_and_trickling_connections() {
    // spec: DEC-76
    // ADMIN_FLOOD_SECONDS=60 for the measure in tests/reliability.md.
    let seconds: u64 = std::env::var("ADMIN_FLOOD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    raise_fd_limit();
    let admin = admin_addr();
    let c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.port().to_string())
        .start();
    assert_eq!(probe(admin, "/readyz").0, 200, "ready before the crowd");

    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let rounds = Arc::new(AtomicU64::new(0));
    let crowd_thread = {
        let (stop, opened, rounds) = (stop.clone(), opened.clone(), rounds.clone());
        std::thread::spawn(move || crowd(admin, stop, opened, rounds))
    };
    // Every connection tried once (a connection the kernel's backlog has no room for takes up
    // to a second to be given up).
    wait_until(
        "the crowd's first round",
        Duration::from_secs(2 * EACH as u64 + 10),
        || rounds.load(Ordering::Relaxed) >= 1,
    );

    let mut probes = Vec::new();
    let end = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < end {
        let round = Instant::now();
        for path in ["/livez", "/readyz"] {
            probes.push((path, probe(admin, path)));
        }
        // A health check's period: one probe of each a second.
        std::thread::sleep(Duration::from_secs(1).saturating_sub(round.elapsed()));
    }
    stop.store(true, Ordering::Relaxed);
    crowd_thread.join().expect("the crowd's thread");

    let late: Vec<_> = probes
        .iter()
        .filter(|(_, (status, took))| *status != 200 || *took > ANSWER_WITHIN)
        .collect();
    let slowest = probes
        .iter()
        .map(|(_, (_, t))| *t)
        .max()
        .unwrap_or_default();
    let opened = opened.load(Ordering::Relaxed);
    report_figures(
        "admin_crowd",
        &format!(
            "{EACH} idle and {EACH} trickling connections on the admin listener, each opened \
             again once closed ({opened} opened in {seconds} s), /livez and /readyz probed \
             every second from the same address"
        ),
        2 * EACH as u64,
        probes.len() as u64,
        late.len() as u64,
        &format!(
            "{} of {} probes answered 200 within 1 s, slowest {slowest:?}",
            probes.len() - late.len(),
            probes.len()
        ),
    );
    assert!(
        late.is_empty(),
        "{} of {} probes unanswered within {ANSWER_WITHIN:?} (status 0: none): {late:?}",
        late.len(),
        probes.len()
    );
    // The crowd took nothing from the service.
    assert_eq!(c.get("/r4/metadata").status, 200);
}
