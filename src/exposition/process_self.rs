//! The standard `process_*` series for the launcher itself, named and computed as the Prometheus
//! client libraries export them (client_golang's process collector): CPU seconds, resident and
//! virtual memory, open and maximum file descriptors, start time. Read from `/proc` at each
//! scrape; a figure that can't be read is left out, never made up.

use std::fmt::Write;

use super::text::family;

/// The figures of `/proc/self/stat` the series need (fields 14, 15, 22, 23, 24).
#[derive(Debug, PartialEq)]
struct Stat {
    utime_ticks: u64,
    stime_ticks: u64,
    start_ticks: u64,
    vsize: u64,
    rss_pages: u64,
}

/// `/proc/<pid>/stat`: the fields after the command (which may hold spaces and parentheses).
fn parse_stat(text: &str) -> Option<Stat> {
    let after = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (the state).
    let field = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        utime_ticks: field(14)?,
        stime_ticks: field(15)?,
        start_ticks: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The CPU seconds (user and system) a `/proc/<pid>/stat` says the process has used, at
/// `ticks` clock ticks a second.
pub(crate) fn cpu_seconds(stat: &str, ticks: u64) -> Option<f64> {
    let s = parse_stat(stat)?;
    (ticks > 0).then(|| (s.utime_ticks + s.stime_ticks) as f64 / ticks as f64)
}

/// Clock ticks a second (`_SC_CLK_TCK`), the unit of `/proc/<pid>/stat`'s times.
pub(crate) fn clock_ticks() -> Option<u64> {
    sysconf(libc::_SC_CLK_TCK)
}

/// `btime` of `/proc/stat`: when the machine booted, in seconds since the epoch.
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

fn sysconf(name: libc::c_int) -> Option<u64> {
    crate::system::ffi::sysconf(name)
}

/// The soft `RLIMIT_NOFILE`, as client_golang reports it.
fn max_fds() -> Option<u64> {
    crate::system::ffi::open_files_limit()
}

/// When the launcher's process started, in Unix milliseconds.
pub fn start_time_ms() -> Option<u64> {
    let stat = parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    let btime = boot_time(&std::fs::read_to_string("/proc/stat").ok()?)?;
    let ticks = sysconf(libc::_SC_CLK_TCK)?;
    Some(btime * 1000 + stat.start_ticks * 1000 / ticks)
}

/// Writes the series for the launcher's own process.
pub fn write(out: &mut String) {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|t| parse_stat(&t));
    let ticks = sysconf(libc::_SC_CLK_TCK);
    let page = sysconf(libc::_SC_PAGESIZE);
    let btime = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| boot_time(&t));
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count() as u64);
    let mut one = |name: &str, kind: &str, help: &str, v: Option<f64>| {
        if let Some(v) = v {
            family(out, name, kind, help);
            let _ = writeln!(out, "{name} {v}");
        }
    };
    let s = stat.as_ref();
    one(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        s.zip(ticks)
            .map(|(s, t)| (s.utime_ticks + s.stime_ticks) as f64 / t as f64),
    );
    one(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        open_fds.map(|n| n as f64),
    );
    one(
        "process_max_fds",
        "gauge",
        "Maximum number of open file descriptors.",
        max_fds().map(|n| n as f64),
    );
    one(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        s.map(|s| s.vsize as f64),
    );
    one(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        s.zip(page).map(|(s, p)| (s.rss_pages * p) as f64),
    );
    one(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        s.zip(ticks)
            .zip(btime)
            .map(|((s, t), b)| b as f64 + s.start_ticks as f64 / t as f64),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_past_a_command_with_spaces_and_parentheses() {
        let text = "4242 (fhir (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 \
                    3 0 9000 123456789 2048 18446744073709551615";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                utime_ticks: 150,
                stime_ticks: 50,
                start_ticks: 9000,
                vsize: 123456789,
                rss_pages: 2048,
            })
        );
        assert_eq!(parse_stat("4242 (cut short) S 1"), None);
        assert_eq!(
            cpu_seconds(text, 100),
            Some(2.0),
            "150 + 50 ticks at 100 a second"
        );
        assert_eq!(cpu_seconds(text, 0), None);
        assert_eq!(cpu_seconds("garbage", 100), None);
        assert_eq!(boot_time("cpu 1 2 3\nbtime 1700000000\n"), Some(1700000000));
    }

    #[test]
    fn the_launchers_own_series_are_all_there_on_linux() {
        let mut out = String::new();
        write(&mut out);
        for name in [
            "process_cpu_seconds_total",
            "process_open_fds",
            "process_max_fds",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
        ] {
            assert!(out.contains(&format!("\n{name} ")), "{name} in {out}");
        }
    }
}
