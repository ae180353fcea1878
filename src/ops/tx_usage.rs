//! "A tx endpoint nobody uses": with workers running, if in the last 10 minutes no tx request
//! reached the tx processes while tx-capable requests (FHIR terminology paths: `$lookup`,
//! `$validate-code`, `$expand`, `metadata`, `CodeSystem/...`) went to the master because their
//! paths are outside `modules.tx.endpoints` (a server whose base is `/4_0_0`, say), the workers
//! sit idle and the master does everything. One WARNING says so, naming the most common path
//! prefix and the endpoints configured. Pure: the front door records master paths
//! (`proxy::master_paths`), the shell asks `TxUsage::check` with `now` and the tx count every
//! so often.

use std::time::{Duration, Instant};

use crate::proxy::master_paths::Counts;

/// The window the rule looks at.
pub const WINDOW: Duration = Duration::from_secs(600);
/// Fewer tx-capable requests than this to the master in a window are not worth a warning (a
/// health check on `/metadata`, say).
pub const MIN_REQUESTS: u64 = 10;

/// Whether `prefix` is one of the endpoints or under one (those requests went to the master by
/// rule 1, `$closure` and the like, not for being outside).
fn inside(prefix: &str, endpoints: &[String]) -> bool {
    endpoints.iter().any(|e| {
        prefix == e
            || prefix
                .strip_prefix(e.as_str())
                .is_some_and(|r| r.starts_with('/'))
    })
}

/// The rule, one window after another.
#[derive(Debug)]
pub struct TxUsage {
    window: Duration,
    endpoints: Vec<String>,
    since: Instant,
    tx_at_start: u64,
    master: Counts,
    warned: bool,
}

impl TxUsage {
    /// `tx_total`: tx requests admitted so far (the front door's lane counts).
    pub fn new(endpoints: Vec<String>, window: Duration, now: Instant, tx_total: u64) -> TxUsage {
        TxUsage {
            window,
            endpoints,
            since: now,
            tx_at_start: tx_total,
            master: Counts::default(),
            warned: false,
        }
    }

    /// Adds what the master got since the last call (`MasterPaths::take`); once a window has
    /// passed, the warning if the rule holds for it (once per run), and a new window.
    pub fn check(
        &mut self,
        now: Instant,
        master: Counts,
        tx_total: u64,
        workers: usize,
    ) -> Option<String> {
        for (prefix, n) in master.by_prefix {
            if !inside(&prefix, &self.endpoints) {
                *self.master.by_prefix.entry(prefix).or_default() += n;
                self.master.total += n;
            }
        }
        if now.saturating_duration_since(self.since) < self.window {
            return None;
        }
        let seen = std::mem::take(&mut self.master);
        let tx = tx_total.saturating_sub(self.tx_at_start);
        self.since = now;
        self.tx_at_start = tx_total;
        if self.warned || workers == 0 || tx > 0 || seen.total < MIN_REQUESTS {
            return None;
        }
        let (prefix, n) = seen
            .by_prefix
            .iter()
            .max_by_key(|(p, n)| (**n, std::cmp::Reverse(p.as_str())))?;
        self.warned = true;
        Some(format!(
            "in the last {} no tx request reached the tx processes, while {} \
             tx-capable requests went to the master because their paths are outside \
             modules.tx.endpoints ({}); the most common prefix was {prefix} ({n}). If that is \
             the server's FHIR base, add it to modules.tx.endpoints: the {workers} worker(s) sit \
             idle meanwhile",
            minutes(self.window),
            seen.total,
            self.endpoints.join(", "),
        ))
    }
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s % 60 == 0 {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::master_paths::MasterPaths;

    fn counts(pairs: &[(&str, u64)]) -> Counts {
        let mp = MasterPaths::default();
        for (path, n) in pairs {
            for _ in 0..*n {
                mp.observe(path);
            }
        }
        mp.take()
    }

    fn r4() -> Vec<String> {
        vec!["/r4".to_string()]
    }

    #[test]
    fn warns_once_a_window_with_only_master_tx_requests_has_passed() {
        let t0 = Instant::now();
        let mut u = TxUsage::new(r4(), WINDOW, t0, 0);
        let m = counts(&[
            ("/4_0_0/CodeSystem/$lookup", 30),
            ("/fhir/metadata", 5),
            ("/dashboard", 100),
        ]);
        assert_eq!(m.total, 35, "the dashboard is not tx-capable");
        assert_eq!(u.check(t0 + Duration::from_secs(60), m, 0, 2), None);
        let w = u
            .check(t0 + WINDOW, Counts::default(), 0, 2)
            .expect("a warning after the window");
        assert!(w.contains("the most common prefix was /4_0_0 (30)"), "{w}");
        assert!(w.contains("modules.tx.endpoints (/r4)"), "{w}");
        assert!(w.contains("35 tx-capable requests"), "{w}");
        assert!(w.contains("last 10 min"), "{w}");
        assert!(w.contains("2 worker(s)"), "{w}");
        // Once per run.
        let m = counts(&[("/4_0_0/CodeSystem/$lookup", 30)]);
        assert_eq!(u.check(t0 + WINDOW * 2, m, 0, 2), None);
    }

    #[test]
    fn no_warning_when_a_tx_request_reached_the_tx_processes() {
        let t0 = Instant::now();
        let mut u = TxUsage::new(r4(), WINDOW, t0, 100);
        let m = counts(&[("/4_0_0/CodeSystem/$lookup", 30)]);
        assert_eq!(u.check(t0 + WINDOW, m, 101, 2), None);
        // The next window, none reached them: now it warns.
        let m = counts(&[("/4_0_0/CodeSystem/$lookup", 30)]);
        assert!(u.check(t0 + WINDOW * 2, m, 101, 2).is_some());
    }

    #[test]
    fn no_warning_without_workers_with_few_requests_or_before_the_window() {
        let t0 = Instant::now();
        let many = || counts(&[("/4_0_0/CodeSystem/$lookup", 30)]);
        assert_eq!(
            TxUsage::new(r4(), WINDOW, t0, 0).check(t0 + WINDOW, many(), 0, 0),
            None,
            "the master alone serves tx anyway"
        );
        let few = counts(&[("/4_0_0/metadata", MIN_REQUESTS - 1)]);
        assert_eq!(
            TxUsage::new(r4(), WINDOW, t0, 0).check(t0 + WINDOW, few, 0, 2),
            None
        );
        assert_eq!(
            TxUsage::new(r4(), WINDOW, t0, 0).check(
                t0 + WINDOW - Duration::from_secs(1),
                many(),
                0,
                2
            ),
            None
        );
    }

    #[test]
    fn requests_inside_an_endpoint_are_not_counted() {
        // `<endpoint>/info/...` and the like go to the master by design.
        let t0 = Instant::now();
        let mut u = TxUsage::new(r4(), WINDOW, t0, 0);
        let m = counts(&[("/r4/info/ValueSet", 30), ("/r4x/CodeSystem/$lookup", 3)]);
        assert_eq!(u.check(t0 + WINDOW, m, 0, 2), None, "only 3 outside");
    }
}
