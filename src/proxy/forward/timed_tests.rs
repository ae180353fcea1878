//! The upstream timeout on reused timers: it still fires on a send that hangs, whatever timer
//! it got (new, a spare moved later, a spare moved earlier, one that fired), and never one of
//! another runtime. (The pool's own tests time real sends: `pool_tests.rs`.)

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Response;
use tokio::time::Instant;

use super::*;
use crate::proxy::forward::error::{ForwardError, SendFailure};
use crate::proxy::forward::upstream_body::UpstreamBody;

type Out = Result<Response<UpstreamBody>, SendFailure<()>>;

/// A send that waits `waits` times (waking itself each time), then fails as a refused connect
/// (any outcome that is not a timeout): what a quick answer looks like to `Timed`.
struct Quick {
    waits: u32,
}

impl Future for Quick {
    type Output = Out;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Out> {
        if self.waits == 0 {
            return Poll::Ready(Err(SendFailure {
                error: ForwardError::Connect(std::io::ErrorKind::ConnectionRefused.into()),
                request: None,
            }));
        }
        self.waits -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A process that never answers.
fn hung() -> impl Future<Output = Out> {
    std::future::pending()
}

fn timed_out(out: &Out) -> bool {
    matches!(
        out,
        Err(SendFailure {
            error: ForwardError::Timeout(_),
            ..
        })
    )
}

/// How long a hung send takes to be given up after `timeout`.
async fn hang(timeout: Duration) -> Duration {
    let start = Instant::now();
    let out = Timed::new(hung(), timeout, Instant::now()).await;
    assert!(
        timed_out(&out),
        "not a timeout: {:?}",
        out.err().map(|f| f.error)
    );
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn a_hung_send_times_out_on_a_new_timer_and_on_each_reused_one() {
    // spec: TIMEOUT-1, DEC-62
    let t = Duration::from_secs(60);
    assert_eq!(spares(), 0);
    let took = hang(t).await;
    assert!(
        took >= t && took < t + Duration::from_millis(10),
        "{took:?}"
    );
    // Its timer is kept, and the next hung send's fires as surely, at its own deadline.
    assert_eq!(spares(), 1);
    for _ in 0..3 {
        let took = hang(t).await;
        assert!(
            took >= t && took < t + Duration::from_millis(10),
            "{took:?}"
        );
        assert_eq!(spares(), 1, "one timer, reused");
    }
}

#[tokio::test(start_paused = true)]
async fn quick_answers_leave_a_timer_that_still_fires_for_a_later_hung_send() {
    // spec: TIMEOUT-1, TIMEOUT-5, DEC-62
    let t = Duration::from_secs(30);
    // Answered in time, a few polls each: no timeout, and the one timer comes back each time.
    for _ in 0..5 {
        let out = Timed::new(Quick { waits: 2 }, t, Instant::now()).await;
        assert!(!timed_out(&out));
        assert_eq!(spares(), 1);
    }
    // Halfway to the spare's deadline: taken as it is, it fires early, and is set on to this
    // send's own deadline then. (The clock is paused: the sleeps here are the scenario's time
    // moved on, no real wait.)
    tokio::time::sleep(t / 2).await;
    let took = hang(t).await;
    assert!(
        took >= t && took < t + Duration::from_millis(10),
        "{took:?}"
    );
    // Long after the spare's own deadline went by (it fired unused), and just before: both hang.
    // (The paused clock again.)
    tokio::time::sleep(t * 2).await;
    let took = hang(t).await;
    assert!(
        took >= t && took < t + Duration::from_millis(10),
        "{took:?}"
    );
    let took = hang(t).await;
    assert!(
        took >= t && took < t + Duration::from_millis(10),
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shorter_timeout_than_the_spare_was_set_to_is_kept() {
    // spec: TIMEOUT-1 (a reload may lower upstreamTimeoutSeconds), DEC-62
    let long = Duration::from_secs(600);
    let out = Timed::new(Quick { waits: 1 }, long, Instant::now()).await;
    assert!(!timed_out(&out));
    assert_eq!(spares(), 1, "its deadline ten minutes ahead");
    let short = Duration::from_secs(1);
    let took = hang(short).await;
    assert!(
        took >= short && took < short + Duration::from_millis(10),
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn no_timeout_arms_nothing_and_a_send_done_at_once_takes_no_timer() {
    // spec: DEC-62
    let out = Timed::new(Quick { waits: 3 }, Duration::ZERO, Instant::now()).await;
    assert!(!timed_out(&out));
    let out = Timed::new(Quick { waits: 0 }, Duration::from_secs(5), Instant::now()).await;
    assert!(!timed_out(&out));
    assert_eq!(spares(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_send_given_up_by_its_caller_gives_its_timer_back_and_spares_are_bounded() {
    // spec: DEC-62
    let t = Duration::from_secs(10);
    // More sends waiting at once than are kept: each has its own timer, and at most KEEP stay.
    let mut sends: Vec<_> = (0..KEEP + 8)
        .map(|_| Box::pin(Timed::new(hung(), t, Instant::now())))
        .collect();
    for s in &mut sends {
        let polled = std::future::poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx))).await;
        assert!(polled.is_pending());
    }
    assert_eq!(spares(), 0);
    drop(sends);
    assert_eq!(spares(), KEEP);
}

#[test]
fn a_spare_of_another_runtime_is_never_used() {
    // spec: DEC-62
    let t = Duration::from_millis(30);
    let rt = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    // A timer left behind by a runtime that has gone (as a test's runtime goes).
    rt().block_on(async {
        let out = Timed::new(Quick { waits: 1 }, t, Instant::now()).await;
        assert!(!timed_out(&out));
    });
    assert_eq!(spares(), 1);
    // A new runtime on the same thread: its hung send gets a timer of its own, which fires.
    let took = rt().block_on(async {
        tokio::time::timeout(Duration::from_secs(10), hang(t))
            .await
            .expect("the timeout never fired")
    });
    assert!(took >= t, "{took:?}");
}
