//! The shell's one clock. The pure core never reads a clock: it is handed `now`. The shell reads
//! it here, through tokio's clock, so tests on a paused runtime (`start_paused`) move every
//! reading at once; a `std::time::Instant::now()` elsewhere would not follow them.

/// Now, on tokio's clock (a paused runtime's in tests).
pub(crate) fn now() -> tokio::time::Instant {
    tokio::time::Instant::now()
}

/// Now, as the `std::time::Instant` the pure core takes.
pub(crate) fn now_std() -> std::time::Instant {
    now().into_std()
}

/// Wall-clock time in milliseconds since the Unix epoch, for what is reported (events, history,
/// the status), never for a deadline. 0 if the system clock is before 1970.
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
