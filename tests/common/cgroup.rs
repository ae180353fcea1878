//! The host's memory cgroup as the tests see it, read independently of the launcher's own reader:
//! where the memory controller is (cgroup v1 or v2), this test process's memory group, and a
//! child memory group the test creates (with or without a limit) to run a launcher in. Works on
//! v1 (`memory.limit_in_bytes`, `total_rss`) and v2 (`memory.max`, `anon`); where neither can
//! be used (no controller, not root) it says exactly what is missing, so the test fails saying
//! so instead of passing without checking.

use super::*;

/// Where the memory controller is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemoryController {
    /// cgroup v1: the `memory` hierarchy's mount point.
    V1(PathBuf),
    /// cgroup v2: the unified hierarchy's mount point, with `memory` among its controllers.
    V2(PathBuf),
}

impl MemoryController {
    pub fn mount(&self) -> &Path {
        match self {
            MemoryController::V1(p) | MemoryController::V2(p) => p,
        }
    }

    /// The `memory.stat` field that is private memory (what the memory guard measures).
    pub fn private_field(&self) -> &'static str {
        match self {
            MemoryController::V1(_) => "total_rss",
            MemoryController::V2(_) => "anon",
        }
    }

    /// The file that holds a group's limit.
    pub fn limit_file(&self) -> &'static str {
        match self {
            MemoryController::V1(_) => "memory.limit_in_bytes",
            MemoryController::V2(_) => "memory.max",
        }
    }
}

/// (mount point, fstype, super options) of every cgroup mount, from /proc/self/mountinfo.
fn cgroup_mounts() -> Vec<(PathBuf, String, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let mount = left.split_whitespace().nth(4)?;
            let mut r = right.split_whitespace();
            let (fstype, _source, opts) = (r.next()?, r.next()?, r.next().unwrap_or(""));
            fstype
                .starts_with("cgroup")
                .then(|| (PathBuf::from(mount), fstype.to_string(), opts.to_string()))
        })
        .collect()
}

/// The host's memory controller: a v1 `memory` hierarchy if there is one (a hybrid host binds
/// the controller there), else a v2 hierarchy that offers `memory`; or why there is none.
pub fn memory_controller() -> Result<MemoryController, String> {
    let mounts = cgroup_mounts();
    if let Some((m, _, _)) = mounts
        .iter()
        .find(|(_, t, o)| t == "cgroup" && o.split(',').any(|x| x == "memory"))
    {
        return Ok(MemoryController::V1(m.clone()));
    }
    for (m, t, _) in &mounts {
        if t == "cgroup2" {
            let controllers =
                std::fs::read_to_string(m.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                return Ok(MemoryController::V2(m.clone()));
            }
        }
    }
    Err(format!(
        "no memory cgroup controller on this host (cgroup mounts: {mounts:?})"
    ))
}

/// This test process's own memory group directory, from /proc/self/cgroup.
pub fn own_memory_group(ctl: &MemoryController) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let rel = text
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, names, path) = (f.next()?, f.next()?, f.next()?);
            let wanted = match ctl {
                MemoryController::V1(_) => names.split(',').any(|c| c == "memory"),
                MemoryController::V2(_) => id == "0" && names.is_empty(),
            };
            wanted.then(|| path.to_string())
        })
        .ok_or_else(|| format!("no memory group in /proc/self/cgroup:\n{text}"))?;
    Ok(ctl.mount().join(rel.trim_start_matches('/')))
}

/// A group's own limit in bytes; None for none ("max", or v1's huge "unlimited").
pub fn group_limit(ctl: &MemoryController, group: &Path) -> Option<u64> {
    std::fs::read_to_string(group.join(ctl.limit_file()))
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|l| *l < 1 << 60)
}

/// Asserts the snapshot's `memory` (its `m`) measures against `limit` with the default fractions:
/// refusal at 0.85 × limit, abort at 0.92 × limit (MEM-1, MEM-2).
pub fn assert_thresholds(m: &Value, limit: u64) {
    assert_eq!(m["limit"].as_u64(), Some(limit), "the limit: {m}");
    for (field, fraction) in [("rejectAt", 0.85), ("abortAt", 0.92)] {
        assert_eq!(
            m[field].as_u64(),
            Some((limit as f64 * fraction) as u64),
            "{field}: {m}"
        );
    }
}

/// A child memory cgroup of the hierarchy's root, created by the test and removed on drop:
/// processes still in it are waited for, then moved to the root, then the directory goes.
pub struct MemCgroup {
    pub ctl: MemoryController,
    pub path: PathBuf,
}

impl MemCgroup {
    /// Creates `name` with `limit` (None: no limit of its own), or says exactly what is missing.
    pub fn create(name: &str, limit: Option<u64>) -> Result<MemCgroup, String> {
        let ctl = memory_controller()?;
        if let MemoryController::V2(root) = &ctl {
            // A v2 child has the memory files only if its parent hands the controller down.
            let control = root.join("cgroup.subtree_control");
            let on = std::fs::read_to_string(&control).unwrap_or_default();
            if !on.split_whitespace().any(|c| c == "memory") {
                std::fs::write(&control, "+memory").map_err(|e| {
                    format!(
                        "can't enable the memory controller in {}: {e} (needs root)",
                        control.display()
                    )
                })?;
            }
        }
        let path = ctl.mount().join(name);
        std::fs::create_dir(&path).map_err(|e| {
            format!(
                "can't create the memory cgroup {}: {e} (needs root)",
                path.display()
            )
        })?;
        let group = MemCgroup { ctl, path };
        if let Some(limit) = limit {
            let file = group.path.join(group.ctl.limit_file());
            std::fs::write(&file, limit.to_string())
                .map_err(|e| format!("can't write {}: {e}", file.display()))?;
        }
        Ok(group)
    }

    /// A group named after this test process and `what`, or a panic saying why it can't be.
    pub fn for_test(what: &str, limit: Option<u64>) -> MemCgroup {
        let name = format!("fhircluster-test-{}-{what}", std::process::id());
        MemCgroup::create(&name, limit)
            .unwrap_or_else(|e| panic!("this test needs a child memory cgroup: {e}"))
    }

    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// A wrapper for `spawn_wrapped`: joins this cgroup, then `exec`s the launcher.
    pub fn wrapper(&self) -> Vec<String> {
        vec![
            "sh".to_string(),
            "-c".to_string(),
            "echo $$ > \"$0\" && exec \"$@\"".to_string(),
            self.procs_file().display().to_string(),
        ]
    }

    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// A `memory.stat` field.
    pub fn stat(&self, field: &str) -> Option<u64> {
        let text = std::fs::read_to_string(self.path.join("memory.stat")).ok()?;
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == field).then(|| v.trim().parse().ok()).flatten()
        })
    }

    /// The group's private memory, as the kernel counts it (v1 `total_rss`, v2 `anon`).
    pub fn private_memory(&self) -> Option<u64> {
        self.stat(self.ctl.private_field())
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.pids().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        for pid in self.pids() {
            let _ = std::fs::write(self.ctl.mount().join("cgroup.procs"), pid.to_string());
        }
        if let Err(e) = std::fs::remove_dir(&self.path) {
            eprintln!(
                "could not remove the test cgroup {}: {e}",
                self.path.display()
            );
        }
    }
}
