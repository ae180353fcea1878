//! The keeper's unit tests: what it passes on to the master's graphs as processes come and go.

use super::*;
use crate::plan::replan;

/// The legend state in each history change queued for the master, oldest first.
fn states(k: &mut Keeper) -> Vec<String> {
    k.history_for_master()
        .into_iter()
        .filter_map(|m| match m {
            ToChild::History { history } => {
                Some(history["processes"][0]["state"].as_str()?.to_string())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_worker_that_exits_is_restarting_and_one_stopped_with_the_launcher_is_unavailable() {
    // spec: GRAPH-10, GRAPH-4
    let dir = tempfile::tempdir().expect("a temporary directory");
    let s = Settings {
        data_dir: dir.path().to_path_buf(),
        ..Settings::default()
    };
    let plan = replan(&s, 1, String::new()).expect("a plan with one worker");
    let worker = plan.processes[1].id;
    let mut k = Keeper::new(&s, &plan.processes, Instant::now());

    k.spawned(worker, u32::MAX, Instant::now());
    k.exited(worker, Exit::Code(1), false);
    k.spawned(worker, u32::MAX, Instant::now());
    k.exited(worker, Exit::Code(0), true);
    assert_eq!(
        states(&mut k),
        ["starting", "restarting", "starting", "unavailable"]
    );
}
