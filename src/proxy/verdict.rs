//! The scheduler's decision about one request as the request holds it: made at once (the
//! common case: a free slot), or to come on a channel while the request waits.
//!
//! Why not always a channel: a decision made while the request is being admitted needs no
//! waiter registered, no channel allocated, sent and polled; that was about 800 instructions of
//! every forwarded request's ~41,000 (callgrind, issue #19).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;
#[cfg(test)]
use tokio::sync::oneshot::error::TryRecvError;

use super::scheduler::Refusal;
use crate::process::ProcessId;

/// The scheduler's decision about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Go(ProcessId),
    Refused(Refusal),
    /// Not sent to this process and nowhere else could take it: `502`.
    Fail(ProcessId),
}

/// A decision made, or to come. Awaited, `None` means there will be none: the scheduler
/// dropped the request undecided (only while stopping).
#[derive(Debug)]
pub struct Verdict(State);

#[derive(Debug)]
enum State {
    Made(Option<Decision>),
    Coming(oneshot::Receiver<Decision>),
}

impl Verdict {
    /// Already decided (`None`: dropped undecided).
    pub fn made(decision: Option<Decision>) -> Verdict {
        Verdict(State::Made(decision))
    }

    /// To come on `rx`.
    pub fn coming(rx: oneshot::Receiver<Decision>) -> Verdict {
        Verdict(State::Coming(rx))
    }

    /// Nothing decided yet: the request waits.
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            State::Made(_) => false,
            State::Coming(rx) => rx.is_empty(),
        }
    }

    /// The decision if there is one now (the tests' look without awaiting).
    #[cfg(test)]
    pub fn try_recv(&mut self) -> Result<Decision, TryRecvError> {
        match &mut self.0 {
            State::Made(d) => d.take().ok_or(TryRecvError::Closed),
            State::Coming(rx) => rx.try_recv(),
        }
    }
}

impl Future for Verdict {
    type Output = Option<Decision>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Decision>> {
        match &mut self.get_mut().0 {
            State::Made(d) => Poll::Ready(d.take()),
            State::Coming(rx) => Pin::new(rx).poll(cx).map(Result::ok),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::ProcessId;

    #[tokio::test]
    async fn a_made_decision_is_there_at_once_and_a_coming_one_when_sent() {
        let go = Decision::Go(ProcessId::MASTER);
        let mut made = Verdict::made(Some(go));
        assert!(!made.is_empty());
        assert_eq!(made.try_recv(), Ok(go));
        assert_eq!(Verdict::made(Some(go)).await, Some(go));
        assert_eq!(Verdict::made(None).await, None);

        let (tx, rx) = oneshot::channel();
        let mut coming = Verdict::coming(rx);
        assert!(coming.is_empty());
        assert_eq!(coming.try_recv(), Err(TryRecvError::Empty));
        let _ = tx.send(go);
        assert!(!coming.is_empty());
        assert_eq!(coming.await, Some(go));

        let (tx, rx) = oneshot::channel::<Decision>();
        drop(tx);
        assert_eq!(Verdict::coming(rx).await, None, "dropped undecided");
    }
}
