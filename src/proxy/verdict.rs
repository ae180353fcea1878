//! The scheduler's decision about one request as the request holds it: made at once (the
//! common case: a free slot), or to come while the request waits.
//!
//! Why not always a channel: a decision made while the request is being admitted needs no
//! waiter registered, no channel allocated, sent and polled, work on every forwarded request.
//!
//! Why no channel for one to come either: the admission's waiters, behind the one lock every
//! decision is made under, hold it (`admission::Waiter`): the request's task leaves its waker
//! there and takes the decision out, where a tokio oneshot is an allocation, its atomics and its
//! release for every queued request, and more bytes on the heap than the slot's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

#[cfg(test)]
use tokio::sync::oneshot::error::TryRecvError;

use super::admission::Admission;
use super::scheduler::{Refusal, RequestId};
use crate::process::ProcessId;

/// The scheduler's decision about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Go(ProcessId),
    Refused(Refusal),
    /// Not sent to this process and nowhere else could take it: `502`.
    Fail(ProcessId),
}

/// A decision made, or to come. Awaited, `None` means there will be none: the request's waiter
/// went undecided (its ticket dropped).
pub struct Verdict(State);

enum State {
    Made(Option<Decision>),
    /// In the admission's waiter for `id`, registered as `serial` (a retry registers the same
    /// request anew: an older verdict never takes the newer one's decision).
    Coming {
        admission: Arc<Admission>,
        id: RequestId,
        serial: u64,
    },
    /// Received: nothing more comes.
    Over,
}

impl std::fmt::Debug for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            State::Made(d) => f.debug_tuple("Made").field(d).finish(),
            State::Coming { id, serial, .. } => f
                .debug_struct("Coming")
                .field("id", id)
                .field("serial", serial)
                .finish(),
            State::Over => f.write_str("Over"),
        }
    }
}

impl Verdict {
    /// Already decided (`None`: dropped undecided).
    pub fn made(decision: Option<Decision>) -> Verdict {
        Verdict(State::Made(decision))
    }

    /// To come in `admission`'s waiter for `id`, registered as `serial`.
    pub(super) fn coming(admission: Arc<Admission>, id: RequestId, serial: u64) -> Verdict {
        Verdict(State::Coming {
            admission,
            id,
            serial,
        })
    }

    /// Nothing was decided as it was admitted: the request waits (its decision may come at
    /// any moment; awaiting it says). Without a look at the waiter, which would take the lock
    /// again for every queued request: the callers ask just after admitting, to know
    /// whether to make the request small while it waits.
    pub fn is_empty(&self) -> bool {
        !matches!(self.0, State::Made(_))
    }

    /// The decision if there is one now (the tests' look without awaiting).
    #[cfg(test)]
    pub fn try_recv(&mut self) -> Result<Decision, TryRecvError> {
        match &mut self.0 {
            State::Made(d) => d.take().ok_or(TryRecvError::Closed),
            State::Coming {
                admission,
                id,
                serial,
            } => match admission.take_decision(*id, *serial, None) {
                Poll::Ready(d) => {
                    self.0 = State::Over;
                    d.ok_or(TryRecvError::Closed)
                }
                Poll::Pending => Err(TryRecvError::Empty),
            },
            State::Over => Err(TryRecvError::Closed),
        }
    }
}

impl Future for Verdict {
    type Output = Option<Decision>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Decision>> {
        let this = self.get_mut();
        match &mut this.0 {
            State::Made(d) => Poll::Ready(d.take()),
            State::Coming {
                admission,
                id,
                serial,
            } => {
                let got = admission.take_decision(*id, *serial, Some(cx.waker()));
                if got.is_ready() {
                    this.0 = State::Over;
                }
                got
            }
            State::Over => Poll::Ready(None),
        }
    }
}

impl Drop for Verdict {
    #[inline]
    fn drop(&mut self) {
        if let State::Coming { .. } = self.0 {
            self.given_up();
        }
    }
}

impl Verdict {
    /// Given up before its decision came (the client went away, or the request was let go
    /// undecided): its waiter goes, so nothing is left behind for it. (Out of line: every
    /// request's verdict is dropped, nearly all made or over.)
    #[cold]
    #[inline(never)]
    fn given_up(&mut self) {
        if let State::Coming {
            admission,
            id,
            serial,
        } = &self.0
        {
            admission.forget_waiter(*id, *serial);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::process::ProcessId;
    use crate::proxy::lane::Lane;
    use crate::proxy::route::{Target, TxDemand};
    use crate::proxy::scheduler::{Finish, ProcessState, Scheduler, SchedulerConfig};

    const TX1: ProcessId = ProcessId(1);

    /// One process with one slot, so the second request waits.
    fn one_slot() -> Arc<Admission> {
        let cfg = SchedulerConfig {
            max_outstanding: 1,
            fast_lane_extra: 0,
            normal_min_slots: 0,
            queue: Duration::from_secs(60),
            ..SchedulerConfig::default()
        };
        let a = Admission::new(Scheduler::new(cfg, &[(TX1, true)]));
        a.set_state(TX1, ProcessState::Ready);
        a
    }

    fn any() -> TxDemand {
        TxDemand {
            target: Target::LeastLoaded,
            lane: Lane::Normal,
            counted: true,
        }
    }

    #[tokio::test]
    async fn a_made_decision_is_there_at_once_and_a_coming_one_when_sent() {
        let go = Decision::Go(ProcessId::MASTER);
        let mut made = Verdict::made(Some(go));
        assert!(!made.is_empty());
        assert_eq!(made.try_recv(), Ok(go));
        assert_eq!(Verdict::made(Some(go)).await, Some(go));
        assert_eq!(Verdict::made(None).await, None);

        let a = one_slot();
        let (first, now) = a.admit(&any());
        assert_eq!(now.await, Some(Decision::Go(TX1)));
        let (second, mut coming) = a.admit(&any());
        assert!(coming.is_empty(), "it waits");
        assert_eq!(coming.try_recv(), Err(TryRecvError::Empty));
        first.finish(Finish::Responded { status: 200 });
        assert_eq!(coming.await, Some(Decision::Go(TX1)));

        // Its ticket dropped while it waits: the request is cancelled, and the verdict says
        // there will be none.
        let (third, coming) = a.admit(&any());
        drop(third);
        assert_eq!(coming.await, None, "let go undecided");
        second.finish(Finish::Responded { status: 200 });
    }

    #[tokio::test]
    async fn a_verdict_given_up_leaves_no_waiter_behind() {
        let a = one_slot();
        let (first, now) = a.admit(&any());
        assert_eq!(now.await, Some(Decision::Go(TX1)));
        let (second, coming) = a.admit(&any());
        assert!(a.has_waiters());
        drop(coming);
        assert!(!a.has_waiters(), "the verdict's waiter went with it");
        // Its decision, made now, finds no one and is lost with it; its ticket cancels it.
        first.finish(Finish::Responded { status: 200 });
        drop(second);
        let (third, now) = a.admit(&any());
        assert_eq!(now.await, Some(Decision::Go(TX1)), "the slot was freed");
        third.finish(Finish::Responded { status: 200 });
        assert!(!a.has_waiters());
    }
}
