//! Reload on SIGHUP: `config.json` read again with the flags and environment of the start, checked
//! as at start, and compared with the settings in force. What the launcher can change while it
//! runs is applied (the queue, lane, cooldown and timeout settings, the drain, status and
//! recycle intervals, the worker count); what it can't (ports, addresses, the command ...) is
//! logged as taking effect at the next start; the rest is the servers' own, and reaches them as
//! the rolling restart that follows starts each again (they read `config.json` at start).
//!
//! Pure: `changes` and `apply_live`. Reading the file and the machine again is the launcher's
//! (`launcher/reloader.rs`).

use std::fmt::Debug;
use std::time::Duration;

use crate::settings::Settings;

/// What a reload changes, one `name old → new` line each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Applied now.
    pub live: Vec<String>,
    /// Changed in the file, but the launcher takes them only at its next start.
    pub next_start: Vec<String>,
    /// The servers read them at their start: taken as the rolling restart replaces each.
    pub servers: Vec<String>,
    /// The worker count (or what sizes it) changed.
    pub workers: bool,
}

fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

fn shown<T: Debug>(v: &T) -> String {
    format!("{v:?}")
}

/// Adds `name old → new` to `list` when they differ.
fn note(list: &mut Vec<String>, name: &str, old: String, new: String) {
    if old != new {
        list.push(format!("{name} {old} → {new}"));
    }
}

/// Compares the settings in force with the reloaded ones.
pub fn changes(old: &Settings, new: &Settings) -> Changes {
    let mut c = Changes::default();
    let (o, n) = (&old.cluster, &new.cluster);
    let live = &mut c.live;
    let cl = |name: &str| format!("server.cluster.{name}");
    note(
        live,
        &cl("workers"),
        o.workers.map_or("(sized)".into(), |w| w.to_string()),
        n.workers.map_or("(sized)".into(), |w| w.to_string()),
    );
    // What sizes the count matters only when no count is given.
    if n.workers.is_none() {
        note(live, &cl("cores"), shown(&o.cores), shown(&n.cores));
        note(
            live,
            &cl("workerRule"),
            o.worker_rule.clone(),
            n.worker_rule.clone(),
        );
        note(
            live,
            &cl("memoryHeadroomGB"),
            o.memory_headroom_gb.to_string(),
            n.memory_headroom_gb.to_string(),
        );
    }
    c.workers = !live.is_empty();
    let counts: [(&str, u32, u32); 4] = [
        ("maxOutstanding", o.max_outstanding, n.max_outstanding),
        ("fastLaneExtra", o.fast_lane_extra, n.fast_lane_extra),
        ("normalMinSlots", o.normal_min_slots, n.normal_min_slots),
        ("saturatedPercent", o.saturated_percent, n.saturated_percent),
    ];
    for (name, a, b) in counts {
        note(live, &cl(name), a.to_string(), b.to_string());
    }
    let sizes: [(&str, u64, u64); 2] = [
        ("headerMaxKB", o.header_max_kb, n.header_max_kb),
        ("bufferMaxMB", o.buffer_max_mb, n.buffer_max_mb),
    ];
    for (name, a, b) in sizes {
        note(live, &cl(name), a.to_string(), b.to_string());
    }
    let durations: [(&str, Duration, Duration); 8] = [
        ("queueSeconds", o.queue, n.queue),
        ("ownerQueueSeconds", o.owner_queue, n.owner_queue),
        ("cooldownSeconds", o.cooldown, n.cooldown),
        (
            "upstreamTimeoutSeconds",
            o.upstream_timeout,
            n.upstream_timeout,
        ),
        ("writeTimeoutSeconds", o.write_timeout, n.write_timeout),
        ("drainSeconds", o.drain, n.drain),
        ("recycleSeconds", o.recycle, n.recycle),
        ("statusSeconds", o.status_interval, n.status_interval),
    ];
    for (name, a, b) in durations {
        note(live, &cl(name), seconds(a), seconds(b));
    }

    let next = &mut c.next_start;
    note(
        next,
        "server.port",
        old.port.to_string(),
        new.port.to_string(),
    );
    note(
        next,
        "server.cluster.command",
        shown(&old.command),
        shown(&new.command),
    );
    note(
        next,
        &cl("internalPort"),
        o.internal_port.to_string(),
        n.internal_port.to_string(),
    );
    note(
        next,
        &cl("bindAddress"),
        o.bind_address.clone(),
        n.bind_address.clone(),
    );
    note(
        next,
        &cl("masterServesTx"),
        shown(&o.master_serves_tx),
        shown(&n.master_serves_tx),
    );
    note(
        next,
        &cl("maxStartFailures"),
        shown(&o.max_start_failures),
        shown(&n.max_start_failures),
    );
    note(
        next,
        &cl("killSeconds"),
        seconds(o.kill_after),
        seconds(n.kill_after),
    );
    note(
        next,
        &cl("fastLaneMaxBytes"),
        shown(&o.fast_lane_max_bytes),
        shown(&n.fast_lane_max_bytes),
    );
    note(
        next,
        &cl("sharedCache"),
        shown(&o.shared_cache),
        shown(&n.shared_cache),
    );
    note(
        next,
        &cl("cacheAffinity"),
        shown(&o.cache_affinity),
        shown(&n.cache_affinity),
    );
    note(
        next,
        &cl("sharedCacheMaxMB"),
        shown(&o.shared_cache_max_mb),
        shown(&n.shared_cache_max_mb),
    );
    note(
        next,
        &cl("sharedClosure"),
        shown(&o.shared_closure),
        shown(&n.shared_closure),
    );
    note(
        next,
        &cl("adminAddress"),
        shown(&o.admin_address),
        shown(&n.admin_address),
    );
    note(
        next,
        &cl("listenAddress"),
        shown(&o.listen_address),
        shown(&n.listen_address),
    );
    note(
        next,
        &cl("logFormat"),
        shown(&o.log_format),
        shown(&n.log_format),
    );
    note(
        next,
        &cl("logLevel"),
        shown(&o.log_level),
        shown(&n.log_level),
    );
    note(
        next,
        &cl("hostPrefix"),
        shown(&o.host_prefix),
        shown(&n.host_prefix),
    );
    note(
        next,
        "modules.tx.instanceCode",
        old.tx.instance_code.clone(),
        new.tx.instance_code.clone(),
    );
    note(
        next,
        "modules.tx.endpoints",
        shown(&old.tx.endpoints),
        shown(&new.tx.endpoints),
    );
    note(
        next,
        "modules.tx.enabled",
        shown(&old.tx.enabled),
        shown(&new.tx.enabled),
    );

    let servers = &mut c.servers;
    let (om, nm) = (&old.memory, &new.memory);
    note(
        servers,
        "server.memory.rejectFraction",
        om.reject_fraction.to_string(),
        nm.reject_fraction.to_string(),
    );
    note(
        servers,
        "server.memory.abortFraction",
        om.abort_fraction.to_string(),
        nm.abort_fraction.to_string(),
    );
    note(
        servers,
        "server.memory.trimAllocator",
        shown(&om.trim_allocator),
        shown(&nm.trim_allocator),
    );
    note(
        servers,
        "stats.sampleSeconds",
        shown(&old.stats.sample),
        shown(&new.stats.sample),
    );
    note(
        servers,
        "stats.intervalMinutes",
        shown(&old.stats.interval_minutes),
        shown(&new.stats.interval_minutes),
    );
    c
}

/// The settings in force after a reload: the live ones from `new`, the rest as they were, so a
/// change that waits for the next start is reported again on the next reload.
pub fn apply_live(running: &Settings, new: &Settings) -> Settings {
    let mut s = running.clone();
    let (c, n) = (&mut s.cluster, &new.cluster);
    c.workers = n.workers;
    c.cores = n.cores;
    c.worker_rule = n.worker_rule.clone();
    c.memory_headroom_gb = n.memory_headroom_gb;
    c.max_outstanding = n.max_outstanding;
    c.fast_lane_extra = n.fast_lane_extra;
    c.normal_min_slots = n.normal_min_slots;
    c.saturated_percent = n.saturated_percent;
    c.queue = n.queue;
    c.owner_queue = n.owner_queue;
    c.cooldown = n.cooldown;
    c.upstream_timeout = n.upstream_timeout;
    c.write_timeout = n.write_timeout;
    c.drain = n.drain;
    c.recycle = n.recycle;
    c.status_interval = n.status_interval;
    c.header_max_kb = n.header_max_kb;
    c.buffer_max_mb = n.buffer_max_mb;
    // The servers' own settings are taken by the rolling restart.
    s.memory = new.memory.clone();
    s.stats = new.stats.clone();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_settings_are_applied_and_the_rest_wait_for_the_next_start() {
        let old = Settings::default();
        let mut new = old.clone();
        new.cluster.max_outstanding = 4;
        new.cluster.queue = Duration::from_millis(500);
        new.cluster.workers = Some(3);
        new.port = 8080;
        new.memory.reject_fraction = 0.8;
        let c = changes(&old, &new);
        assert_eq!(
            c.live,
            vec![
                "server.cluster.workers (sized) → 3",
                "server.cluster.maxOutstanding 16 → 4",
                "server.cluster.queueSeconds 1 s → 0.5 s",
            ]
        );
        assert!(c.workers);
        assert_eq!(c.next_start, vec!["server.port 3000 → 8080"]);
        assert_eq!(c.servers, vec!["server.memory.rejectFraction 0.85 → 0.8"]);

        let running = apply_live(&old, &new);
        assert_eq!(running.cluster.max_outstanding, 4);
        assert_eq!(running.port, 3000, "the port stays until the next start");
        let again = changes(&running, &new);
        assert!(again.live.is_empty(), "{again:?}");
        assert_eq!(again.next_start, vec!["server.port 3000 → 8080"]);
    }

    #[test]
    fn every_setting_reported_live_is_applied_so_the_next_reload_reports_it_no_more() {
        let old = Settings::default();
        let mut new = old.clone();
        let c = &mut new.cluster;
        c.max_outstanding = 8;
        c.fast_lane_extra = 2;
        c.normal_min_slots = 2;
        c.saturated_percent = 75;
        c.queue = Duration::from_secs(2);
        c.owner_queue = Duration::from_secs(10);
        c.cooldown = Duration::from_secs(5);
        c.upstream_timeout = Duration::from_secs(30);
        c.write_timeout = Duration::from_secs(20);
        c.drain = Duration::from_secs(10);
        c.recycle = Duration::from_secs(40);
        c.status_interval = Duration::from_secs(5);
        let first = changes(&old, &new);
        assert_eq!(first.live.len(), 12, "{:?}", first.live);
        assert!(first
            .live
            .contains(&"server.cluster.saturatedPercent 90 → 75".to_string()));
        let running = apply_live(&old, &new);
        assert_eq!(changes(&running, &new), Changes::default());
    }

    #[test]
    fn nothing_changed_is_nothing_to_say() {
        let s = Settings::default();
        assert_eq!(changes(&s, &s), Changes::default());
    }

    #[test]
    fn what_sizes_the_count_matters_only_without_a_given_count() {
        let mut old = Settings::default();
        old.cluster.workers = Some(2);
        let mut new = old.clone();
        new.cluster.cores = Some(8);
        assert!(!changes(&old, &new).workers);
        new.cluster.workers = None;
        let c = changes(&old, &new);
        assert!(c.workers);
        assert_eq!(
            c.live,
            vec![
                "server.cluster.workers 2 → (sized)",
                "server.cluster.cores None → Some(8)"
            ]
        );
    }
}
