//! The CPUs this process may run on (its affinity: `os.availableParallelism()` in the spec, SIZE-3)
//! and how many physical cores they are on (SIZE-4..6): the distinct `core_cpus_list` (older
//! kernels: `thread_siblings_list`) among those CPUs under
//! `<root>/sys/devices/system/cpu/cpuN/topology/`. Counting only the CPUs in the affinity mask
//! matters under `taskset` or a cpuset: two of an 8-core machine's CPUs are at most two cores.

use std::collections::BTreeSet;
use std::path::Path;

use super::unreadable::{read_optional, Unreadable};

/// What the machine says about its CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuReading {
    /// The ids of the CPUs this process may run on.
    pub cpus: BTreeSet<usize>,
    /// Distinct physical cores among them, or why they could not be counted (the caller then
    /// takes the vCPUs as the cores, SIZE-6).
    pub physical_cores: Result<u32, Unreadable>,
}

impl CpuReading {
    pub fn vcpu(&self) -> u32 {
        u32::try_from(self.cpus.len()).unwrap_or(u32::MAX)
    }
}

/// Parses a kernel CPU list (`0-3,8-11`, `5`, or empty).
pub fn parse_cpu_list(text: &str) -> Result<BTreeSet<usize>, String> {
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let number = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| format!("{s:?} is not a CPU number in {:?}", text.trim()))
        };
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (number(first)?, number(last)?);
                if last < first || last - first > 65_536 {
                    return Err(format!("{part:?} is not a CPU range"));
                }
                cpus.extend(first..=last);
            }
            None => {
                cpus.insert(number(part)?);
            }
        }
    }
    Ok(cpus)
}

/// The distinct physical cores among `cpus`, from the topology files under `root`.
pub fn physical_cores(root: &Path, cpus: &BTreeSet<usize>) -> Result<u32, Unreadable> {
    let mut cores: BTreeSet<BTreeSet<usize>> = BTreeSet::new();
    for cpu in cpus {
        let topology = root.join(format!("sys/devices/system/cpu/cpu{cpu}/topology"));
        let mut siblings = None;
        for name in ["core_cpus_list", "thread_siblings_list"] {
            let path = topology.join(name);
            if let Some(text) = read_optional(&path)? {
                siblings =
                    Some(parse_cpu_list(&text).map_err(|why| Unreadable::parse(&path, why))?);
                break;
            }
        }
        let siblings = siblings.ok_or_else(|| {
            Unreadable::new(
                topology.display().to_string(),
                "neither core_cpus_list nor thread_siblings_list exists",
            )
        })?;
        cores.insert(siblings);
    }
    if cores.is_empty() {
        return Err(Unreadable::new("CPU topology", "no CPUs to count"));
    }
    Ok(u32::try_from(cores.len()).unwrap_or(u32::MAX))
}

/// The CPUs this process may run on, from `sched_getaffinity`.
pub fn affinity() -> Result<BTreeSet<usize>, Unreadable> {
    use nix::sched::{sched_getaffinity, CpuSet};
    use nix::unistd::Pid;
    let set = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| Unreadable::new("CPU affinity (sched_getaffinity)", e.to_string()))?;
    let cpus: BTreeSet<usize> = (0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect();
    if cpus.is_empty() {
        return Err(Unreadable::new(
            "CPU affinity (sched_getaffinity)",
            "the mask is empty",
        ));
    }
    Ok(cpus)
}

/// Reads the affinity, then the topology of those CPUs under `root`.
pub fn read_cpus(root: &Path) -> Result<CpuReading, Unreadable> {
    let cpus = affinity()?;
    let physical_cores = physical_cores(root, &cpus);
    Ok(CpuReading {
        cpus,
        physical_cores,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::fixture::FakeRoot;

    fn set(ids: &[usize]) -> BTreeSet<usize> {
        ids.iter().copied().collect()
    }

    /// A machine of `cores` cores with `threads` hyperthreads each, numbered as Linux does on
    /// x86 (cpu n and n + cores are siblings). `old_kernel` writes only `thread_siblings_list`.
    fn machine(cores: usize, threads: usize, old_kernel: bool) -> FakeRoot {
        let root = FakeRoot::new();
        for cpu in 0..cores * threads {
            let core = cpu % cores;
            let siblings: Vec<String> = (0..threads)
                .map(|t| (core + t * cores).to_string())
                .collect();
            let name = if old_kernel {
                "thread_siblings_list"
            } else {
                "core_cpus_list"
            };
            root.write(
                &format!("sys/devices/system/cpu/cpu{cpu}/topology/{name}"),
                &format!("{}\n", siblings.join(",")),
            );
        }
        root
    }

    #[test]
    fn cpu_lists_parse_ranges_and_singles() {
        assert_eq!(
            parse_cpu_list("0-3,8-11\n"),
            Ok(set(&[0, 1, 2, 3, 8, 9, 10, 11]))
        );
        assert_eq!(parse_cpu_list("5"), Ok(set(&[5])));
        assert_eq!(parse_cpu_list(""), Ok(set(&[])));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
    }

    #[test]
    fn smt_off_counts_every_cpu_as_a_core() {
        // spec: SIZE-4
        let root = machine(8, 1, false);
        assert_eq!(physical_cores(root.path(), &(0..8).collect()), Ok(8));
    }

    #[test]
    fn smt_on_counts_sibling_threads_once() {
        // spec: SIZE-4
        let root = machine(4, 2, false);
        assert_eq!(physical_cores(root.path(), &(0..8).collect()), Ok(4));
    }

    #[test]
    fn a_smaller_affinity_mask_counts_only_its_cores() {
        // spec: SIZE-3, SIZE-4 — taskset -c 0,4,1 on 4 cores x 2 threads: cpus 0 and 4 share a core.
        let root = machine(4, 2, false);
        assert_eq!(physical_cores(root.path(), &set(&[0, 4, 1])), Ok(2));
    }

    #[test]
    fn older_kernels_use_thread_siblings_list() {
        // spec: SIZE-5
        let root = machine(4, 2, true);
        assert_eq!(physical_cores(root.path(), &(0..8).collect()), Ok(4));
    }

    #[test]
    fn unreadable_topology_says_why() {
        // spec: SIZE-6 — the caller then takes the vCPUs as the cores.
        let root = FakeRoot::new();
        let err = physical_cores(root.path(), &set(&[0, 1])).unwrap_err();
        assert!(err.why.contains("core_cpus_list"), "{err}");
        let garbled = machine(2, 1, false);
        garbled.write("sys/devices/system/cpu/cpu1/topology/core_cpus_list", "x\n");
        assert!(physical_cores(garbled.path(), &set(&[0, 1])).is_err());
    }

    #[test]
    fn this_machine_has_an_affinity_and_a_topology() {
        let reading = read_cpus(Path::new("/")).expect("affinity is readable on Linux");
        assert!(reading.vcpu() >= 1);
        if let Ok(cores) = reading.physical_cores {
            assert!(cores >= 1 && cores <= reading.vcpu());
        }
    }
}
