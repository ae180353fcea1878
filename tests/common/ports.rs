//! Free loopback ports for a test's cluster, claimed so parallel tests never share one, and what
//! the kernel's socket tables (/proc/net/tcp, tcp6) say of a port.

use super::*;

/// Ports are handed out in blocks of this many, below the kernel's ephemeral range (32768 and
/// up), so no client connection of a test running beside this one can take one by chance.
pub(super) const PORT_BLOCK: u16 = 16;
pub(super) const PORT_BLOCKS_FROM: u16 = 10_000;
pub(super) const PORT_BLOCKS: u16 = 1_250;

/// `count` (at most 16) consecutive free loopback ports, held for the whole test.
///
/// Tests run in parallel processes (nextest), so a block is claimed with an exclusive `flock` on
/// a file named after it; the lock lives as long as the test process, and the kernel drops it
/// when the process ends however it ends. Each port is also checked free before use.
pub fn free_ports(count: u16) -> u16 {
    assert!(
        count <= PORT_BLOCK,
        "at most {PORT_BLOCK} ports per cluster"
    );
    let dir = std::env::temp_dir().join("fhircluster-test-ports");
    std::fs::create_dir_all(&dir).expect("the port lock directory");
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32);
    for _ in 0..2_000 {
        // xorshift: a different order of blocks in each process.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let block = (seed % u64::from(PORT_BLOCKS)) as u16;
        let Ok(file) = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(block.to_string()))
        else {
            continue;
        };
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a file descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            continue;
        }
        let base = PORT_BLOCKS_FROM + block * PORT_BLOCK;
        let all_free = (base..base + count).all(|p| {
            TcpListener::bind(("127.0.0.1", p)).is_ok() && TcpListener::bind(("0.0.0.0", p)).is_ok()
        });
        if all_free {
            // Held until the test process exits.
            std::mem::forget(file);
            return base;
        }
    }
    panic!("no block of {count} free ports found");
}

/// Every row of /proc/net/tcp and tcp6 as (local port, remote port, state, rx_queue).
fn tcp_rows() -> Vec<(u16, u16, u8, u64)> {
    let port_of = |addr: &str| {
        addr.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
    };
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    let state = u8::from_str_radix(f.get(3)?, 16).ok()?;
                    let rx = f.get(4)?.split(':').nth(1)?;
                    Some((
                        port_of(f.get(1)?)?,
                        port_of(f.get(2)?)?,
                        state,
                        u64::from_str_radix(rx, 16).ok()?,
                    ))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Connections waiting in `port`'s listen queue, not yet accepted (None: nothing listens there).
pub fn accept_queue(port: u16) -> Option<u64> {
    const LISTEN: u8 = 0x0A;
    let rows: Vec<u64> = tcp_rows()
        .into_iter()
        .filter(|r| r.0 == port && r.2 == LISTEN)
        .map(|r| r.3)
        .collect();
    (!rows.is_empty()).then(|| rows.iter().sum())
}

/// Established connections from a client on this host to `port`.
pub fn clients_of(port: u16) -> usize {
    const ESTABLISHED: u8 = 0x01;
    tcp_rows()
        .into_iter()
        .filter(|r| r.1 == port && r.2 == ESTABLISHED)
        .count()
}
