//! When a waiting request can expect a slot (`predictiveAdmission`, DEC-50): pure arithmetic
//! over the slots that could take it, each a *stream* of expected frees, and the line ahead of
//! it.
//!
//! Theory of operation. Between the scheduler's decisions nothing waiting could be admitted
//! anywhere, so each admission from now on needs a slot to free. A slot busy with a request
//! whose estimate is `e` and that has run `elapsed` is expected to free after `e - elapsed` (at
//! once if it has run longer: never later than expected); the request that takes it then frees
//! it again after the estimate of the waiting lane, and so on: a stream `first, first + period,
//! ...`. The frees go, in time order, to the line oldest first; one whose wait ends before the
//! next free is refused by then and takes none. The newcomer gets the free after the line's.
//! Counting every free as an admission for the lane is the most there can be (a free may admit
//! nothing: a cheap request's end on a held process), so when even that free comes after the
//! newcomer's wait, it cannot be admitted in time if the estimates are right: it is refused at
//! once instead of after its whole wait. The same free says when a slot is expected, for
//! `Retry-After`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// The most `Retry-After` says, as the spec's fixed value (QUEUE-5): a client told to wait
/// longer would only come back to a different line.
pub(crate) const RETRY_AFTER_MAX: u8 = 5;

/// The longest line forecast: past it nothing is said (a walk per arrival must stay short; a
/// line this long behind slots this busy is a flood the queue's own wait refuses anyway).
pub(crate) const MOST_AHEAD: usize = 1024;

/// One slot's expected frees: the first `first` from now, then one each `period`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stream {
    pub first: Duration,
    pub period: Duration,
}

/// When the newcomer can expect its slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// This long from now.
    At(Duration),
    /// Not within the horizon asked about.
    Later,
    /// Nothing can be said (no slot to watch, or a line too long to walk).
    Unknown,
}

/// The free the newcomer can expect, behind a line whose waits end `ahead` from now (oldest
/// first), looking no further than `horizon`.
pub(crate) fn slot(
    streams: &[Stream],
    ahead: impl IntoIterator<Item = Duration>,
    horizon: Duration,
) -> Slot {
    let mut frees: BinaryHeap<Reverse<(Duration, usize)>> = streams
        .iter()
        .enumerate()
        .map(|(i, s)| Reverse((s.first, i)))
        .collect();
    for (n, ends) in ahead.into_iter().enumerate() {
        if n >= MOST_AHEAD {
            return Slot::Unknown;
        }
        let Some(&Reverse((at, i))) = frees.peek() else {
            return Slot::Unknown;
        };
        if at > horizon {
            return Slot::Later;
        }
        // A wait that ends at the free's time ends first (the scheduler fires timers first).
        if at < ends {
            let period = streams[i].period;
            if period.is_zero() {
                // Work that takes no time: the whole line is served at once.
                return Slot::At(at);
            }
            frees.pop();
            frees.push(Reverse((at.saturating_add(period), i)));
        }
    }
    match frees.peek() {
        None => Slot::Unknown,
        Some(&Reverse((at, _))) if at <= horizon => Slot::At(at),
        Some(_) => Slot::Later,
    }
}

/// How far to look for a newcomer that may wait `wait`: past it for `Retry-After`'s seconds.
pub(crate) fn horizon(wait: Duration) -> Duration {
    wait.max(Duration::from_secs(u64::from(RETRY_AFTER_MAX)))
}

/// Whether a newcomer whose slot is `slot` (with `horizon(wait)`) certainly gets none within
/// `wait`. A free at the wait's very end is counted as in time.
pub(crate) fn certainly_late(slot: Slot, wait: Duration) -> bool {
    match slot {
        Slot::At(at) => at > wait,
        Slot::Later => true,
        Slot::Unknown => false,
    }
}

/// Whole seconds until the slot: at least 1, at most [`RETRY_AFTER_MAX`], never less for a
/// later slot.
pub(crate) fn retry_after(slot: Slot) -> u8 {
    match slot {
        Slot::At(at) => {
            let whole = at.as_secs() + u64::from(at.subsec_nanos() > 0);
            u8::try_from(whole)
                .unwrap_or(RETRY_AFTER_MAX)
                .clamp(1, RETRY_AFTER_MAX)
        }
        Slot::Later | Slot::Unknown => RETRY_AFTER_MAX,
    }
}

#[cfg(test)]
#[path = "forecast_tests.rs"]
mod tests;
