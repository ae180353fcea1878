//! CPU per request of a front door: the user + system time of its processes (every thread of
//! each: nginx's master and workers, HAProxy, fhircluster's launcher without its children) from
//! `/proc/<pid>/stat` before and after a `wrk` run, over the requests the run completed.
//!
//! The kernel counts in clock ticks (`USER_HZ`, 100 a second on Linux): 10 ms, small against the
//! seconds of CPU a run of tens of thousands of requests takes.

use serde::Serialize;

/// `utime + stime` of a `/proc/<pid>/stat` line, in clock ticks (fields 14 and 15, counted after
/// the command's closing parenthesis, which may itself hold spaces and parentheses).
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    // After ')': state is field 3, so utime (14) is the 12th and stime (15) the 13th.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks a second (`sysconf(_SC_CLK_TCK)`; 100 if unknown).
pub fn ticks_per_second() -> u64 {
    fhircluster::system::ffi::sysconf(libc::_SC_CLK_TCK).unwrap_or(100)
}

/// The processes one front door runs on, fixed when it was started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProcSet {
    pub pids: Vec<i32>,
}

impl ProcSet {
    /// The CPU ticks of every process together; `None` if one of them is gone (a run that lost a
    /// process measures nothing).
    pub fn ticks(&self) -> Option<u64> {
        if self.pids.is_empty() {
            return None;
        }
        self.pids
            .iter()
            .map(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .ok()
                    .and_then(|s| parse_stat_ticks(&s))
            })
            .sum()
    }
}

/// CPU microseconds a request: `ticks` over `requests`; `None` without requests.
pub fn us_per_request(ticks: u64, ticks_per_second: u64, requests: u64) -> Option<f64> {
    (requests > 0 && ticks_per_second > 0)
        .then(|| ticks as f64 * 1e6 / ticks_per_second as f64 / requests as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_utime_and_stime_past_a_command_with_spaces_and_parentheses() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime ...
        let stat = "4242 (nginx: (worker) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    1234 567 89 10 20 0 1 0 555 1000 200";
        assert_eq!(parse_stat_ticks(stat), Some(1234 + 567));
        assert_eq!(parse_stat_ticks("1 (x) S 1 2"), None);
        assert_eq!(parse_stat_ticks("no parenthesis"), None);
    }

    #[test]
    fn this_process_has_spent_some_cpu_and_a_gone_one_none() {
        let me = ProcSet {
            pids: vec![std::process::id() as i32],
        };
        // Burn CPU until a tick is counted (ticks are 10 ms; this takes at most a few).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut x = 0u64;
        while me.ticks().is_none_or(|t| t == 0) {
            assert!(std::time::Instant::now() < deadline, "no CPU counted");
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        assert_eq!(ProcSet::default().ticks(), None);
        let gone = ProcSet {
            pids: vec![std::process::id() as i32, i32::MAX],
        };
        assert_eq!(gone.ticks(), None);
        assert!(ticks_per_second() >= 1);
    }

    #[test]
    fn microseconds_a_request() {
        // 3 s of CPU at 100 ticks/s over 100,000 requests: 30 µs each.
        assert_eq!(us_per_request(300, 100, 100_000), Some(30.0));
        assert_eq!(us_per_request(300, 100, 0), None);
    }
}
