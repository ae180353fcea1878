//! The sim's life: read flags, environment and config.json, say `hello` on its channel, wait the
//! start delay (or fail, on demand), listen, say `ready` (at once, or after the ready delay while
//! it serves), serve until SIGTERM or the channel closes, finish what is in progress, send the
//! last counts, hold the port a while if asked, exit.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::args::{self, SimArgs};
use super::cache_store::CacheStore;
use super::config::SimConfig;
use super::knobs::Knobs;
use super::reporter;
use super::state::{now_ms, Sim, SimInit};
use super::{StopReason, USAGE};
use fhircluster::ipc;
use fhircluster::ipc::message::FromChild;
use fhircluster::process::Role;
use fhircluster::settings::jsonc;

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// The binary's entry point.
pub fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match args::parse(&argv, &env) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fhirsmith-sim: {e}");
            return ExitCode::from(1);
        }
    };
    if args.help {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fhirsmith-sim: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = rt.block_on(run(args));
    // Streams and hung requests may still hold tasks; they end with the process.
    rt.shutdown_background();
    ExitCode::from(code)
}

/// Exits (or dies by a signal) now, as SIM_EXIT_* asks.
fn exit_now(code: &str, knobs: &Knobs) -> ! {
    die(
        code,
        knobs.exit_signal.as_deref(),
        knobs.exit_code,
        "SIM_EXIT_*",
    )
}

/// Dies by the signal `signal` (a name without `SIG`), else exits with `exit_code`; `why` is
/// the knob, for the line it writes first.
pub fn die(code: &str, signal: Option<&str>, exit_code: i32, why: &str) -> ! {
    if let Some(name) = signal {
        if let Ok(sig) = format!("SIG{name}").parse::<nix::sys::signal::Signal>() {
            eprintln!("[fhirsmith-sim {code}] raising SIG{name} ({why})");
            // Rust's own SIGSEGV/SIGBUS handler (stack overflow detection) swallows a raised
            // signal once and restores the default action, so the second raise is the one that
            // kills the process.
            let _ = nix::sys::signal::raise(sig);
            let _ = nix::sys::signal::raise(sig);
            std::thread::sleep(Duration::from_millis(200));
            std::process::exit(128 + sig as i32);
        }
        eprintln!("[fhirsmith-sim {code}] unknown signal '{name}', exiting with {exit_code}");
    }
    eprintln!("[fhirsmith-sim {code}] exiting with {exit_code} ({why})");
    std::process::exit(exit_code)
}

fn resolve_code(args: &SimArgs, config: &SimConfig) -> Result<String, String> {
    match (&args.instance_code, args.role) {
        (Some(c), _) => Ok(c.clone()),
        (None, Some(Role::TxWorker)) => Err("a tx-worker needs --instance-code".to_string()),
        (None, Some(Role::Master)) => config
            .instance_code
            .clone()
            .ok_or_else(|| "a master needs --instance-code or modules.tx.instanceCode".to_string()),
        (None, None) => Ok(config
            .instance_code
            .clone()
            .unwrap_or_else(|| "s0".to_string())),
    }
}

async fn bind(address: &str, port: u16) -> std::io::Result<TcpListener> {
    match address.parse::<IpAddr>() {
        Ok(ip) => TcpListener::bind(SocketAddr::new(ip, port)).await,
        Err(_) => TcpListener::bind((address, port)).await,
    }
}

async fn run(args: SimArgs) -> u8 {
    let start_ms = now_ms();
    let data_dir = env("FHIRSMITH_DATA_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."));
    let json = match jsonc::read(&data_dir) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("fhirsmith-sim: {e}");
            return 1;
        }
    };
    let config = SimConfig::from_json(json.as_ref(), args.role.is_some());
    let code = match resolve_code(&args, &config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fhirsmith-sim: {e}");
            return 1;
        }
    };
    let tag = format!("[fhirsmith-sim {code}]");
    if !args.unknown.is_empty() {
        eprintln!("{tag} flags passed through: {}", args.unknown.join(" "));
    }
    let knobs = Knobs::read(&code, &env);
    let mut channel = match ipc::channel::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{tag} NODE_CHANNEL_FD: {e}");
            return 1;
        }
    };
    // Protocol 1.1: say first, before listening, that this process speaks the protocol, so the
    // launcher waits for its `ready` and never takes its socket for it (LAUNCH-3, DEC-27).
    if let (Some(ch), true) = (channel.as_mut(), knobs.speaks_1_1()) {
        let hello = FromChild::Hello {
            protocol: Some(knobs.protocol.clone()),
            code: code.clone(),
            pid: std::process::id(),
        };
        let _ = ch.send(&hello).await;
    }
    if knobs.start_delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(knobs.start_delay_ms)).await;
    }
    if let Some(exit) = knobs.fail_at_start {
        if knobs.fire_once("fail-at-start", &code) {
            eprintln!("{tag} failing at start with {exit} (SIM_FAIL_AT_START)");
            std::process::exit(exit);
        }
    }
    let cache = if config.shared_cache && args.role.is_some() {
        match CacheStore::shared(&data_dir, &code, start_ms, args.role == Some(Role::Master)) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{tag} shared cache under {}: {e}", data_dir.display());
                return 1;
            }
        }
    } else {
        CacheStore::local(&code, start_ms)
    };
    let port = args.port.or(config.port).unwrap_or(3000);
    let address = if args.role.is_some() {
        config.bind_address.clone()
    } else {
        "0.0.0.0".to_string()
    };
    let listener = match bind(&address, port).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{tag} cannot listen on {address}:{port}: {e}");
            return 1;
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(port);
    let role = args.role;
    let sim = Arc::new(Sim::new(SimInit {
        code: code.clone(),
        role,
        args,
        config,
        knobs: knobs.clone(),
        data_dir,
        has_channel: channel.is_some(),
        cache,
        start_ms,
    }));
    sim.port
        .store(u64::from(port), std::sync::atomic::Ordering::Relaxed);
    eprintln!("{tag} {} listening on {address}:{port}", sim.role_name());

    let (stop_tx, mut stop_rx) = mpsc::unbounded_channel();
    let sender = channel.map(|ch| reporter::start(sim.clone(), ch, stop_tx.clone()));
    if let Some(s) = &sender {
        let ready = FromChild::Ready {
            code: code.clone(),
            role: sim.role_name().to_string(),
            pid: sim.pid,
            port,
            protocol: Some(knobs.protocol.clone()),
            memory_limit: sim.memory_limit(),
        };
        let (s, delay, tag) = (s.clone(), knobs.ready_delay_ms, tag.clone());
        // SIM_READY_DELAY_MS: it listens and serves meanwhile, but isn't ready yet.
        let said = tokio::spawn(async move {
            if delay > 0 {
                eprintln!("{tag} saying ready in {delay} ms (SIM_READY_DELAY_MS)");
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            reporter::send(&s, ready).await;
        });
        if delay == 0 {
            let _ = said.await;
        }
    }
    if let Some(ms) = knobs.exit_after_ms {
        if knobs.fire_once("exit-after", &code) {
            let (code, knobs) = (code.clone(), knobs.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                exit_now(&code, &knobs);
            });
        }
    }
    spawn_signals(&tag, knobs.ignore_sigterm, stop_tx);

    let (serve_stop_tx, serve_stop_rx) = watch::channel(false);
    let server = super::server::serve(&listener, sim.clone(), serve_stop_rx);
    tokio::pin!(server);
    let reason = tokio::select! {
        _ = &mut server => StopReason::ChannelClosed,
        r = stop_rx.recv() => r.unwrap_or(StopReason::ChannelClosed),
    };
    let stopped_at = tokio::time::Instant::now();
    eprintln!("{tag} stopping ({reason:?}): finishing requests in progress");
    let _ = serve_stop_tx.send(true);
    match reason {
        StopReason::Signal => server.await,
        // The launcher has gone: don't wait on a request no one will read for long.
        StopReason::ChannelClosed => {
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
    }
    if let (Some(s), StopReason::Signal, true) = (&sender, reason, sim.is_worker()) {
        let last = FromChild::RequestCounts(sim.take_counts(true));
        let _ = tokio::time::timeout(Duration::from_secs(5), reporter::send(s, last)).await;
    }
    let linger = Duration::from_millis(knobs.linger_ms);
    tokio::time::sleep_until(stopped_at + linger).await;
    eprintln!("{tag} stopped");
    0
}

fn spawn_signals(tag: &str, ignore_sigterm: bool, stop: mpsc::UnboundedSender<StopReason>) {
    use tokio::signal::unix::{signal, SignalKind};
    let tag = tag.to_string();
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("{tag} cannot install signal handlers");
        return;
    };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => {
                    if ignore_sigterm {
                        eprintln!("{tag} ignoring SIGTERM (SIM_IGNORE_SIGTERM)");
                        continue;
                    }
                }
                _ = int.recv() => {}
            }
            let _ = stop.send(StopReason::Signal);
        }
    });
}
