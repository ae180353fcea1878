//! The shell of the unused-tx-endpoint rule (`ops::tx_usage`): every tenth of the window it
//! hands the rule what the master got and how many tx requests the front door admitted, and
//! logs the WARNING if the rule says so.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::warn;

use crate::ops::tx_usage::{TxUsage, WINDOW};
use crate::proxy::front::Front;

/// For tests only: the window in seconds instead of 10 minutes.
const WINDOW_ENV: &str = "FHIRCLUSTER_TX_USAGE_WINDOW_SECONDS";

/// The window: 10 minutes, or the test knob's.
fn window() -> Duration {
    std::env::var(WINDOW_ENV)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= WINDOW.as_secs_f64())
        .map_or(WINDOW, Duration::from_secs_f64)
}

/// Runs until the launcher stops.
pub(super) async fn run(front: Arc<Front>, endpoints: Vec<String>) {
    let window = window();
    let admitted = |f: &Front| -> u64 {
        f.counters
            .lanes
            .iter()
            .map(|(_, n)| n.load(Ordering::Relaxed))
            .sum()
    };
    let mut rule = TxUsage::new(
        endpoints,
        window,
        Instant::now().into_std(),
        admitted(&front),
    );
    let every = (window / 10).clamp(Duration::from_millis(100), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        if front.admission.is_stopping() {
            return;
        }
        let workers = front.roster.present().count().saturating_sub(1);
        let master = front.counters.master_paths.take();
        if let Some(w) = rule.check(Instant::now().into_std(), master, admitted(&front), workers) {
            warn!("{w}");
        }
    }
}
