//! `SIGUSR2`: the launcher replaces its own program with the binary now at its path, keeping
//! its pid, its listening sockets and every FHIRsmith process (`upgrade/`). In order:
//! the new binary is checked (`upgrade::preflight`; a failure is one line and nothing changes);
//! systemd hears `RELOADING=1`; the client connections are drained with the port kept open and
//! unaccepted (connections arriving wait in the kernel's backlog) and the idle keep-alive ones
//! kept open, to be handed over (`proxy::conn::handed`); the supervisor hands every
//! process and the state over (refused unless the cluster is steady: then the listener serves
//! on); the state goes to a memfd and the program is `execve`d with every socket, channel and
//! pipe inherited. Should the `execve` fail, everything is taken back and served as before. A
//! stop signal before the `execve` ends the upgrade and stops as usual.
//!
//! The other side, the new program taking over, is `resume::Resume`.

use std::os::fd::{AsRawFd, RawFd};

use tokio::sync::{oneshot, watch};
use tracing::{error, info, warn};

use super::reloader::{Deferred, Reloader};
use super::{log_signal, Launcher, Serving};
use crate::ops::signal_stream::Signals;
use crate::proxy::conn::HandedClient;
use crate::proxy::listener::{self, Kept, Shutdown};
use crate::signals::Sig;
use crate::signals::{meaning, Meaning, Phase};
use crate::supervisor::{Control, ShellHandover};
use crate::test_hooks;
use crate::upgrade::exec;
use crate::upgrade::state::{ChildState, ClientConnState, CooldownState, Handover, FORMAT};

/// How an upgrade that returned ended (a successful one does not return).
pub(super) enum Outcome {
    /// Refused or failed before the `execve` took: serving on, as before; `reload`: a
    /// `SIGHUP` came meanwhile, to be carried out now.
    Serving { serving: Serving, reload: bool },
    /// A stop signal came meanwhile: the drain is over, stop the processes.
    Stop,
}

/// What config.json now says, as the new program will take it: one line per change (applied by
/// the new program, or waiting for the processes' restart in turn), or why the upgrade is
/// refused: a setting that says where the processes run (`Reload::Restart`), which the new
/// program could not take them over under. `quiet`: the reload that asked for this upgrade has
/// said each already.
fn settings_for_upgrade(
    reloader: &Reloader,
    quiet: bool,
) -> Result<crate::settings::Settings, String> {
    let new = super::reloader::read(&reloader.cli, &reloader.cwd)
        .map_err(|e| format!("config.json is refused: {e:#}"))?;
    let changes = crate::reload::changes(&reloader.running, &new);
    if let Some(line) = changes.restart.first() {
        return Err(format!(
            "{line}: the processes run where they were started; revert it for the upgrade (it \
             needs a restart of the launcher)"
        ));
    }
    if quiet {
        return Ok(new);
    }
    for line in changes.live.iter().chain(&changes.upgrade) {
        info!("upgrade: {line}: applied by the new program");
    }
    for line in &changes.servers {
        warn!(
            "upgrade: {line}: the processes take it as they restart in turn (the next SIGHUP \
             restarts those whose inputs changed)"
        );
    }
    if changes.workers {
        warn!("upgrade: the worker count changed: waiting for a SIGHUP (the processes are kept as they are)");
    }
    Ok(new)
}

/// Why a handover that the supervisor made was not carried through to the `execve`.
enum NotExecuted {
    /// A process ended during the handover (or a step said no): one `upgrade refused` line.
    Refused(String),
    /// The state could not be written, or the `execve` itself failed.
    Failed(String),
    /// A stop signal came meanwhile.
    Stop,
}

impl Launcher {
    /// `deferred`: a reload asked for this upgrade (its settings need the launcher's own
    /// restart); the new program then carries out the reload's part for the processes, and a
    /// refusal names the settings left waiting.
    pub(super) async fn upgrade(
        &mut self,
        serving: Serving,
        signals: &mut Signals,
        reloader: &Reloader,
        deferred: Option<&Deferred>,
    ) -> Outcome {
        self.waiting = deferred.map(|d| d.waiting.join(", "));
        let not_now = |serving| Outcome::Serving {
            serving,
            reload: false,
        };
        let Some(program) = exec::program_path() else {
            self.refused("the launcher's own path is not known");
            return not_now(serving);
        };
        let new = match settings_for_upgrade(reloader, deferred.is_some()) {
            Ok(new) => new,
            Err(why) => {
                self.refused(&why);
                return not_now(serving);
            }
        };
        // A pid file the new program writes elsewhere: this one's goes just before the execve.
        let pid_file = |s: &crate::settings::Settings| {
            crate::ops::pid_file::path(&s.data_dir, &s.cluster.pid_file)
        };
        let (was, will) = (pid_file(&reloader.running), pid_file(&new));
        self.old_pid_file = was.filter(|w| Some(w) != will.as_ref());
        info!("upgrade: checking {}", program.display());
        let checked = {
            let program = program.clone();
            tokio::task::spawn_blocking(move || crate::upgrade::preflight::check(&program)).await
        };
        let takes = match checked {
            Ok(Ok(takes)) => takes,
            Ok(Err(why)) => {
                self.refused(&why);
                return not_now(serving);
            }
            Err(e) => {
                self.refused(&format!("the check did not finish ({e})"));
                return not_now(serving);
            }
        };
        // What the new settings listen on, bound now: a port another program holds refuses
        // the upgrade here, with nothing given up (DEC-70).
        let prebound = match self.bind_for(&new, &serving, takes.listeners) {
            Ok(bound) => bound,
            Err(why) => {
                self.refused(&why);
                return not_now(serving);
            }
        };
        if !takes.clients {
            info!(
                "upgrade: {} takes no client connections over: idle ones are closed in the drain",
                program.display()
            );
        }
        let live = serving.live.clone();
        self.notifier.upgrading();
        self.state
            .send_replace(crate::ops::notify::State::Reloading);
        let started = crate::clock::now_std();
        let mut reload = false;
        let Some(kept) = self
            .drain_for_upgrade(serving, takes.clients, signals, &mut reload)
            .await
        else {
            return Outcome::Stop;
        };
        let drained = started.elapsed();
        // The supervisor's part: every process and the state, or why not now (then it gave
        // back whatever it took).
        let (reply, answer) = oneshot::channel();
        let (give_back, back) = oneshot::channel();
        let _ = self.control.send(Control::HandOver { reply, back }).await;
        let handed = match answer.await {
            Ok(Ok(h)) => h,
            Ok(Err(why)) => {
                self.refused(&why);
                return self.serve_on(
                    kept,
                    live,
                    reload,
                    &format!("upgrade refused, running as before: {why}"),
                );
            }
            Err(_) => {
                error!("upgrade: the supervisor has ended; stopping");
                return Outcome::Stop;
            }
        };
        // From here a failure at any step gives everything back to the supervisor, which takes
        // it up again as it was (a process that ended meanwhile is then seen to have).
        let not = self
            .execute(
                &program,
                (&handed, &kept, &prebound),
                signals,
                &mut reload,
                drained,
            )
            .await;
        let _ = give_back.send(handed);
        match not {
            NotExecuted::Stop => {
                self.front.admission.stop();
                // The idle client connections are closed, as a stop's drain closes them.
                drop(kept);
                Outcome::Stop
            }
            NotExecuted::Refused(why) => {
                self.refused(&why);
                self.serve_on(
                    kept,
                    live,
                    reload,
                    &format!("upgrade refused, running as before: {why}"),
                )
            }
            NotExecuted::Failed(why) => {
                error!("upgrade: {why}; serving on as before");
                self.desk.ended("failed", &why);
                self.serve_on(
                    kept,
                    live,
                    reload,
                    &format!("upgrade failed, running as before: {why}"),
                )
            }
        }
    }

    /// The steps after the supervisor's handover: the state written, a last look that every
    /// process still runs, and the `execve`. Returns only when the program was not replaced.
    async fn execute(
        &mut self,
        program: &std::path::Path,
        (handed, kept, prebound): (&ShellHandover, &Kept, &[std::net::TcpListener]),
        signals: &mut Signals,
        reload: &mut bool,
        drained: std::time::Duration,
    ) -> NotExecuted {
        if let Err(why) = test_hooks::step("state").await {
            return NotExecuted::Failed(why);
        }
        let (mut h, mut keep) = self.handover(handed, kept);
        h.prebound = prebound.iter().map(AsRawFd::as_raw_fd).collect();
        keep.extend(&h.prebound);
        if let Err(why) = test_hooks::step("exec").await {
            return NotExecuted::Failed(why);
        }
        // Signals that came since the drain: the new program would never hear them.
        signals.settle().await;
        while let Some(sig) = signals.pending() {
            match meaning(sig, Phase::Upgrading) {
                Meaning::Stop | Meaning::StopNow => {
                    info!("{sig}: the upgrade is given up; stopping as usual");
                    return NotExecuted::Stop;
                }
                Meaning::ReloadAfterUpgrade => defer_reload(sig, reload),
                m => log_signal(sig, &m, &self.front.access_log),
            }
        }
        // A reload that asked for this upgrade goes on in the new program (`waiting`: its
        // settings), as a SIGHUP deferred meanwhile does.
        h.reload_pending = *reload || self.waiting.is_some();
        // A process that ended since it was handed over: its end is this program's to see
        // (the new one would find an exit it cannot explain), so not now.
        if let Some(c) = handed.children.iter().find(|c| c.carried.has_ended()) {
            let code = self
                .front
                .roster
                .present()
                .find(|p| p.id == c.id)
                .map_or_else(|| format!("process {}", c.id.0), |p| p.code.clone());
            return NotExecuted::Refused(format!(
                "{code} (pid {}) ended during the handover",
                c.carried.pid
            ));
        }
        info!(
            "upgrade: executing {} (pid {} kept, {} processes and {} idle client connections \
             handed over, drained in {:.0} ms)",
            program.display(),
            std::process::id(),
            handed.children.len(),
            kept.clients.len(),
            drained.as_secs_f64() * 1000.0
        );
        crate::logs::logging::flush();
        if let Some(path) = &self.old_pid_file {
            crate::ops::pid_file::release(path);
        }
        let e = exec::exec(program.to_path_buf(), &h, &keep);
        // Not replaced: the pid file is this program's again.
        if let Some(path) = &self.old_pid_file {
            if let Err(e) = crate::ops::pid_file::claim(path) {
                warn!("upgrade: the pid file could not be written again: {e:#}");
            }
        }
        NotExecuted::Failed(format!("cannot execute {}: {e}", program.display()))
    }

    /// Serves on after an upgrade that did not happen, and carries out a reload deferred
    /// meanwhile (`reload`).
    fn serve_on(
        &mut self,
        kept: Kept,
        live: std::sync::Arc<listener::LiveListenerSettings>,
        reload: bool,
        status: &str,
    ) -> Outcome {
        let serving = self.serve_again(kept.listener, kept.clients, live);
        self.notifier.ready(status);
        Outcome::Serving { serving, reload }
    }

    /// One line, and the reason for `fhircluster upgrade`; nothing was changed. For a reload's
    /// upgrade the line names the settings left waiting for the next reload.
    fn refused(&self, why: &str) {
        match &self.waiting {
            Some(names) => warn!(
                "upgrade refused: {why}; serving on as before: the rest of the reload is applied, \
                 and {names} wait for the next reload"
            ),
            None => warn!("upgrade refused: {why}; serving on as before"),
        }
        self.desk.ended("refused", why);
    }

    /// The drain with the port kept, and the idle client connections too when the new program
    /// takes them over (`clients`): `None` when a stop signal came meanwhile (the drain then
    /// ends as a stop's does). A `SIGHUP` meanwhile is deferred (`reload`).
    async fn drain_for_upgrade(
        &mut self,
        mut serving: Serving,
        clients: bool,
        signals: &mut Signals,
        reload: &mut bool,
    ) -> Option<Kept> {
        let _ = serving.shutdown.send(Shutdown::HandOver { clients });
        let mut stop = false;
        let listener = loop {
            tokio::select! {
                l = &mut serving.task => break l.ok().flatten(),
                sig = signals.next() => match meaning(sig, Phase::Upgrading) {
                    Meaning::Stop | Meaning::StopNow => {
                        info!("{sig}: the upgrade is given up; stopping as usual");
                        stop = true;
                    }
                    Meaning::ReloadAfterUpgrade => defer_reload(sig, reload),
                    m => log_signal(sig, &m, &self.front.access_log),
                },
            }
        };
        if stop {
            self.front.admission.stop();
            return None;
        }
        if listener.is_none() {
            error!("upgrade: the client listener was lost; stopping");
            self.front.admission.stop();
        }
        listener
    }

    /// Serves again on the same listener and the idle client connections the drain kept (the
    /// upgrade did not happen).
    fn serve_again(
        &mut self,
        listener: tokio::net::TcpListener,
        clients: Vec<HandedClient>,
        live: std::sync::Arc<listener::LiveListenerSettings>,
    ) -> Serving {
        let (shutdown, shutdown_rx) = watch::channel(Shutdown::No);
        let at = listener.local_addr().ok();
        let task = tokio::spawn(listener::serve_live(
            listener,
            clients,
            self.front.clone(),
            live.clone(),
            shutdown_rx,
        ));
        self.state.send_replace(crate::ops::notify::State::Serving);
        Serving {
            task,
            shutdown,
            live,
            at,
        }
    }

    /// The listeners the settings to come need beyond those in force, bound now (DEC-70): to
    /// be handed over when the new program takes them (`hand`), else closed again at once (the
    /// new program binds them itself: this proves only that the ports are free). `Err`: the
    /// refusal's reason.
    fn bind_for(
        &self,
        new: &crate::settings::Settings,
        serving: &Serving,
        hand: bool,
    ) -> Result<Vec<std::net::TcpListener>, String> {
        let c = &new.cluster;
        let want = crate::upgrade::listeners::to_bind(
            serving.at,
            self.admin_at,
            new.port,
            c.listen_address,
            c.admin_address,
        );
        let mut bound = Vec::new();
        if let Some((port, listen)) = want.client {
            let made = crate::ops::client_port::bind(listen, port)
                .and_then(|b| b.listener.into_std())
                .map_err(|e| {
                    let on = listen.map_or(String::new(), |a| format!(" on {a}"));
                    format!("server.port {port}{on}: cannot listen: {e}")
                })?;
            bound.push(made);
        }
        if let Some(addr) = want.admin {
            let made = std::net::TcpListener::bind(addr)
                .map_err(|e| format!("server.cluster.adminAddress {addr}: cannot listen: {e}"))?;
            bound.push(made);
        }
        if !hand {
            bound.clear();
        }
        Ok(bound)
    }

    /// The state as the new program reads it, and every fd it names.
    fn handover(&self, handed: &ShellHandover, kept: &Kept) -> (Handover, Vec<RawFd>) {
        let listener = &kept.listener;
        let mut keep = vec![listener.as_raw_fd()];
        let client_conns = kept
            .clients
            .iter()
            .map(|c| ClientConnState {
                fd: c.stream.as_raw_fd(),
                unread: c.unread.to_vec(),
                idle_ms: handed
                    .at
                    .saturating_duration_since(c.idle_since)
                    .as_millis() as u64,
            })
            .collect::<Vec<_>>();
        keep.extend(client_conns.iter().map(|c| c.fd));
        let admin_fd = self.admin_fd.as_ref().map(AsRawFd::as_raw_fd);
        keep.extend(admin_fd);
        let agent_fd = self.agent_fd.as_ref().map(AsRawFd::as_raw_fd);
        keep.extend(agent_fd);
        let control_fd = self.control_socket.as_ref().map(|c| c.raw_fd());
        let control_file = self.control_socket.as_ref().map(|c| c.file());
        keep.extend(control_fd);
        let guardian = crate::tree::guardian::hand_over();
        keep.extend(guardian.as_ref().map(|g| g.fd));
        let children = handed
            .children
            .iter()
            .map(|c| ChildState::capture(c, &mut keep))
            .collect();
        let mono_now = crate::ops::notify::monotonic_usec() / 1000;
        let since = crate::clock::now_std().saturating_duration_since(handed.at);
        let h = Handover {
            format: FORMAT,
            captured_monotonic_ms: mono_now.saturating_sub(since.as_millis() as u64),
            lifecycle: handed.lifecycle.clone(),
            children,
            shell: handed.shell.clone(),
            mailbox: handed.mailbox.clone(),
            keeper: handed.keeper.clone(),
            client_fd: listener.as_raw_fd(),
            admin_fd,
            agent_fd,
            control_fd,
            control_file,
            mark: crate::tree::run::current()
                .map(|r| r.mark.clone())
                .unwrap_or_default(),
            guardian,
            reload_pending: false,
            counters: crate::proxy::carried_counters::carry(&crate::ops::admin::metrics_text(
                &self.front,
                None,
            )),
            last_reload: Some(self.front.counters.observed.reload_state()),
            client_conns,
            prebound: Vec::new(),
            cooldowns: self
                .front
                .admission
                .cooldowns()
                .into_iter()
                .map(|(id, until)| CooldownState {
                    id: id.0,
                    left_ms: until.saturating_duration_since(handed.at).as_millis() as u64,
                })
                .collect(),
        };
        (h, keep)
    }
}

/// A `SIGHUP` during an upgrade: carried out once it is over (by the new program, or by this
/// one should it not happen). One line, the first time.
fn defer_reload(sig: Sig, reload: &mut bool) {
    if !std::mem::replace(reload, true) {
        info!(
            "{sig}: deferred: an upgrade is under way; the settings are reloaded once it is over"
        );
    }
}
