//! What the front door counted (cumulative since the launcher started) and its turn into the
//! minute's `counts` event (EVENT-6..12, EVENT-14): the keeper passes each minute's tally with
//! the one before; the difference is counted into the event log, which closes the minute. Pure.

use super::events::{Event, EventLog, LostKind, RefusalKind};
use crate::per_kind::PerKind;

/// Requests lost to one process, by kind.
pub type Lost<T = u64> = PerKind<LostKind, T, 3>;
/// The launcher's own 503s, by kind.
pub type Refused<T = u64> = PerKind<RefusalKind, T, 3>;

/// What the front door counted, cumulative since the launcher started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Per process (index = `ProcessId`).
    pub lost: Vec<Lost>,
    pub refused: Refused,
    pub write_timeout_closes: u64,
}

impl Tally {
    /// Counts what grew since `last` into `log` (per process by `codes`, index = `ProcessId`)
    /// and closes the minute at `now_ms`: the `counts` event, or None when nothing was counted.
    pub fn since(
        &self,
        last: &Tally,
        codes: &[String],
        log: &mut EventLog,
        now_ms: u64,
    ) -> Option<Event> {
        for (i, lost) in self.lost.iter().enumerate() {
            let before = last.lost.get(i).copied().unwrap_or_default();
            let Some(code) = codes.get(i) else {
                continue;
            };
            for (kind, n) in lost.iter() {
                for _ in 0..n.saturating_sub(before[kind]) {
                    log.count_lost(code, kind);
                }
            }
        }
        for (kind, n) in self.refused.iter() {
            for _ in 0..n.saturating_sub(last.refused[kind]) {
                log.count_refused(kind);
            }
        }
        for _ in 0..self
            .write_timeout_closes
            .saturating_sub(last.write_timeout_closes)
        {
            log.count_write_timeout();
        }
        log.minute(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::per_kind::{assert_in_order, Kind};
    use serde_json::json;

    const T0: u64 = 1_700_000_000_000;

    /// Losses as the event names them: 504s, 502s, cache-ids while restarting.
    fn lost([t504, b502, restarting]: [u64; 3]) -> Lost {
        PerKind::from_fn(|k| match k {
            LostKind::Timeout504 => t504,
            LostKind::BadGateway502 => b502,
            LostKind::CacheIdWhileRestarting => restarting,
        })
    }

    /// Refusals: queue wait, no process ready, stopping.
    fn refused([queue, none, stopping]: [u64; 3]) -> Refused {
        PerKind::from_fn(|k| match k {
            RefusalKind::QueueWait => queue,
            RefusalKind::NoProcessReady => none,
            RefusalKind::Stopping => stopping,
        })
    }

    #[test]
    fn the_kinds_index_in_order() {
        assert_in_order::<LostKind>();
        assert_in_order::<RefusalKind>();
        assert_eq!(LostKind::ALL.len(), 3);
    }

    #[test]
    fn a_minutes_growth_is_one_counts_event_per_process_and_kind() {
        // spec: EVENT-6, EVENT-7, EVENT-8, EVENT-9, EVENT-10, EVENT-11, EVENT-12, EVENT-14
        let codes = ["m0".to_string(), "tx1".to_string()];
        let mut log = EventLog::new(0, T0);
        let first = Tally {
            lost: vec![lost([1, 0, 0]), lost([0, 2, 0])],
            refused: refused([1, 0, 0]),
            write_timeout_closes: 1,
        };
        let ev = first.since(&Tally::default(), &codes, &mut log, T0 + 60_000);
        let v = ev.map(|e| e.to_json()).unwrap_or_default();
        assert_eq!(v["kind"], "counts");
        assert_eq!(
            (v["from"].as_u64(), v["to"].as_u64()),
            (Some(T0), Some(T0 + 60_000))
        );
        assert_eq!(v["lost"]["m0"]["timeout504"], 1);
        assert_eq!(v["lost"]["tx1"]["badGateway502"], 2);
        assert_eq!(v["refused"]["queueWait"], 1);
        assert_eq!(v["writeTimeoutCloses"], 1);
        // The next minute counts only what grew since: an index with no code (no such process;
        // the keeper keeps the codes of retired workers) is left out.
        let second = Tally {
            lost: vec![lost([1, 0, 0]), lost([0, 2, 3]), lost([9, 9, 9])],
            refused: refused([1, 4, 2]),
            write_timeout_closes: 3,
        };
        let ev = second.since(&first, &codes, &mut log, T0 + 120_000);
        let v = ev.map(|e| e.to_json()).unwrap_or_default();
        assert_eq!(v["lost"].as_object().map(|o| o.len()), Some(1), "{v}");
        assert_eq!(
            v["lost"]["tx1"],
            json!({"timeout504": 0, "badGateway502": 0, "cacheIdWhileRestarting": 3})
        );
        assert_eq!(
            v["refused"],
            json!({"queueWait": 0, "noProcessReady": 4, "stopping": 2})
        );
        assert_eq!(v["writeTimeoutCloses"], 2);
        // Nothing grew: no event.
        assert_eq!(second.since(&second, &codes, &mut log, T0 + 180_000), None);
    }
}
