//! When a waiting request can expect a slot (`predictiveAdmission`, DEC-50): pure arithmetic
//! over the slots that could take it, each a *stream* of expected frees.
//!
//! Theory of operation. A request that finds no room waits behind `ahead` others of its lane.
//! Between the scheduler's decisions nothing waiting could be admitted anywhere, so each
//! admission from now on needs a slot to free. A slot busy with a request whose estimate is `e`
//! and that has run `elapsed` is expected to free after `e - elapsed` (at once if it has run
//! longer: never later than expected); the request that takes it then frees it again after the
//! estimate of the waiting lane, and so on: a stream `first, first + period, ...`. Counting
//! every free as an admission for this lane is the most there can be (a free may admit nothing:
//! a cheap request in the fast lane's extra slot, a held process), so when even that count
//! within the wait is no more than `ahead`, the request cannot be admitted in time, if the
//! estimates are right: it is refused at once instead of after its whole wait. The same count
//! over 1 to 4 seconds says when a slot is expected, for `Retry-After`.

use std::time::Duration;

/// The most `Retry-After` says, as the spec's fixed value (QUEUE-5): a client told to wait
/// longer would only come back to a different line.
pub(crate) const RETRY_AFTER_MAX: u8 = 5;

/// One slot's expected frees: the first `first` from now, then one each `period`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stream {
    pub first: Duration,
    pub period: Duration,
}

/// How many frees the streams give by `by` from now (a free at `by` counts), saturating; a
/// stream with no period (requests that take no time) gives as many as there could be.
pub(crate) fn frees_by(streams: &[Stream], by: Duration) -> u64 {
    let mut n: u64 = 0;
    for s in streams {
        if s.first > by {
            continue;
        }
        let more = match s.period.as_nanos() {
            0 => return u64::MAX,
            period => u64::try_from((by - s.first).as_nanos() / period).unwrap_or(u64::MAX),
        };
        n = n.saturating_add(more).saturating_add(1);
    }
    n
}

/// Whether a request behind `ahead` others certainly gets no slot within `wait`: fewer frees
/// are expected by then than it needs (its own and one for each ahead of it). With no stream at
/// all nothing is known, so nothing is certain.
pub(crate) fn certainly_late(streams: &[Stream], ahead: usize, wait: Duration) -> bool {
    !streams.is_empty() && frees_by(streams, wait) <= ahead as u64
}

/// Whole seconds until a request behind `ahead` others can expect a slot: at least 1, at most
/// [`RETRY_AFTER_MAX`], never less for a longer expected wait.
pub(crate) fn retry_after(streams: &[Stream], ahead: usize) -> u8 {
    if streams.is_empty() {
        return RETRY_AFTER_MAX;
    }
    (1..RETRY_AFTER_MAX)
        .find(|&s| frees_by(streams, Duration::from_secs(u64::from(s))) > ahead as u64)
        .unwrap_or(RETRY_AFTER_MAX)
}

#[cfg(test)]
#[path = "forecast_tests.rs"]
mod tests;
