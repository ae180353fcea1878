//! The launcher's own sizing, end to end with `workers` left out, on this machine's real CPU
//! affinity, topology and memory cgroup: `--check`'s decision line against what /proc and /sys
//! say of the CPUs the launcher may run on (narrowed with `taskset`, SIZE-3); a real start, where
//! the line with the memory fit is logged as the master is loaded, that many workers start, and
//! the idle memory line follows once every worker is ready (MEM-12); and a start in a memory
//! cgroup too small for one worker (MEM-9, MEM-10, MEM-13). Every expectation is a relation
//! read from this host, so it holds on any host.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::json;

/// A CPU list (`0-3,8`), as /proc and /sys write them.
fn cpu_list(text: &str) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (
            a.parse().expect("a CPU number"),
            b.parse().expect("a CPU number"),
        );
        out.extend(a..=b);
    }
    out
}

/// The CPUs this test process may run on, from /proc (not through the launcher's code).
fn allowed_cpus() -> BTreeSet<usize> {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list");
    cpu_list(list)
}

/// The distinct physical cores among `cpus`, from the topology in /sys; None where unreadable.
fn physical_cores(cpus: &BTreeSet<usize>) -> Option<usize> {
    let mut cores = BTreeSet::new();
    for cpu in cpus {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let siblings = std::fs::read_to_string(format!("{dir}/core_cpus_list"))
            .or_else(|_| std::fs::read_to_string(format!("{dir}/thread_siblings_list")))
            .ok()?;
        cores.insert(cpu_list(&siblings));
    }
    Some(cores.len())
}

/// `text` between `before` and the next `after`.
fn between<'a>(text: &'a str, before: &str, after: &str) -> &'a str {
    let start = text
        .find(before)
        .unwrap_or_else(|| panic!("no {before:?} in {text:?}"))
        + before.len();
    let rest = &text[start..];
    &rest[..rest
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?} after {before:?} in {text:?}"))]
}

fn number(text: &str) -> u32 {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {text:?}"))
}

/// Checks the decision line against the CPUs the launcher ran on, and returns its worker count.
/// `workers N: C physical cores (V vCPU, ...), quota ..., memory ... → classic rule min(K,
/// round(0.6×V))[ ...]`.
fn check_decision(line: &str, cpus: &BTreeSet<usize>) -> u32 {
    // spec: SIZE-3 — vCPU is the CPUs the launcher may run on (its affinity).
    let vcpu = cpus.len() as u32;
    let line = &line[line.find("workers ").expect("the decision line")..];
    assert_eq!(number(between(line, "(", " vCPU")), vcpu, "vCPU: {line}");
    assert_eq!(
        number(between(line, "round(0.6×", "))")),
        vcpu,
        "the rule's vCPU: {line}"
    );
    // spec: SIZE-4, SIZE-6 — the distinct cores among those CPUs (or the vCPUs, unreadable).
    let cores = number(between(line, ": ", " physical core"));
    match physical_cores(cpus) {
        Some(n) => assert_eq!(cores, n as u32, "physical cores: {line}"),
        None => {
            assert!(line.contains("topology unreadable"), "{line}");
            assert_eq!(cores, vcpu, "{line}");
        }
    }
    // spec: SIZE-8, SIZE-10, SIZE-12 — the classic rule on the cores a quota leaves.
    let rule_cores = number(between(line, "min(", ","));
    let capped = line
        .split("caps cores at ")
        .nth(1)
        .map(|r| number(r.split(|c: char| !c.is_ascii_digit()).next().unwrap_or("")));
    assert_eq!(rule_cores, capped.unwrap_or(cores), "{line}");
    let by_cpu = rule_cores
        .min((0.6 * f64::from(vcpu)).round() as u32)
        .max(1);
    let workers = number(between(line, "workers ", ":"));
    if line.contains("to fit memory") {
        assert!(workers >= 1 && workers < by_cpu, "{line}");
    } else {
        assert_eq!(workers, by_cpu, "{line}");
    }
    workers
}

/// config.json for a cluster with `workers` left out, in `dir`, on free ports.
fn write_unsized_config(dir: &Path) {
    let base = free_ports(16);
    write_config(
        dir,
        &json!({
            "server": { "port": base, "cluster": { "internalPort": base + 1, "command": [SIM] } },
            "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } }
        }),
    );
}

/// `fhircluster --check` under `taskset -c cpus` (all of this test's CPUs when None): its
/// decision line.
fn check_line(dir: &Path, cpus: Option<&BTreeSet<usize>>) -> String {
    let mut cmd = match cpus {
        Some(set) => {
            let list: Vec<String> = set.iter().map(ToString::to_string).collect();
            let mut c = Command::new("taskset");
            c.args(["-c", &list.join(","), LAUNCHER]);
            c
        }
        None => Command::new(LAUNCHER),
    };
    cmd.arg("--data-dir")
        .arg(dir)
        .arg("--check")
        .env_remove("FHIRSMITH_WORKERS")
        .env_remove("PORT");
    let out = run_bounded(&mut cmd, Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "{}", out.all());
    out.stdout
        .lines()
        .chain(out.stderr.lines())
        .find(|l| l.contains(" vCPU"))
        .unwrap_or_else(|| panic!("no decision line:\n{}", out.all()))
        .to_string()
}

#[test]
fn check_sizes_from_the_cpus_the_launcher_may_run_on() {
    // spec: SIZE-1, SIZE-2, SIZE-3, SIZE-4, SIZE-10, SIZE-12
    let dir = tempfile::tempdir().expect("temp dir");
    write_unsized_config(dir.path());
    let all = allowed_cpus();
    let line = check_line(dir.path(), None);
    check_decision(&line, &all);
    assert!(
        line.contains("memory fit decided once the master is loaded"),
        "{line}"
    );
    // Narrowed to one CPU, then two: the line follows the affinity, not the machine.
    let one: BTreeSet<usize> = all.iter().copied().take(1).collect();
    let line = check_line(dir.path(), Some(&one));
    assert_eq!(check_decision(&line, &one), 1, "{line}");
    if all.len() >= 2 {
        let two: BTreeSet<usize> = all.iter().copied().take(2).collect();
        check_decision(&check_line(dir.path(), Some(&two)), &two);
    } else {
        println!(
            "NOT CHECKED on this host: it lets this test run on one CPU only, so narrowing the \
             launcher's affinity could not be told from the whole machine"
        );
    }
}

/// Up to 4 of this test's CPUs, so the cluster stays small on any host.
fn a_few_cpus() -> BTreeSet<usize> {
    allowed_cpus().into_iter().take(4).collect()
}

fn taskset(cpus: &BTreeSet<usize>) -> Vec<String> {
    let list: Vec<String> = cpus.iter().map(ToString::to_string).collect();
    vec!["taskset".to_string(), "-c".to_string(), list.join(",")]
}

/// The decision line logged once the master is loaded (its memory part decided), checked to come
/// after the master is ready and before any worker starts; returns it.
fn loaded_decision(c: &mut Cluster) -> String {
    c.wait_for("m0: ready", secs(20));
    let line = c.wait_for(" vCPU", secs(10));
    // spec: SIZE-2, MEM-7 — with the memory fit, as the master is loaded.
    let line = if line.contains("decided once the master is loaded") {
        let at = c.must_index(&line);
        let later = c.wait_for_after(at + 1, " vCPU", secs(10));
        assert!(!later.contains("decided once"), "{later}");
        later
    } else {
        line
    };
    let (ready, decided) = (c.must_index("m0: ready"), c.must_index(&line));
    assert!(ready < decided, "decided before the master was loaded");
    if let Some(first) = c.line_index("tx1: started") {
        assert!(decided < first, "a worker started before the decision");
    }
    line
}

/// The idle memory line, checked to come once every worker is ready and to count them all.
fn idle_line(c: &mut Cluster, workers: u32) -> String {
    // spec: MEM-12
    let line = c.wait_for("memory idle with every worker ready", secs(20));
    let last_ready = c.must_index(&format!("tx{workers}: ready"));
    assert!(
        c.must_index(&line) > last_ready,
        "before every worker was ready:\n{}",
        c.log_lines().join("\n")
    );
    assert!(
        line.contains(&format!("in {} processes", workers + 1)),
        "{line}"
    );
    line
}

#[test]
fn a_start_without_workers_sizes_by_the_cpus_then_the_memory_fit_and_reports_the_idle_use() {
    // spec: SIZE-1, SIZE-2, SIZE-3, SIZE-13, MEM-7, MEM-8, MEM-12, DEC-3
    let cpus = a_few_cpus();
    let mut c = cluster().workers_unset().spawn_wrapped(&taskset(&cpus));
    let line = loaded_decision(&mut c);
    let workers = check_decision(&line, &cpus);
    // The memory part is what this host's memory cgroup says: a limit (own or enclosing) is
    // fitted under, none is "no limit".
    let ctl = memory_controller().ok();
    let limited = ctl.as_ref().is_some_and(|ctl| {
        let own = own_memory_group(ctl).expect("this test's memory group");
        own.ancestors()
            .take_while(|p| p.starts_with(ctl.mount()))
            .any(|g| group_limit(ctl, g).is_some())
    });
    if limited {
        assert!(line.contains("memory fits "), "{line}");
    } else {
        assert!(line.contains("memory fits: no limit"), "{line}");
    }
    for n in 1..=workers {
        c.wait_for(&format!("tx{n}: ready"), secs(20));
    }
    let idle = idle_line(&mut c, workers);
    if !limited {
        assert!(idle.ends_with("; no memory limit"), "{idle}");
    }
    // Exactly that many workers: no tx{workers+1} ever starts.
    c.wait_until_listening(secs(10));
    assert!(
        c.line_index(&format!("tx{}: started", workers + 1))
            .is_none(),
        "{}",
        c.log_lines().join("\n")
    );
    assert_eq!(c.child_pids().len(), workers as usize + 1);
}

#[test]
fn in_a_memory_cgroup_too_small_for_one_worker_one_starts_with_warnings_naming_the_numbers() {
    // spec: MEM-8, MEM-9, MEM-10, MEM-12, MEM-13, SIZE-13
    // A 256 MiB limit leaves 0.85 × 256 MiB, less than memoryHeadroomGB (2 GiB): no worker fits.
    const LIMIT: u64 = 256 << 20;
    let group = MemCgroup::for_test("sizing", Some(LIMIT));
    let cpus = a_few_cpus();
    let mut wrap = group.wrapper();
    wrap.extend(taskset(&cpus));
    let mut c = cluster().workers_unset().spawn_wrapped(&wrap);
    let line = loaded_decision(&mut c);
    assert!(line.contains("memory fits 0"), "{line}");
    check_decision(&line, &cpus);
    let warning = c.wait_for("not even one worker fits in memory", secs(5));
    assert!(
        warning.contains(" WARNING "),
        "a WARNING (MEM-10): {warning}"
    );
    for figure in [
        "each worker about",
        "in use now",
        "refusal threshold 0.2 GiB",
        "memoryHeadroomGB 2",
    ] {
        assert!(warning.contains(figure), "{figure}: {warning}");
    }
    // MEM-9: one starts anyway, and only one.
    c.wait_for("tx1: ready", secs(20));
    let idle = idle_line(&mut c, 1);
    // MEM-13: less than the headroom left under the threshold is a WARNING.
    assert!(
        idle.contains(" WARNING ") && idle.contains("less than memoryHeadroomGB 2 to spare"),
        "{idle}"
    );
    assert!(c.line_index("tx2: started").is_none());
}

#[test]
fn workers_given_that_do_not_fit_all_start_with_a_warning_line() {
    // spec: MEM-11, DEC-2 (all start; one WARNING line, the word in it for `grep WARNING`)
    const LIMIT: u64 = 256 << 20;
    let group = MemCgroup::for_test("sizing-given", Some(LIMIT));
    let mut c = cluster().workers(2).spawn_wrapped(&group.wrapper());
    let warning = c.wait_for("2 workers asked for", secs(20));
    assert!(warning.contains(" WARNING "), "a WARNING: {warning}");
    assert!(
        warning.contains("but only 0 fit in memory") && warning.contains("starting all 2"),
        "{warning}"
    );
    c.wait_for("tx2: ready", secs(20));
}
