//! The launcher's `wire` phase: the front door's state, the launcher's own endpoints, systemd's
//! messages, and the supervisor, which starts the master at once (or takes over the processes
//! of the program before, after an in-place upgrade).

use std::sync::Arc;

use anyhow::Result;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::launcher::host;
use crate::logs::child_log::ChildLines;
use crate::ops::admin::{self, Admin};
use crate::ops::notify::{self, Notifier};
use crate::plan::Plan;
use crate::process::ProcessId;
use crate::proxy::front::Front;
use crate::proxy::route::RouteTable;
use crate::proxy::scheduler::Scheduler;
use crate::reload::Live;
use crate::settings::Settings;
use crate::sizing::CpuSizing;
use crate::status::keeper::Keeper;
use crate::supervisor::output::OutputSink;
use crate::supervisor::{self, Hooks, SupervisorSetup};

use super::resume::Resume;
use super::{cluster_status, Launcher};

impl Launcher {
    /// The front door's state, the launcher's own endpoints, systemd's messages, and the
    /// supervisor, which starts the master at once.
    pub(super) async fn wire(
        settings: &Settings,
        sizing: &CpuSizing,
        plan: &Plan,
        lines: ChildLines,
        resume: Option<&Resume>,
        admin_listener: Option<TcpListener>,
    ) -> Result<Launcher> {
        let output = OutputSink::new(lines);
        for w in &settings.warnings {
            warn!("{w}");
        }
        if !plan.dropped_node_flags.is_empty() {
            warn!(
                "node flags not passed on (the launcher's own): {}",
                plan.dropped_node_flags.join(" ")
            );
        }
        info!("{}", plan.decision);
        info!("{}", plan.limits);

        let c = &settings.cluster;
        let room = capacity(settings, sizing, plan.workers());
        let all = crate::plan::replan(settings, room, plan.decision.clone())
            .map(|p| p.processes)
            .unwrap_or_else(|_| plan.processes.clone());
        let places = u32::try_from(all.len().saturating_sub(1)).unwrap_or(u32::MAX);
        let tx_processes: Vec<(ProcessId, bool)> =
            plan.processes.iter().map(|p| (p.id, p.serves_tx)).collect();
        // What a reload may change, in the shape each part takes it (as `Reloader` gives it).
        let live = Live::from(settings);
        let sched = Scheduler::new(live.scheduler, &tx_processes);
        let routes = RouteTable::from_specs(settings, &all);
        let slots = (c.max_outstanding + c.fast_lane_extra) as usize;
        let front = Front::new(sched, routes, all.clone(), slots, live.upstream_timeout);
        front.budget.set_limit(live.buffer_limit);
        if let Some(r) = resume {
            front.admission.resume_cooldowns(&r.cooldowns());
            let _ = front.carried.set(r.handover.counters.clone());
            if let Some((failed, ok_ms)) = r.handover.last_reload {
                front.counters.observed.resume_reloads(failed, ok_ms);
            }
        }
        tokio::spawn(front.admission.clone().run_timer());
        tokio::spawn(crate::proxy::saturation_watch::run(front.clone()));
        tokio::spawn(crate::proxy::refusal_log::run(front.clone()));

        // The supervisor's news goes to the front door; the launcher follows the roster's.
        let hooks: Arc<dyn Hooks> = front.clone();
        let news = front.roster.news();
        let (control, control_rx) = mpsc::channel(16);
        // The launcher's own endpoints answer from the start (/readyz says why it isn't ready).
        let mut admin_fd = None;
        let (desk, upgrade_asks) = crate::ops::upgrade_desk::UpgradeDesk::new();
        let admin = Admin::start(front.clone(), control.clone(), desk.clone());
        let mut admin_at = None;
        if let Some(l) = admin_listener {
            admin_fd = std::os::fd::AsFd::as_fd(&l).try_clone_to_owned().ok();
            admin_at = l.local_addr().ok();
            let addr = admin_at.map_or(String::new(), |a| a.to_string());
            info!(
                "the launcher's own endpoints, read-only (/livez, /readyz, /status, /metrics), \
                 on http://{addr}"
            );
            tokio::spawn(admin::serve(l, admin.clone()));
        }
        // HAProxy's agent-check (DEC-89), its socket kept across an in-place upgrade so no
        // check is refused meanwhile.
        let mut agent_fd = None;
        if let Some(addr) = c.agent_address {
            let bound = match inherited_listener(resume.and_then(Resume::agent_listener), addr) {
                Some(l) => Some((l, " (kept across the upgrade)")),
                None => match TcpListener::bind(addr).await {
                    Ok(l) => Some((l, "")),
                    // After an upgrade the cluster is serving already: never stopped for this
                    // (DEC-70); the next reload tries again.
                    Err(e) if resume.is_some() => {
                        warn!(
                            "server.cluster.agentAddress {addr}: cannot listen: {e}; serving on \
                             without HAProxy's agent-check"
                        );
                        None
                    }
                    Err(e) => {
                        return Err(anyhow::Error::new(e)
                            .context(format!("server.cluster.agentAddress {addr}: cannot listen")))
                    }
                },
            };
            if let Some((l, place)) = bound {
                agent_fd = std::os::fd::AsFd::as_fd(&l).try_clone_to_owned().ok();
                info!(
                    "HAProxy's agent-check (readiness and weight, one line per connection) on \
                 {addr}{place}"
                );
                tokio::spawn(crate::ops::agent::serve(l, front.clone()));
            }
        }
        // The actions' way in, for the service user and its group only.
        let inherited = resume.and_then(Resume::control_listener);
        let opened = crate::ops::control_socket::open(settings, inherited, resume.is_some());
        let control_socket = match opened {
            Err(e) if resume.is_some() => {
                warn!("{e:#}: running without a control socket");
                None
            }
            Err(e) => return Err(e),
            Ok(None) => None,
            Ok(Some((socket, listener))) => {
                info!(
                    "the control socket (status, upgrade, scale, restart) on {} (mode 660, for the launcher's \
                     user and {})",
                    socket.path().display(),
                    match c.control_group.as_str() {
                        "" => "its own group".to_string(),
                        g => format!("group {g}"),
                    }
                );
                tokio::spawn(crate::ops::control_serve::serve(
                    listener,
                    admin.clone(),
                    desk.clone(),
                ));
                Some(socket)
            }
        };
        let notifier = Arc::new(Notifier::from_env());
        let (state, state_rx) = watch::channel(notify::State::Starting);
        let status_front = front.clone();
        tokio::spawn(notify::keep_informed(
            notifier.clone(),
            state_rx,
            {
                let news = news.clone();
                move || news.borrow().master_alive
            },
            move |s, alive| match s {
                notify::State::Starting if alive => "starting: the master is loading".to_string(),
                notify::State::Starting => "starting: the master is not running".to_string(),
                notify::State::Reloading => {
                    format!("reloading: {}", cluster_status(&status_front))
                }
                _ => cluster_status(&status_front),
            },
        ));
        let setup = SupervisorSetup {
            processes: all,
            workers: plan.processes.len().saturating_sub(1),
            max_start_failures: c.max_start_failures,
            kill_after: c.kill_after,
            settings: live.supervisor,
            idle_report: Box::new(host::idle_report(settings)),
            scale: supervisor::ScaleLimits {
                room_why: room_why(settings, room),
                memory: Box::new(host::memory_room(settings)),
            },
        };
        let sizer = Box::new(host::sizer(settings, sizing.clone()));
        let now = Instant::now().into_std();
        let supervisor = match resume {
            None => {
                let keeper = Keeper::new(settings, &plan.processes, now);
                tokio::spawn(supervisor::run(
                    setup, keeper, hooks, sizer, control_rx, output,
                ))
            }
            Some(r) => {
                let keeper = Keeper::resume(settings, &plan.processes, now, &r.handover.keeper);
                tokio::spawn(supervisor::resume(
                    setup,
                    keeper,
                    hooks,
                    sizer,
                    control_rx,
                    output,
                    r.shell(),
                ))
            }
        };
        Ok(Launcher {
            front,
            admin_fd,
            admin_at,
            agent_fd,
            control_socket,
            desk,
            upgrade_asks,
            control,
            supervisor,
            notifier,
            state,
            news,
            reloads_seen: 0,
            room: places,
            waiting: None,
            old_pid_file: None,
        })
    }
}

/// The listener the program before handed over, when it is still at `addr` (the setting may
/// have changed with the upgrade: then it is closed and `addr` bound anew).
fn inherited_listener(
    inherited: Option<std::net::TcpListener>,
    addr: std::net::SocketAddr,
) -> Option<TcpListener> {
    let l = inherited.filter(|l| l.local_addr().is_ok_and(|a| a == addr))?;
    l.set_nonblocking(true).ok()?;
    TcpListener::from_std(l).ok()
}

/// How many workers this run makes room for: the plan's, or up to `RELOAD_ROOM` (the vCPUs if
/// more), as far as the ports after `internalPort` leave `server.port` free (DEC-21). The
/// front door's tables are made this size once, so a request never takes a lock to find its
/// process's entry; an unused entry is a few bytes and holds no socket.
fn capacity(settings: &Settings, sizing: &CpuSizing, planned: u32) -> u32 {
    let most = RELOAD_ROOM.max(sizing.vcpu).max(planned);
    (planned..=most)
        .rev()
        .find(|&w| crate::plan::check_port_range(settings, w).is_ok())
        .unwrap_or(planned)
}

/// Why this run has room for no more than `room` workers, for a refused `scale` (DEC-21): the
/// port range's own line when one more would run into `server.port` (or the admin port, or
/// past 65535), else the room made at start.
fn room_why(settings: &Settings, room: u32) -> String {
    match crate::plan::check_port_range(settings, room.saturating_add(1)) {
        Err(e) => e.to_string(),
        Ok(()) => format!(
            "this run made room for {room} workers at its start (the most of {RELOAD_ROOM}, the \
             vCPUs and the planned count); a restart of the launcher makes room for more"
        ),
    }
}

/// The most workers a reload may ask for without a restart of the launcher.
const RELOAD_ROOM: u32 = 16;
