//! Helpers for the reliability suite: its figures line, per-process counts.

use super::*;

/// Prints one parseable line of what a reliability test tried and what held, for the README's
/// table (`tests/reliability-table.sh` collects them from `--nocapture` output):
/// `RELIABILITY {"test": ..., "tried": ..., "faults": n, "requests": n, "lost": n, "held": ...}`.
pub fn report_figures(test: &str, tried: &str, faults: u64, requests: u64, lost: u64, held: &str) {
    let line = serde_json::json!({
        "test": test, "tried": tried, "faults": faults, "requests": requests,
        "lost": lost, "held": held,
    });
    println!("RELIABILITY {line}");
}

/// How many requests process `code` has answered, by its own count (`/sim/info`, read straight
/// from it and not counted itself); 0 when it can't be read.
pub fn answered_by(c: &Cluster, code: &str) -> u64 {
    request(c.process_addr(code), "GET", "/sim/info", &[], b"").json()["requests"]
        .as_u64()
        .unwrap_or(0)
}

/// Requests in progress on process `code`, by its own count.
pub fn in_flight_on(c: &Cluster, code: &str) -> i64 {
    request(c.process_addr(code), "GET", "/sim/info", &[], b"").json()["inFlight"]
        .as_i64()
        .unwrap_or(-1)
}

/// The probe and heavy requests of the reliability suite.
pub const LOOKUP: &str = "/r4/CodeSystem/$lookup?system=http://loinc.org&code=1234-5";
pub const EXPAND: &str = "/r4/ValueSet/$expand?url=http://hl7.org/fhir/ValueSet/x";

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The launcher's `/status` on its own endpoint.
pub fn admin_status(admin: SocketAddr) -> Value {
    request(admin, "GET", "/status", &[], b"").json()
}

/// A free loopback port for `adminAddress`.
pub fn admin_addr() -> SocketAddr {
    // A claimed port below the ephemeral range (`free_ports`): a port from `:0` is one a client
    // connection of a test running beside this one may take before the launcher binds it.
    SocketAddr::from(([127, 0, 0, 1], free_ports(1)))
}
