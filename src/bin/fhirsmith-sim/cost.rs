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
    let mut slices = slices(total).peekable();
    while let Some(slice) = slices.next() {
        let start = Instant::now();
        while start.elapsed() < slice {
            std::hint::spin_loop();
        }
        // Between slices only: as in Node, an operation's last turn ends with its answer
        // written, not with one more wait in line behind the others.
        if slices.peek().is_some() {
            tokio::task::yield_now().await;
        }
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

    /// How many times another task ran while `cost` was burnt on a one-thread runtime.
    fn turns_given_while_burning(cost: Duration) -> usize {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime");
        rt.block_on(async {
            let turns = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let t = turns.clone();
            let other = tokio::spawn(async move {
                loop {
                    t.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    tokio::task::yield_now().await;
                }
            });
            burn(cost).await;
            let n = turns.load(std::sync::atomic::Ordering::SeqCst);
            other.abort();
            n
        })
    }

    #[test]
    fn an_operation_yields_between_its_slices_and_not_after_the_last() {
        // spec: SIM-12 (a cheap request answers in its first turn, as in Node; a heavy one
        // lets the others run between its slices)
        assert_eq!(turns_given_while_burning(Duration::from_millis(4)), 0);
        assert_eq!(turns_given_while_burning(Duration::from_millis(60)), 2);
    }

    #[test]
    fn costs_by_operation() {
        let c = Costs::default();
        assert_eq!(c.for_op(Op::Expand), Duration::from_millis(200));
        assert_eq!(c.for_op(Op::Lookup), Duration::from_millis(4));
        assert_eq!(c.for_op(Op::Read), Duration::from_millis(1));
    }
}
