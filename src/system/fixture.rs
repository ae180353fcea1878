//! Test fixtures: a fake machine's files in a temporary directory, used as the readers' root.

use std::path::{Path, PathBuf};

pub(crate) struct FakeRoot {
    dir: tempfile::TempDir,
}

impl FakeRoot {
    pub(crate) fn new() -> FakeRoot {
        FakeRoot {
            dir: tempfile::tempdir().expect("a temporary directory for the fixture"),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` at `relative` (e.g. `proc/self/cgroup`), creating the directories.
    pub(crate) fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("fixture directory");
        }
        std::fs::write(&path, text).expect("fixture file");
        path
    }

    /// A hybrid machine like the one the project runs on: v1 controllers each at
    /// `/sys/fs/cgroup/<ctrl>`, and v2 at `/sys/fs/cgroup/unified` with no controllers.
    pub(crate) fn hybrid(memory_group: &str, cpu_group: &str, unified_group: &str) -> FakeRoot {
        let root = FakeRoot::new();
        root.write(
            "proc/self/cgroup",
            &format!(
                "9:name=systemd:/\n4:memory:{memory_group}\n2:cpuacct:/\n1:cpu:{cpu_group}\n0::{unified_group}\n"
            ),
        );
        root.write(
            "proc/self/mountinfo",
            "23 1 0:21 / / rw,relatime - overlay overlay rw\n\
             31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
             32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
             33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
             35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
             40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
        );
        root
    }

    /// A cgroup v2-only machine, the process in `group`.
    pub(crate) fn v2(group: &str) -> FakeRoot {
        let root = FakeRoot::new();
        root.write("proc/self/cgroup", &format!("0::{group}\n"));
        root.write(
            "proc/self/mountinfo",
            "23 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw\n\
             30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        root
    }
}
