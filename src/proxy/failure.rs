//! Every way a request ends in the launcher's own answer, and the one place that turns it into
//! the answer, counts it and logs it (as pingora's `fail_to_proxy`). The request path says what
//! happened (a [`Failure`]); [`fail`] decides what the client hears (an [`Answer`]), what is
//! counted and against which process (`Counters::count`), and what is logged: a process's
//! failure as a WARNING, a client's own doing at debug only (a hostile client could flood the
//! log otherwise).

use std::time::Duration;

use tracing::{debug, warn};

use super::bad_gateway_log::Why;

use http::Response;

use super::answer::Answer;
use super::forward::{ForwardError, Peer, ProxyBody};
use super::front::Front;
use super::route::BadTarget;
use super::scheduler::Refusal;
use super::served;
use crate::process::ProcessId;

/// What went wrong with a request, as the request path found it.
pub(crate) enum Failure<'a> {
    /// A method the launcher never proxies (`CONNECT`).
    Unsupported,
    /// No `Host`, more than one, or one that is no host.
    BadHost { why: &'static str, from: &'a Peer },
    /// A target the route table refuses.
    BadTarget(BadTarget),
    /// A request line and headers over `max_head` bytes (`headerMaxKB`), seen by the lobby.
    HeadTooLarge { max_head: usize },
    /// A head hyper's parser would refuse, seen by the lobby.
    BadHead(super::conn::Refused),
    /// The client had not sent its whole body after `waited` (the `setting` that says how long
    /// it may take): read ahead before admission, or still arriving when the upstream timeout
    /// ran out. The client's doing, not the process's.
    BodyLate {
        waited: Duration,
        setting: &'static str,
    },
    /// The client's body was malformed or cut short (bad chunking, gone mid-body).
    BodyFailed(&'a (dyn std::fmt::Display + Sync)),
    /// One of the master's paths while the master is not ready.
    MasterNotReady,
    /// The scheduler refused it (`cache_id` is the request's, for `OwnerGone`).
    Refused { reason: Refusal, cache_id: &'a str },
    /// Nothing was sent to `process`, and no other process could take it.
    NotSent(ProcessId),
    /// `process` ended by itself while the request, idempotent and unanswered, was on it: not
    /// sent on, since it may be the cause (DEC-73).
    MayHaveEndedIt {
        process: ProcessId,
        ending: crate::process::Ending,
    },
    /// Forwarding to `process` failed (the error says where).
    Upstream {
        process: ProcessId,
        error: &'a ForwardError,
    },
    /// The cache-id's issuer is down, or died under the request: its caches are gone.
    IssuerGone { owner: ProcessId, cache_id: &'a str },
}

/// The launcher's answer to `failure`, counted (against the process it names, when it is that
/// process's loss) and logged.
pub(crate) fn fail(front: &Front, failure: Failure<'_>) -> Answer {
    let (answer, against) = answer(front, failure);
    front.counters.count(&answer, against);
    answer
}

/// `fail`, as the response, which names the process the answer concerns when there is one (a
/// `502`/`504`, the `404` for a lost cache-id), for `servedByHeader` and the access log.
pub(crate) fn fail_respond(front: &Front, failure: Failure<'_>) -> Response<ProxyBody> {
    let (answer, against) = answer(front, failure);
    front.counters.count(&answer, against);
    let resp = answer.respond();
    match against {
        Some(p) => served::by(resp, p),
        None => resp,
    }
}

/// The answer, and the process it is counted against; logs what is worth a line.
fn answer(front: &Front, failure: Failure<'_>) -> (Answer, Option<ProcessId>) {
    let code = |p: ProcessId| front.roster.code(p).to_string();
    match failure {
        Failure::Unsupported => (Answer::Unsupported, None),
        Failure::BadHost { why, from } => {
            debug!("a request from {from} refused with 400: {why}");
            (Answer::BadHost(why), None)
        }
        Failure::BadTarget(bad) => (Answer::BadTarget(bad), None),
        Failure::HeadTooLarge { max_head } => {
            let max_kb = (max_head >> 10) as u64;
            debug!("a client sent a request head over {max_kb} KB (headerMaxKB): answered 431");
            (Answer::HeadTooLarge { max_kb }, None)
        }
        Failure::BadHead(refused) => {
            use super::conn::Refused;
            let answer = match refused {
                Refused::Bad(why) => Answer::BadHead(why),
                Refused::TooManyHeaders => Answer::TooManyHeaders,
                Refused::TargetTooLong => Answer::TargetTooLong,
            };
            debug!("a client sent a request head hyper would refuse: {refused:?}; answered itself");
            (answer, None)
        }
        Failure::BodyLate { waited, setting } => {
            debug!(
                "a client had not sent its whole request body after {} s ({setting}); \
                 answered 408",
                waited.as_secs_f64()
            );
            (Answer::RequestTimeout, None)
        }
        Failure::BodyFailed(error) => {
            debug!("a client's request body failed: {error}; answered 400");
            (Answer::BadRequestBody, None)
        }
        Failure::MasterNotReady => (Answer::MasterNotReady, None),
        Failure::Refused { reason, cache_id } => match reason {
            Refusal::QueueTimeout { waited } => {
                let waited_secs = waited.as_secs_f64();
                (Answer::QueueTimeout { waited_secs }, None)
            }
            Refusal::Forecast {
                waited,
                retry_after,
                early,
            } => {
                let waited_secs = waited.as_secs_f64();
                let answer = Answer::QueueForecast {
                    waited_secs,
                    retry_after,
                    early,
                };
                (answer, None)
            }
            Refusal::OwnerGone(owner) => answer(front, Failure::IssuerGone { owner, cache_id }),
            Refusal::NoProcessReady => (Answer::NoProcessReady, None),
            Refusal::Stopping => (Answer::Stopping, None),
        },
        Failure::NotSent(process) => {
            let code = code(process);
            front.bad_gateway_log.warn(process, Why::NotSent, || {
                format!(
                    "{code}: a request could not be sent to it or came back unanswered, and no \
                     other process could take it; answered 502"
                )
            });
            (Answer::BadGateway { code, ended: None }, Some(process))
        }
        Failure::MayHaveEndedIt { process, ending } => {
            let (code, how) = (code(process), ending.to_string());
            front
                .bad_gateway_log
                .warn(process, Why::MayHaveEndedIt, || {
                    format!(
                        "{code}: ended ({how}) with a request unanswered, not sent to another \
                     process as it may be what ended it (DEC-73); answered 502"
                    )
                });
            let answer = Answer::BadGateway {
                code,
                ended: Some(how),
            };
            (answer, Some(process))
        }
        Failure::Upstream { process, error } if error.client_body_failed() => {
            // Not the process's failure: neither counted against it nor logged as one.
            let code = code(process);
            debug!("{code}: the client's request body failed: {error}; answered 400");
            (Answer::BadRequestBody, None)
        }
        Failure::Upstream { process, error } if error.is_timeout() => {
            let (code, secs) = (code(process), front.upstream_timeout().as_secs_f64());
            warn!(
                "{code}: no response began within {secs} s (upstreamTimeoutSeconds); \
                 answered 504"
            );
            (Answer::GatewayTimeout { code, secs }, Some(process))
        }
        Failure::Upstream { process, error } => {
            let code = code(process);
            front.bad_gateway_log.warn(process, Why::Failed, || {
                format!("{code}: {error}; answered 502")
            });
            (Answer::BadGateway { code, ended: None }, Some(process))
        }
        // However the launcher learned the issuer was gone (the scheduler knew, the connection
        // was refused, or it died mid-request): counted once against it for the daily report
        // (EVENT-8).
        Failure::IssuerGone { owner, cache_id } => {
            let cache_id = cache_id.to_string();
            (Answer::CacheIdLost { cache_id }, Some(owner))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use super::*;
    use crate::proxy::front::test_front;
    use crate::status::events::{LostKind, RefusalKind};

    const TX1: ProcessId = ProcessId(1);
    const TX2: ProcessId = ProcessId(2);

    #[test]
    fn a_queue_wait_is_a_503_naming_the_wait_and_a_refusal_in_the_report() {
        // spec: QUEUE-4, EVENT-10
        let front = test_front(2);
        let reason = Refusal::QueueTimeout {
            waited: Duration::from_secs(30),
        };
        let a = fail(
            &front,
            Failure::Refused {
                reason,
                cache_id: "",
            },
        );
        assert_eq!(a.status(), 503);
        assert!(
            a.outcome().text.contains("within 30 s"),
            "{:?}",
            a.outcome()
        );
        let t = front.counters.tally();
        assert_eq!(t.refused[RefusalKind::QueueWait], 1);
        assert!(t.lost.iter().all(|l| l.iter().all(|(_, n)| *n == 0)));
    }

    #[test]
    fn an_issuer_gone_is_a_404_counted_once_against_it_however_it_was_learned() {
        // spec: ROUTE-3b, EVENT-8
        let front = test_front(2);
        let refused = Failure::Refused {
            reason: Refusal::OwnerGone(TX2),
            cache_id: "tx2.a.b",
        };
        let a = fail(&front, refused);
        assert_eq!(a.status(), 404);
        assert_eq!(a.outcome().tx_issue_type, Some("cache-id-unknown"));
        let died = Failure::IssuerGone {
            owner: TX2,
            cache_id: "tx2.a.b",
        };
        assert_eq!(fail(&front, died), a);
        let t = front.counters.tally();
        assert_eq!(t.lost[2][LostKind::CacheIdWhileRestarting], 2);
        assert_eq!(t.lost[1][LostKind::CacheIdWhileRestarting], 0);
    }

    #[test]
    fn a_process_failure_is_its_502_or_504_and_counted_against_it() {
        // spec: LAUNCH-9, TIMEOUT-1, TIMEOUT-2, EVENT-6, EVENT-7
        let front = test_front(2);
        let timeout = ForwardError::Timeout(Duration::from_secs(60));
        let a = fail(
            &front,
            Failure::Upstream {
                process: TX1,
                error: &timeout,
            },
        );
        assert_eq!(a.status(), 504);
        assert!(a.outcome().text.contains("tx1"), "{:?}", a.outcome());
        let refused = ForwardError::Connect(std::io::ErrorKind::ConnectionRefused.into());
        let upstream = Failure::Upstream {
            process: TX1,
            error: &refused,
        };
        assert_eq!(fail(&front, upstream).status(), 502);
        assert_eq!(fail(&front, Failure::NotSent(TX2)).status(), 502);
        let t = front.counters.tally();
        assert_eq!(t.lost[1][LostKind::Timeout504], 1);
        assert_eq!(t.lost[1][LostKind::BadGateway502], 1);
        assert_eq!(t.lost[2][LostKind::BadGateway502], 1);
        assert_eq!(front.counters.bad_gateway.load(Relaxed), 2);
    }

    #[test]
    fn the_clients_own_doing_is_counted_against_no_process() {
        // spec: DEC-31 (408 and 431 are the launcher's own answers, counted against no process)
        let front = test_front(1);
        let late = Failure::BodyLate {
            waited: Duration::from_secs(10),
            setting: "headerTimeoutSeconds",
        };
        assert_eq!(fail(&front, late).status(), 408);
        let big = Failure::HeadTooLarge { max_head: 32 << 10 };
        assert_eq!(
            fail(&front, big),
            Answer::HeadTooLarge { max_kb: 32 },
            "431 naming headerMaxKB"
        );
        let broken = std::io::Error::other("bad chunk");
        assert_eq!(fail(&front, Failure::BodyFailed(&broken)).status(), 400);
        let c = &front.counters;
        assert_eq!(c.request_timeouts.load(Relaxed), 1);
        assert_eq!(c.heads_too_large.load(Relaxed), 1);
        let t = c.tally();
        assert!(t.lost.iter().all(|l| l.iter().all(|(_, n)| *n == 0)));
        assert!(t.refused.iter().all(|(_, n)| *n == 0));
    }

    #[test]
    fn a_refusal_while_stopping_or_with_none_ready_is_a_503_in_the_report() {
        // spec: QUEUE-15, QUEUE-16
        let front = test_front(1);
        for reason in [Refusal::Stopping, Refusal::NoProcessReady] {
            let f = Failure::Refused {
                reason,
                cache_id: "",
            };
            assert_eq!(fail(&front, f).status(), 503);
        }
        assert_eq!(fail(&front, Failure::MasterNotReady).status(), 503);
        let t = front.counters.tally();
        assert_eq!(t.refused[RefusalKind::Stopping], 1);
        assert_eq!(
            t.refused[RefusalKind::NoProcessReady],
            2,
            "the master's 503 too"
        );
    }
}
