//! `Timers` held to the one heap it replaced: on random pushes (waits of both kinds at their
//! lengths, some from a `now` read a little earlier, lengths changed by a reload; cooldowns),
//! pops and time, both give the same earliest timer at every step, and the same order to the end.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

#[derive(Clone, Debug)]
enum Op {
    /// A wait of `kind` begins at `now` less `early` ms (a clock read before the lock).
    Wait {
        owner: bool,
        early: u8,
    },
    /// A cooldown of `process` ends `ms` from now (often when a wait ends: the tie's order).
    Cool {
        process: u8,
        ms: u16,
    },
    Pop,
    /// Time passes.
    Tick {
        ms: u16,
    },
    /// A reload: this kind's waits now last `ms`.
    Reload {
        owner: bool,
        ms: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<bool>(), prop_oneof![3 => Just(0u8), 1 => 0u8..5]).prop_map(|(owner, early)| Op::Wait { owner, early }),
        1 => (0u8..3, prop_oneof![0u16..3000, Just(1000u16), Just(2500u16)]).prop_map(|(process, ms)| Op::Cool { process, ms }),
        4 => Just(Op::Pop),
        2 => (0u16..500).prop_map(|ms| Op::Tick { ms }),
        1 => (any::<bool>(), 0u16..3000).prop_map(|(owner, ms)| Op::Reload { owner, ms }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn timers_come_in_the_order_one_heap_of_them_all_gives(ops in prop::collection::vec(op(), 1..200)) {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut now = t0;
        let mut length = [Duration::from_millis(1000), Duration::from_millis(2500)];
        let mut timers = Timers::default();
        let mut heap: BinaryHeap<Reverse<(Instant, Timer)>> = BinaryHeap::new();
        let mut seq = 0u64;
        let mut generation = 0u64;
        for op in ops {
            match op {
                Op::Wait { owner, early } => {
                    let kind = if owner { WaitKind::Owner } else { WaitKind::Queue };
                    let until = now - Duration::from_millis(u64::from(early)) + length[kind as usize];
                    let id = RequestId(seq * 7 % 5);
                    timers.push_wait(kind, until, seq, id);
                    heap.push(Reverse((until, Timer::Queue { seq, id })));
                    seq += 1;
                }
                Op::Cool { process, ms } => {
                    generation += 1;
                    let until = now + Duration::from_millis(u64::from(ms));
                    timers.push_cool(until, usize::from(process), generation);
                    heap.push(Reverse((until, Timer::Cool { process: usize::from(process), generation })));
                }
                Op::Pop => {
                    timers.pop();
                    heap.pop();
                }
                Op::Tick { ms } => now += Duration::from_millis(u64::from(ms)),
                Op::Reload { owner, ms } => {
                    length[usize::from(owner)] = Duration::from_millis(u64::from(ms));
                }
            }
            prop_assert_eq!(timers.peek(), heap.peek().map(|Reverse(e)| *e));
        }
        while let Some(Reverse(e)) = heap.pop() {
            prop_assert_eq!(timers.peek(), Some(e));
            timers.pop();
        }
        prop_assert_eq!(timers.peek(), None);
    }
}
