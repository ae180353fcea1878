//! A request's future as the pipeline (`pipeline::handle`) builds it: the answer by the way the
//! request was routed (`Answering`), then its end, counted and logged, the last rule applied
//! (`Handled`). Written out, not one `async` block, so that each part holds its state once: a
//! block that moves what it captures into an awaited future keeps both (rust-lang/rust#62958),
//! and this future is boxed per request, its size that allocation's (see `conn::hyper_phase`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::{HeaderValue, CONNECTION};
use http::Response;
use tokio::time::Instant;

use super::finish;
use super::forward::{Arrival, ProxyBody};
use super::front::Front;
use super::listener_settings::ListenerSettings;
use crate::proxy::observed::RouteClass;

pin_project_lite::pin_project! {
    /// Steps 5 and 6 by the way the request was routed: a future of each, or the launcher's
    /// own answer.
    #[project = AnsweringProj]
    pub(super) enum Answering<M, T, R> {
        Now { resp: Option<Response<ProxyBody>> },
        Master { #[pin] fut: M },
        Tx { #[pin] fut: T },
        ReadFirst { fut: Pin<Box<R>> },
    }
}

impl<M, T, R> Future for Answering<M, T, R>
where
    M: Future<Output = Response<ProxyBody>>,
    T: Future<Output = Response<ProxyBody>>,
    R: Future<Output = Response<ProxyBody>>,
{
    type Output = Response<ProxyBody>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response<ProxyBody>> {
        match self.project() {
            // Polled once: the future ends with its first answer.
            AnsweringProj::Now { resp } => match resp.take() {
                Some(resp) => Poll::Ready(resp),
                None => Poll::Pending,
            },
            AnsweringProj::Master { fut } => fut.poll(cx),
            AnsweringProj::Tx { fut } => fut.poll(cx),
            AnsweringProj::ReadFirst { fut } => fut.as_mut().poll(cx),
        }
    }
}

/// What the answer's end needs (step 7's counting, the access log, the last rule).
pub(super) struct Rest<W> {
    pub(super) front: Arc<Front>,
    pub(super) cfg: Arc<ListenerSettings>,
    pub(super) started: Instant,
    pub(super) access: Option<finish::Pending>,
    pub(super) arrival: Option<Arrival>,
    pub(super) class: RouteClass,
    pub(super) wrap: W,
}

pin_project_lite::pin_project! {
    /// A request's future: its answer, then its end.
    pub(super) struct Handled<A, W> {
        #[pin]
        answering: A,
        rest: Option<Rest<W>>,
    }
}

impl<A, W> Handled<A, W> {
    pub(super) fn new(answering: A, rest: Rest<W>) -> Handled<A, W> {
        Handled {
            answering,
            rest: Some(rest),
        }
    }
}

impl<A, W, B> Future for Handled<A, W>
where
    A: Future<Output = Response<ProxyBody>>,
    W: FnOnce(ProxyBody, bool) -> B,
{
    type Output = Result<Response<B>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let resp = std::task::ready!(this.answering.poll(cx));
        let Some(rest) = this.rest.take() else {
            // Polled after its end: hyper does not.
            return Poll::Pending;
        };
        let Rest {
            front,
            cfg,
            started,
            access,
            arrival,
            class,
            wrap,
        } = rest;
        let resp = finish::finish(
            &front.roster,
            &front.counters.observed,
            &cfg,
            class,
            started,
            access,
            resp,
        );
        let read_whole = arrival.as_ref().is_none_or(Arrival::is_complete);
        Poll::Ready(Ok(respond(resp, &arrival).map(|b| wrap(b, read_whole))))
    }
}

/// Step 6's last rule: `Connection: close` when the client's body was not read to the end.
fn respond(mut resp: Response<ProxyBody>, arrival: &Option<Arrival>) -> Response<ProxyBody> {
    if arrival.as_ref().is_some_and(|a| !a.is_complete()) {
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}
