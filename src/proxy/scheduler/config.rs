//! The scheduler's settings, taken from `server.cluster` and replaceable live (`set_config`).

use std::time::Duration;

use crate::settings::ClusterSettings;

/// What the scheduler reads of the settings. Zero means what the spec says it means for each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// `maxOutstanding` (16); 0: no limit, nothing waits (CONF-12).
    pub max_outstanding: u32,
    /// `fastLaneExtra` (4); 0: no fast lane, cheap requests are normal ones (CONF-20).
    pub fast_lane_extra: u32,
    /// `normalMinSlots` (4); 0: no minimum (CONF-21); above `max_outstanding` is taken as
    /// `max_outstanding` (CONF-22; the settings refuse it at start, DEC-7).
    pub normal_min_slots: u32,
    /// `saturatedPercent` (90, fhircluster's own); 0: no process is ever held as saturated.
    pub saturated_percent: u32,
    /// `predictiveAdmission` (fhircluster's own, DEC-50): refuse at once what the measured
    /// service times say cannot be admitted in time, and give the queue's `503`s a
    /// `Retry-After` from them. Off: the spec's rule alone.
    pub predictive: bool,
    /// `queueSeconds` (1); 0: refused at once instead of waiting (CONF-13).
    pub queue: Duration,
    /// `ownerQueueSeconds` (30); 0: refused at once instead of waiting (CONF-14).
    pub owner_queue: Duration,
    /// `cooldownSeconds` (2); 0: no cooldown (CONF-15).
    pub cooldown: Duration,
}

impl From<&ClusterSettings> for SchedulerConfig {
    fn from(c: &ClusterSettings) -> Self {
        SchedulerConfig {
            max_outstanding: c.max_outstanding,
            fast_lane_extra: c.fast_lane_extra,
            normal_min_slots: c.normal_min_slots,
            saturated_percent: c.saturated_percent,
            predictive: c.predictive_admission,
            queue: c.queue,
            owner_queue: c.owner_queue,
            cooldown: c.cooldown,
        }
    }
}

impl Default for SchedulerConfig {
    /// The spec's defaults.
    fn default() -> Self {
        SchedulerConfig::from(&ClusterSettings::default())
    }
}
