//! The upstream timeout (TIMEOUT-3, 5, 6): a send given up with [`ForwardError::Timeout`] when
//! its response head has not begun within `upstreamTimeoutSeconds`, on a timer reused from
//! request to request.
//!
//! Why reused: nearly every request is answered long before its timeout, so its timer is armed and
//! dropped without ever firing, and a new `tokio::time::Sleep` per request costs a registration in
//! the runtime's timer wheel under the driver's lock at its first poll and a removal under the same
//! lock when dropped, besides making it (DEC-62). A timer given back here stays in the wheel as it
//! is, and the next request takes it with its deadline unchanged if that is still ahead and no
//! later than its own: such a timer can only fire early, never late, and one that fires before the
//! request's own deadline is set to it then (`reset`, rare: only a request still waiting then).
//! Moving every spare's deadline on each request (tokio's `Sleep::reset`) would cost much of what a
//! new timer does, so a spare is set anew only once it has gone past: about once per timeout each.
//! A spare that nobody takes fires once at its deadline and wakes, for nothing, the task that last
//! polled it.
//!
//! The spares are kept per thread (no lock), a few only ([`KEEP`]), each with the runtime it
//! belongs to: a timer is only ever polled in its own runtime (another's driver may not be
//! running, and its wake would never come).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Response;
use tokio::runtime::{Handle, Id};
use tokio::time::{Instant, Sleep};

use super::error::{ForwardError, SendFailure};
use super::upstream_body::UpstreamBody;
use crate::deadline::Later;

/// Spare timers kept per thread: about as many as requests wait for a head at once on it (more
/// are dropped as they come back; fewer only means a new timer now and then).
pub const KEEP: usize = 64;

type Timer = Pin<Box<Sleep>>;

thread_local! {
    static SPARE: RefCell<Vec<(Id, Timer)>> = const { RefCell::new(Vec::new()) };
}

pin_project_lite::pin_project! {
    /// A send given up with [`ForwardError::Timeout`] when its response head has not begun
    /// within `timeout` (zero: never) of `sent`, the caller's clock read as it sends; a timer
    /// is armed only when the send first has to wait.
    pub struct Timed<F> {
        #[pin]
        send: F,
        timeout: Duration,
        // The send's start, read once by the caller for its own figures too.
        sent: Instant,
        // When the send is given up, `timeout` after `sent`: set when it first waits.
        deadline: Option<Instant>,
        // Set to `deadline` or earlier.
        timer: Option<(Id, Timer)>,
    }

    impl<F> PinnedDrop for Timed<F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(timer) = this.project().timer.take() {
                give_back(timer);
            }
        }
    }
}

impl<F> Timed<F> {
    /// `send`, started at `sent`, given up `timeout` after it (zero: never).
    pub fn new(send: F, timeout: Duration, sent: Instant) -> Timed<F> {
        Timed {
            send,
            timeout,
            sent,
            deadline: None,
            timer: None,
        }
    }
}

impl<F, B> Future for Timed<F>
where
    F: Future<Output = Result<Response<UpstreamBody>, SendFailure<B>>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        // The send first, as `tokio::time::timeout` polls it: a head that came in time wins.
        if let Poll::Ready(done) = this.send.poll(cx) {
            if let Some(timer) = this.timer.take() {
                give_back(timer);
            }
            return Poll::Ready(done);
        }
        if this.timeout.is_zero() {
            return Poll::Pending;
        }
        let (deadline, (_, timer)) = match (*this.deadline, this.timer.as_mut()) {
            (Some(deadline), Some(timer)) => (deadline, timer),
            _ => {
                // No clock read: the send's start is the caller's (a spare set between it and
                // now fires at once and is set again below).
                let deadline = this.sent.later(*this.timeout);
                *this.deadline = Some(deadline);
                (deadline, this.timer.insert(take(*this.sent, deadline)))
            }
        };
        loop {
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // A spare set earlier than this send's own deadline: set to it now.
            if timer.deadline() < deadline && Instant::now() < deadline {
                timer.as_mut().reset(deadline);
                continue;
            }
            return Poll::Ready(Err(SendFailure {
                error: ForwardError::Timeout(*this.timeout),
                request: None,
            }));
        }
    }
}

/// A timer of this thread's runtime that fires after `now` and by `deadline`: a spare if there
/// is one (set anew only if its own deadline is not in that span).
fn take(now: Instant, deadline: Instant) -> (Id, Timer) {
    let runtime = Handle::current().id();
    let spare = SPARE
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let at = s.iter().rposition(|(id, _)| *id == runtime)?;
            Some(s.swap_remove(at).1)
        })
        .ok()
        .flatten();
    let timer = match spare {
        Some(mut timer) => {
            let at = timer.deadline();
            if at <= now || at > deadline {
                timer.as_mut().reset(deadline);
            }
            timer
        }
        None => Box::pin(tokio::time::sleep_until(deadline)),
    };
    (runtime, timer)
}

/// A timer no longer needed, kept for the next request unless enough are.
fn give_back(timer: (Id, Timer)) {
    // At the thread's end (its spares already dropped) it is simply dropped.
    let _ = SPARE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if s.len() < KEEP {
                s.push(timer);
            }
        }
    });
}

/// How many spare timers this thread holds. For the tests.
#[cfg(test)]
pub fn spares() -> usize {
    SPARE.with(|s| s.borrow().len())
}

#[cfg(test)]
#[path = "timed_tests.rs"]
mod tests;
