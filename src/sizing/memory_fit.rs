//! The memory fit (MEM-7..13, DEC-2, DEC-3), decided once the master is loaded: its private memory
//! stands for each worker's, and the workers that fit are those that leave `memoryHeadroomGB`
//! (GiB) free under the refusal threshold (`rejectFraction` × the limit) on top of what is in use
//! now. Not given, the count is lowered to that (at least 1: a master alone serves nobody's tx
//! load better than one worker does); given, every worker starts and the misfit is a WARNING.
//! With no limit there is nothing to fit under.

use super::cpu::CpuSizing;

const GIB: f64 = (1u64 << 30) as f64;

/// Memory figures once the master is loaded, in bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MemoryFacts {
    /// The refusal threshold; None with no memory limit.
    pub refuse_at: Option<u64>,
    /// The master's private memory (`RssAnon`), taken as each worker's.
    pub per_worker: u64,
    /// Private memory in use now (the cgroup's, or the processes' summed).
    pub in_use: u64,
}

/// The outcome of the fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryFit {
    /// How many workers fit; None with no limit. May be 0 (then 1 starts, with a WARNING).
    pub fits: Option<u32>,
    /// The count to run.
    pub workers: u32,
    /// WARNING lines to log, each whole.
    pub warnings: Vec<String>,
}

/// The line logged once every worker is ready (MEM-12), and whether it is a WARNING (MEM-13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdleUse {
    pub line: String,
    pub warning: bool,
}

/// `rejectFraction` × the limit (MEM-1); None with no limit.
pub fn refuse_threshold(limit: Option<u64>, reject_fraction: f64) -> Option<u64> {
    limit.map(|l| (l as f64 * reject_fraction).max(0.0) as u64)
}

pub(crate) fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / GIB)
}

fn headroom_bytes(headroom_gb: f64) -> u64 {
    (headroom_gb.max(0.0) * GIB) as u64
}

/// A number of GiB as the settings write it: `2`, `1.5`.
pub(crate) fn plain(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// How many workers fit under `refuse_at` with the headroom to spare.
fn fitting(refuse_at: u64, facts: &MemoryFacts, headroom: u64) -> u32 {
    let room = refuse_at
        .saturating_sub(facts.in_use)
        .saturating_sub(headroom);
    match room.checked_div(facts.per_worker) {
        Some(n) => u32::try_from(n).unwrap_or(u32::MAX),
        // A master of no measurable size: nothing limits the count.
        None => u32::MAX,
    }
}

/// Fits the CPU sizing's count into memory.
pub fn memory_fit(sizing: &CpuSizing, facts: &MemoryFacts, headroom_gb: f64) -> MemoryFit {
    let Some(refuse_at) = facts.refuse_at else {
        return MemoryFit {
            fits: None,
            workers: sizing.planned(),
            warnings: Vec::new(),
        };
    };
    let headroom = headroom_bytes(headroom_gb);
    let fits = fitting(refuse_at, facts, headroom);
    let numbers = format!(
        "each worker about {} (the master's private memory), {} in use now, refusal threshold {}, memoryHeadroomGB {}",
        gib(facts.per_worker),
        gib(facts.in_use),
        gib(refuse_at),
        plain(headroom_gb)
    );
    let mut warnings = Vec::new();
    let workers = match sizing.given {
        Some(given) => {
            if given > fits {
                // spec: MEM-11, DEC-2
                let by = sizing
                    .given_by
                    .as_deref()
                    .unwrap_or(crate::settings::paths::cluster::workers);
                warnings.push(format!(
                    "{given} workers asked for (set by {by}) but only {fits} fit in memory ({numbers}); starting all {given}"
                ));
            }
            given
        }
        None => {
            if fits == 0 {
                // spec: MEM-10
                warnings.push(format!(
                    "not even one worker fits in memory ({numbers}); starting 1 anyway"
                ));
            }
            sizing.cpu_count().min(fits.max(1))
        }
    };
    MemoryFit {
        fits: Some(fits),
        workers,
        warnings,
    }
}

/// What every process uses idle once every worker is ready (MEM-12), a WARNING when less than
/// the headroom is left under the refusal threshold (MEM-13).
pub fn idle_use(
    refuse_at: Option<u64>,
    in_use: u64,
    processes: usize,
    headroom_gb: f64,
) -> IdleUse {
    let used = format!(
        "memory idle with every worker ready: {} private in {processes} processes",
        gib(in_use)
    );
    let Some(refuse_at) = refuse_at else {
        return IdleUse {
            line: format!("{used}; no memory limit"),
            warning: false,
        };
    };
    let headroom = headroom_bytes(headroom_gb);
    let (left, warning) = if in_use <= refuse_at {
        let left = refuse_at - in_use;
        (
            format!(
                "{} left under the refusal threshold {}",
                gib(left),
                gib(refuse_at)
            ),
            left < headroom,
        )
    } else {
        (
            format!(
                "{} over the refusal threshold {}",
                gib(in_use - refuse_at),
                gib(refuse_at)
            ),
            true,
        )
    };
    let line = if warning {
        format!(
            "{used}, {left}: less than memoryHeadroomGB {} to spare, so one heavy operation may make every process refuse requests",
            plain(headroom_gb)
        )
    } else {
        format!("{used}, {left}")
    };
    IdleUse { line, warning }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ClusterSettings;
    use crate::sizing::cpu::{size_by_cpu, CpuInputs};

    const G: u64 = 1 << 30;

    fn sizing(given: Option<u32>) -> CpuSizing {
        let cluster = ClusterSettings {
            workers: given,
            ..ClusterSettings::default()
        };
        let inputs = CpuInputs {
            vcpu: 8,
            detected_cores: Some(4),
            quota: None,
        };
        size_by_cpu(&cluster, &inputs).unwrap()
    }

    fn facts(refuse_gib: Option<u64>, per_worker_gib: u64, in_use_gib: u64) -> MemoryFacts {
        MemoryFacts {
            refuse_at: refuse_gib.map(|g| g * G),
            per_worker: per_worker_gib * G,
            in_use: in_use_gib * G,
        }
    }

    #[test]
    fn the_threshold_is_reject_fraction_of_the_limit() {
        // spec: MEM-1
        assert_eq!(refuse_threshold(Some(100), 0.85), Some(85));
        assert_eq!(refuse_threshold(None, 0.85), None);
    }

    #[test]
    fn not_given_lowers_to_what_fits() {
        // spec: MEM-7, MEM-8, SIZE-13 — 27 GiB threshold, 4 in use, 2 headroom, 3 GiB each: 7 fit.
        let fit = memory_fit(&sizing(None), &facts(Some(27), 3, 4), 2.0);
        assert_eq!((fit.fits, fit.workers), (Some(7), 4));
        let tight = memory_fit(&sizing(None), &facts(Some(13), 3, 4), 2.0);
        assert_eq!((tight.fits, tight.workers), (Some(2), 2));
        assert!(tight.warnings.is_empty());
    }

    #[test]
    fn headroom_is_in_gib() {
        // spec: DEC-3 — 10 GiB threshold, 4 in use, 3 each: with 0 headroom 2 fit, with 0.5 GiB 1.
        assert_eq!(
            memory_fit(&sizing(None), &facts(Some(10), 3, 4), 0.0).fits,
            Some(2)
        );
        assert_eq!(
            memory_fit(&sizing(None), &facts(Some(10), 3, 4), 0.5).fits,
            Some(1)
        );
    }

    #[test]
    fn none_fits_starts_one_with_a_warning() {
        // spec: MEM-9, MEM-10
        let fit = memory_fit(&sizing(None), &facts(Some(6), 3, 4), 2.0);
        assert_eq!((fit.fits, fit.workers), (Some(0), 1));
        assert_eq!(fit.warnings.len(), 1);
        let w = &fit.warnings[0];
        assert!(w.contains("not even one worker fits"), "{w}");
        assert!(
            w.contains("3.0 GiB") && w.contains("4.0 GiB") && w.contains("6.0 GiB"),
            "{w}"
        );
    }

    #[test]
    fn given_all_start_and_warn_only_when_they_do_not_fit() {
        // spec: MEM-11, DEC-2
        let fit = memory_fit(&sizing(Some(6)), &facts(Some(13), 3, 4), 2.0);
        assert_eq!((fit.fits, fit.workers), (Some(2), 6));
        assert_eq!(fit.warnings.len(), 1);
        assert!(fit.warnings[0]
            .contains("6 workers asked for (set by server.cluster.workers) but only 2 fit"));
        let fine = memory_fit(&sizing(Some(2)), &facts(Some(13), 3, 4), 2.0);
        assert_eq!((fine.workers, fine.warnings.len()), (2, 0));
    }

    #[test]
    fn no_limit_no_cap() {
        // spec: DEC-3
        let fit = memory_fit(&sizing(None), &facts(None, 3, 4), 2.0);
        assert_eq!((fit.fits, fit.workers, fit.warnings.len()), (None, 4, 0));
    }

    #[test]
    fn idle_use_warns_under_the_headroom() {
        // spec: MEM-12, MEM-13
        let ok = idle_use(Some(27 * G), 15 * G, 5, 2.0);
        assert!(!ok.warning);
        assert_eq!(
            ok.line,
            "memory idle with every worker ready: 15.0 GiB private in 5 processes, 12.0 GiB left under the refusal threshold 27.0 GiB"
        );
        let short = idle_use(Some(27 * G), 26 * G, 5, 2.0);
        assert!(short.warning);
        assert!(
            short.line.contains("less than memoryHeadroomGB 2"),
            "{}",
            short.line
        );
        let over = idle_use(Some(27 * G), 28 * G, 5, 2.0);
        assert!(
            over.warning && over.line.contains("1.0 GiB over"),
            "{}",
            over.line
        );
        let unlimited = idle_use(None, 28 * G, 5, 2.0);
        assert!(!unlimited.warning && unlimited.line.ends_with("no memory limit"));
    }
}
