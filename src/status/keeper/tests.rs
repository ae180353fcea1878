//! The keeper's unit tests: what it passes on to the master's graphs and events as processes
//! come and go, with each exit's meaning given (the lifecycle's), and the snapshot taking each
//! process's state from the `Life` it is handed.

use super::*;
use crate::plan::replan;
use crate::status::readings::Reading;
use crate::status::snapshot::{CgroupReading, HostMemory, ProcMemory, ProcessState};
use crate::system::unreadable::Unreadable;

/// A machine where every process uses 1 GiB and nothing else can be read.
struct Fixed;

impl Readings for Fixed {
    fn process(&self, pid: u32) -> Reading<ProcMemory> {
        Ok(ProcMemory {
            rss_anon: (1 << 30) + u64::from(pid % 2),
            rss_file: 0,
        })
    }
    fn cgroup(&self) -> Reading<CgroupReading> {
        Err(Unreadable::new("/proc/self/cgroup", "not here").into())
    }
    fn host(&self) -> Reading<HostMemory> {
        Err(Unreadable::new("/proc/meminfo", "not here").into())
    }
}

/// A keeper for a master and one worker, in its own data directory.
fn keeper(dir: &tempfile::TempDir) -> (Keeper, ProcessId) {
    let s = Settings {
        data_dir: dir.path().to_path_buf(),
        ..Settings::default()
    };
    let plan = replan(&s, 1, String::new()).expect("a plan with one worker");
    let worker = plan.processes[1].id;
    (Keeper::new(&s, &plan.processes, Instant::now()), worker)
}

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

/// The kinds of the events waiting for the master, oldest first.
fn event_kinds(k: &Keeper) -> Vec<String> {
    match k.events_to_send() {
        Some((ToChild::Events { events }, _)) => events
            .iter()
            .filter_map(|e| e["kind"].as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn a_worker_that_exits_is_restarting_and_one_stopped_with_the_launcher_is_unavailable() {
    // spec: GRAPH-10, GRAPH-4, EVENT-2
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut k, worker) = keeper(&dir);
    k.started(worker);
    k.exited(worker, Exit::Code(1), Some(7), ExitFate::Restarting, None);
    k.started(worker);
    k.exited(worker, Exit::Code(0), Some(8), ExitFate::Stopped, None);
    assert_eq!(
        states(&mut k),
        ["starting", "restarting", "starting", "unavailable"]
    );
    assert_eq!(event_kinds(&k), ["launcherStarted", "exit"]);
}

#[test]
fn a_retired_worker_is_unavailable_with_no_exit_event_and_no_restart_reason() {
    // spec: GRAPH-10, STATUS-17
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut k, worker) = keeper(&dir);
    k.started(worker);
    k.ready(worker);
    k.exited(worker, Exit::Signal(15), Some(7), ExitFate::Stopped, None);
    assert_eq!(states(&mut k), ["starting", "live", "unavailable"]);
    assert_eq!(event_kinds(&k), ["launcherStarted"]);
    let lives = [Life::NOT_STARTED; 2];
    let v = k.snapshot(&lives, &[], &Fixed, Instant::now());
    assert_eq!(v["processes"][1]["lastRestart"], Value::Null);
}

#[test]
fn a_master_given_up_is_unavailable_and_its_exit_is_an_event() {
    // spec: EVENT-2, GRAPH-10
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut k, _) = keeper(&dir);
    k.started(ProcessId::MASTER);
    k.exited(
        ProcessId::MASTER,
        Exit::Code(3),
        Some(9),
        ExitFate::Died,
        None,
    );
    assert_eq!(states(&mut k), ["starting", "unavailable"]);
    assert_eq!(event_kinds(&k), ["launcherStarted", "exit"]);
}

#[test]
fn the_snapshot_takes_each_state_from_the_life_it_is_given() {
    // spec: STATUS-17, STATUS-22
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut k, worker) = keeper(&dir);
    let now = Instant::now();
    k.started(worker);
    k.exited(worker, Exit::Signal(9), Some(7), ExitFate::Restarting, None);
    let lives = [
        Life {
            state: ProcessState::Ready,
            pid: Some(100),
            started_at: Some(now),
            ready_at: Some(now),
            restarts: 0,
            restarts_by: Default::default(),
            ..Life::NOT_STARTED
        },
        Life {
            state: ProcessState::Restarting,
            pid: None,
            started_at: Some(now),
            ready_at: None,
            restarts: 2,
            restarts_by: Default::default(),
            ..Life::NOT_STARTED
        },
    ];
    let v = k.snapshot(&lives, &[], &Fixed, now);
    let (m0, tx1) = (&v["processes"][0], &v["processes"][1]);
    assert_eq!(m0["status"], "ready");
    assert_eq!(m0["rssAnon"], 1u64 << 30);
    assert_eq!(tx1["status"], "restarting");
    assert_eq!(tx1["restarts"], 2, "the lifecycle's count");
    assert_eq!(tx1["lastRestart"], "signal SIGKILL");
    assert_eq!(
        tx1["rssAnon"],
        Value::Null,
        "nothing read of a process not running"
    );
    assert_eq!(v["totals"]["restarts"], 2);
}

#[test]
fn a_retired_workers_last_minute_reaches_the_report() {
    // spec: EVENT-6, EVENT-7, EVENT-8, EVENT-14 (a worker removed by a reload since the last
    // minute tick: its 502s, 504s and lost cache-ids are still counted, under its code)
    use crate::status::events::LostKind;
    use crate::status::tally::Lost;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let s = Settings {
        data_dir: dir.path().to_path_buf(),
        ..Settings::default()
    };
    let plan = replan(&s, 2, String::new()).expect("a plan with two workers");
    let mut k = Keeper::new(&s, &plan.processes, Instant::now());
    let tx2 = plan.processes[2].code.clone();
    let quiet = Tally {
        lost: vec![Lost::default(); 3],
        ..Tally::default()
    };
    k.minute(quiet.clone());
    // A reload lowers workers to 1: tx2 drains, exits, and its row goes (`fit_rows`); the
    // front door counted against it after the last minute tick.
    k.resize_rows(&plan.processes[..2]);
    let mut lost = quiet.lost.clone();
    lost[2][LostKind::Timeout504] = 2;
    lost[2][LostKind::BadGateway502] = 1;
    lost[2][LostKind::CacheIdWhileRestarting] = 3;
    k.minute(Tally {
        lost,
        ..Tally::default()
    });
    let counts = match k.events_to_send() {
        Some((ToChild::Events { events }, _)) => events
            .into_iter()
            .find(|e| e["kind"] == "counts")
            .unwrap_or_default(),
        _ => Value::Null,
    };
    assert_eq!(
        counts["lost"][tx2.as_str()],
        serde_json::json!({"timeout504": 2, "badGateway502": 1, "cacheIdWhileRestarting": 3}),
        "{counts}"
    );
    assert_eq!(k.rows(), 2, "the row is gone all the same");
}

#[test]
fn history_changes_that_pile_up_give_way_to_the_whole_history() {
    // spec: DEC-32 (bounded while the master is down or not taking them; the whole history has
    // every point the changes carried)
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut k, worker) = keeper(&dir);
    for _ in 0..=MAX_UPDATES {
        k.started(worker);
    }
    assert!(k.history_updates.len() <= MAX_UPDATES);
    let sent = k.history_for_master();
    assert!(
        matches!(sent.as_slice(), [ToChild::History { history }] if history["append"] == false),
        "{} messages",
        sent.len()
    );
    // And then the changes again, as they come.
    k.started(worker);
    assert_eq!(states(&mut k), ["starting"]);
}

#[test]
fn the_launcher_samples_only_the_processes_that_sample_nothing_themselves() {
    // spec: DEC-46, GRAPH-1
    use crate::ipc::message::Sample;
    use crate::status::front::FrontFigures;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut k, worker) = keeper(&dir);
    let now = Instant::now();
    let long_ago = now - std::time::Duration::from_secs(600);
    let life = |pid| Life {
        state: ProcessState::Ready,
        pid: Some(pid),
        started_at: Some(long_ago),
        ready_at: Some(long_ago),
        restarts: 0,
        restarts_by: Default::default(),
        ..Life::NOT_STARTED
    };
    let lives = [life(100), life(101)];
    for id in [ProcessId::MASTER, worker] {
        k.started(id);
        k.ready(id);
    }
    // The master samples itself; the worker has no channel.
    let own = Sample {
        at: crate::clock::unix_ms() - 1000,
        requests: 3,
        client_caches: None,
        client_concepts: None,
        refusals: 0,
        heap_used: Some(1),
        turnaround_ms: None,
    };
    k.message(
        ProcessId::MASTER,
        &FromChild::Sample(own),
        &lives,
        &Fixed,
        now,
    );
    let front = |n: u64, refused: u64| {
        Some(FrontFigures {
            answered: [0, n, 0, 1, 0],
            refused,
            in_flight: 2,
            ..FrontFigures::default()
        })
    };
    // The first interval sets the baseline; the second is a sample of what came between.
    k.front_samples(&lives, &[front(5, 0), front(5, 0)], &Fixed, now);
    k.front_samples(&lives, &[front(50, 1), front(12, 3)], &Fixed, now);
    let h = k.history.to_json(crate::clock::unix_ms());
    let points = |code: &str| -> Vec<Value> {
        h["processes"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["code"] == code))
            .and_then(|p| p["points"].as_array().cloned())
            .unwrap_or_default()
    };
    let m0 = points("m0");
    assert_eq!(m0.len(), 1, "its own sample only: {m0:?}");
    assert!(m0[0].get("front").is_none());
    let tx1 = points("tx1");
    assert_eq!(tx1.len(), 1, "{tx1:?}");
    assert_eq!(tx1[0]["front"], true);
    assert_eq!(
        tx1[0]["requests"], 7,
        "the answers passed on in the interval"
    );
    assert_eq!(tx1[0]["refusals"], 3);
    assert_eq!(tx1[0]["inFlight"], 2);
    assert_eq!(tx1[0]["rssAnon"], (1u64 << 30) + 1);
    assert_eq!(
        tx1[0]["heapUsed"],
        Value::Null,
        "nothing of the process's own"
    );
}
