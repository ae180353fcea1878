//! The launcher's sizing on this machine: the system readers joined to the pure sizing rules.
//! The CPU sizing before anything starts (for the plan and `--check`), and the memory fit once
//! the master is loaded (the supervisor's `Sizer`).

use std::path::Path;

use tracing::{info, warn};

use crate::plan::{self, Plan, PlanError};
use crate::settings::Settings;
use crate::sizing::{
    decision_line, idle_use, memory_fit, refuse_threshold, size_for, CpuInputs, CpuSizing,
    MemoryFacts,
};
use crate::supervisor::{IdleReport, Sizer};
use crate::system::{read_cgroup_memory, read_cpu_quota, read_cpus, read_process_memory};

/// The CPU sizing of this machine for these settings.
pub fn cpu_sizing(settings: &Settings) -> Result<CpuSizing, String> {
    let root = Path::new("/");
    let reading = read_cpus(root).map_err(|e| e.to_string())?;
    // An unreadable quota is no quota: the decision line says `quota none`.
    let quota = read_cpu_quota(root).ok().flatten();
    let inputs = CpuInputs::from_reading(&reading, quota);
    size_for(settings, &inputs).map_err(|e| e.to_string())
}

/// The plan before the master is loaded: what `--check` prints and what the launcher starts with.
pub fn plan_for_this_machine(settings: &Settings) -> Result<(CpuSizing, Plan), String> {
    let sizing = cpu_sizing(settings)?;
    let plan = plan::plan(settings, &sizing, None).map_err(|e: PlanError| e.to_string())?;
    Ok((sizing, plan))
}

/// The memory fit, run once the master is ready: its private memory stands for each worker's
/// (MEM-7); logs the decision line with the fit and any WARNING (SIZE-2, MEM-10, MEM-11).
pub fn sizer(settings: &Settings, sizing: CpuSizing) -> Sizer {
    let reject_fraction = settings.memory.reject_fraction;
    let headroom = settings.cluster.memory_headroom_gb;
    Box::new(move |master_pid| {
        let root = Path::new("/");
        let master = match read_process_memory(root, master_pid) {
            Ok(m) => m.rss_anon,
            Err(e) => {
                warn!("memory fit skipped: the master's memory could not be read: {e}");
                return sizing.planned() as usize;
            }
        };
        let cgroup = read_cgroup_memory(root).ok();
        let limit = cgroup.as_ref().and_then(|c| c.effective_limit());
        let in_use = cgroup.as_ref().map_or(master, |c| c.anon.max(master));
        let facts = MemoryFacts {
            refuse_at: refuse_threshold(limit, reject_fraction),
            per_worker: master,
            in_use,
        };
        let fit = memory_fit(&sizing, &facts, headroom);
        info!("{}", decision_line(&sizing, Some(&fit)));
        for w in &fit.warnings {
            warn!("{w}");
        }
        fit.workers as usize
    })
}

/// Once every worker is ready: what they all use idle, with a WARNING when less than the
/// headroom is left under the refusal threshold (MEM-12, MEM-13).
pub fn idle_report(settings: &Settings) -> IdleReport {
    let reject_fraction = settings.memory.reject_fraction;
    let headroom = settings.cluster.memory_headroom_gb;
    Box::new(move |pids| {
        let root = Path::new("/");
        let summed: u64 = pids
            .iter()
            .filter_map(|&pid| read_process_memory(root, pid).ok())
            .map(|m| m.rss_anon)
            .sum();
        let cgroup = read_cgroup_memory(root).ok();
        let limit = cgroup.as_ref().and_then(|c| c.effective_limit());
        let in_use = cgroup.as_ref().map_or(summed, |c| c.anon.max(summed));
        let idle = idle_use(
            refuse_threshold(limit, reject_fraction),
            in_use,
            pids.len(),
            headroom,
        );
        if idle.warning {
            warn!("{}", idle.line);
        } else {
            info!("{}", idle.line);
        }
    })
}
