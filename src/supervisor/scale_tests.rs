//! The scale decision's tests: can one more be added, may one fewer go, and what the refusal
//! says.

use super::*;

const G: u64 = 1 << 30;

fn facts(current: usize) -> Facts<'static> {
    Facts {
        current,
        room: 4,
        room_why: "server.cluster.internalPort 3000: the processes' ports 3000-3005 must not include server.port 3005",
        memory: None,
        busy: None,
    }
}

#[test]
fn the_argument_is_a_count_or_a_step() {
    assert_eq!(Ask::parse("3"), Ok(Ask::To(3)));
    assert_eq!(Ask::parse("+1"), Ok(Ask::By(1)));
    assert_eq!(Ask::parse("-2"), Ok(Ask::By(-2)));
    for bad in ["", "x", "+", "1.5", "--1", "99999999999"] {
        assert!(
            Ask::parse(bad).unwrap_err().contains("scale takes"),
            "{bad:?}"
        );
    }
}

#[test]
fn one_more_and_one_fewer_within_the_room() {
    assert_eq!(
        decide(Ask::By(1), &facts(2)),
        Decision::Change { from: 2, to: 3 }
    );
    assert_eq!(
        decide(Ask::By(-1), &facts(2)),
        Decision::Change { from: 2, to: 1 }
    );
    assert_eq!(
        decide(Ask::To(4), &facts(2)),
        Decision::Change { from: 2, to: 4 }
    );
    assert_eq!(decide(Ask::To(2), &facts(2)), Decision::Same(2));
}

#[test]
fn the_last_worker_is_never_stopped() {
    // TTOU at one worker, and `scale 0`, are refused; the count stays.
    for ask in [Ask::By(-1), Ask::To(0), Ask::By(-5)] {
        match decide(ask, &facts(1)) {
            Decision::Refused(why) => {
                assert!(
                    why.contains("last worker") && why.contains("stays 1"),
                    "{why}"
                )
            }
            other => panic!("{ask:?}: {other:?}"),
        }
    }
}

#[test]
fn beyond_the_port_range_is_refused_naming_it_and_by_how_much() {
    // spec: DEC-21 — the ports after internalPort must not run into server.port.
    let Decision::Refused(why) = decide(Ask::By(1), &facts(4)) else {
        panic!("a fifth worker has no port");
    };
    for part in [
        "internalPort",
        "room for 4",
        "1 too many",
        "server.port 3005",
        "stays 4",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    let Decision::Refused(why) = decide(Ask::To(7), &facts(2)) else {
        panic!("7 > 4");
    };
    assert!(why.contains("3 too many"), "{why}");
}

#[test]
fn more_than_fit_in_memory_is_refused_by_how_much_and_fewer_always_fit() {
    // spec: MEM-7 — each worker counted as the master's private memory; 10 GiB threshold,
    // 6 in use, 2 headroom: 2 GiB left, a 3 GiB worker is 1 GiB short.
    let f = Facts {
        memory: Some(MemoryRoom {
            refuse_at: 10 * G,
            per_worker: 3 * G,
            in_use: 6 * G,
            headroom_gb: 2.0,
        }),
        ..facts(2)
    };
    let Decision::Refused(why) = decide(Ask::By(1), &f) else {
        panic!("does not fit");
    };
    for part in [
        "memory fit",
        "3.0 GiB",
        "2.0 GiB is left",
        "1.0 GiB short",
        "stays 2",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    assert_eq!(decide(Ask::By(-1), &f), Decision::Change { from: 2, to: 1 });
    // Below a GiB the figures are in MB: a small process is never "0.0 GiB short".
    let small = MemoryRoom {
        refuse_at: 300 << 20,
        per_worker: 8 << 20,
        in_use: 400 << 20,
        headroom_gb: 0.0,
    };
    let why = small
        .short_of(1, "process")
        .expect("over the threshold: no room");
    assert!(
        why.contains("8 MB") && why.contains("0 MB is left") && why.contains("8 MB short"),
        "{why}"
    );
    let roomy = Facts {
        memory: Some(MemoryRoom {
            refuse_at: 20 * G,
            ..f.memory.unwrap()
        }),
        ..f.clone()
    };
    assert_eq!(
        decide(Ask::By(1), &roomy),
        Decision::Change { from: 2, to: 3 }
    );
}

#[test]
fn nothing_changes_while_busy_and_the_reason_is_said() {
    let f = Facts {
        busy: Some("a rolling restart is under way (a reload): send it again once it is done"),
        ..facts(2)
    };
    let Decision::Refused(why) = decide(Ask::By(1), &f) else {
        panic!("busy");
    };
    assert!(
        why.contains("rolling restart") && why.contains("stays 2"),
        "{why}"
    );
}
