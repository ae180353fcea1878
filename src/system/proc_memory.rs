//! Memory from `/proc`: each process's private and mapped memory (`RssAnon`, `RssFile` in
//! `/proc/<pid>/status`, STATUS-2, RECYCLE-13) and the host's (`/proc/meminfo` `MemTotal`,
//! `MemAvailable`, STATUS-4). Without `/proc` (not Linux) these are unreadable, never zero
//! (STATUS-23).

use std::path::Path;

use super::unreadable::{read_text, Unreadable};

/// One process's memory, in bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ProcessMemory {
    /// Private memory (`RssAnon`).
    pub rss_anon: u64,
    /// Mapped files (`RssFile`).
    pub rss_file: u64,
}

/// The host's memory, in bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HostMemory {
    pub total: u64,
    pub available: u64,
}

/// A `Key:   123 kB` field, in bytes.
fn kb_field(text: &str, key: &str) -> Result<u64, String> {
    let line = text
        .lines()
        .find(|l| l.split(':').next() == Some(key))
        .ok_or_else(|| format!("no {key}"))?;
    let mut value = line.split(':').nth(1).unwrap_or("").split_whitespace();
    let number = value.next().unwrap_or("");
    let kb: u64 = number
        .parse()
        .map_err(|_| format!("{key} {number:?} is not a number"))?;
    match value.next() {
        Some("kB") => kb
            .checked_mul(1024)
            .ok_or_else(|| format!("{key} is too large")),
        other => Err(format!("{key} is in {other:?}, not kB")),
    }
}

/// Parses `/proc/<pid>/status`.
pub fn parse_proc_status(text: &str) -> Result<ProcessMemory, String> {
    Ok(ProcessMemory {
        rss_anon: kb_field(text, "RssAnon")?,
        rss_file: kb_field(text, "RssFile")?,
    })
}

/// Parses `/proc/meminfo`.
pub fn parse_meminfo(text: &str) -> Result<HostMemory, String> {
    Ok(HostMemory {
        total: kb_field(text, "MemTotal")?,
        available: kb_field(text, "MemAvailable")?,
    })
}

/// Reads `<root>/proc/<pid>/status`.
pub fn read_process_memory(root: &Path, pid: u32) -> Result<ProcessMemory, Unreadable> {
    let path = root.join(format!("proc/{pid}/status"));
    parse_proc_status(&read_text(&path)?).map_err(|why| Unreadable::parse(&path, why))
}

/// Reads `<root>/proc/meminfo`.
pub fn read_host_memory(root: &Path) -> Result<HostMemory, Unreadable> {
    let path = root.join("proc/meminfo");
    parse_meminfo(&read_text(&path)?).map_err(|why| Unreadable::parse(&path, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::fixture::FakeRoot;

    const STATUS: &str = "Name:\tnode\nVmRSS:\t  3000 kB\nRssAnon:\t  2048 kB\nRssFile:\t   512 kB\nRssShmem:\t 0 kB\n";

    #[test]
    fn proc_status_gives_private_and_mapped_bytes() {
        // spec: STATUS-2, RECYCLE-13
        assert_eq!(
            parse_proc_status(STATUS),
            Ok(ProcessMemory {
                rss_anon: 2048 * 1024,
                rss_file: 512 * 1024
            })
        );
        assert!(parse_proc_status("Name:\tnode\n").is_err());
        assert!(parse_proc_status("RssAnon: 1 MB\nRssFile: 1 kB\n").is_err());
    }

    #[test]
    fn meminfo_gives_total_and_available() {
        // spec: STATUS-4
        let host =
            parse_meminfo("MemTotal:  1000 kB\nMemFree: 10 kB\nMemAvailable:  400 kB\n").unwrap();
        assert_eq!((host.total, host.available), (1000 * 1024, 400 * 1024));
    }

    #[test]
    fn fixture_reads_and_missing_proc_says_why() {
        // spec: STATUS-23
        let root = FakeRoot::new();
        root.write("proc/42/status", STATUS);
        assert_eq!(
            read_process_memory(root.path(), 42).unwrap().rss_anon,
            2048 * 1024
        );
        let err = read_process_memory(root.path(), 43).unwrap_err();
        assert!(err.what.ends_with("proc/43/status"), "{err}");
        assert!(read_host_memory(root.path()).is_err());
    }

    #[test]
    fn this_process_and_host_are_readable() {
        let own =
            read_process_memory(Path::new("/"), std::process::id()).expect("/proc/<pid>/status");
        assert!(own.rss_anon > 0);
        let host = read_host_memory(Path::new("/")).expect("/proc/meminfo");
        assert!(host.total > 0 && host.available <= host.total);
    }
}
