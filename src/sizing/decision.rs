//! The one line that logs the sizing's inputs and its decision (SIZE-2), as the spec shows it:
//!
//! `workers 4: 4 physical cores (8 vCPU, SMT 2), quota none, memory fits 11 → classic rule min(4, round(0.6×8))`
//!
//! With no memory limit the memory part is `memory fits: no limit` (DEC-3); before the master is
//! loaded (`--check`) it says the fit is decided then; a quota that capped the cores says so
//! (`quota 1.5 (cpu.max) caps cores at 2`, DEC-22); with `server.cluster.workers` given, the line
//! says what set it (`--workers`, the environment or config.json), and still shows what the
//! machine is.

use super::cpu::{CoresSource, CpuSizing};
use super::memory_fit::{plain, MemoryFit};

fn cores_part(sizing: &CpuSizing) -> String {
    let v = sizing.vcpu;
    let noun = |n: u32| {
        if n == 1 {
            "physical core"
        } else {
            "physical cores"
        }
    };
    match sizing.cores {
        CoresSource::Detected(c) => {
            let smt = if c == 0 || v <= c {
                "no SMT".to_string()
            } else if v % c == 0 {
                format!("SMT {}", v / c)
            } else {
                format!("SMT {}", plain(f64::from(v) / f64::from(c)))
            };
            format!("{c} {} ({v} vCPU, {smt})", noun(c))
        }
        CoresSource::Overridden { cores, detected } => {
            let detected =
                detected.map_or_else(|| "none detected".to_string(), |d| format!("{d} detected"));
            format!(
                "{cores} {} (server.cluster.cores; {detected}, {v} vCPU)",
                noun(cores)
            )
        }
        CoresSource::TakenAsVcpu(c) => {
            format!(
                "{c} {} ({v} vCPU; topology unreadable, cores taken as the vCPUs)",
                noun(c)
            )
        }
    }
}

fn quota_part(sizing: &CpuSizing) -> String {
    match (&sizing.quota, sizing.quota_cap()) {
        (Some(q), Some(cap)) if cap < sizing.cores.cores() => {
            format!("quota {} ({}) caps cores at {cap}", plain(q.cpus), q.file)
        }
        (Some(q), _) => format!("quota {} ({})", plain(q.cpus), q.file),
        (None, _) => "quota none".to_string(),
    }
}

fn memory_part(memory: Option<&MemoryFit>) -> String {
    match memory {
        None => "memory fit decided once the master is loaded".to_string(),
        Some(MemoryFit { fits: None, .. }) => "memory fits: no limit".to_string(),
        Some(MemoryFit { fits: Some(n), .. }) => format!("memory fits {n}"),
    }
}

/// The decision line: `memory` is None before the master is loaded.
pub fn decision_line(sizing: &CpuSizing, memory: Option<&MemoryFit>) -> String {
    let inputs = format!(
        "{}, {}, {}",
        cores_part(sizing),
        quota_part(sizing),
        memory_part(memory)
    );
    if let Some(given) = sizing.given {
        let alone = if given == 0 {
            " (the master alone)"
        } else {
            ""
        };
        let by = sizing
            .given_by
            .as_deref()
            .unwrap_or(crate::settings::paths::cluster::workers);
        return format!("workers {given}: set by {by}{alone}; {inputs}");
    }
    let rule = format!(
        "{} rule {}",
        sizing.rule.name,
        (sizing.rule.explain)(sizing.rule_cores, sizing.vcpu)
    );
    let cpu = sizing.cpu_count();
    let workers = memory.map_or(cpu, |m| m.workers);
    let mut adjust = String::new();
    if sizing.rule_count == 0 {
        adjust.push_str(" = 0, raised to 1");
    }
    if workers < cpu {
        if adjust.is_empty() {
            adjust = format!(" = {cpu}");
        }
        adjust.push_str(&format!(", lowered to {workers} to fit memory"));
    }
    format!("workers {workers}: {inputs} → {rule}{adjust}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ClusterSettings;
    use crate::sizing::cpu::{size_by_cpu, CpuInputs};
    use crate::system::CpuQuota;
    use std::path::PathBuf;

    fn sizing(
        cluster: ClusterSettings,
        vcpu: u32,
        cores: Option<u32>,
        quota: Option<f64>,
    ) -> CpuSizing {
        let inputs = CpuInputs {
            vcpu,
            detected_cores: cores,
            quota: quota.map(|cpus| CpuQuota {
                cpus,
                file: "cpu.max",
                group: PathBuf::from("/sys/fs/cgroup"),
            }),
        };
        size_by_cpu(&cluster, &inputs).unwrap()
    }

    fn fits(fits: Option<u32>, workers: u32) -> MemoryFit {
        MemoryFit {
            fits,
            workers,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn the_specs_line_exactly() {
        // spec: SIZE-2
        let s = sizing(ClusterSettings::default(), 8, Some(4), None);
        assert_eq!(
            decision_line(&s, Some(&fits(Some(11), 4))),
            "workers 4: 4 physical cores (8 vCPU, SMT 2), quota none, memory fits 11 → classic rule min(4, round(0.6×8))"
        );
    }

    #[test]
    fn no_limit_and_not_yet_loaded() {
        // spec: DEC-3
        let s = sizing(ClusterSettings::default(), 8, Some(8), None);
        assert_eq!(
            decision_line(&s, Some(&fits(None, 5))),
            "workers 5: 8 physical cores (8 vCPU, no SMT), quota none, memory fits: no limit → classic rule min(8, round(0.6×8))"
        );
        assert_eq!(
            decision_line(&s, None),
            "workers 5: 8 physical cores (8 vCPU, no SMT), quota none, memory fit decided once the master is loaded → classic rule min(8, round(0.6×8))"
        );
    }

    #[test]
    fn a_quota_that_caps_shows_its_file() {
        // spec: DEC-22
        let s = sizing(ClusterSettings::default(), 8, Some(4), Some(1.5));
        assert_eq!(
            decision_line(&s, Some(&fits(None, 2))),
            "workers 2: 4 physical cores (8 vCPU, SMT 2), quota 1.5 (cpu.max) caps cores at 2, memory fits: no limit → classic rule min(2, round(0.6×8))"
        );
        let loose = sizing(ClusterSettings::default(), 8, Some(4), Some(6.0));
        assert!(decision_line(&loose, None).contains(", quota 6 (cpu.max), "));
    }

    #[test]
    fn memory_lowering_and_raising_show() {
        // spec: SIZE-12, SIZE-13
        let s = sizing(ClusterSettings::default(), 16, Some(8), None);
        assert!(decision_line(&s, Some(&fits(Some(3), 3))).ends_with(
            "memory fits 3 → classic rule min(8, round(0.6×16)) = 8, lowered to 3 to fit memory"
        ));
        let zero = sizing(
            ClusterSettings {
                cores: Some(0),
                ..ClusterSettings::default()
            },
            4,
            None,
            None,
        );
        let line = decision_line(&zero, None);
        assert!(
            line.starts_with(
                "workers 1: 0 physical cores (server.cluster.cores; none detected, 4 vCPU)"
            ),
            "{line}"
        );
        assert!(line.ends_with("= 0, raised to 1"), "{line}");
    }

    #[test]
    fn given_workers_say_so() {
        let s = sizing(
            ClusterSettings {
                workers: Some(3),
                ..ClusterSettings::default()
            },
            8,
            Some(4),
            None,
        );
        assert_eq!(
            decision_line(&s, Some(&fits(Some(11), 3))),
            "workers 3: set by server.cluster.workers; 4 physical cores (8 vCPU, SMT 2), quota none, memory fits 11"
        );
    }

    #[test]
    fn unreadable_topology_says_cores_are_the_vcpus() {
        // spec: SIZE-6
        let s = sizing(ClusterSettings::default(), 4, None, None);
        assert!(decision_line(&s, None).starts_with(
            "workers 2: 4 physical cores (4 vCPU; topology unreadable, cores taken as the vCPUs)"
        ));
    }
}
