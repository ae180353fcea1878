//! The snapshot's `memory` section: the cgroup's figures and the limit the guards measure
//! against (the service's own cgroup limit, else the guards' own), with the refusal and abort
//! thresholds it makes (STATUS-7, STATUS-24).

use serde_json::{json, Value};

use super::{CgroupLimit, Missing, ProcessInput, SnapshotInput};
use crate::process::Role;

fn bytes_at(limit: Option<u64>, fraction: f64) -> Option<u64> {
    limit.map(|l| (l as f64 * fraction) as u64)
}

pub(super) fn memory_section(
    input: &SnapshotInput,
    process_anon: Option<u64>,
    missing: &mut Missing,
) -> Value {
    let st = &input.settings;
    let mut group = None;
    let (cgroup, limit, source) = match &input.cgroup {
        Ok(c) => {
            group = Some(c.group.clone());
            match c.limit {
                CgroupLimit::Own(limit) => (
                    json!({"anon": c.anon, "file": c.file}),
                    Some(limit),
                    Some("cgroup"),
                ),
                CgroupLimit::Enclosing(limit) => {
                    missing.add_what(
                        "cgroup memory limit",
                        &format!(
                            "the limit ({limit} bytes) is on an enclosing cgroup, not the \
                             service's own ({}): each process measures its own private memory",
                            c.group
                        ),
                    );
                    (Value::Null, None, None)
                }
                CgroupLimit::None => {
                    missing.add_what(
                        "cgroup memory limit",
                        &format!(
                            "the service's cgroup ({}) has no memory limit (no MemoryMax): each \
                             process measures its own private memory",
                            c.group
                        ),
                    );
                    (Value::Null, None, None)
                }
            }
        }
        Err(why) => {
            missing.add_what("cgroup memory", &why.to_string());
            (Value::Null, None, None)
        }
    };
    let (limit, source) = match (limit, source) {
        (Some(l), s) => (Some(l), s),
        _ => {
            let guard = guard_limit(input.processes);
            if guard.is_none() && !input.processes.is_empty() {
                missing.add_what(
                    "memory limit",
                    "no process has reported the limit its memory guard measures against",
                );
            }
            (guard, guard.map(|_| "guard"))
        }
    };
    json!({
        "cgroup": cgroup,
        "processAnon": process_anon,
        "limit": limit,
        "limitSource": source,
        "rejectAt": bytes_at(limit, st.reject_fraction),
        "abortAt": bytes_at(limit, st.abort_fraction),
        "rejectFraction": st.reject_fraction,
        "abortFraction": st.abort_fraction,
        "group": group,
    })
}

/// Without a cgroup limit of its own, each guard measures against its own limit; they are the
/// same figure on one machine. The master's, else the first reported.
fn guard_limit(processes: &[ProcessInput]) -> Option<u64> {
    processes
        .iter()
        .find(|p| p.role == Role::Master && p.guard_limit.is_some())
        .or_else(|| processes.iter().find(|p| p.guard_limit.is_some()))
        .and_then(|p| p.guard_limit)
}
