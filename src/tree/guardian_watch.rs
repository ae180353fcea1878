//! The guardian's watch: a task that waits for the guardian's end by its pid (`exit_watch`: a
//! pidfd, or `SIGCHLD` and a slow tick where there is none, as for the servers), reaps it, and
//! has it replaced (`guardian::replace`) at once, or after the wait `guardian_backoff` says when
//! guardians keep ending or cannot be started; every failed start is an ERROR line naming the
//! next try. It never gives up: a launcher without a guardian is one a `SIGKILL` makes leave its
//! servers running.
//!
//! Before, the guardian was replaced only when the launcher next wrote to it (a child starting
//! or ending): in a steady cluster that is never, and a killed guardian left none (#25).

use std::sync::Once;

use tracing::error;

use super::guardian::{self, Replaced};
use super::guardian_backoff::Backoff;
use super::subreaper;
use crate::tree::exit_watch;

/// Starts the watch, once, inside the runtime (a no-op without a guardian).
pub fn keep_watched() {
    static WATCHING: Once = Once::new();
    WATCHING.call_once(|| {
        tokio::spawn(watch());
    });
}

async fn watch() {
    let mut backoff = Backoff::default();
    while let Some((pid, started)) = guardian::current() {
        let (end, mut wait) = match pid {
            Some(pid) => {
                let end = exit_watch::exited(pid).await.to_string();
                subreaper::forget(pid);
                let lived = crate::clock::now_std().saturating_duration_since(started);
                (end, backoff.ended(lived))
            }
            // None could be started (at the launcher's start): try again.
            None => (String::new(), backoff.failed()),
        };
        loop {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            match guardian::replace(pid, &end, crate::clock::now_std()) {
                Replaced::Done => break,
                Replaced::Later(d) => wait = d,
                Replaced::Failed(e) => {
                    wait = backoff.failed();
                    let what = match pid {
                        Some(pid) => format!(
                            "the guardian (pid {pid}) is gone ({end}) and another cannot be started"
                        ),
                        None => "no guardian can be started".to_string(),
                    };
                    error!(
                        "{what} ({e}); trying again in {:.1} s. Until then a launcher killed \
                         with SIGKILL leaves its processes running",
                        wait.as_secs_f64()
                    );
                }
            }
        }
    }
}
