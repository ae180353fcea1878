//! The sim's side of the IPC channel (SIM-15..18, SIM-20): `status` every `statusSeconds`, a
//! graph `sample` every sample interval, `requestCounts` every minute from a worker, and the
//! launcher's messages taken in (`hello` sets the intervals; the master keeps the snapshot,
//! counts, events and history, and acknowledges the events, protocol 1.1). The channel closing
//! is a reason to stop. `/sim/channel?pause=S` stops the reading for a while, as a master alive
//! but busy would.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{mpsc, Mutex};

use super::state::Sim;
use super::StopReason;
use fhircluster::ipc::channel::{ChannelSender, ChildChannel, Received};
use fhircluster::ipc::message::{same_major, FromChild, Status, ToChild, PROTOCOL_VERSION};

pub type Sender = Arc<Mutex<ChannelSender<FromChild>>>;

/// Sends one message; a failure means the launcher has gone, which the receiver reports.
pub async fn send(sender: &Sender, msg: FromChild) {
    let _ = sender.lock().await.send(&msg).await;
}

pub fn status(sim: &Sim) -> FromChild {
    FromChild::Status(Status {
        heap_used: Some(sim.heap_used()),
        heap_limit: sim.heap_limit(),
        client_caches: Some(sim.client_caches()),
        client_concepts: Some(sim.concepts.load(Ordering::Relaxed)),
        expansion_items: Some(sim.expansions.load(Ordering::Relaxed).min(1000)),
        in_flight: sim.in_flight.load(Ordering::Relaxed) as u32,
        refusing: sim.refusing.load(Ordering::Relaxed),
        requests: sim.requests.load(Ordering::Relaxed),
        event_loop_delay_ms: None,
    })
}

/// Starts the periodic sends and the receive loop. Returns the sender for the final counts.
pub fn start(
    sim: Arc<Sim>,
    channel: ChildChannel,
    stop: mpsc::UnboundedSender<StopReason>,
) -> Sender {
    let (mut receiver, sender) = channel.split();
    let sender: Sender = Arc::new(Mutex::new(sender));
    let period = |sim: &Sim, pick: fn((f64, f64)) -> f64| {
        let p = pick(*sim.periods.lock().unwrap_or_else(|e| e.into_inner()));
        Duration::from_secs_f64(p.clamp(0.01, 86_400.0))
    };
    {
        let (sim, sender) = (sim.clone(), sender.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(period(&sim, |p| p.0)) => {}
                    // A new period from hello: start the wait again with it.
                    _ = sim.periods_changed.notified() => continue,
                }
                send(&sender, status(&sim)).await;
            }
        });
    }
    {
        let (sim, sender) = (sim.clone(), sender.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(period(&sim, |p| p.1)) => {}
                    // A new period from hello: start the wait again with it.
                    _ = sim.periods_changed.notified() => continue,
                }
                send(&sender, FromChild::Sample(sim.take_sample())).await;
            }
        });
    }
    if sim.is_worker() {
        let (sim, sender) = (sim.clone(), sender.clone());
        tokio::spawn(async move {
            let every = Duration::from_secs_f64(sim.knobs.counts_seconds);
            loop {
                tokio::time::sleep(every).await;
                send(&sender, FromChild::RequestCounts(sim.take_counts(false))).await;
            }
        });
    }
    let acks = sender.clone();
    tokio::spawn(async move {
        loop {
            wait_while_paused(&sim).await;
            match receiver.recv().await {
                Received::Message(m) => {
                    if let (ToChild::Events { events }, true) = (&m, sim.knobs.speaks_1_1()) {
                        // Acknowledged as it is taken in (before /sim/received shows it, so a
                        // test that saw it knows the launcher has the acknowledgement queued).
                        let up_to = events.iter().filter_map(|e| e["id"].as_u64()).max();
                        if let Some(up_to) = up_to {
                            send(&acks, FromChild::EventsReceived { up_to }).await;
                        }
                    }
                    take_in(&sim, m)
                }
                Received::Unknown {
                    type_name,
                    first_time,
                } => {
                    if first_time {
                        eprintln!(
                            "[fhirsmith-sim {}] ignoring IPC message type '{type_name}'",
                            sim.code
                        );
                        sim.received
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .unknown_types
                            .push(type_name);
                    }
                }
                Received::Error(e) => eprintln!("[fhirsmith-sim {}] IPC: {e}", sim.code),
                Received::Closed => {
                    let _ = stop.send(StopReason::ChannelClosed);
                    return;
                }
            }
        }
    });
    sender
}

/// Returns once the channel may be read (no pause, or the pause is over or lifted).
async fn wait_while_paused(sim: &Sim) {
    loop {
        let changed = sim.channel_pause_changed.notified();
        let until = *sim
            .channel_paused_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match until {
            Some(t) if t > std::time::Instant::now() => {
                tokio::select! {
                    _ = tokio::time::sleep_until(t.into()) => {}
                    _ = changed => {}
                }
            }
            _ => return,
        }
    }
}

fn take_in(sim: &Sim, m: ToChild) {
    let mut inbox = sim.received.lock().unwrap_or_else(|e| e.into_inner());
    match m {
        ToChild::Hello {
            protocol,
            role,
            code,
            status_seconds,
            sample_seconds,
        } => {
            if !same_major(&protocol) {
                eprintln!(
                    "[fhirsmith-sim {}] WARNING: launcher speaks IPC protocol {protocol}, this process {PROTOCOL_VERSION}",
                    sim.code
                );
            }
            let mut p = sim.periods.lock().unwrap_or_else(|e| e.into_inner());
            if status_seconds > 0.0 {
                p.0 = status_seconds;
            }
            if sample_seconds > 0.0 {
                p.1 = sample_seconds;
            }
            drop(p);
            sim.periods_changed.notify_waiters();
            inbox.hello = Some(json!({
                "protocol": protocol, "role": role, "code": code,
                "statusSeconds": status_seconds, "sampleSeconds": sample_seconds,
            }));
        }
        ToChild::Snapshot { status } => {
            inbox.snapshots += 1;
            inbox.last_snapshot = Some(status);
        }
        ToChild::WorkerCounts { code, counts } => {
            *inbox.worker_counts.entry(code.clone()).or_default() += counts.total;
            inbox
                .worker_count_messages
                .push(json!({ "code": code, "counts": counts }));
        }
        ToChild::Events { events } => inbox.events.extend(events),
        ToChild::History { history } => apply_history(&mut inbox.history, history),
        ToChild::Unknown => {}
    }
}

/// Keeps the history as the master would: a whole history (`append` false or absent) replaces
/// what was kept; a delta (`append: true`) adds its points and memory Total to it and updates
/// each named process's state, so `/sim/received` shows everything the launcher sent.
fn apply_history(kept: &mut Option<serde_json::Value>, history: serde_json::Value) {
    use serde_json::Value;
    let append = history["append"] == Value::Bool(true);
    let Some(base) = kept.as_mut().filter(|_| append) else {
        *kept = Some(history);
        return;
    };
    if let Some(extra) = history["memoryTotal"].as_array() {
        if let Some(total) = base["memoryTotal"].as_array_mut() {
            total.extend(extra.iter().cloned());
        } else {
            base["memoryTotal"] = Value::Array(extra.clone());
        }
    }
    for delta in history["processes"].as_array().into_iter().flatten() {
        if !base["processes"].is_array() {
            base["processes"] = Value::Array(Vec::new());
        }
        let Some(series) = base["processes"].as_array_mut() else {
            continue;
        };
        let i = match series.iter().position(|s| s["code"] == delta["code"]) {
            Some(i) => i,
            None => {
                let mut s = delta.clone();
                s["points"] = Value::Array(Vec::new());
                series.push(s);
                series.len() - 1
            }
        };
        let s = &mut series[i];
        s["state"] = delta["state"].clone();
        if let (Some(points), Some(new)) = (s["points"].as_array_mut(), delta["points"].as_array())
        {
            points.extend(new.iter().cloned());
        }
    }
}
