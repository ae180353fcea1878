//! The memory of the processes' own cgroup (STATUS-3, MEM-3..5): private memory (v2
//! `memory.stat` `anon`, v1 `total_rss`), page cache (`file`, v1 `total_cache`) and the limit —
//! the group's own, and separately the tightest on an enclosing group. Only the group's own limit
//! makes it "a cgroup of the service's own" (MEM-4): a limit only on an enclosing slice is shared
//! with whatever else runs there, so the cluster's guard cannot measure against it (MEM-5).

use std::path::{Path, PathBuf};

use super::cgroup::{self, CgroupChain, CgroupVersion, Hierarchy};
use super::unreadable::{read_optional, read_text, Unreadable};

/// cgroup v1 writes "no limit" as a huge page-aligned number (9223372036854771712); anything at
/// or above 2^60 bytes (an exbibyte) is taken as none.
pub const NO_LIMIT_AT: u64 = 1 << 60;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMemory {
    pub version: CgroupVersion,
    /// The processes' own group directory.
    pub group: PathBuf,
    /// Private memory in bytes: what the memory guard measures.
    pub anon: u64,
    /// Page cache in bytes (not counted against the guard).
    pub file: u64,
    /// The limit on the group itself.
    pub own_limit: Option<u64>,
    /// The tightest limit on an enclosing group, if any.
    pub enclosing_limit: Option<EnclosingLimit>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnclosingLimit {
    pub bytes: u64,
    pub group: PathBuf,
}

impl CgroupMemory {
    /// The tightest limit that applies to the processes at all, own or enclosing.
    pub fn effective_limit(&self) -> Option<u64> {
        let enclosing = self.enclosing_limit.as_ref().map(|e| e.bytes);
        match (self.own_limit, enclosing) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Parses `memory.stat` into (private, page cache) bytes.
pub fn parse_memory_stat(text: &str, version: CgroupVersion) -> Result<(u64, u64), String> {
    let (anon_key, file_key) = match version {
        CgroupVersion::V2 => ("anon", "file"),
        CgroupVersion::V1 => ("total_rss", "total_cache"),
    };
    let field = |key: &str| -> Result<u64, String> {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .ok_or_else(|| format!("memory.stat has no {key}"))?;
        let value = line.split_whitespace().nth(1).unwrap_or("");
        value
            .parse()
            .map_err(|_| format!("memory.stat {key} {value:?} is not a number"))
    };
    Ok((field(anon_key)?, field(file_key)?))
}

/// Parses `memory.max` (v2: `max` or bytes) or `memory.limit_in_bytes` (v1: bytes, huge for none).
pub fn parse_memory_limit(text: &str) -> Result<Option<u64>, String> {
    let text = text.trim();
    if text == "max" {
        return Ok(None);
    }
    let bytes: u64 = text
        .parse()
        .map_err(|_| format!("memory limit {text:?} is not a number"))?;
    Ok((bytes < NO_LIMIT_AT).then_some(bytes))
}

fn limit_file(version: CgroupVersion) -> &'static str {
    match version {
        CgroupVersion::V2 => "memory.max",
        CgroupVersion::V1 => "memory.limit_in_bytes",
    }
}

fn read_limit(dir: &Path, version: CgroupVersion) -> Result<Option<u64>, Unreadable> {
    let path = dir.join(limit_file(version));
    match read_optional(&path)? {
        Some(text) => parse_memory_limit(&text).map_err(|why| Unreadable::parse(&path, why)),
        None => Ok(None),
    }
}

fn read_chain(chain: &CgroupChain) -> Result<CgroupMemory, Unreadable> {
    let group = chain.own().to_path_buf();
    let stat_path = group.join("memory.stat");
    let (anon, file) = parse_memory_stat(&read_text(&stat_path)?, chain.version)
        .map_err(|why| Unreadable::parse(&stat_path, why))?;
    let own_limit = read_limit(&group, chain.version)?;
    let mut enclosing_limit: Option<EnclosingLimit> = None;
    for dir in chain.dirs.iter().skip(1) {
        if let Some(bytes) = read_limit(dir, chain.version)? {
            if enclosing_limit.as_ref().is_none_or(|e| bytes < e.bytes) {
                enclosing_limit = Some(EnclosingLimit {
                    bytes,
                    group: dir.clone(),
                });
            }
        }
    }
    Ok(CgroupMemory {
        version: chain.version,
        group,
        anon,
        file,
        own_limit,
        enclosing_limit,
    })
}

/// The memory of this process's cgroup under `root`: the v1 `memory` hierarchy where there is
/// one (a hybrid machine's v2 hierarchy has no controllers), else v2.
pub fn read_cgroup_memory(root: &Path) -> Result<CgroupMemory, Unreadable> {
    let (memberships, mounts) = cgroup::read_self(root)?;
    let chain = cgroup::locate(&memberships, &mounts, root, Hierarchy::V1("memory"))
        .or_else(|v1| {
            cgroup::locate(&memberships, &mounts, root, Hierarchy::V2)
                .map_err(|v2| format!("{v1}; {v2}"))
        })
        .map_err(|why| Unreadable::new("memory cgroup", why))?;
    read_chain(&chain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::fixture::FakeRoot;

    const V2_STAT: &str = "anon 1048576\nfile 2097152\nkernel 4096\nfile_mapped 0\n";
    const V1_STAT: &str = "cache 5\nrss 6\ntotal_cache 3000\ntotal_rss 4000\ntotal_rss_huge 0\n";

    #[test]
    fn memory_stat_parses_by_version() {
        // spec: STATUS-3, MEM-3
        assert_eq!(
            parse_memory_stat(V2_STAT, CgroupVersion::V2),
            Ok((1_048_576, 2_097_152))
        );
        assert_eq!(
            parse_memory_stat(V1_STAT, CgroupVersion::V1),
            Ok((4000, 3000))
        );
        assert!(parse_memory_stat("anon 1\n", CgroupVersion::V2).is_err());
        assert!(parse_memory_stat("anon x\nfile 1\n", CgroupVersion::V2).is_err());
    }

    #[test]
    fn limits_parse_with_v1_unlimited_as_none() {
        assert_eq!(parse_memory_limit("max\n"), Ok(None));
        assert_eq!(
            parse_memory_limit("17179869184\n"),
            Ok(Some(17_179_869_184))
        );
        assert_eq!(parse_memory_limit("9223372036854771712\n"), Ok(None));
        assert_eq!(parse_memory_limit("1152921504606846976"), Ok(None));
        assert!(parse_memory_limit("lots").is_err());
    }

    #[test]
    fn v2_own_limit_is_the_services() {
        // spec: MEM-4, STATUS-3
        let root = FakeRoot::v2("/system.slice/fhir.service");
        root.write(
            "sys/fs/cgroup/system.slice/fhir.service/memory.stat",
            V2_STAT,
        );
        root.write(
            "sys/fs/cgroup/system.slice/fhir.service/memory.max",
            "17179869184\n",
        );
        root.write("sys/fs/cgroup/system.slice/memory.max", "max\n");
        let memory = read_cgroup_memory(root.path()).unwrap();
        assert_eq!((memory.anon, memory.file), (1_048_576, 2_097_152));
        assert_eq!(memory.own_limit, Some(17_179_869_184));
        assert_eq!(memory.enclosing_limit, None);
    }

    #[test]
    fn a_limit_only_on_an_enclosing_slice_is_not_the_services() {
        // spec: MEM-5, STATUS-24
        let root = FakeRoot::v2("/user.slice/fhir.service");
        root.write("sys/fs/cgroup/user.slice/fhir.service/memory.stat", V2_STAT);
        root.write("sys/fs/cgroup/user.slice/fhir.service/memory.max", "max\n");
        root.write("sys/fs/cgroup/user.slice/memory.max", "8589934592\n");
        let memory = read_cgroup_memory(root.path()).unwrap();
        assert_eq!(memory.own_limit, None);
        assert_eq!(
            memory.enclosing_limit.as_ref().map(|e| e.bytes),
            Some(8_589_934_592)
        );
        assert_eq!(memory.effective_limit(), Some(8_589_934_592));
    }

    #[test]
    fn v1_on_a_hybrid_machine_with_unlimited_as_none() {
        // spec: STATUS-3, MEM-5 — v1's "unlimited" is a huge number, not a limit.
        let root = FakeRoot::hybrid("/process_api/abc", "/", "/");
        root.write("sys/fs/cgroup/memory/process_api/abc/memory.stat", V1_STAT);
        root.write(
            "sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        root.write(
            "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        let memory = read_cgroup_memory(root.path()).unwrap();
        assert_eq!(memory.version, CgroupVersion::V1);
        assert_eq!((memory.anon, memory.file), (4000, 3000));
        assert_eq!((memory.own_limit, &memory.enclosing_limit), (None, &None));
        assert_eq!(memory.effective_limit(), None);
    }

    #[test]
    fn a_missing_memory_stat_is_unreadable_not_zero() {
        let root = FakeRoot::v2("/svc");
        let err = read_cgroup_memory(root.path()).unwrap_err();
        assert!(err.what.ends_with("memory.stat"), "{err}");
    }

    /// This host's memory controller and this process's group in it, read here from
    /// /proc/self/mountinfo and /proc/self/cgroup independently of the reader under test: the
    /// version, the mount point, and the group's path below it. None: no memory controller.
    fn host_memory_group() -> Option<(CgroupVersion, PathBuf)> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mounts: Vec<(&str, &str, &str)> = mountinfo
            .lines()
            .filter_map(|l| {
                let (left, right) = l.split_once(" - ")?;
                let mut r = right.split_whitespace();
                let fstype = r.next()?;
                let opts = r.nth(1).unwrap_or("");
                Some((left.split_whitespace().nth(4)?, fstype, opts))
            })
            .collect();
        let v1 = mounts
            .iter()
            .find(|(_, t, o)| *t == "cgroup" && o.split(',').any(|x| x == "memory"));
        let v2 = mounts.iter().find(|(m, t, _)| {
            *t == "cgroup2"
                && std::fs::read_to_string(Path::new(m).join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
        });
        let (version, mount) = match (v1, v2) {
            (Some((m, _, _)), _) => (CgroupVersion::V1, *m),
            (None, Some((m, _, _))) => (CgroupVersion::V2, *m),
            (None, None) => return None,
        };
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let rel = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, names, path) = (f.next()?, f.next()?, f.next()?);
            let wanted = match version {
                CgroupVersion::V1 => names.split(',').any(|n| n == "memory"),
                CgroupVersion::V2 => id == "0" && names.is_empty(),
            };
            wanted.then(|| path.trim_start_matches('/').to_string())
        })?;
        Some((version, Path::new(mount).join(rel)))
    }

    #[test]
    fn this_machines_memory_cgroup_is_read_in_the_version_it_has() {
        // spec: STATUS-3, MEM-3 — against the real kernel, in whichever version this host has
        // (v1 on a hybrid host, else v2); the other version is checked against fixtures above.
        let Some((version, group)) = host_memory_group() else {
            let err = read_cgroup_memory(Path::new("/")).expect_err("no controller, no reading");
            println!(
                "NOT CHECKED on this host: no memory cgroup controller, so neither v1 nor v2 was \
                 read from a real kernel (fixtures only); the reader said: {err}"
            );
            return;
        };
        let memory = read_cgroup_memory(Path::new("/")).expect("the memory cgroup is readable");
        assert_eq!(memory.version, version, "the version this host has");
        assert_eq!(memory.group, group, "this process's own group");
        // The private memory is what the kernel says of the group, and this process has some.
        let stat = std::fs::read_to_string(group.join("memory.stat")).expect("memory.stat");
        let (kernel_anon, _) = parse_memory_stat(&stat, version).expect("memory.stat parses");
        assert!(memory.anon > 0, "this test process has private memory");
        assert!(
            memory.anon.abs_diff(kernel_anon) < 64 << 20,
            "read {} vs the kernel's {kernel_anon}",
            memory.anon
        );
        let other = match version {
            CgroupVersion::V1 => "cgroup v2 (this host binds the memory controller to v1)",
            CgroupVersion::V2 => "cgroup v1 (this host has no v1 memory hierarchy)",
        };
        println!(
            "NOT CHECKED on this host: {other} against a real kernel; that version's reading \
             is checked against fixtures only"
        );
    }
}
