//! The pure core stays pure: the files that decide (routing, admission and scheduling, sizing,
//! restart, recycle and rolling policy, status merging, the IPC codec, the plan) read no clock
//! and do no I/O; time comes in as an argument and effects go out as values (style.md, 1 and 2).
//! Their tests may read the clock for a starting instant, so only the code before a file's
//! `#[cfg(test)]` is looked at. What no lint holds: clippy's `disallowed_methods` and
//! `disallowed_types` name single paths crate-wide, while this is a rule per file (the same
//! `Instant::now` is right in the shell and wrong in the core) over whole families (`tokio::`,
//! `std::fs`, `libc::`), which a list of paths would miss as they grow.

use std::path::Path;

const PURE: &[&str] = &[
    "src/ipc/codec.rs",
    "src/kit/haproxy.rs",
    "src/kit/hosts.rs",
    "src/log_throttle.rs",
    "src/ops/extend.rs",
    "src/ops/readiness.rs",
    "src/signals.rs",
    "src/ops/tx_usage.rs",
    "src/per_kind.rs",
    "src/plan.rs",
    "src/plan/check.rs",
    "src/plan/limits.rs",
    "src/proxy/answer.rs",
    "src/proxy/lane.rs",
    "src/proxy/route.rs",
    "src/proxy/saturation.rs",
    "src/proxy/scheduler/config.rs",
    "src/proxy/scheduler/cooldown.rs",
    "src/proxy/scheduler/machine.rs",
    "src/proxy/scheduler/machine/pick.rs",
    "src/proxy/scheduler/machine/upkeep.rs",
    "src/proxy/scheduler/mod.rs",
    "src/proxy/scheduler/queue.rs",
    "src/proxy/scheduler/slots.rs",
    "src/proxy/scheduler/types.rs",
    "src/reload.rs",
    "src/sizing/cpu.rs",
    "src/sizing/decision.rs",
    "src/sizing/memory_fit.rs",
    "src/sizing/mod.rs",
    "src/sizing/rule.rs",
    "src/status/events.rs",
    "src/status/history.rs",
    "src/status/readings.rs",
    "src/status/snapshot.rs",
    "src/supervisor/lifecycle.rs",
    "src/supervisor/lifecycle/actions.rs",
    "src/supervisor/lifecycle/rolling.rs",
    "src/supervisor/mailbox.rs",
    "src/supervisor/recycle.rs",
    "src/supervisor/restart.rs",
];

/// What only the shell may do: read a clock, sleep, touch files, sockets, processes or the
/// environment, or run on the runtime.
const SHELL_ONLY: &[&str] = &[
    "Instant::now",
    "SystemTime::now",
    ".elapsed()",
    "thread::sleep",
    "tokio::",
    "std::fs",
    "std::env",
    "std::process",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "UnixStream",
    "libc::",
    "procfs::",
];

/// The lines of `text` before its tests that use something only the shell may.
fn shell_uses(text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| !l.trim_start().starts_with("#[cfg(test)]"))
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| SHELL_ONLY.iter().any(|s| l.contains(s)))
        .map(|(i, l)| format!("{}: {}", i + 1, l.trim()))
        .collect()
}

#[test]
fn the_pure_core_reads_no_clock_and_does_no_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for file in PURE {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{file}: {e} (a pure file moved? update this list)"));
        found.extend(shell_uses(&text).into_iter().map(|l| format!("{file}:{l}")));
    }
    assert!(
        found.is_empty(),
        "the pure core must take time and give effects as values:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_a_clock_read_and_ignores_tests_and_comments() {
    let code = "fn f() {\n    // Instant::now() is the shell's\n    let t = Instant::now();\n}\n\
                #[cfg(test)]\nmod tests { fn g() { let _ = std::time::Instant::now(); } }\n";
    assert_eq!(shell_uses(code), ["3: let t = Instant::now();"]);
}
