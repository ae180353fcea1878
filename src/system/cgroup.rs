//! Where this process's cgroups are, found from `/proc/self/cgroup` and `/proc/self/mountinfo`
//! rather than assumed: a machine may have cgroup v2 alone (`/sys/fs/cgroup`), v1 controllers each
//! at their own mount, or both (a hybrid: v1 controllers under `/sys/fs/cgroup/<ctrl>` and a v2
//! hierarchy with no controllers at `/sys/fs/cgroup/unified`), and a container may see its group
//! as the root of a mount.
//!
//! The parsers are pure; `locate` puts a membership and its mount together into the chain of
//! directories from the process's own group up to the root of that mount, which is what a reader
//! walks to find a limit on the group "or any enclosing one".

use std::path::{Path, PathBuf};

use super::unreadable::{read_text, under_root, Unreadable};

/// One line of `/proc/<pid>/mountinfo` that mounts a cgroup hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMount {
    /// The path inside the hierarchy that is mounted (`/` unless a container sees a subtree).
    pub root: String,
    /// Where it is mounted, absolute on the machine.
    pub mount_point: PathBuf,
    pub version: CgroupVersion,
    /// v1: the controllers of this hierarchy (`cpu`, `cpuacct`, `memory`, `name=systemd` ...).
    pub controllers: Vec<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// One line of `/proc/<pid>/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    pub hierarchy_id: u32,
    /// Empty for the v2 hierarchy (`0::/path`).
    pub controllers: Vec<String>,
    pub path: String,
}

/// Which hierarchy a reader wants.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Hierarchy<'a> {
    /// The v1 hierarchy that has this controller (`cpu`, `memory`).
    V1(&'a str),
    /// The unified (v2) hierarchy.
    V2,
}

/// A process's group in one hierarchy, as directories on the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupChain {
    pub version: CgroupVersion,
    /// The process's own group first, then each enclosing one, up to the root of the mount.
    pub dirs: Vec<PathBuf>,
}

impl CgroupChain {
    /// The process's own group.
    pub fn own(&self) -> &Path {
        // `locate` always puts at least the own group in the chain.
        self.dirs
            .first()
            .map(PathBuf::as_path)
            .unwrap_or(Path::new("/"))
    }
}

/// Parses `/proc/<pid>/cgroup`. Lines that are not `id:controllers:path` are skipped.
pub fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let hierarchy_id = parts.next()?.trim().parse().ok()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            Some(Membership {
                hierarchy_id,
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: path.to_string(),
            })
        })
        .collect()
}

/// Parses the cgroup mounts out of `/proc/<pid>/mountinfo`:
/// `id parent maj:min root mount-point options [optional...] - fstype source super-options`.
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fields: Vec<&str> = before.split_whitespace().collect();
            let root = unescape(fields.get(3)?);
            let mount_point = PathBuf::from(unescape(fields.get(4)?));
            let mut tail = after.split_whitespace();
            let fstype = tail.next()?;
            let _source = tail.next();
            let super_options = tail.next().unwrap_or("");
            let version = match fstype {
                "cgroup2" => CgroupVersion::V2,
                "cgroup" => CgroupVersion::V1,
                _ => return None,
            };
            let controllers = match version {
                CgroupVersion::V2 => Vec::new(),
                CgroupVersion::V1 => super_options
                    .split(',')
                    .filter(|o| !matches!(*o, "rw" | "ro") && !o.is_empty())
                    .map(str::to_string)
                    .collect(),
            };
            Some(CgroupMount {
                root,
                mount_point,
                version,
                controllers,
            })
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash in paths as `\040` etc.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(byte) = u8::try_from(value) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The process's group in `want`, as a chain of directories under `root`.
pub fn locate(
    memberships: &[Membership],
    mounts: &[CgroupMount],
    root: &Path,
    want: Hierarchy<'_>,
) -> Result<CgroupChain, String> {
    let (membership, mount) = match want {
        Hierarchy::V2 => (
            memberships
                .iter()
                .find(|m| m.hierarchy_id == 0 && m.controllers.is_empty()),
            mounts.iter().find(|m| m.version == CgroupVersion::V2),
        ),
        Hierarchy::V1(controller) => (
            memberships
                .iter()
                .find(|m| m.hierarchy_id != 0 && m.controllers.iter().any(|c| c == controller)),
            mounts.iter().find(|m| {
                m.version == CgroupVersion::V1 && m.controllers.iter().any(|c| c == controller)
            }),
        ),
    };
    let name = match want {
        Hierarchy::V2 => "the cgroup v2 hierarchy".to_string(),
        Hierarchy::V1(c) => format!("the cgroup v1 {c} hierarchy"),
    };
    let membership = membership.ok_or_else(|| format!("this process is in no group of {name}"))?;
    let mount = mount.ok_or_else(|| format!("{name} is not mounted"))?;
    let relative = relative_to_mount(&membership.path, &mount.root).ok_or_else(|| {
        format!(
            "the group {} is outside the mounted part {} of {name}",
            membership.path, mount.root
        )
    })?;
    let base = under_root(root, &mount.mount_point);
    let mut dirs = Vec::new();
    let mut current = relative;
    loop {
        dirs.push(if current.as_os_str().is_empty() {
            base.clone()
        } else {
            base.join(&current)
        });
        if !current.pop() {
            break;
        }
    }
    Ok(CgroupChain {
        version: mount.version,
        dirs,
    })
}

/// The group's path below the mount's root, or None when the mount does not contain it.
fn relative_to_mount(group: &str, mount_root: &str) -> Option<PathBuf> {
    let group = group.trim_end_matches(" (deleted)");
    let relative = Path::new(group).strip_prefix(mount_root).ok()?;
    Some(relative.to_path_buf())
}

/// Reads `/proc/self/cgroup` and `/proc/self/mountinfo` under `root`, for [`locate`].
pub(crate) fn read_self(root: &Path) -> Result<(Vec<Membership>, Vec<CgroupMount>), Unreadable> {
    let memberships = parse_proc_cgroup(&read_text(&root.join("proc/self/cgroup"))?);
    let mounts = parse_mountinfo(&read_text(&root.join("proc/self/mountinfo"))?);
    Ok((memberships, mounts))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_CGROUP: &str =
        "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/svc\n3:cpuset:/\n0::/\n";
    const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
";

    #[test]
    fn hybrid_finds_each_controller_at_its_own_mount() {
        let members = parse_proc_cgroup(HYBRID_CGROUP);
        let mounts = parse_mountinfo(HYBRID_MOUNTS);
        assert_eq!(mounts.len(), 4, "the tmpfs is not a cgroup mount");
        let memory = locate(&members, &mounts, Path::new("/"), Hierarchy::V1("memory")).unwrap();
        assert_eq!(
            memory.dirs,
            vec![
                PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"),
                PathBuf::from("/sys/fs/cgroup/memory/process_api"),
                PathBuf::from("/sys/fs/cgroup/memory"),
            ]
        );
        // `cpu` must not match `cpuset`, and must match the combined `cpu,cpuacct` mount.
        let cpu = locate(&members, &mounts, Path::new("/r"), Hierarchy::V1("cpu")).unwrap();
        assert_eq!(cpu.own(), Path::new("/r/sys/fs/cgroup/cpu,cpuacct/svc"));
        let unified = locate(&members, &mounts, Path::new("/"), Hierarchy::V2).unwrap();
        assert_eq!(unified.dirs, vec![PathBuf::from("/sys/fs/cgroup/unified")]);
        assert!(locate(&members, &mounts, Path::new("/"), Hierarchy::V1("pids")).is_err());
    }

    #[test]
    fn a_container_sees_its_group_as_the_mount_root() {
        let members = parse_proc_cgroup("0::/docker/abc/app\n");
        let mounts = parse_mountinfo(
            "30 23 0:26 /docker/abc /sys/fs/cgroup ro,relatime - cgroup2 cgroup2 rw\n",
        );
        let chain = locate(&members, &mounts, Path::new("/"), Hierarchy::V2).unwrap();
        assert_eq!(
            chain.dirs,
            vec![
                PathBuf::from("/sys/fs/cgroup/app"),
                PathBuf::from("/sys/fs/cgroup")
            ]
        );
        let outside = parse_proc_cgroup("0::/other\n");
        assert!(locate(&outside, &mounts, Path::new("/"), Hierarchy::V2).is_err());
    }

    #[test]
    fn mount_points_are_unescaped() {
        let mounts = parse_mountinfo("1 2 0:1 / /mnt/my\\040cgroup rw - cgroup2 none rw\n");
        assert_eq!(mounts[0].mount_point, PathBuf::from("/mnt/my cgroup"));
        assert_eq!(unescape("a\\134b\\0"), "a\\b\\0");
    }
}
