//! The limits line the launcher logs as it starts (LAUNCH-10): every wait (DEC-1), the lane, the
//! headroom, the drain, `trimAllocator` as the processes apply it with a role (CONF-25), and
//! whether memory recycling is on (RECYCLE-15), in one line; and fhircluster's own
//! `saturatedPercent`, which also decides how many requests a process gets.

use crate::settings::Settings;
use crate::sizing::memory_fit::plain;

fn seconds(d: std::time::Duration) -> String {
    plain(d.as_secs_f64())
}

/// The limits line logged at start (LAUNCH-10, DEC-1, CONF-25, RECYCLE-15).
pub fn limits_line(settings: &Settings) -> String {
    let c = &settings.cluster;
    let recycling = if c.recycle.is_zero() { "off" } else { "on" };
    format!(
        "limits: maxOutstanding {}, queueSeconds {}, ownerQueueSeconds {}, cooldownSeconds {}, upstreamTimeoutSeconds {}, writeTimeoutSeconds {}, fastLaneExtra {}, fastLaneMaxBytes {}, memoryHeadroomGB {}, normalMinSlots {}, saturatedPercent {}, drainSeconds {}, trimAllocator {}, recycleSeconds {} (recycling {recycling})",
        c.max_outstanding,
        seconds(c.queue),
        seconds(c.owner_queue),
        seconds(c.cooldown),
        seconds(c.upstream_timeout),
        seconds(c.write_timeout),
        c.fast_lane_extra,
        c.fast_lane_max_bytes,
        plain(c.memory_headroom_gb),
        c.normal_min_slots,
        c.saturated_percent,
        seconds(c.drain),
        settings.memory.trim_allocator,
        seconds(c.recycle),
    )
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
}
