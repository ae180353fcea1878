//! The forecast's arithmetic (`forecast.rs`): exact cases and properties, no clock.

use proptest::prelude::*;

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn stream(first: u64, period: u64) -> Stream {
    Stream {
        first: ms(first),
        period: ms(period),
    }
}

const FAR: Duration = Duration::from_secs(3600);

#[test]
fn the_newcomer_takes_the_free_after_the_lines() {
    // spec: DEC-50
    let s = [stream(100, 300), stream(0, 1000)];
    let h = ms(5000);
    assert_eq!(
        slot(&s, [], h),
        Slot::At(ms(0)),
        "first in line: the first free"
    );
    assert_eq!(slot(&s, [FAR], h), Slot::At(ms(100)));
    assert_eq!(slot(&s, [FAR; 2], h), Slot::At(ms(400)));
    // frees: 0, 100, 400, 700, 1000, 1000, 1300 ...
    assert_eq!(slot(&s, [FAR; 5], h), Slot::At(ms(1000)));
    assert_eq!(slot(&s, [FAR; 6], h), Slot::At(ms(1300)));
    assert_eq!(
        slot(&s, [FAR; 6], ms(1299)),
        Slot::Later,
        "past the horizon"
    );
    assert_eq!(slot(&[], [], h), Slot::Unknown, "no slot to watch");
    assert_eq!(
        slot(&[stream(10, 0)], [FAR; 50], h),
        Slot::At(ms(10)),
        "work of no time"
    );
}

#[test]
fn one_whose_wait_ends_before_the_next_free_takes_none() {
    // spec: DEC-50, QUEUE-4 (it is refused first)
    let s = [stream(500, 1000)];
    let h = ms(5000);
    // Ahead: one refused at 0.3 s (before the free at 0.5 s), one at exactly 0.5 s (its
    // timer fires first), one that waits long enough.
    assert_eq!(slot(&s, [ms(300), ms(500), FAR], h), Slot::At(ms(1500)));
    assert_eq!(slot(&s, [ms(300), ms(500)], h), Slot::At(ms(500)));
}

#[test]
fn late_is_a_slot_after_the_wait_and_a_free_at_its_very_end_is_in_time() {
    // spec: DEC-50
    let wait = ms(1000);
    assert!(certainly_late(Slot::At(ms(1001)), wait));
    assert!(!certainly_late(Slot::At(ms(1000)), wait));
    assert!(certainly_late(Slot::Later, wait));
    assert!(
        !certainly_late(Slot::Unknown, wait),
        "nothing known: nothing certain"
    );
    assert_eq!(horizon(ms(1000)), ms(5000));
    assert_eq!(horizon(ms(30_000)), ms(30_000));
}

#[test]
fn retry_after_is_the_whole_seconds_until_the_slot_from_1_to_5() {
    // spec: DEC-50
    assert_eq!(retry_after(Slot::At(ms(0))), 1, "a slot now: at least 1");
    assert_eq!(retry_after(Slot::At(ms(1000))), 1);
    assert_eq!(retry_after(Slot::At(ms(1001))), 2);
    assert_eq!(retry_after(Slot::At(ms(2500))), 3);
    assert_eq!(retry_after(Slot::At(ms(4999))), 5);
    assert_eq!(retry_after(Slot::At(ms(60_000))), 5, "at most 5");
    assert_eq!(retry_after(Slot::Later), 5);
    assert_eq!(retry_after(Slot::Unknown), 5, "nothing known: the spec's 5");
}

#[test]
fn a_line_too_long_to_walk_is_not_forecast() {
    // spec: DEC-50
    let s = [stream(0, 1)];
    assert_eq!(slot(&s, vec![FAR; MOST_AHEAD], FAR), Slot::At(ms(1024)));
    assert_eq!(slot(&s, vec![FAR; MOST_AHEAD + 1], FAR), Slot::Unknown);
}

fn streams() -> impl Strategy<Value = Vec<Stream>> {
    prop::collection::vec((0u64..6000, 1u64..3000), 1..12)
        .prop_map(|v| v.into_iter().map(|(f, p)| stream(f, p)).collect())
}

fn line() -> impl Strategy<Value = Vec<Duration>> {
    prop::collection::vec(0u64..8000, 0..60).prop_map(|v| v.into_iter().map(ms).collect())
}

/// The slot by brute force: every free up to the horizon listed and sorted, handed out.
fn by_hand(s: &[Stream], ahead: &[Duration], horizon: Duration) -> Slot {
    let mut frees = Vec::new();
    for x in s {
        let mut t = x.first;
        while t <= horizon + ms(6000 + 3000 * 60) {
            frees.push(t);
            t += x.period;
        }
    }
    frees.sort();
    let mut it = frees.into_iter().peekable();
    for &ends in ahead {
        if it.peek().is_some_and(|&f| f < ends) {
            it.next();
        }
    }
    match it.next() {
        Some(f) if f <= horizon => Slot::At(f),
        _ => Slot::Later,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_slot_is_the_one_a_slot_by_slot_hand_out_finds(
        s in streams(),
        ahead in line(),
        h in 0u64..8000,
    ) {
        // spec: DEC-50
        prop_assert_eq!(slot(&s, ahead.clone(), ms(h)), by_hand(&s, &ahead, ms(h)));
    }

    #[test]
    fn retry_after_is_within_1_to_5_and_never_less_for_a_longer_wait(
        s in streams(),
        ahead in line(),
        more in line(),
        later in 0u64..3000,
        slower in 0u64..3000,
    ) {
        // spec: DEC-50
        let r = retry_after(slot(&s, ahead.clone(), FAR));
        prop_assert!((1..=RETRY_AFTER_MAX).contains(&r));
        // A later slot: never a shorter Retry-After.
        let at = |x: u64| retry_after(Slot::At(ms(x)));
        prop_assert!(at(later + slower) >= at(later));
        // More in the line: a slot no sooner.
        let longer: Vec<Duration> = ahead.iter().chain(more.iter().map(|_| &FAR)).copied().collect();
        prop_assert!(retry_after(slot(&s, longer, FAR)) >= r);
        // Every slot freeing later or less often, for a line that waits for it: no sooner.
        // (With waits that end, a slower slot can let more of the line be refused first, and
        // the newcomer's slot come sooner: the queue's own arithmetic, kept.)
        let patient = vec![FAR; ahead.len()];
        let before = retry_after(slot(&s, patient.clone(), FAR));
        let worse: Vec<Stream> = s
            .iter()
            .map(|x| Stream { first: x.first + ms(later), period: x.period + ms(slower) })
            .collect();
        prop_assert!(retry_after(slot(&worse, patient, FAR)) >= before);
    }

    #[test]
    fn late_and_retry_after_agree_and_a_longer_wait_is_never_more_late(
        s in streams(),
        ahead in line(),
        wait_s in 1u64..5,
        extra in 0u64..5000,
    ) {
        // spec: DEC-50
        let wait = Duration::from_secs(wait_s);
        let at = slot(&s, ahead.clone(), horizon(wait));
        if certainly_late(at, wait) {
            // No slot within the wait: the client is told to come back after it.
            prop_assert!(u64::from(retry_after(at)) > wait_s);
        } else {
            prop_assert!(u64::from(retry_after(at)) <= wait_s);
            let longer = wait + ms(extra);
            prop_assert!(!certainly_late(slot(&s, ahead, horizon(longer)), longer));
        }
    }
}
