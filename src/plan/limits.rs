//! The limits line the launcher logs as it starts (LAUNCH-10): every wait (DEC-1), the lane, the
//! headroom, the drain, `trimAllocator` as the processes apply it with a role (CONF-25), and
//! whether memory recycling is on (RECYCLE-15), in one line; and fhircluster's own
//! `saturatedPercent`, which also decides how many requests a process gets.

use crate::settings::paths::{cluster, memory};
use crate::settings::{setting, Settings};

/// The settings the line shows, in its order: the spec's (LAUNCH-10), and `saturatedPercent`.
const SHOWN: &[&str] = &[
    cluster::max_outstanding,
    cluster::queue,
    cluster::owner_queue,
    cluster::cooldown,
    cluster::upstream_timeout,
    cluster::write_timeout,
    cluster::fast_lane_extra,
    cluster::fast_lane_max_bytes,
    cluster::memory_headroom_gb,
    cluster::normal_min_slots,
    cluster::saturated_percent,
    cluster::drain,
    memory::trim_allocator,
    cluster::recycle,
];

/// The limits line logged at start (LAUNCH-10, DEC-1, CONF-25, RECYCLE-15): each setting by
/// its key, its value as the table shows it.
pub fn limits_line(settings: &Settings) -> String {
    let shown: Vec<String> = SHOWN
        .iter()
        .filter_map(|path| setting(path))
        .map(|s| format!("{} {}", s.key(), s.shown(settings)))
        .collect();
    let recycling = if settings.cluster.recycle.is_zero() {
        "off"
    } else {
        "on"
    };
    format!("limits: {} (recycling {recycling})", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings() -> Settings {
        Settings::default()
    }

    #[test]
    fn the_limits_line() {
        // spec: LAUNCH-10, DEC-1, CONF-25, RECYCLE-15
        let mut s = settings();
        assert_eq!(
            limits_line(&s),
            "limits: maxOutstanding 16, queueSeconds 1, ownerQueueSeconds 30, cooldownSeconds 2, upstreamTimeoutSeconds 60, writeTimeoutSeconds 60, fastLaneExtra 4, fastLaneMaxBytes 1024, memoryHeadroomGB 2, normalMinSlots 4, saturatedPercent 90, drainSeconds 30, trimAllocator true, recycleSeconds 30 (recycling on)"
        );
        s.cluster.recycle = Duration::ZERO;
        s.cluster.queue = Duration::from_millis(500);
        s.memory.trim_allocator = false;
        let line = limits_line(&s);
        assert!(
            line.ends_with("trimAllocator false, recycleSeconds 0 (recycling off)"),
            "{line}"
        );
        assert!(line.contains("queueSeconds 0.5,"), "{line}");
    }

    #[test]
    fn every_setting_it_shows_is_in_the_table() {
        for path in SHOWN {
            assert!(setting(path).is_some(), "{path} is no setting of the table");
        }
    }
}
