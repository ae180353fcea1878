//! The one-thread cost model (SIM-12): each operation burns real CPU on the sim's single
//! request thread in slices of at most 25 ms, yielding between slices, so concurrent operations
//! take turns as they do on a Node event loop and a cheap request waits behind heavy ones.

use std::time::{Duration, Instant};

use super::path::Op;

/// The longest a slice runs before yielding: a Node operation's turn.
pub const SLICE: Duration = Duration::from_millis(25);

/// CPU cost per operation, ms (environment `SIM_COST_*_MS`).
#[derive(Clone, Debug, PartialEq)]
pub struct Costs {
    pub metadata_ms: f64,
    pub lookup_ms: f64,
    pub validate_ms: f64,
    pub subsumes_ms: f64,
    pub expand_ms: f64,
    pub other_ms: f64,
}

impl Default for Costs {
    fn default() -> Costs {
        Costs {
            metadata_ms: 1.0,
            lookup_ms: 4.0,
            validate_ms: 5.0,
            subsumes_ms: 4.0,
            expand_ms: 200.0,
            other_ms: 1.0,
        }
    }
}

impl Costs {
    pub fn for_op(&self, op: Op) -> Duration {
        let ms = match op {
            Op::Metadata => self.metadata_ms,
            Op::Lookup => self.lookup_ms,
            Op::ValidateCode => self.validate_ms,
            Op::Subsumes => self.subsumes_ms,
            Op::Expand => self.expand_ms,
            Op::Sim(_) => 0.0,
            _ => self.other_ms,
        };
        Duration::from_secs_f64(ms.max(0.0) / 1000.0)
    }
}

/// The slices a cost is burnt in: full slices, then the remainder.
pub fn slices(total: Duration) -> impl Iterator<Item = Duration> {
    let full = (total.as_nanos() / SLICE.as_nanos()) as u32;
    let rest = total.saturating_sub(SLICE * full);
    (0..full)
        .map(|_| SLICE)
        .chain((!rest.is_zero()).then_some(rest))
}

/// Burns `total` of CPU on the current thread, yielding to the runtime between slices.
pub async fn burn(total: Duration) {
    for slice in slices(total) {
        let start = Instant::now();
        while start.elapsed() < slice {
            std::hint::spin_loop();
        }
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_at_most_25_ms_and_add_up() {
        // spec: SIM-12
        for ms in [0u64, 1, 24, 25, 26, 200, 201, 1000] {
            let total = Duration::from_millis(ms);
            let s: Vec<Duration> = slices(total).collect();
            assert!(s.iter().all(|d| *d <= SLICE && !d.is_zero()), "{ms}: {s:?}");
            assert_eq!(s.iter().sum::<Duration>(), total, "{ms}");
        }
        assert_eq!(slices(Duration::from_millis(200)).count(), 8);
    }

    #[test]
    fn costs_by_operation() {
        let c = Costs::default();
        assert_eq!(c.for_op(Op::Expand), Duration::from_millis(200));
        assert_eq!(c.for_op(Op::Lookup), Duration::from_millis(4));
        assert_eq!(c.for_op(Op::Read), Duration::from_millis(1));
    }
}
