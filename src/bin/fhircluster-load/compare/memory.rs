//! fhircluster's resident memory against connections held open: idle keep-alive clients (each
//! answered once), and requests left waiting (sent to a hung upstream, queued). One run each,
//! added in steps (1,000, 2,000, 5,000 ...) with RSS read after each step settles, so a curve
//! is one run's.
//!
//! Each connection is a file descriptor on both sides, the tool's and fhircluster's, and an
//! unprivileged process cannot raise its hard limit: a count the limit cannot hold is lowered
//! to what it can, and the run says so, instead of failing at the last step.

use std::net::TcpStream;
use std::thread::sleep;
use std::time::Duration;

use serde::Serialize;

use super::clients::{answered, idle_clients, waiting_requests};
use super::procs::rss_mb;
use super::table::group;

/// RSS with `count` connections open.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemoryPoint {
    pub count: usize,
    pub rss_mb: Option<f64>,
    /// Of waiting requests, how many had an answer when RSS was read (0: all still waiting).
    pub answered: Option<usize>,
}

/// Descriptors kept for everything but the connections: the tool's and fhircluster's own files,
/// listeners, channels and upstream connections.
pub const FD_MARGIN: u64 = 300;

/// Process places the launcher keeps descriptors for at most in these runs (a master and up to
/// 16 workers): its share of the limit, beside the clients' (DEC-54), is reckoned with this.
const PLACES: usize = 17;

/// The counts a run can reach under an open-file limit of `fd_limit`, ascending, without 0s or
/// repeats: a count above what the launcher accepts at that limit (its client connections,
/// DEC-54) or above `fd_limit - FD_MARGIN` is lowered to that, in whole 500s. Also a note saying
/// what was lowered, if anything.
pub fn fit_counts(counts: &[usize], fd_limit: u64) -> (Vec<usize>, Option<String>) {
    let clients = fhircluster::proxy::conn_limit::client_connections(fd_limit, PLACES) as u64;
    let most = (fd_limit.saturating_sub(FD_MARGIN).min(clients) / 500 * 500) as usize;
    let mut fitted: Vec<usize> = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| c.min(most))
        .filter(|&c| c > 0)
        .collect();
    fitted.sort_unstable();
    fitted.dedup();
    let lowered: Vec<String> = counts
        .iter()
        .filter(|&&c| c > most)
        .map(|&c| group(c as f64, 0))
        .collect();
    let note = (!lowered.is_empty()).then(|| {
        format!(
            "{} lowered to {}: the open-file limit is {}, less the launcher's own share (raise the \
             hard limit, e.g. LimitNOFILE or `ulimit -Hn` as root, to measure more)",
            lowered.join(", "),
            group(most as f64, 0),
            group(fd_limit as f64, 0)
        )
    });
    (fitted, note)
}

/// Opens connections with `open(n)` up to each of `counts` in turn (ascending), keeping them
/// all, and reads `pid`'s RSS `settle` after each step; with how many had an answer by then
/// when `count_answers`.
fn curve(
    pid: i32,
    counts: &[usize],
    settle: Duration,
    count_answers: bool,
    mut open: impl FnMut(usize) -> anyhow::Result<Vec<TcpStream>>,
) -> anyhow::Result<Vec<MemoryPoint>> {
    let mut held: Vec<TcpStream> = Vec::new();
    let mut points = Vec::new();
    for &count in counts {
        held.extend(open(count.saturating_sub(held.len()))?);
        sleep(settle);
        points.push(MemoryPoint {
            count,
            rss_mb: rss_mb(pid),
            answered: count_answers.then(|| answered(&held)),
        });
    }
    Ok(points)
}

/// Idle keep-alive clients to `port` (each answered `GET path` once), RSS a second after each
/// step.
pub fn idle_curve(
    port: u16,
    path: &str,
    pid: i32,
    counts: &[usize],
) -> anyhow::Result<Vec<MemoryPoint>> {
    curve(pid, counts, Duration::from_secs(1), false, |n| {
        idle_clients(port, path, n)
    })
}

/// Requests to `port` that wait (`path` hangs upstream), RSS two seconds after each step.
pub fn waiting_curve(
    port: u16,
    path: &str,
    pid: i32,
    counts: &[usize],
) -> anyhow::Result<Vec<MemoryPoint>> {
    curve(pid, counts, Duration::from_secs(2), true, |n| {
        waiting_requests(port, path, n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_over_the_limit_are_lowered_and_said() {
        let asked = [20_000, 1_000, 2_000, 5_000, 10_000, 0];
        let (fit, note) = fit_counts(&asked, 1_048_576);
        assert_eq!(fit, [1_000, 2_000, 5_000, 10_000, 20_000]);
        assert_eq!(note, None);
        // spec: DEC-54: at 20,000 descriptors the launcher takes 20,000 - 256 - 32 × 17 - 2,500
        // = 16,700 clients; more would wait in its backlog, and the run's connects time out.
        let (fit, note) = fit_counts(&asked, 20_000);
        assert_eq!(fit, [1_000, 2_000, 5_000, 10_000, 16_500]);
        let note = note.unwrap_or_default();
        assert!(
            note.starts_with("20,000 lowered to 16,500: the open-file limit is 20,000"),
            "{note}"
        );
        let (fit, _) = fit_counts(&[30_000, 25_000], 20_000);
        assert_eq!(fit, [16_500], "two lowered to the same count are one step");
        assert_eq!(fit_counts(&[100], 200).0, Vec::<usize>::new());
    }
}
