//! The sim's test knobs, read from the environment. Every knob may be scoped to one instance
//! code by suffixing it: `SIM_FAIL_AT_START_tx2=1` wins over `SIM_FAIL_AT_START` for `tx2`, so
//! one test can make one worker misbehave. Knobs apply on every start of a process (a restarted
//! process is started with the same environment); with `SIM_ONCE_DIR=<dir>` the start and exit
//! knobs (`SIM_FAIL_AT_START`, `SIM_EXIT_AFTER_MS`) fire only once per instance code, marked by a
//! file in that directory. The list is in the module docs of `sim` and in `--help`.

use std::path::PathBuf;

use super::cost::Costs;
use fhircluster::ipc::message::{acknowledges_events, PROTOCOL_VERSION};

#[derive(Clone, Debug, PartialEq)]
pub struct Knobs {
    pub start_delay_ms: u64,
    /// Wait this long after listening (and serving) before sending `ready`.
    pub ready_delay_ms: u64,
    /// The IPC protocol version it announces; below 1.1 it sends no `hello` and no
    /// `eventsReceived`, as a 1.0 child.
    pub protocol: String,
    pub fail_at_start: Option<i32>,
    pub exit_after_ms: Option<u64>,
    pub exit_code: i32,
    /// A signal name without `SIG` (`KILL`, `SEGV`, `ABRT`, `TERM` ...).
    pub exit_signal: Option<String>,
    pub ignore_sigterm: bool,
    pub linger_ms: u64,
    pub refuse_health: bool,
    pub refuse: bool,
    pub memory_limit_mb: Option<u64>,
    pub counts_seconds: f64,
    pub once_dir: Option<PathBuf>,
    pub costs: Costs,
}

impl Knobs {
    /// Reads the knobs for the process `code`.
    pub fn read(code: &str, env: &dyn Fn(&str) -> Option<String>) -> Knobs {
        let get = |name: &str| {
            env(&format!("{name}_{code}"))
                .or_else(|| env(name))
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let num = |name: &str| get(name).and_then(|v| v.parse::<u64>().ok());
        let flag = |name: &str| get(name).is_some_and(|v| v != "0" && v != "false");
        let ms = |name: &str, default: f64| {
            get(name)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| *v >= 0.0)
                .unwrap_or(default)
        };
        Knobs {
            start_delay_ms: num("SIM_START_DELAY_MS").unwrap_or(0),
            ready_delay_ms: num("SIM_READY_DELAY_MS").unwrap_or(0),
            protocol: get("SIM_PROTOCOL").unwrap_or_else(|| PROTOCOL_VERSION.to_string()),
            fail_at_start: get("SIM_FAIL_AT_START").and_then(|v| v.parse().ok()),
            exit_after_ms: num("SIM_EXIT_AFTER_MS"),
            exit_code: get("SIM_EXIT_CODE")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1),
            exit_signal: get("SIM_EXIT_SIGNAL")
                .map(|s| s.trim_start_matches("SIG").to_ascii_uppercase()),
            ignore_sigterm: flag("SIM_IGNORE_SIGTERM"),
            linger_ms: num("SIM_LINGER_MS").unwrap_or(0),
            refuse_health: flag("SIM_REFUSE_HEALTH"),
            refuse: flag("SIM_REFUSE"),
            memory_limit_mb: num("SIM_MEMORY_LIMIT_MB"),
            counts_seconds: ms("SIM_COUNTS_SECONDS", 60.0).max(0.01),
            once_dir: get("SIM_ONCE_DIR").map(PathBuf::from),
            costs: Costs {
                metadata_ms: ms("SIM_COST_METADATA_MS", 1.0),
                lookup_ms: ms("SIM_COST_LOOKUP_MS", 4.0),
                validate_ms: ms("SIM_COST_VALIDATE_MS", 5.0),
                subsumes_ms: ms("SIM_COST_SUBSUMES_MS", 4.0),
                expand_ms: ms("SIM_COST_EXPAND_MS", 200.0),
                other_ms: ms("SIM_COST_OTHER_MS", 1.0),
            },
        }
    }

    /// Whether it speaks protocol 1.1 or later: `hello` first, `eventsReceived` as a master.
    pub fn speaks_1_1(&self) -> bool {
        acknowledges_events(&self.protocol)
    }

    /// Whether a once-only knob may fire now for `code` (always, without `SIM_ONCE_DIR`).
    /// Marks it fired.
    pub fn fire_once(&self, knob: &str, code: &str) -> bool {
        let Some(dir) = &self.once_dir else {
            return true;
        };
        let _ = std::fs::create_dir_all(dir);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(format!("{code}.{knob}")))
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_scoped_knob_wins_over_the_plain_one() {
        let env = |k: &str| match k {
            "SIM_FAIL_AT_START" => Some("3".to_string()),
            "SIM_FAIL_AT_START_tx2" => Some("7".to_string()),
            "SIM_COST_EXPAND_MS" => Some("50".to_string()),
            "SIM_REFUSE_tx1" => Some("1".to_string()),
            _ => None,
        };
        assert_eq!(Knobs::read("tx2", &env).fail_at_start, Some(7));
        assert_eq!(Knobs::read("tx1", &env).fail_at_start, Some(3));
        assert!(Knobs::read("tx1", &env).refuse);
        assert!(!Knobs::read("tx2", &env).refuse);
        assert_eq!(Knobs::read("m0", &env).costs.expand_ms, 50.0);
    }

    #[test]
    fn defaults() {
        let k = Knobs::read("m0", &|_| None);
        assert_eq!(k.costs, Costs::default());
        assert_eq!(
            (k.exit_code, k.counts_seconds, k.fail_at_start),
            (1, 60.0, None)
        );
        assert_eq!(
            (k.ready_delay_ms, k.protocol.as_str()),
            (0, PROTOCOL_VERSION)
        );
        assert!(k.speaks_1_1());
        let old = Knobs::read("m0", &|k: &str| (k == "SIM_PROTOCOL").then(|| "1.0".into()));
        assert!(!old.speaks_1_1());
    }

    #[test]
    fn once_dir_fires_once_per_code() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().to_string_lossy().to_string();
        let env = move |k: &str| (k == "SIM_ONCE_DIR").then(|| path.clone());
        let k = Knobs::read("tx1", &env);
        assert!(k.fire_once("exit", "tx1"));
        assert!(!k.fire_once("exit", "tx1"));
        assert!(k.fire_once("exit", "tx2"));
        Ok(())
    }
}
