//! The CPU quota on the launcher's cgroup or any enclosing one (SIZE-8, DEC-22): cgroup v2
//! `cpu.max` (`150000 100000` = 1.5 CPUs, `max 100000` = none) and cgroup v1
//! `cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1 = none). The tightest wins, wherever it is: a
//! quota on an enclosing slice limits the launcher's processes as surely as one on its own group.

use std::path::{Path, PathBuf};

use super::cgroup::{self, CgroupChain, Hierarchy};
use super::unreadable::{read_optional, read_text, Unreadable};

/// A quota that applies, in CPUs, and the file that set it.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuQuota {
    pub cpus: f64,
    /// `cpu.max` or `cpu.cfs_quota_us`: what the decision line names.
    pub file: &'static str,
    /// The group directory the file is in.
    pub group: PathBuf,
}

/// Parses a v2 `cpu.max`: `None` for `max ...`.
pub fn parse_cpu_max(text: &str) -> Result<Option<f64>, String> {
    let mut fields = text.split_whitespace();
    let quota = fields.next().ok_or("cpu.max is empty")?;
    if quota == "max" {
        return Ok(None);
    }
    let quota: u64 = quota
        .parse()
        .map_err(|_| format!("cpu.max quota {quota:?} is not a number"))?;
    let period = match fields.next() {
        Some(p) => p
            .parse::<u64>()
            .map_err(|_| format!("cpu.max period {p:?} is not a number"))?,
        None => 100_000,
    };
    cpus(quota, period)
}

/// Parses v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us`: `None` for a quota of -1.
pub fn parse_cfs(quota_text: &str, period_text: &str) -> Result<Option<f64>, String> {
    let quota: i64 = quota_text
        .trim()
        .parse()
        .map_err(|_| format!("cpu.cfs_quota_us {:?} is not a number", quota_text.trim()))?;
    if quota < 0 {
        return Ok(None);
    }
    let period: u64 = period_text
        .trim()
        .parse()
        .map_err(|_| format!("cpu.cfs_period_us {:?} is not a number", period_text.trim()))?;
    cpus(quota.unsigned_abs(), period)
}

fn cpus(quota: u64, period: u64) -> Result<Option<f64>, String> {
    if period == 0 {
        return Err("the CPU period is 0".to_string());
    }
    Ok(Some(quota as f64 / period as f64))
}

/// The smallest of the quotas found, if any.
pub fn tightest(quotas: impl IntoIterator<Item = CpuQuota>) -> Option<CpuQuota> {
    quotas
        .into_iter()
        .fold(None, |best: Option<CpuQuota>, q| match best {
            Some(b) if b.cpus <= q.cpus => Some(b),
            _ => Some(q),
        })
}

/// Every quota on a v2 chain.
fn v2_quotas(chain: &CgroupChain) -> Result<Vec<CpuQuota>, Unreadable> {
    let mut found = Vec::new();
    for dir in &chain.dirs {
        let path = dir.join("cpu.max");
        if let Some(text) = read_optional(&path)? {
            if let Some(cpus) = parse_cpu_max(&text).map_err(|why| Unreadable::parse(&path, why))? {
                found.push(CpuQuota {
                    cpus,
                    file: "cpu.max",
                    group: dir.clone(),
                });
            }
        }
    }
    Ok(found)
}

/// Every quota on a v1 `cpu` chain.
fn v1_quotas(chain: &CgroupChain) -> Result<Vec<CpuQuota>, Unreadable> {
    let mut found = Vec::new();
    for dir in &chain.dirs {
        let quota_path = dir.join("cpu.cfs_quota_us");
        let Some(quota) = read_optional(&quota_path)? else {
            continue;
        };
        let period = read_text(&dir.join("cpu.cfs_period_us"))?;
        if let Some(cpus) =
            parse_cfs(&quota, &period).map_err(|why| Unreadable::parse(&quota_path, why))?
        {
            found.push(CpuQuota {
                cpus,
                file: "cpu.cfs_quota_us",
                group: dir.clone(),
            });
        }
    }
    Ok(found)
}

/// The tightest CPU quota on this process's groups (v2 and v1) and every enclosing one;
/// `Ok(None)` when there is none. A hierarchy this process is not in, or that is not mounted,
/// has no quota for it.
pub fn read_cpu_quota(root: &Path) -> Result<Option<CpuQuota>, Unreadable> {
    let (memberships, mounts) = cgroup::read_self(root)?;
    let mut found = Vec::new();
    if let Ok(chain) = cgroup::locate(&memberships, &mounts, root, Hierarchy::V2) {
        found.extend(v2_quotas(&chain)?);
    }
    if let Ok(chain) = cgroup::locate(&memberships, &mounts, root, Hierarchy::V1("cpu")) {
        found.extend(v1_quotas(&chain)?);
    }
    Ok(tightest(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::fixture::FakeRoot;

    #[test]
    fn cpu_max_parses() {
        assert_eq!(parse_cpu_max("max 100000\n"), Ok(None));
        assert_eq!(parse_cpu_max("150000 100000\n"), Ok(Some(1.5)));
        assert_eq!(parse_cpu_max("200000\n"), Ok(Some(2.0)));
        assert!(parse_cpu_max("lots 100000").is_err());
        assert!(parse_cpu_max("100 0").is_err());
        assert!(parse_cpu_max("").is_err());
    }

    #[test]
    fn cfs_parses() {
        assert_eq!(parse_cfs("-1\n", "100000\n"), Ok(None));
        assert_eq!(parse_cfs("250000\n", "100000\n"), Ok(Some(2.5)));
        assert!(parse_cfs("x", "100000").is_err());
    }

    #[test]
    fn v2_quota_on_an_ancestor_applies() {
        // spec: SIZE-8, DEC-22 — the quota is on the enclosing slice, not on the service.
        let root = FakeRoot::v2("/system.slice/fhir.service");
        root.write(
            "sys/fs/cgroup/system.slice/fhir.service/cpu.max",
            "max 100000\n",
        );
        root.write("sys/fs/cgroup/system.slice/cpu.max", "150000 100000\n");
        let quota = read_cpu_quota(root.path()).unwrap().expect("a quota");
        assert_eq!(quota.cpus, 1.5);
        assert_eq!(quota.file, "cpu.max");
        assert!(quota.group.ends_with("sys/fs/cgroup/system.slice"));
    }

    #[test]
    fn the_tightest_quota_wins() {
        // spec: DEC-22
        let root = FakeRoot::v2("/a/b");
        root.write("sys/fs/cgroup/a/b/cpu.max", "300000 100000\n");
        root.write("sys/fs/cgroup/a/cpu.max", "200000 100000\n");
        let quota = read_cpu_quota(root.path()).unwrap().expect("a quota");
        assert_eq!(quota.cpus, 2.0);
    }

    #[test]
    fn v1_quota_applies_on_a_hybrid_machine() {
        // spec: DEC-22 — v1 cpu.cfs_quota_us, found through mountinfo, not a fixed path.
        let root = FakeRoot::hybrid("/", "/docker/abc", "/");
        root.write("sys/fs/cgroup/cpu/docker/abc/cpu.cfs_quota_us", "250000\n");
        root.write("sys/fs/cgroup/cpu/docker/abc/cpu.cfs_period_us", "100000\n");
        root.write("sys/fs/cgroup/cpu/docker/cpu.cfs_quota_us", "-1\n");
        root.write("sys/fs/cgroup/cpu/docker/cpu.cfs_period_us", "100000\n");
        let quota = read_cpu_quota(root.path()).unwrap().expect("a quota");
        assert_eq!(quota.cpus, 2.5);
        assert_eq!(quota.file, "cpu.cfs_quota_us");
    }

    #[test]
    fn v1_and_v2_together_take_the_tighter() {
        // spec: DEC-22
        let root = FakeRoot::hybrid("/", "/", "/svc");
        root.write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "300000\n");
        root.write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
        root.write("sys/fs/cgroup/unified/svc/cpu.max", "120000 100000\n");
        let quota = read_cpu_quota(root.path()).unwrap().expect("a quota");
        assert_eq!((quota.cpus, quota.file), (1.2, "cpu.max"));
    }

    #[test]
    fn no_quota_anywhere_is_none() {
        let root = FakeRoot::hybrid("/", "/", "/");
        root.write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
        root.write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
        assert_eq!(read_cpu_quota(root.path()), Ok(None));
    }

    #[test]
    fn this_machine_reads_without_error() {
        // This machine is hybrid with no quota on the cpu hierarchy's root; whatever it has, the
        // read must succeed and any quota must be positive.
        let quota = read_cpu_quota(Path::new("/")).expect("cgroups are readable here");
        if let Some(q) = quota {
            assert!(q.cpus > 0.0);
        }
    }
}
