//! The upper bound of every number fhircluster reads (cluster.md's settings table lists them).
//!
//! A value past its bound is refused at start like any bad value (DEC-7), never clamped. Each
//! bound is far above any value that means something different from the bound itself, so no
//! FHIRsmith configuration that works is refused, and each keeps the run-time arithmetic on the
//! value (a deadline `now + d`, three status intervals, `maxOutstanding + fastLaneExtra`) far from
//! overflowing: 1e19 seconds passed the old checks and then panicked at `Instant + Duration`.

/// Every duration, in seconds (`…Seconds`, `stats.sampleSeconds`): a year. Node's own timers
/// hold at most 24.8 days (2^31 - 1 ms; FHIRsmith's `setTimeout` fires a longer one at once), so
/// a longer wait means nothing to a FHIRsmith process, and a year added to any clock reading is
/// safe.
pub const MAX_SECONDS: f64 = 31_536_000.0;

/// `stats.intervalMinutes`: the same year, in minutes.
pub const MAX_MINUTES: f64 = MAX_SECONDS / 60.0;

/// Counts (`cores`, `maxOutstanding`, `fastLaneExtra`, `normalMinSlots`, `maxStartFailures`): a
/// million. More requests at once than a process has sockets for, more cores than Linux runs
/// (8,192), more start failures than a launcher lives through: all past any meaning, and the
/// sums of two stay far inside a `u32`.
pub const MAX_COUNT: u64 = 1_000_000;

/// `proxyThreads`: the front door's runtime threads. It is I/O bound (one thread was measured
/// fastest, README's Performance), so more threads than CPUs only take turns; thousands fail to
/// start under the task limits of systemd (`TasksMax`) and containers.
pub const MAX_PROXY_THREADS: u64 = 1024;

/// Sizes the launcher only compares or passes on (`fastLaneMaxBytes`, `sharedCacheMaxMB`):
/// JavaScript's largest exact integer, so nothing FHIRsmith itself can hold is refused.
pub const MAX_JS_INTEGER: u64 = 9_007_199_254_740_991;

/// `memoryHeadroomGB`: 1 PiB, more memory than any one machine has.
pub const MAX_HEADROOM_GB: f64 = 1_048_576.0;

/// A year, for a message: the bound's meaning in words.
pub const MAX_SECONDS_WORDS: &str = "31536000 (a year)";
