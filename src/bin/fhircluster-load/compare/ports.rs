//! Free loopback ports for the processes a comparison starts.
//!
//! The first version drew its candidates from the kernel's ephemeral range (a port from
//! `127.0.0.1:0`) and failed on a busy machine ("no 2 consecutive free loopback ports" after a
//! 256-connection run left 14,500 sockets in TIME_WAIT). Its `bind` did set `SO_REUSEADDR` (std
//! does on Unix), but that only lets a port be bound over a TIME_WAIT socket that had it too, as
//! a server's has; a client's closed connection (wrk's, the surge's) leaves a TIME_WAIT socket
//! without it, which refuses every bind of that port for a minute, the servers' own included.
//! So candidates are drawn below the ephemeral range, where no client connection takes a port.

use std::net::TcpListener;

use anyhow::bail;

/// The lowest port drawn from.
const LOWEST: u16 = 10_000;

/// Whether a server binding `127.0.0.1:port` with `SO_REUSEADDR` (as nginx, HAProxy, tokio and
/// std do) would get it now.
pub fn bindable(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// The kernel's ephemeral range (client ports), from `/proc/sys/net/ipv4/ip_local_port_range`;
/// Linux's default (32768 to 60999) when unreadable.
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| parse_range(&s))
        .unwrap_or((32_768, 60_999))
}

fn parse_range(range: &str) -> Option<(u16, u16)> {
    let mut words = range.split_whitespace();
    let low = words.next()?.parse().ok()?;
    let high = words.next()?.parse().ok()?;
    (low <= high).then_some((low, high))
}

/// The first port of the ephemeral range.
pub fn ephemeral_low() -> u16 {
    ephemeral_range().0
}

/// How many ports the ephemeral range has.
pub fn ephemeral_ports() -> u64 {
    let (low, high) = ephemeral_range();
    u64::from(high - low) + 1
}

/// The `n`th candidate for `count` consecutive ports: a base in `[LOWEST, low - count]`, spread
/// by `seed`; `None` when that range is empty (an ephemeral range starting below `LOWEST`).
pub fn candidate(seed: u64, count: u16, low: u16) -> Option<u16> {
    let top = low.checked_sub(count)?;
    if top < LOWEST {
        return None;
    }
    let span = u64::from(top - LOWEST) + 1;
    Some(LOWEST + (seed % span) as u16)
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// `count` consecutive loopback ports that were free when checked, below the ephemeral range.
pub fn free_ports(count: u16) -> anyhow::Result<u16> {
    let low = ephemeral_low();
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32)
        | 1;
    for _ in 0..2_000 {
        seed = xorshift(seed);
        let Some(base) = candidate(seed, count, low) else {
            bail!("no ports below the ephemeral range (it starts at {low})");
        };
        if (base..base + count).all(bindable) {
            return Ok(base);
        }
    }
    bail!("no {count} consecutive free loopback ports below {low}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    /// Whether a socket on 127.0.0.1:`port` is in TIME_WAIT (state 06 in /proc/net/tcp).
    fn time_wait_on(port: u16) -> bool {
        let local = format!("0100007F:{port:04X}");
        std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(1) == Some(&local.as_str()) && f.get(3) == Some(&"06")
            })
        })
    }

    /// Closes a connection to a fresh listener, the client or the server first, and returns the
    /// port whose socket is then left in TIME_WAIT (the closing side's).
    fn time_wait(client_first: bool) -> anyhow::Result<u16> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let client = TcpStream::connect(listener.local_addr()?)?;
        let (served, _) = listener.accept()?;
        let port = if client_first {
            client.local_addr()?.port()
        } else {
            listener.local_addr()?.port()
        };
        let (first, mut second) = if client_first {
            (client, served)
        } else {
            (served, client)
        };
        drop(first);
        second.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut buf = [0u8; 1];
        assert_eq!(second.read(&mut buf)?, 0, "the other side closed");
        drop(second);
        drop(listener);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !time_wait_on(port) {
            assert!(Instant::now() < deadline, "no TIME_WAIT socket on {port}");
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(port)
    }

    #[test]
    fn a_client_time_wait_takes_its_port_and_a_server_one_does_not() -> anyhow::Result<()> {
        // Why candidates are not drawn where client connections take their ports.
        let client_port = time_wait(true)?;
        assert!(!bindable(client_port), "{client_port}");
        // A proxy that stopped leaves its own port reusable by the next round's.
        let server_port = time_wait(false)?;
        assert!(bindable(server_port), "{server_port}");
        Ok(())
    }

    #[test]
    fn free_ports_are_drawn_below_the_ephemeral_range() {
        for count in [1, 2, 4] {
            let base = free_ports(count).unwrap_or(0);
            assert!(
                base >= LOWEST && base + count <= ephemeral_low(),
                "{base} (+{count}) is not below {}",
                ephemeral_low()
            );
        }
    }

    #[test]
    fn candidates_stay_below_the_ephemeral_range() {
        assert_eq!(parse_range("32768\t60999\n"), Some((32_768, 60_999)));
        assert_eq!(parse_range("32768"), None);
        assert_eq!(parse_range("9 8"), None);
        assert!(ephemeral_ports() >= 1);
        for seed in [0, 1, 7, u64::MAX, 123_456_789] {
            let base = candidate(seed, 6, 32_768).unwrap_or(0);
            assert!((LOWEST..=32_762).contains(&base), "{base}");
        }
        assert_eq!(candidate(5, 1, LOWEST + 1), Some(LOWEST));
        assert_eq!(candidate(5, 2, LOWEST + 1), None);
        assert_eq!(candidate(5, 1, 1024), None);
    }
}
