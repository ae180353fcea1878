//! Where the control socket and the launcher meet about an in-place upgrade: `upgrade` asks
//! for one (as `SIGUSR2` does), `upgrade-state` says which program serves (`programStartedMs`,
//! which an upgrade changes) and how the last upgrade that did not happen ended (`last`: a
//! sequence number, refused or failed, the reason), for `fhircluster upgrade`.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Cheap to clone: the socket's and the launcher's halves are the same desk.
#[derive(Clone)]
pub(crate) struct UpgradeDesk {
    ask: mpsc::Sender<()>,
    last: Arc<Mutex<Value>>,
    /// Why the launcher takes no `scale` now (an upgrade under way, the stop begun), if so.
    busy: Arc<Mutex<Option<&'static str>>>,
}

impl UpgradeDesk {
    /// The desk, and what the launcher reads the requests from.
    pub(crate) fn new() -> (UpgradeDesk, mpsc::Receiver<()>) {
        let (ask, asked) = mpsc::channel(1);
        let desk = UpgradeDesk {
            ask,
            last: Arc::new(Mutex::new(Value::Null)),
            busy: Arc::default(),
        };
        (desk, asked)
    }

    /// An upgrade is asked for; false when one is already waiting to begin.
    pub(crate) fn ask(&self) -> bool {
        self.ask.try_send(()).is_ok()
    }

    /// The launcher begins an upgrade or its stop (`Some`: why no `scale` is taken now), or
    /// serves again (`None`).
    pub(crate) fn set_busy(&self, why: Option<&'static str>) {
        *self.busy.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }

    pub(crate) fn busy(&self) -> Option<&'static str> {
        *self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An upgrade did not happen: `outcome` (`refused`, `failed`) and why.
    pub(crate) fn ended(&self, outcome: &str, reason: &str) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let seq = last["seq"].as_u64().unwrap_or(0) + 1;
        *last = json!({
            "seq": seq,
            "outcome": outcome,
            "reason": reason,
            "atMs": crate::clock::unix_ms(),
        });
    }

    /// `upgrade-state`'s answer.
    pub(crate) fn state(&self) -> Value {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        json!({
            "pid": std::process::id(),
            "programStartedMs": crate::upgrade::exec::program_started_ms(),
            "last": last,
        })
    }
}
