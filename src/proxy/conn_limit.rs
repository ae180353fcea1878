//! How many client connections the launcher holds open at once: its open files less what it
//! keeps for its own work, so that at the limit a request already in hand still reaches its
//! process and a process that exits can still be started again. Beyond it the listener stops
//! accepting until a connection ends: a new client waits in the kernel's backlog (a few ms to
//! the next close, or the header timeout of an idle one), as HAProxy does at `maxconn`, instead
//! of failing every request in progress with `502` when the descriptors run out.
//!
//! Kept back (DEC-54): 256 for the launcher itself (logs, databases, `/proc` reads, the
//! admin endpoint's and the control socket's connections), 32 per process place (its channel,
//! pipes and pidfd, and the connections of its slots and the fast lane, pooled or in use), and
//! an eighth of the limit for the master's paths, which have no slots: each such request in
//! flight holds a connection to the master beside its client's.

/// Kept for the launcher's own descriptors.
const OWN: u64 = 256;
/// Kept per process place (the master and every worker the ports have room for).
const PER_PROCESS: u64 = 32;
/// The fewest client connections allowed, however low the limit.
const AT_LEAST: u64 = 64;

/// The launcher's own endpoint (`adminAddress`): at most this many connections hold a place at
/// once, and as many again may be closing (`ops/admin_room.rs`); a scraper and a health check
/// need one or two, and the endpoint may be published where anyone can open thousands.
pub const ADMIN_AT_MOST: usize = 64;

/// The control socket (`ops/control_conns.rs`, DEC-72): at most this many connections at
/// once; `fhircluster` opens one per command, and the socket is for the service user and its
/// group only.
pub const CONTROL_AT_MOST: usize = 16;

/// The client connections allowed at once with `open_files` descriptors and `places` process
/// places.
pub fn client_connections(open_files: u64, places: usize) -> usize {
    let kept = OWN
        .saturating_add(PER_PROCESS.saturating_mul(places as u64))
        .saturating_add(open_files / 8);
    let n = open_files.saturating_sub(kept).max(AT_LEAST);
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launchers_own_connections_fit_in_what_it_keeps() {
        // spec: DEC-54, DEC-72 — the admin endpoint's and the control socket's connections are
        // of the launcher's own share, with room left for its logs, databases and `/proc`.
        let own = (ADMIN_AT_MOST + CONTROL_AT_MOST) as u64;
        assert!(own * 2 <= OWN, "{own} of {OWN}");
    }

    #[test]
    fn the_launcher_keeps_its_share_and_clients_get_the_rest() {
        // spec: DEC-54 — systemd's default hard limit, raised to: most of it for clients.
        assert_eq!(
            client_connections(524_288, 17),
            524_288 - 256 - 544 - 65_536
        );
        // This host's kind of limit.
        assert_eq!(client_connections(20_000, 17), 20_000 - 256 - 544 - 2_500);
        // systemd's soft limit where the hard one can't be reached: little room for clients.
        assert_eq!(client_connections(1_024, 17), 1_024 - 256 - 544 - 128);
        // A limit too low to keep a share: the floor.
        assert_eq!(client_connections(512, 17), 64);
        assert_eq!(client_connections(0, 0), 64);
        // Unlimited.
        assert!(client_connections(u64::MAX, 17) > 1 << 40);
    }

    #[test]
    fn more_places_or_a_lower_limit_never_allow_more() {
        let mut last = usize::MAX;
        for places in 0..100 {
            let n = client_connections(65_536, places);
            assert!(n <= last);
            last = n;
        }
        let mut last = 0;
        for limit in (0..200_000).step_by(997) {
            let n = client_connections(limit, 17);
            assert!(n >= last, "{limit}");
            last = n;
        }
    }
}
