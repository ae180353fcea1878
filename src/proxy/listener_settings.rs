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
/// force when it is accepted; the drain reads them when it begins. Kept in one `Arc` that every
/// connection accepted since the last change shares: a copy each was 112 bytes a connection.
#[derive(Debug)]
pub struct LiveListenerSettings(RwLock<Arc<ListenerSettings>>);

impl LiveListenerSettings {
    pub fn new(cfg: ListenerSettings) -> Arc<LiveListenerSettings> {
        Arc::new(LiveListenerSettings(RwLock::new(Arc::new(cfg))))
    }

    pub fn get(&self) -> ListenerSettings {
        ListenerSettings::clone(&self.shared())
    }

    /// The settings in force, shared.
    pub fn shared(&self) -> Arc<ListenerSettings> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set(&self, cfg: ListenerSettings) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(cfg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(header_secs: u64) -> ListenerSettings {
        ListenerSettings {
            write_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(header_secs),
            max_head: 32 * 1024,
            drain: Duration::from_secs(10),
            served_by: None,
        }
    }

    #[test]
    fn connections_share_one_copy_until_a_change() {
        let live = LiveListenerSettings::new(settings(60));
        let (a, b) = (live.shared(), live.shared());
        assert!(Arc::ptr_eq(&a, &b), "one copy for every connection");
        live.set(settings(5));
        let c = live.shared();
        assert_eq!(c.header_read_timeout, Duration::from_secs(5));
        // Those accepted before keep theirs.
        assert_eq!(a.header_read_timeout, Duration::from_secs(60));
        assert_eq!(live.get(), settings(5));
    }
}
