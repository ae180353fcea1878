//! Which processes still belong to a process the launcher started, read from `/proc`: those in
//! its process group, and those carrying its mark in their environment.
//!
//! Every process the launcher starts leads a process group of its own and gets
//! `FHIRCLUSTER_TREE=<run>/<generation>` in its environment. What it starts inherits both unless
//! it leaves the group (`setsid`, `setpgid`) and scrubs its environment too, so either finds it
//! (Jenkins' ProcessTreeKiller finds a build's leftovers by an environment cookie the same way).
//! A process whose arguments overwrite its environment's memory (`setproctitle`) loses the mark
//! but keeps the group. Zombies hold nothing (no port, no memory) and don't count.
//!
//! The parsers and [`belongs`] are pure; [`scan`] reads under a `root`.

use std::collections::BTreeSet;
use std::path::Path;

use crate::system::listen;

/// The environment variable that marks a started process and what it starts.
pub const TREE_VAR: &str = "FHIRCLUSTER_TREE";

/// The environment variables that belong to the launcher alone; its children must not inherit
/// them (with `NotifyAccess=main` their messages would be refused anyway). systemd's notify
/// protocol (`ops/notify.rs`) is what reads them; they are here, with the mark children do carry,
/// so the layers that start children need not import the operator's edge.
pub(crate) const NOTIFY_ENV: &[&str] = &["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// The mark of one started process: `<run>/<generation>`.
pub fn mark(run: &str, generation: u64) -> String {
    format!("{run}/{generation}")
}

/// What belongs: the processes in `groups`, and those whose mark matches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    pub groups: BTreeSet<u32>,
    pub mark: Mark,
    /// Never these (the scanner itself, the launcher).
    pub except: Vec<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Mark {
    #[default]
    None,
    /// One started process's mark (`<run>/<generation>`).
    Exactly(String),
    /// Every process of a run (`<run>/...`).
    Run(String),
}

impl Mark {
    fn matches(&self, value: &[u8]) -> bool {
        match self {
            Mark::None => false,
            Mark::Exactly(m) => value == m.as_bytes(),
            Mark::Run(run) => value
                .strip_prefix(run.as_bytes())
                .is_some_and(|rest| rest.starts_with(b"/")),
        }
    }
}

/// A process as `/proc/<pid>/stat` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub pid: u32,
    pub pgid: u32,
    /// Exited, waiting to be reaped (`Z`), or being torn down (`X`).
    pub gone: bool,
}

/// `/proc/<pid>/stat`: the state and the process group follow the `)` that ends the command name
/// (which may hold spaces and parentheses itself).
pub fn parse_stat(pid: u32, text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut f = rest.split_whitespace();
    let state = f.next()?;
    let _ppid = f.next()?;
    let pgid = f.next()?.parse().ok()?;
    Some(Stat {
        pid,
        pgid,
        gone: matches!(state, "Z" | "X" | "x"),
    })
}

/// The value of `name` in a `/proc/<pid>/environ` (NUL-separated `NAME=value` entries).
pub fn env_value<'a>(environ: &'a [u8], name: &str) -> Option<&'a [u8]> {
    environ.split(|&b| b == 0).find_map(|entry| {
        entry
            .strip_prefix(name.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
    })
}

/// Whether a live process belongs; `environ` is read only when the group doesn't decide it.
pub fn belongs(stat: &Stat, wanted: &Wanted, environ: impl FnOnce() -> Option<Vec<u8>>) -> bool {
    if stat.gone || wanted.except.contains(&stat.pid) {
        return false;
    }
    if wanted.groups.contains(&stat.pgid) {
        return true;
    }
    if wanted.mark == Mark::None {
        return false;
    }
    environ().is_some_and(|env| env_value(&env, TREE_VAR).is_some_and(|v| wanted.mark.matches(v)))
}

/// The live processes under `root` that belong (those whose files can't be read are not seen).
pub fn scan(root: &Path, wanted: &Wanted) -> Vec<Stat> {
    let mut found = Vec::new();
    let mut pids = listen::pids(root);
    pids.sort_unstable();
    for pid in pids {
        let proc_dir = root.join(format!("proc/{pid}"));
        let Ok(text) = std::fs::read_to_string(proc_dir.join("stat")) else {
            continue;
        };
        let Some(stat) = parse_stat(pid, &text) else {
            continue;
        };
        if belongs(&stat, wanted, || {
            std::fs::read(proc_dir.join("environ")).ok()
        }) {
            found.push(stat);
        }
    }
    found
}

/// `pid 12 (sleep 1000), pid 13 (node server.js)`: for log lines, at most `max` named.
pub fn describe(root: &Path, pids: &[u32], max: usize) -> String {
    let mut parts: Vec<String> = pids
        .iter()
        .take(max)
        .map(|&p| format!("pid {p} ({})", listen::command_of(root, p)))
        .collect();
    if pids.len() > max {
        parts.push(format!("and {} more", pids.len() - max));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::fixture::FakeRoot;

    fn stat(pid: u32, pgid: u32) -> Stat {
        Stat {
            pid,
            pgid,
            gone: false,
        }
    }

    #[test]
    fn stat_gives_the_group_and_whether_it_is_gone() {
        assert_eq!(
            parse_stat(42, "42 (my (odd) name) S 7 40 40 0"),
            Some(stat(42, 40))
        );
        assert!(parse_stat(42, "42 (x) Z 7 40 40 0").is_some_and(|s| s.gone));
        assert_eq!(parse_stat(42, "42 (x"), None);
        assert_eq!(parse_stat(42, "42 (x) S 7 y"), None);
    }

    #[test]
    fn the_mark_is_read_from_the_environment_exactly() {
        let env = b"PATH=/bin\0FHIRCLUSTER_TREE=123.9/4\0FHIRCLUSTER_TREEX=no\0";
        assert_eq!(env_value(env, TREE_VAR), Some(&b"123.9/4"[..]));
        assert_eq!(env_value(env, "PATH"), Some(&b"/bin"[..]));
        assert_eq!(env_value(env, "PAT"), None);
        assert!(Mark::Exactly(mark("123.9", 4)).matches(b"123.9/4"));
        assert!(!Mark::Exactly(mark("123.9", 4)).matches(b"123.9/41"));
        assert!(Mark::Run("123.9".into()).matches(b"123.9/41"));
        assert!(!Mark::Run("123.9".into()).matches(b"123.91/4"));
        assert!(!Mark::None.matches(b""));
    }

    #[test]
    fn a_process_belongs_by_its_group_or_its_mark_never_when_gone_or_excepted() {
        let wanted = Wanted {
            groups: BTreeSet::from([100]),
            mark: Mark::Exactly("r/1".into()),
            except: vec![5],
        };
        let marked = || Some(b"A=b\0FHIRCLUSTER_TREE=r/1\0".to_vec());
        let unread = || -> Option<Vec<u8>> { panic!("the group decides it") };
        assert!(belongs(&stat(101, 100), &wanted, unread));
        assert!(
            belongs(&stat(7, 7), &wanted, marked),
            "left the group, kept the mark"
        );
        assert!(!belongs(&stat(7, 7), &wanted, || Some(b"A=b\0".to_vec())));
        assert!(
            !belongs(&stat(7, 7), &wanted, || None),
            "environ unreadable"
        );
        assert!(!belongs(&stat(5, 100), &wanted, marked), "excepted");
        let zombie = Stat {
            gone: true,
            ..stat(101, 100)
        };
        assert!(!belongs(&zombie, &wanted, marked));
    }

    #[test]
    fn a_scan_finds_the_group_and_the_marked() {
        let root = FakeRoot::new();
        let proc = |pid: u32, pgid: u32, state: &str, env: &str| {
            root.write(
                &format!("proc/{pid}/stat"),
                &format!("{pid} (p{pid}) {state} 1 {pgid} {pgid} 0"),
            );
            root.write(&format!("proc/{pid}/environ"), env);
            root.write(&format!("proc/{pid}/cmdline"), &format!("p{pid}\0--x\0"));
        };
        proc(10, 10, "S", "");
        proc(11, 10, "S", "");
        proc(12, 10, "Z", "");
        proc(20, 20, "S", "FHIRCLUSTER_TREE=run/2\0");
        proc(21, 21, "S", "FHIRCLUSTER_TREE=run/3\0");
        proc(30, 30, "S", "");
        let wanted = Wanted {
            groups: BTreeSet::from([10]),
            mark: Mark::Run("run".into()),
            except: vec![],
        };
        let pids: Vec<u32> = scan(root.path(), &wanted).iter().map(|s| s.pid).collect();
        assert_eq!(pids, [10, 11, 20, 21]);
        assert_eq!(
            describe(root.path(), &pids, 2),
            "pid 10 (p10 --x), pid 11 (p11 --x), and 2 more"
        );
    }
}
