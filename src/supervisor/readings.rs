//! The machine as the status and the recycle decision read it: each process's memory from
//! `/proc/<pid>/status`, the launcher's cgroup, the host's `/proc/meminfo` (`crate::system`'s
//! readers, under `/`). The supervisor's shell reads; `status/` only sees the `Readings` trait.

use std::path::{Path, PathBuf};

use crate::status::readings::{Reading, Readings};
use crate::status::snapshot::{CgroupLimit, CgroupReading, HostMemory, ProcMemory};
use crate::system;

/// This machine, read under `root` (`/`).
pub(crate) struct SystemReadings {
    root: PathBuf,
}

impl SystemReadings {
    pub(crate) fn new() -> SystemReadings {
        SystemReadings {
            root: PathBuf::from("/"),
        }
    }

    fn root(&self) -> &Path {
        &self.root
    }
}

impl Readings for SystemReadings {
    fn process(&self, pid: u32) -> Reading<ProcMemory> {
        let m = system::read_process_memory(self.root(), pid)?;
        Ok(ProcMemory {
            rss_anon: m.rss_anon,
            rss_file: m.rss_file,
        })
    }

    fn cgroup(&self) -> Reading<CgroupReading> {
        let c = system::read_cgroup_memory(self.root())?;
        let limit = match (c.own_limit, &c.enclosing_limit) {
            (Some(l), _) => CgroupLimit::Own(l),
            (None, Some(e)) => CgroupLimit::Enclosing(e.bytes),
            (None, None) => CgroupLimit::None,
        };
        Ok(CgroupReading {
            anon: c.anon,
            file: c.file,
            limit,
            group: c.group.display().to_string(),
        })
    }

    fn cpu_seconds(&self, pid: u32) -> Option<f64> {
        let path = self.root().join(format!("proc/{pid}/stat"));
        let text = std::fs::read_to_string(path).ok()?;
        crate::exposition::process_self::cpu_seconds(
            &text,
            crate::exposition::process_self::clock_ticks()?,
        )
    }

    fn host(&self) -> Reading<HostMemory> {
        let h = system::read_host_memory(self.root())?;
        Ok(HostMemory {
            total: h.total,
            available: h.available,
        })
    }
}
