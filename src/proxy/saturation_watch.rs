//! The shell around `saturation`: every `INTERVAL` while tx requests are in flight, reads each
//! ready process's main-thread run + wait time (and whether it is asleep) and whether heavy
//! requests wait for it, and tells the scheduler whether its event loop is saturated and how
//! many heavy requests it is held to. Sleeps while nothing is in flight (an idle launcher
//! doesn't wake for it), and forgets what it knew: a process with nothing to do is not held.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::front::Front;
use super::saturation::{Demand, LoopMeter};
use crate::system::schedstat::read_main_thread;

/// How often a busy cluster is sampled: a few turns of a 25 ms event loop, so a surge is held
/// within its first tenth of a second and its end is seen as quickly.
pub const INTERVAL: Duration = Duration::from_millis(100);

pub async fn run(front: Arc<Front>) {
    let (roster, admission) = (&front.roster, &front.admission);
    let mut meters: Vec<(LoopMeter, Option<u32>)> = vec![Default::default(); roster.all().len()];
    // Just woken by a dispatch: read now, so the first verdict comes one interval after the
    // work began, not two (what a surge sends before it is held stays for seconds).
    let mut read_now = false;
    loop {
        let (percent, ceiling, busy) = admission.saturation_watch_state();
        if !busy || percent == 0 {
            for (spec, (meter, _)) in roster.all().iter().zip(&mut meters) {
                if meter.saturated() {
                    admission.set_saturated(spec.id, None);
                }
                meter.reset();
            }
            if percent == 0 {
                // Off: a reload may turn it on; look again now and then.
                tokio::time::sleep(INTERVAL * 10).await;
            } else {
                admission.until_busy().await;
                read_now = true;
            }
            continue;
        }
        if !std::mem::take(&mut read_now) {
            tokio::time::sleep(INTERVAL).await;
        }
        let now = crate::clock::now_std();
        for (spec, (meter, seen)) in roster.all().iter().zip(&mut meters) {
            let pid = roster.pid(spec.id).filter(|_| spec.serves_tx);
            if pid != *seen {
                // Another process in this place (or none): what was measured was the old one's.
                *seen = pid;
                meter.reset();
            }
            let Some(pid) = pid else { continue };
            // Unreadable (the process just exited, no /proc): no verdict this time.
            let Ok(reading) = read_main_thread(Path::new("/"), pid) else {
                continue;
            };
            let demand = Demand {
                waiting: admission.normal_waiting(spec.id),
                ceiling,
            };
            let before = meter.held();
            meter.sample(now, reading, percent, demand);
            if meter.held() != before {
                tracing::debug!(
                    process = %spec.code,
                    held = ?meter.held(),
                    "event loop {}",
                    if meter.saturated() { "saturated: heavy requests held" } else { "no longer saturated" }
                );
            }
            // Every time, not only on a change: the scheduler drops the mark when a process
            // stops being ready, and the meter may still see the same process saturated after.
            admission.set_saturated(spec.id, meter.held());
        }
    }
}
