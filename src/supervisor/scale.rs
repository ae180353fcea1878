//! One worker more or fewer at run time (`SIGTTIN`, `SIGTTOU`, `fhircluster scale N`), decided
//! purely: what was asked, the count now, the room this run made at its start (the ports after
//! `internalPort` stop short of `server.port`, DEC-21) and what memory is left (the fit the start
//! made, MEM-7) in, the new count or the refusal's one line out. The shell (`shell/scale.rs`)
//! reads the machine and carries the change out through the lifecycle's `resize`, which drains
//! the highest-numbered workers (as a recycle does, DEC-15) and starts new ones as at launch.
//!
//! A count set this way holds until the next reload or start (both go back to config.json) and
//! is carried across an in-place upgrade, which is neither (DEC-48).

use crate::sizing::memory_fit::{gib, plain};

/// What was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// So many more (positive) or fewer (negative): `SIGTTIN` is `By(1)`, `SIGTTOU` `By(-1)`.
    By(i64),
    /// This many.
    To(usize),
}

impl Ask {
    /// `scale`'s argument: `3`, `+1`, `-1`. `Err`: why not, for the answer.
    pub fn parse(text: &str) -> Result<Ask, String> {
        let bad = || format!("scale takes a worker count (3) or a step (+1, -1), not {text:?}");
        if let Some(rest) = text.strip_prefix('+') {
            return rest
                .parse::<u32>()
                .map(|n| Ask::By(i64::from(n)))
                .map_err(|_| bad());
        }
        if let Some(rest) = text.strip_prefix('-') {
            return rest
                .parse::<u32>()
                .map(|n| Ask::By(-i64::from(n)))
                .map_err(|_| bad());
        }
        text.parse::<u32>()
            .map(|n| Ask::To(n as usize))
            .map_err(|_| bad())
    }

    /// The count asked for from `current` (never below 0).
    fn target(self, current: usize) -> usize {
        match self {
            Ask::To(n) => n,
            Ask::By(d) if d >= 0 => {
                current.saturating_add(usize::try_from(d).unwrap_or(usize::MAX))
            }
            Ask::By(d) => {
                current.saturating_sub(usize::try_from(d.unsigned_abs()).unwrap_or(usize::MAX))
            }
        }
    }
}

/// Memory as the fit at start reads it, in bytes: each worker counted as the master's private
/// memory (MEM-7), what is in use now, the refusal threshold and `memoryHeadroomGB`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryRoom {
    pub refuse_at: u64,
    pub per_worker: u64,
    pub in_use: u64,
    pub headroom_gb: f64,
}

/// What the decision needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts<'a> {
    /// Workers wanted now.
    pub current: usize,
    /// The most workers this run has room for (its ports and tables, made at start).
    pub room: usize,
    /// Why no more than `room`: the setting that stops it (the port range's own line), for
    /// the refusal.
    pub room_why: &'a str,
    /// Memory, when there is a limit to fit under; None: nothing limits the count.
    pub memory: Option<MemoryRoom>,
    /// Why no change can be made now (the cluster starting, a rolling restart), if so.
    pub busy: Option<&'a str>,
}

/// The decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run `to` workers from now on.
    Change { from: usize, to: usize },
    /// Already that many: nothing to do.
    Same(usize),
    /// Refused, the count unchanged: the reason, whole.
    Refused(String),
}

/// Whether the count may become what was asked, and if not, which limit says no and by how
/// much. Never the last worker (a master alone serves tx at the master's cost); never beyond
/// the room the run made at start (DEC-21); never more than fit in memory with the headroom
/// to spare.
pub fn decide(ask: Ask, f: &Facts) -> Decision {
    let from = f.current;
    let to = ask.target(from);
    if to == from {
        return Decision::Same(from);
    }
    if let Some(why) = f.busy {
        return Decision::Refused(format!("{why}; the worker count stays {from}"));
    }
    if to == 0 {
        return Decision::Refused(format!(
            "the last worker is never stopped (the master would serve every tx request); the \
             worker count stays {from}"
        ));
    }
    if to > f.room {
        return Decision::Refused(format!(
            "the internalPort range: {to} workers asked for, room for {}, {} too many ({}); \
             the worker count stays {from}",
            f.room,
            to - f.room,
            f.room_why
        ));
    }
    if let (Some(m), true) = (f.memory, to > from) {
        let more = (to - from) as u64;
        if let Some(short) = m.short_of(more, "worker(s)") {
            return Decision::Refused(format!("{short}; the worker count stays {from}"));
        }
    }
    Decision::Change { from, to }
}

impl MemoryRoom {
    /// Why `more` processes more (`what`: "worker(s)") do not fit, with how much is short:
    /// each counted as the master's private memory, under the refusal threshold with the
    /// headroom to spare. None: they fit.
    pub fn short_of(&self, more: u64, what: &str) -> Option<String> {
        let need = self.per_worker.saturating_mul(more);
        let headroom = (self.headroom_gb.max(0.0) * (1u64 << 30) as f64) as u64;
        let left = self
            .refuse_at
            .saturating_sub(self.in_use)
            .saturating_sub(headroom);
        (need > left).then(|| {
            format!(
                "the memory fit: {more} more {what} need about {} (the master's private \
                 memory each), {} is left under the refusal threshold {} with {} in use and \
                 memoryHeadroomGB {} to spare: {} short",
                amount(need),
                amount(left),
                amount(self.refuse_at),
                amount(self.in_use),
                plain(self.headroom_gb),
                amount(need - left)
            )
        })
    }
}

/// GiB, or MB below one GiB: a process of tens of MB short is not "0.0 GiB short".
fn amount(bytes: u64) -> String {
    if bytes < 1 << 30 {
        format!("{} MB", bytes.div_ceil(1 << 20))
    } else {
        gib(bytes)
    }
}

#[cfg(test)]
#[path = "scale_tests.rs"]
mod tests;
