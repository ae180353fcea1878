//! How many processes the OOM killer has ended in this process's cgroup (its children's too,
//! when they share it, as a service's do): a process that died by `SIGKILL` while the count rose
//! was most likely ended for the memory it took, not by someone outside (DEC-73).

use std::path::Path;

use super::cgroup::{self, Hierarchy};

/// The `oom_kill` count: the v2 group's `memory.events`, else the v1 memory group's
/// `memory.oom_control`, else the machine's `/proc/vmstat` (the OOM killer of a host without a
/// memory cgroup); None when none of them can be read.
pub(crate) fn read_oom_kills(root: &Path) -> Option<u64> {
    let from_group = || {
        let (memberships, mounts) = cgroup::read_self(root).ok()?;
        [
            (Hierarchy::V1("memory"), "memory.oom_control"),
            (Hierarchy::V2, "memory.events"),
        ]
        .into_iter()
        .find_map(|(want, file)| {
            let chain = cgroup::locate(&memberships, &mounts, root, want).ok()?;
            parse_oom_kill(&std::fs::read_to_string(chain.own().join(file)).ok()?)
        })
    };
    from_group()
        .or_else(|| parse_oom_kill(&std::fs::read_to_string(root.join("proc/vmstat")).ok()?))
}

/// The `oom_kill N` line of a flat-keyed file (`memory.events`, `memory.oom_control`,
/// `/proc/vmstat`).
pub(crate) fn parse_oom_kill(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == "oom_kill").then(|| value.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::fixture::FakeRoot;

    #[test]
    fn the_oom_kill_line_is_read_from_each_kind_of_file() {
        assert_eq!(
            parse_oom_kill("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n"),
            Some(2)
        );
        assert_eq!(
            parse_oom_kill("oom_kill_disable 0\nunder_oom 0\noom_kill 7\n"),
            Some(7)
        );
        assert_eq!(parse_oom_kill("oom_kill_disable 0\n"), None);
        assert_eq!(parse_oom_kill("oom_kill x\n"), None);
    }

    #[test]
    fn the_own_groups_count_or_the_machines() {
        let root = FakeRoot::v2("/system.slice/fhir.service");
        root.write("proc/vmstat", "oom_kill 40\n");
        assert_eq!(read_oom_kills(root.path()), Some(40), "no memory.events");
        root.write(
            "sys/fs/cgroup/system.slice/fhir.service/memory.events",
            "oom 1\noom_kill 1\n",
        );
        assert_eq!(read_oom_kills(root.path()), Some(1));
    }
}
