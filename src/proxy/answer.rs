//! The launcher's own answers: each reason the launcher answers a request itself maps to one
//! status, its headers and a FHIR OperationOutcome. Which answer a failure gets, and its
//! counting, is `failure::fail`.

use http::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};

use super::forward::{full, ProxyBody};
use super::route::BadTarget;
use super::served::Served;
use crate::outcome::{printable, Outcome, CONTENT_TYPE as FHIR_JSON};

/// Why the launcher answers a request itself.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A method the launcher never proxies (`CONNECT`, see `forward::refuse`): `501`, with
    /// `Allow` naming the methods it does.
    Unsupported,
    /// The request target can't be routed: `400`.
    BadTarget(BadTarget),
    /// A master path while the master is not ready: `503` (LIMIT-1, LIMIT-2).
    MasterNotReady,
    /// No ready process could take it: `503` at once (QUEUE-16, DEC-10).
    NoProcessReady,
    /// Waited its whole wait for a slot: `503`, `Retry-After: 5`, `Connection: close`
    /// (QUEUE-4, QUEUE-5).
    QueueTimeout { waited_secs: f64 },
    /// The same, with `predictiveAdmission` (DEC-50): `Retry-After` says when a slot is expected
    /// (1-5 s); `early`: refused as it came, since it could not have been admitted within
    /// `waited_secs`.
    QueueForecast {
        waited_secs: f64,
        retry_after: u8,
        early: bool,
    },
    /// The launcher is stopping: `503` (QUEUE-15).
    Stopping,
    /// The cache-id's issuer is down or restarting: `404` `cache-id-unknown` (ROUTE-3b).
    CacheIdLost { cache_id: String },
    /// The client's request body was malformed or cut short as it was passed on: `400`,
    /// `Connection: close` (what follows on the connection can't be trusted).
    BadRequestBody,
    /// No `Host`, more than one, or one that is no host: `400` (RFC 9112 §3.2), `Connection:
    /// close` (a client that sends such a head is not one to go on reading from).
    BadHost(&'static str),
    /// The client had not sent its whole body in time: `408`, `Connection: close`. The
    /// client's doing, never counted against a process.
    RequestTimeout,
    /// The request line and headers were over `headerMaxKB`: `431`, `Connection: close`,
    /// before any process is asked.
    HeadTooLarge { max_kb: u64 },
    /// A request head hyper's parser would refuse (a character not allowed in the target, a
    /// malformed header, version or `Content-Length`): `400`, `Connection: close`, answered
    /// by the lobby before hyper sees it (`http1::request_head`); on a connection hyper holds,
    /// hyper's own bare `400`, counted and logged as this.
    BadHead(&'static str),
    /// More headers than hyper reads (100): `431`, `Connection: close`.
    TooManyHeaders,
    /// A request target over 65,534 bytes: `414`, `Connection: close`.
    TargetTooLong,
    /// The process took the request and gave no answer: `502` (LAUNCH-9). `ended`: how it
    /// ended by itself under the request, which was not sent on for it may be the cause
    /// (DEC-73).
    BadGateway { code: String, ended: Option<String> },
    /// No response began within `upstreamTimeoutSeconds`: `504` naming the process
    /// (TIMEOUT-1, TIMEOUT-2).
    GatewayTimeout { code: String, secs: f64 },
}

/// What a client should wait before trying again after a `503` of the launcher's.
pub const RETRY_AFTER_SECS: &str = "5";
/// The same, as a number.
const RETRY_AFTER_DEFAULT: u8 = 5;

/// The methods the launcher proxies, for `Allow` on a `501`.
const ALLOWED: &str = "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS";

impl Answer {
    pub fn status(&self) -> StatusCode {
        match self {
            Answer::Unsupported => StatusCode::NOT_IMPLEMENTED,
            Answer::BadTarget(_)
            | Answer::BadRequestBody
            | Answer::BadHost(_)
            | Answer::BadHead(_) => StatusCode::BAD_REQUEST,
            Answer::TooManyHeaders => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Answer::TargetTooLong => StatusCode::URI_TOO_LONG,
            Answer::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Answer::HeadTooLarge { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Answer::MasterNotReady
            | Answer::NoProcessReady
            | Answer::QueueTimeout { .. }
            | Answer::QueueForecast { .. }
            | Answer::Stopping => StatusCode::SERVICE_UNAVAILABLE,
            Answer::CacheIdLost { .. } => StatusCode::NOT_FOUND,
            Answer::BadGateway { .. } => StatusCode::BAD_GATEWAY,
            Answer::GatewayTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// Why the launcher answered itself, as `/metrics` and the access log name it.
    pub fn reason(&self) -> &'static str {
        match self {
            Answer::Unsupported => "unsupported",
            Answer::BadTarget(_) => "bad_target",
            Answer::MasterNotReady => "master_not_ready",
            Answer::NoProcessReady => "no_process_ready",
            Answer::QueueTimeout { .. } | Answer::QueueForecast { .. } => "queue_wait",
            Answer::Stopping => "stopping",
            Answer::CacheIdLost { .. } => "cache_id_lost",
            Answer::BadRequestBody => "bad_request_body",
            Answer::BadHost(_) => "bad_host",
            Answer::RequestTimeout => "request_timeout",
            Answer::HeadTooLarge { .. } => "head_too_large",
            Answer::BadHead(_) => "bad_request_head",
            Answer::TooManyHeaders => "too_many_headers",
            Answer::TargetTooLong => "target_too_long",
            Answer::BadGateway { .. } => "bad_gateway",
            Answer::GatewayTimeout { .. } => "gateway_timeout",
        }
    }

    pub fn outcome(&self) -> Outcome {
        match self {
            Answer::Unsupported => Outcome::error(
                "not-supported",
                "CONNECT is not supported: this server is not a forward proxy",
            ),
            Answer::BadTarget(why) => Outcome::error("invalid", format!("Bad request: {why}")),
            Answer::BadRequestBody => Outcome::error(
                "invalid",
                "Bad request: the request body was malformed or cut short",
            ),
            Answer::BadHost(why) => Outcome::error("invalid", format!("Bad request: {why}")),
            Answer::RequestTimeout => Outcome::error(
                "timeout",
                "The request body did not arrive in time; send it whole and promptly",
            ),
            Answer::HeadTooLarge { max_kb } => Outcome::error(
                "too-long",
                format!(
                    "The request line and headers are over {max_kb} KB \
                     (server.cluster.headerMaxKB)"
                ),
            ),
            Answer::BadHead(why) => Outcome::error("invalid", format!("Bad request: {why}")),
            Answer::TooManyHeaders => {
                Outcome::error("too-long", "The request has more than 100 header fields")
            }
            Answer::TargetTooLong => {
                Outcome::error("too-long", "The request target is over 65,534 bytes")
            }
            Answer::MasterNotReady => Outcome::error(
                "transient",
                "The master server is not ready (starting or restarting); try again shortly",
            ),
            Answer::NoProcessReady => Outcome::error(
                "transient",
                "No server process is ready to take this request (starting or restarting); \
                 try again shortly",
            ),
            Answer::QueueTimeout { waited_secs } => Outcome::error(
                "transient",
                format!(
                    "The server is busy: no process was free within {waited_secs} s; \
                     try again in {RETRY_AFTER_SECS} s"
                ),
            ),
            Answer::QueueForecast {
                waited_secs,
                retry_after,
                early,
            } => {
                let free = if *early {
                    "no process can be free"
                } else {
                    "no process was free"
                };
                Outcome::error(
                    "transient",
                    format!(
                        "The server is busy: {free} within {waited_secs} s; \
                         try again in {retry_after} s"
                    ),
                )
            }
            Answer::Stopping => Outcome::error(
                "transient",
                "The server is shutting down; try again shortly",
            ),
            Answer::CacheIdLost { cache_id } => Outcome::cache_id_lost_to_restart(cache_id),
            Answer::BadGateway { code, ended: None } => Outcome::error(
                "exception",
                format!(
                    "Server process {} failed without answering the request",
                    printable(code)
                ),
            ),
            Answer::BadGateway {
                code,
                ended: Some(how),
            } => Outcome::error(
                "exception",
                format!(
                    "Server process {} ended ({how}) while working on the request, which was \
                     not sent to another process: the request may be what ended it",
                    printable(code)
                ),
            ),
            Answer::GatewayTimeout { code, secs } => Outcome::error(
                "timeout",
                format!(
                    "Server process {} did not begin its response within {secs} s \
                     (upstreamTimeoutSeconds); the request was aborted",
                    printable(code)
                ),
            ),
        }
    }

    /// The response: status, headers, OperationOutcome body.
    pub fn respond(&self) -> Response<ProxyBody> {
        let mut resp = Response::new(full(self.outcome().to_bytes()));
        *resp.status_mut() = self.status();
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static(FHIR_JSON));
        if let Some(secs) = self.retry_after() {
            h.insert(RETRY_AFTER, HeaderValue::from(u16::from(secs)));
        }
        if self.closes() {
            h.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        if *self == Answer::Unsupported {
            h.insert(ALLOW, HeaderValue::from_static(ALLOWED));
        }
        // A process's failure (`502`, `504`) is no refusal; the pipeline names the process.
        let refused = !matches!(
            self,
            Answer::BadGateway { .. } | Answer::GatewayTimeout { .. }
        );
        resp.extensions_mut().insert(Served {
            refused,
            own: Some(self.reason()),
            ..Served::default()
        });
        resp
    }

    /// `Retry-After` (seconds), on every `503`: the spec's 5, or the forecast's (DEC-50).
    pub fn retry_after(&self) -> Option<u8> {
        match self {
            Answer::QueueForecast { retry_after, .. } => Some(*retry_after),
            _ if self.status() == StatusCode::SERVICE_UNAVAILABLE => Some(RETRY_AFTER_DEFAULT),
            _ => None,
        }
    }

    /// Whether the connection is closed after this answer, and the answer says so.
    fn closes(&self) -> bool {
        matches!(
            self,
            Answer::QueueTimeout { .. }
                | Answer::QueueForecast { .. }
                | Answer::Stopping
                | Answer::BadRequestBody
                | Answer::BadHost(_)
                | Answer::RequestTimeout
                | Answer::HeadTooLarge { .. }
                | Answer::BadHead(_)
                | Answer::TooManyHeaders
                | Answer::TargetTooLong
        )
    }

    /// The whole HTTP/1.1 response as bytes, for a connection hyper doesn't hold (the lobby).
    pub fn to_http1(&self) -> Vec<u8> {
        let status = self.status();
        let body = self.outcome().to_bytes();
        let mut out = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {FHIR_JSON}\r\ncontent-length: {}\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            body.len()
        )
        .into_bytes();
        if let Some(secs) = self.retry_after() {
            out.extend_from_slice(format!("retry-after: {secs}\r\n").as_bytes());
        }
        if self.closes() {
            out.extend_from_slice(b"connection: close\r\n");
        }
        if *self == Answer::Unsupported {
            out.extend_from_slice(format!("allow: {ALLOWED}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&body);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_timeout_is_503_with_retry_after_5_and_connection_close() {
        // spec: QUEUE-4, QUEUE-5
        let r = Answer::QueueTimeout { waited_secs: 1.0 }.respond();
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()[RETRY_AFTER], "5");
        assert_eq!(r.headers()[CONNECTION], "close");
        assert_eq!(r.headers()[CONTENT_TYPE], FHIR_JSON);
    }

    #[test]
    fn a_forecast_refusal_is_the_same_503_with_the_forecast_retry_after() {
        // spec: DEC-50, QUEUE-5 (the header and the answer as the spec's, its value measured)
        for early in [true, false] {
            let a = Answer::QueueForecast {
                waited_secs: 1.0,
                retry_after: 2,
                early,
            };
            let r = a.respond();
            assert_eq!(r.status(), 503);
            assert_eq!(r.headers()[RETRY_AFTER], "2");
            assert_eq!(r.headers()[CONNECTION], "close");
            assert_eq!(r.headers()[CONTENT_TYPE], FHIR_JSON);
            assert_eq!(a.reason(), "queue_wait");
            let o = a.outcome();
            assert_eq!(o.code, "transient");
            assert!(
                o.text.contains("within 1 s; try again in 2 s"),
                "{}",
                o.text
            );
            let raw = String::from_utf8(a.to_http1()).unwrap_or_default();
            assert!(raw.contains("\r\nretry-after: 2\r\n"), "{raw}");
        }
        let spec = Answer::QueueTimeout { waited_secs: 1.0 };
        assert!(String::from_utf8(spec.to_http1())
            .unwrap_or_default()
            .contains("\r\nretry-after: 5\r\n"));
    }

    #[tokio::test]
    async fn connect_is_refused_with_501_allow_and_an_operation_outcome() {
        use http_body_util::BodyExt;
        let r = Answer::Unsupported.respond();
        assert_eq!(r.status(), StatusCode::NOT_IMPLEMENTED);
        assert_eq!(r.headers()[CONTENT_TYPE], FHIR_JSON);
        assert!(r.headers()[ALLOW]
            .to_str()
            .is_ok_and(|a| a.contains("POST")));
        let body = r.into_body().collect().await.map(|b| b.to_bytes());
        let v: serde_json::Value =
            serde_json::from_slice(&body.unwrap_or_default()).unwrap_or_default();
        assert_eq!(v["resourceType"], "OperationOutcome");
        assert_eq!(v["issue"][0]["code"], "not-supported");
    }

    #[test]
    fn a_bad_request_body_is_400_with_connection_close() {
        let r = Answer::BadRequestBody.respond();
        assert_eq!(r.status(), 400);
        assert_eq!(r.headers()[CONNECTION], "close");
    }

    #[test]
    fn a_head_too_large_is_431_closed_and_whole_as_bytes() {
        // spec: DEC-31
        let a = Answer::HeadTooLarge { max_kb: 32 };
        let r = a.respond();
        assert_eq!(r.status(), 431);
        assert_eq!(r.headers()[CONNECTION], "close");
        let raw = String::from_utf8(a.to_http1()).unwrap_or_default();
        assert!(
            raw.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{raw}"
        );
        assert!(raw.contains("\r\nconnection: close\r\n"), "{raw}");
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or_default();
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{raw}"
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(v["resourceType"], "OperationOutcome");
        assert!(body.contains("32 KB"), "{body}");
    }

    #[test]
    fn a_body_that_never_came_is_408_and_closes() {
        // spec: DEC-31
        let r = Answer::RequestTimeout.respond();
        assert_eq!(r.status(), 408);
        assert_eq!(r.headers()[CONNECTION], "close");
    }

    #[test]
    fn a_timeout_names_the_process() {
        // spec: TIMEOUT-2
        let a = Answer::GatewayTimeout {
            code: "tx2".into(),
            secs: 60.0,
        };
        assert_eq!(a.status(), 504);
        assert!(a.outcome().text.contains("tx2"));
    }

    #[test]
    fn a_lost_cache_is_404_cache_id_unknown() {
        // spec: ROUTE-3b
        let a = Answer::CacheIdLost {
            cache_id: "tx1.abc.def".into(),
        };
        assert_eq!(a.status(), 404);
        assert_eq!(a.outcome().tx_issue_type, Some("cache-id-unknown"));
    }
}
