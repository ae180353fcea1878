//! The state format held still: a state captured from a real upgrade by the program of its day
//! (`tests/fixtures/handover-format-N.json`, frozen: never edited, never captured again) must be
//! read by every later program that lists `N` in [`READS`], and the writer's output for a fixed
//! state is a committed golden file, so a change of what is written can't pass unseen.

use super::tests::handover;
use super::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn the_frozen_format_1_state_of_a_real_upgrade_is_read_as_it_was_written() {
    // Captured from the program of #28's day: the simulator's master and two workers, tx1
    // killed and restarted once, tx2 cooling down after a 503, a cache-id session on tx1, an
    // idle keep-alive connection that had sent half of its next head (`upgrade_fixture.rs`).
    let h = decode(&fixture("handover-format-1.json")).expect("the format 1 fixture");
    assert_eq!(h.format, 1);
    assert_eq!(h.captured_monotonic_ms, 13_615_391);
    let pids: Vec<(u16, u32, i32)> = h
        .children
        .iter()
        .map(|c| (c.id, c.pid, c.channel_fd))
        .collect();
    assert_eq!(pids, [(0, 7724, 21), (1, 7733, 23), (2, 7727, 30)]);
    assert!(h.children.iter().all(|c| c.spoke && c.inputs.is_some()));
    assert_eq!(h.children[1].stdout_fd, Some(29));
    // The lifecycle: every place ready, tx1 restarted once after a kill.
    let life = serde_json::to_value(&h.lifecycle).expect("lifecycle");
    assert_eq!(life["workers"], 2);
    assert_eq!(life["phase"]["is"], "running");
    for slot in life["slots"].as_array().expect("slots") {
        assert_eq!(slot["state"]["is"], "ready", "{slot}");
    }
    assert_eq!(life["slots"][1]["restarts"], 1);
    // The keeper: tx1's restart and its reason, the history's processes.
    let keeper = serde_json::to_value(&h.keeper).expect("keeper");
    assert_eq!(keeper["rows"][1]["code"], "tx1");
    assert_eq!(keeper["rows"][1]["lastRestart"], "signal SIGKILL");
    assert_eq!(keeper["workers"]["workers"], 2);
    let codes: Vec<&str> = keeper["history"]["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter_map(|p| p["code"].as_str())
        .collect();
    assert_eq!(codes, ["m0", "tx1", "tx2"]);
    // The front door: tx2's cooldown, the idle connection with half a head read ahead.
    assert_eq!(h.cooldowns.len(), 1);
    assert_eq!(h.cooldowns[0].id, 2);
    assert!(h.cooldowns[0].left_ms > 590_000);
    assert_eq!(h.client_conns.len(), 1);
    assert_eq!(h.client_conns[0].unread, b"GET /r4/metadata HTTP/1.1\r\nHo");
    // The fds and the rest of the envelope.
    assert_eq!(
        (h.client_fd, h.admin_fd, h.control_fd),
        (28, Some(14), Some(16))
    );
    let guardian = h.guardian.as_ref().expect("guardian");
    assert_eq!(guardian.groups.len(), 3);
    assert!(h.mark.contains('.'));
    assert_eq!(h.shell.generation, 4);
    assert!(h.shell.master_acks);
    assert_eq!(h.last_reload, Some((false, 0)));
    assert!(!h.reload_pending);
    assert_eq!(
        h.counters.get("fhircluster_connections_accepted_total"),
        Some(&7.0)
    );
}

#[test]
fn every_frozen_fixture_is_read_by_this_program() {
    // A fixture per format number: dropping a number from READS (or breaking a reader) fails
    // here, naming the fixture.
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(FIXTURES).expect("fixtures") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        let Some(n) = name
            .strip_prefix("handover-format-")
            .and_then(|r| r.strip_suffix(".json"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Err(e) = decode(&fixture(&name)) {
            panic!("{name}, a state format {n} program wrote, is no longer read: {e}");
        }
        seen.push(n);
    }
    seen.sort_unstable();
    assert!(seen.contains(&FORMAT), "no fixture for the format written");
    for n in READS {
        assert!(
            seen.contains(n),
            "format {n} is read but has no frozen fixture"
        );
    }
}

#[test]
fn the_writer_writes_exactly_the_golden_file() {
    let name = "handover-format-1-writer.json";
    let written = serde_json::to_string_pretty(
        &serde_json::from_slice::<serde_json::Value>(&encode(&handover())).expect("json"),
    )
    .expect("pretty")
        + "\n";
    if std::env::var_os("FHIRCLUSTER_BLESS").is_some() {
        std::fs::write(format!("{FIXTURES}/{name}"), &written).expect("bless");
    }
    let golden = String::from_utf8(fixture(name)).expect("utf-8");
    assert!(
        written == golden,
        "the state this program writes changed (tests/fixtures/{name}).\n\
         Document the change in cluster.md's \"The state format\"; if an older reader would \
         misread it (a field it ignores meaning something it must not ignore, a field renamed \
         or retyped, a meaning changed), bump FORMAT in src/upgrade/state.rs and add a frozen \
         fixture tests/fixtures/handover-format-<N>.json captured from a real upgrade. Then \
         write the new golden file: FHIRCLUSTER_BLESS=1 cargo nextest run -E \
         'test(/the_writer_writes_exactly_the_golden_file/)'.\n--- written:\n{written}"
    );
}
