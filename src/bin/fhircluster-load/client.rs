//! The HTTP/1.1 client: keep-alive connections (`hyper::client::conn::http1` over a
//! `TcpStream`), one per virtual client, each carrying one request at a time.
//!
//! A connection goes back to its pool only when it can take another request, so a `503` with
//! `Connection: close` or a timed-out request costs a new connection, as it would a real client.
//! The timeout covers everything a request costs the client: connecting, sending, and reading the
//! whole response.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST};
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{handshake, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::requests::RequestSpec;
use super::target::Target;

/// A response as the load tool needs it.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// The `X-Cache-Id` response header, if any.
    pub cache_id: Option<String>,
    pub body: Bytes,
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum Failure {
    /// The client's own timeout.
    Timeout,
    /// Connecting, sending or reading failed (refused, reset, closed early, malformed); the load
    /// tool counts it and does not report why.
    Error,
}

type Sender = SendRequest<Full<Bytes>>;

/// Idle keep-alive connections to one target. Cloning shares the pool.
#[derive(Clone)]
pub struct Pool {
    target: Arc<Target>,
    idle: Arc<Mutex<Vec<Sender>>>,
}

impl Pool {
    pub fn new(target: Arc<Target>) -> Self {
        Pool {
            target,
            idle: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn take_idle(&self) -> Option<Sender> {
        self.idle.lock().ok()?.pop()
    }

    fn put_back(&self, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(sender);
        }
    }

    /// Sends `spec` on an idle connection or a new one and reads the whole response, within
    /// `timeout`.
    pub async fn exchange(&self, spec: &RequestSpec, timeout: Duration) -> Result<Answer, Failure> {
        match tokio::time::timeout(timeout, self.exchange_untimed(spec)).await {
            Ok(result) => result.map_err(|_| Failure::Error),
            Err(_) => Err(Failure::Timeout),
        }
    }

    async fn exchange_untimed(&self, spec: &RequestSpec) -> anyhow::Result<Answer> {
        let mut sender = self.ready_sender().await?;
        let request = build_request(&self.target, spec)?;
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        let cache_id = response
            .headers()
            .get("x-cache-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response.into_body().collect().await?.to_bytes();
        self.put_back(sender);
        Ok(Answer {
            status,
            cache_id,
            body,
        })
    }

    /// An idle connection that is still open, or a new one.
    async fn ready_sender(&self) -> anyhow::Result<Sender> {
        while let Some(mut sender) = self.take_idle() {
            if sender.ready().await.is_ok() {
                return Ok(sender);
            }
        }
        connect(self.target.addr).await
    }
}

async fn connect(addr: SocketAddr) -> anyhow::Result<Sender> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = handshake(TokioIo::new(stream)).await?;
    // The connection task ends when the sender is dropped or the peer closes.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

fn build_request(target: &Target, spec: &RequestSpec) -> anyhow::Result<Request<Full<Bytes>>> {
    let mut builder = Request::builder()
        .method(spec.method.clone())
        .uri(format!("{}{}", target.prefix, spec.path_and_query))
        .header(HOST, target.host_header.as_str())
        .header("accept", "application/fhir+json");
    if !spec.body.is_empty() {
        builder = builder.header(CONTENT_TYPE, "application/fhir+json");
    }
    if let Some(id) = &spec.cache_id {
        builder = builder.header("x-cache-id", id.as_str());
    }
    Ok(builder.body(Full::new(spec.body.clone()))?)
}
