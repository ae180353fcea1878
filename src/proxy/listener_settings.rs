//! The client side's timeouts and limits (`writeTimeoutSeconds`, `headerTimeoutSeconds`,
//! `headerMaxKB`, `drainSeconds`), read by the listener, each connection and each request, and
//! changeable on reload.

use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Timeouts and limits of the client side.
#[derive(Clone, Debug, PartialEq)]
pub struct ListenerSettings {
    /// `writeTimeoutSeconds`: a client that takes none of its response this long is cut off.
    pub write_timeout: Duration,
    /// How long a client may take to send a request's head (slow-header clients), and a body
    /// of up to 64 KB read before admission.
    pub header_read_timeout: Duration,
    /// `headerMaxKB` in bytes: a request line and headers larger get `431`.
    pub max_head: usize,
    /// `drainSeconds`.
    pub drain: Duration,
    /// `servedByHeader`: the response header naming the process that answered; None: off.
    pub served_by: Option<http::HeaderName>,
}

/// The listener's settings, changeable while it serves (reload): a connection takes those in
/// force when it is accepted; the drain reads them when it begins.
#[derive(Debug)]
pub struct LiveListenerSettings(RwLock<ListenerSettings>);

impl LiveListenerSettings {
    pub fn new(cfg: ListenerSettings) -> Arc<LiveListenerSettings> {
        Arc::new(LiveListenerSettings(RwLock::new(cfg)))
    }

    pub fn get(&self) -> ListenerSettings {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set(&self, cfg: ListenerSettings) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = cfg;
    }
}
