//! The launcher's sizing on this host: the system readers joined to the pure sizing rules.
//! The CPU sizing before anything starts (for the plan, `--check` and a reload), and the memory
//! fit once the master is loaded (the supervisor's sizer). Reads the machine: not in the pure
//! core, unlike the rest of `sizing/`.

use std::fmt;
use std::path::Path;

use tracing::{info, warn};

use crate::plan::{self, Plan, PlanError};
use crate::settings::Settings;
use crate::sizing::rule::UnknownRule;
use crate::sizing::{
    decision_line, idle_use, memory_fit, refuse_threshold, size_for, CpuInputs, CpuSizing,
    MemoryFacts,
};
use crate::system::unreadable::Unreadable;
use crate::system::{read_cgroup_memory, read_cpu_quota, read_cpus, read_process_memory};

/// Why this host could not be sized for the settings.
#[derive(Debug)]
pub(crate) enum SizingError {
    /// Its CPUs could not be read.
    Cpus(Unreadable),
    /// `server.cluster.workerRule` names no known rule (DEC-23).
    Rule(UnknownRule),
    /// The plan can't be made (ports, command, bind address, data directory).
    Plan(PlanError),
}

impl fmt::Display for SizingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizingError::Cpus(_) => f.write_str("reading this host's CPUs"),
            // The settings' own one-line errors, as they are.
            SizingError::Rule(e) => e.fmt(f),
            SizingError::Plan(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SizingError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SizingError::Cpus(e) => Some(e),
            SizingError::Rule(e) => e.source(),
            SizingError::Plan(e) => e.source(),
        }
    }
}

/// The CPU sizing of this host for these settings.
pub(crate) fn cpu_sizing(settings: &Settings) -> Result<CpuSizing, SizingError> {
    let root = Path::new("/");
    let reading = read_cpus(root).map_err(SizingError::Cpus)?;
    // An unreadable quota is no quota: the decision line says `quota none`.
    let quota = read_cpu_quota(root).ok().flatten();
    let inputs = CpuInputs::from_reading(&reading, quota);
    size_for(settings, &inputs).map_err(SizingError::Rule)
}

/// The plan before the master is loaded: what `--check` prints and what the launcher starts with.
pub(crate) fn plan_for_this_host(settings: &Settings) -> Result<(CpuSizing, Plan), SizingError> {
    let sizing = cpu_sizing(settings)?;
    let plan = plan::plan(settings, &sizing, None).map_err(SizingError::Plan)?;
    Ok((sizing, plan))
}

/// The memory fit, run once the master is ready: its private memory stands for each worker's
/// (MEM-7); logs the decision line with the fit and any WARNING (SIZE-2, MEM-10, MEM-11).
pub(crate) fn sizer(
    settings: &Settings,
    sizing: CpuSizing,
) -> impl FnMut(u32) -> usize + Send + 'static {
    let reject_fraction = settings.memory.reject_fraction;
    let headroom = settings.cluster.memory_headroom_gb;
    move |master_pid| {
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
    }
}

/// Memory as the start's fit reads it, for a worker more at run time (`supervisor::scale`):
/// the master's private memory stands for the new worker's (MEM-7), what is in use now is the
/// cgroup's (or the master's alone outside one). None: no limit to fit under, or unreadable.
pub(crate) fn memory_room(
    settings: &Settings,
) -> impl FnMut(u32) -> Option<crate::supervisor::scale::MemoryRoom> + Send + 'static {
    let reject_fraction = settings.memory.reject_fraction;
    let headroom_gb = settings.cluster.memory_headroom_gb;
    move |master_pid| {
        let root = Path::new("/");
        let per_worker = read_process_memory(root, master_pid).ok()?.rss_anon;
        let cgroup = read_cgroup_memory(root).ok()?;
        let refuse_at = refuse_threshold(cgroup.effective_limit(), reject_fraction)?;
        Some(crate::supervisor::scale::MemoryRoom {
            refuse_at,
            per_worker,
            in_use: cgroup.anon.max(per_worker),
            headroom_gb,
        })
    }
}

/// Once every worker is ready: what they all use idle, with a WARNING when less than the
/// headroom is left under the refusal threshold (MEM-12, MEM-13).
pub(crate) fn idle_report(settings: &Settings) -> impl FnMut(&[u32]) + Send + 'static {
    let reject_fraction = settings.memory.reject_fraction;
    let headroom = settings.cluster.memory_headroom_gb;
    move |pids: &[u32]| {
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
    }
}
