//! The CPU part of sizing: which cores the rule sees (detected, `server.cluster.cores`, or the
//! vCPUs where the topology can't be read; SIZE-4..7), capped at `ceil(quota)` by a CPU quota
//! (SIZE-8, DEC-22; the vCPUs are not capped), the rule's count, then at least 1 (SIZE-12).
//! With `server.cluster.workers` given, that count stands and the rule is only reported.

use crate::settings::{ClusterSettings, Settings, Source};
use crate::system::{CpuQuota, CpuReading};

use super::rule::{find_rule, UnknownRule, WorkerRule};

/// What the machine said about its CPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuInputs {
    /// The CPUs the launcher may run on.
    pub vcpu: u32,
    /// Distinct physical cores among them; None where the topology can't be read.
    pub detected_cores: Option<u32>,
    /// The tightest CPU quota on the launcher's cgroup or an enclosing one.
    pub quota: Option<CpuQuota>,
}

impl CpuInputs {
    pub fn from_reading(reading: &CpuReading, quota: Option<CpuQuota>) -> CpuInputs {
        CpuInputs {
            vcpu: reading.vcpu(),
            detected_cores: reading.physical_cores.as_ref().ok().copied(),
            quota,
        }
    }
}

/// Where the rule's cores came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CoresSource {
    /// Counted from the topology.
    Detected(u32),
    /// `server.cluster.cores`, with what was detected, if anything.
    Overridden { cores: u32, detected: Option<u32> },
    /// The topology couldn't be read: the vCPUs stand in (SIZE-6).
    TakenAsVcpu(u32),
}

impl CoresSource {
    pub fn cores(self) -> u32 {
        match self {
            CoresSource::Detected(c)
            | CoresSource::Overridden { cores: c, .. }
            | CoresSource::TakenAsVcpu(c) => c,
        }
    }
}

/// The CPU sizing, before memory.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuSizing {
    pub rule: &'static WorkerRule,
    pub vcpu: u32,
    pub cores: CoresSource,
    pub quota: Option<CpuQuota>,
    /// The cores the rule used: `cores`, capped at `ceil(quota)`.
    pub rule_cores: u32,
    /// What the rule gave, before "at least 1".
    pub rule_count: u32,
    /// `server.cluster.workers`, when given.
    pub given: Option<u32>,
    /// What gave `given`, as the decision line names it (`--workers`, `environment
    /// FHIRSMITH_WORKERS`, `server.cluster.workers in /d/config.json`); None: the setting's name.
    pub given_by: Option<String>,
}

impl CpuSizing {
    /// The CPU rule's number, at least 1.
    pub fn cpu_count(&self) -> u32 {
        self.rule_count.max(1)
    }

    /// The count before any memory lowering: the given one, else the CPU rule's. The
    /// `internalPort` range is checked against this at start (DEC-21).
    pub fn planned(&self) -> u32 {
        self.given.unwrap_or_else(|| self.cpu_count())
    }

    /// The same sizing, saying what set the given count (`Source::setter`).
    pub fn given_by(self, setter: String) -> CpuSizing {
        CpuSizing {
            given_by: Some(setter),
            ..self
        }
    }

    /// The quota's cap on the cores, when a quota applies.
    pub fn quota_cap(&self) -> Option<u32> {
        self.quota.as_ref().map(|q| quota_cap(q.cpus))
    }
}

/// `ceil(quota)`, at least 1: a quota of 0.5 CPU still runs one process at a time.
fn quota_cap(cpus: f64) -> u32 {
    let ceil = cpus.ceil();
    if ceil >= f64::from(u32::MAX) {
        u32::MAX
    } else if ceil >= 1.0 {
        ceil as u32
    } else {
        1
    }
}

/// [`size_by_cpu`] for the whole settings: the sizing also names what set a given count (the
/// flag, the environment or config.json), for the decision line and the memory warning.
pub fn size_for(settings: &Settings, inputs: &CpuInputs) -> Result<CpuSizing, UnknownRule> {
    const WORKERS: &str = crate::settings::paths::cluster::workers;
    let from = settings.sources.of(WORKERS);
    let sizing = size_by_cpu(&settings.cluster, inputs)?;
    // A count no layer gave (settings made in code) keeps the setting's name.
    Ok(if from == Source::Default {
        sizing
    } else {
        sizing.given_by(from.setter(WORKERS))
    })
}

/// Sizes by the CPUs with the rule `cluster.worker_rule` (DEC-23: an unknown rule is an error).
pub fn size_by_cpu(
    cluster: &ClusterSettings,
    inputs: &CpuInputs,
) -> Result<CpuSizing, UnknownRule> {
    let rule = find_rule(&cluster.worker_rule)?;
    let vcpu = inputs.vcpu.max(1);
    let cores = match (cluster.cores, inputs.detected_cores) {
        (Some(cores), detected) => CoresSource::Overridden { cores, detected },
        (None, Some(detected)) => CoresSource::Detected(detected),
        (None, None) => CoresSource::TakenAsVcpu(vcpu),
    };
    let rule_cores = match &inputs.quota {
        Some(q) => cores.cores().min(quota_cap(q.cpus)),
        None => cores.cores(),
    };
    Ok(CpuSizing {
        rule,
        vcpu,
        cores,
        quota: inputs.quota.clone(),
        rule_cores,
        rule_count: (rule.count)(rule_cores, vcpu),
        given: cluster.workers,
        given_by: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn inputs(vcpu: u32, cores: Option<u32>, quota: Option<f64>) -> CpuInputs {
        CpuInputs {
            vcpu,
            detected_cores: cores,
            quota: quota.map(|cpus| CpuQuota {
                cpus,
                file: "cpu.max",
                group: PathBuf::from("/sys/fs/cgroup/system.slice"),
            }),
        }
    }

    fn count(cluster: &ClusterSettings, i: &CpuInputs) -> u32 {
        size_by_cpu(cluster, i).unwrap().planned()
    }

    #[test]
    fn the_specs_four_machines() {
        // spec: SIZE-1, SIZE-11
        let c = ClusterSettings::default();
        assert_eq!(count(&c, &inputs(4, Some(4), None)), 2);
        assert_eq!(count(&c, &inputs(8, Some(4), None)), 4);
        assert_eq!(count(&c, &inputs(8, Some(8), None)), 5);
        assert_eq!(count(&c, &inputs(16, Some(8), None)), 8);
    }

    #[test]
    fn unreadable_topology_takes_the_vcpus() {
        // spec: SIZE-6
        let s = size_by_cpu(&ClusterSettings::default(), &inputs(8, None, None)).unwrap();
        assert_eq!(s.cores, CoresSource::TakenAsVcpu(8));
        assert_eq!(s.planned(), 5);
    }

    #[test]
    fn cores_overrides_the_detected() {
        // spec: SIZE-7
        let c = ClusterSettings {
            cores: Some(2),
            ..ClusterSettings::default()
        };
        let s = size_by_cpu(&c, &inputs(8, Some(4), None)).unwrap();
        assert_eq!(
            s.cores,
            CoresSource::Overridden {
                cores: 2,
                detected: Some(4)
            }
        );
        assert_eq!(s.planned(), 2);
    }

    #[test]
    fn a_quota_caps_the_cores_not_the_vcpus() {
        // spec: SIZE-8, DEC-22 — 1.5 CPUs caps 4 cores at 2; round(0.6×8) still uses 8 vCPU.
        let s = size_by_cpu(&ClusterSettings::default(), &inputs(8, Some(4), Some(1.5))).unwrap();
        assert_eq!((s.rule_cores, s.vcpu, s.planned()), (2, 8, 2));
        assert_eq!(s.quota_cap(), Some(2));
        // A quota caps an overridden count too.
        let c = ClusterSettings {
            cores: Some(16),
            ..ClusterSettings::default()
        };
        assert_eq!(count(&c, &inputs(16, Some(8), Some(3.2))), 4);
        // A loose quota leaves the cores alone.
        assert_eq!(
            count(&ClusterSettings::default(), &inputs(8, Some(4), Some(6.0))),
            4
        );
    }

    #[test]
    fn at_least_one() {
        // spec: SIZE-12
        let c = ClusterSettings {
            cores: Some(0),
            ..ClusterSettings::default()
        };
        let s = size_by_cpu(&c, &inputs(8, Some(4), None)).unwrap();
        assert_eq!((s.rule_count, s.planned()), (0, 1));
        assert_eq!(
            count(&ClusterSettings::default(), &inputs(1, Some(1), Some(0.2))),
            1
        );
    }

    #[test]
    fn given_workers_stand() {
        let c = ClusterSettings {
            workers: Some(7),
            ..ClusterSettings::default()
        };
        assert_eq!(count(&c, &inputs(4, Some(4), None)), 7);
        let alone = ClusterSettings {
            workers: Some(0),
            ..ClusterSettings::default()
        };
        assert_eq!(count(&alone, &inputs(4, Some(4), None)), 0);
    }

    #[test]
    fn an_unknown_rule_is_an_error() {
        // spec: DEC-23
        let c = ClusterSettings {
            worker_rule: "fancy".to_string(),
            ..ClusterSettings::default()
        };
        let err = size_by_cpu(&c, &inputs(4, Some(4), None)).unwrap_err();
        assert!(err.to_string().contains("known: classic"), "{err}");
    }
}

#[cfg(test)]
mod this_machine {
    use super::*;
    use crate::sizing::decision_line;
    use std::path::Path;

    #[test]
    fn sizes_this_machine_from_its_real_readings() {
        // spec: SIZE-3 — the vCPUs are this process's affinity, as /proc tells it apart from
        // the reader (narrowed with taskset end to end: tests/sizing.rs).
        let reading = crate::system::read_cpus(Path::new("/")).expect("affinity");
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim()
            .to_string();
        let listed = crate::system::cpu::parse_cpu_list(&allowed).expect("a CPU list");
        assert_eq!(reading.cpus, listed, "Cpus_allowed_list {allowed}");
        let quota = crate::system::read_cpu_quota(Path::new("/")).expect("cgroups");
        let inputs = CpuInputs::from_reading(&reading, quota);
        let sizing = size_by_cpu(&ClusterSettings::default(), &inputs).unwrap();
        assert!(sizing.planned() >= 1);
        let line = decision_line(&sizing, None);
        assert!(line.contains(&format!("({} vCPU", listed.len())), "{line}");
    }
}
