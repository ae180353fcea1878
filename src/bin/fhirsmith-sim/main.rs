//! `fhirsmith-sim`: a simulated FHIRsmith server for tests, demos and benchmarks. It behaves like
//! `node server.js` where the launcher can see it (flags, config.json, IPC, cache-ids, SIGTERM,
//! one event loop) without FHIRsmith's terminology. See [`USAGE`] for flags and knobs.
//!
//! Request handling runs on one thread (a current-thread runtime) and burns each operation's CPU
//! cost in slices of at most 25 ms (`cost`), so it queues like Node. Cache-ids (`cache_id`,
//! `cache_store`), routing checks (`path`), the IPC side (`reporter`) and the test knobs
//! (`knobs`) each have their own file; `run` is the process's life from start to exit.

// `unsafe` only in `system::ffi`, each block with its `SAFETY:` comment: the compiler holds both.
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod args;
mod body;
mod cache_id;
mod cache_store;
mod config;
mod control;
mod cost;
mod handler;
mod knobs;
mod memory;
mod path;
mod reporter;
mod run;
mod server;
mod state;

fn main() -> std::process::ExitCode {
    // First: the fds the sim was started with, the only ones it may take as inherited (fd 3).
    fhircluster::system::ffi::note_inherited_fds();
    run::main()
}

/// Why the sim stops.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// SIGTERM or SIGINT: finish what is in progress, send the last counts, exit 0.
    Signal,
    /// The launcher's end of the IPC channel closed (it exited or was killed).
    ChannelClosed,
}

/// `fhirsmith-sim --help`.
pub const USAGE: &str = "\
fhirsmith-sim: a simulated FHIRsmith server (node server.js) for testing fhircluster

USAGE: fhirsmith-sim [--role=master|tx-worker] [--instance-code=CODE] [--port=N] [other flags]

  --role, FHIRSMITH_ROLE                master or tx-worker; none: a single server
  --instance-code, FHIRSMITH_INSTANCE_CODE   prefix of its cache-ids (a worker needs one; a master
                                        may use modules.tx.instanceCode)
  --port, PORT                          the port (else server.port, else 3000; 0: any free one)
  FHIRSMITH_DATA_DIR                    the data directory (config.json, databases/); else cwd
  Other flags (--expose-gc, --max-old-space-size=N, server.js ...) are accepted and reported at
  GET /sim/info, with FHIRCLUSTER_NODE_FLAGS. --port/--instance-code need --role, as in FHIRsmith.
  With a role it listens on server.cluster.bindAddress (127.0.0.1); without, on every interface.
  With NODE_CHANNEL_FD set it speaks the IPC protocol (cluster.md, The IPC protocol) and exits when the
  channel closes; without, it runs on its own.

KNOBS (environment; NAME_<code>, e.g. SIM_REFUSE_tx2=1, wins over NAME for that process;
knobs apply on every start, unless SIM_ONCE_DIR is set, see below)
  SIM_COST_METADATA_MS=1 SIM_COST_LOOKUP_MS=4 SIM_COST_VALIDATE_MS=5 SIM_COST_SUBSUMES_MS=4
  SIM_COST_EXPAND_MS=200 SIM_COST_OTHER_MS=1    CPU per operation, burnt in 25 ms slices
  SIM_START_DELAY_MS=N      wait N ms before listening and sending ready
  SIM_READY_DELAY_MS=N      listen and serve, but send ready only N ms later (its hello, sent
                            before it listens, says it speaks the protocol: the launcher waits)
  SIM_PROTOCOL=1.0          the IPC protocol it announces (default: the launcher's); below 1.1
                            no hello first and, as the master, no eventsReceived
  SIM_FAIL_AT_START=CODE    exit with CODE before listening (after the start delay)
  SIM_EXIT_AFTER_MS=N       N ms after ready, exit with SIM_EXIT_CODE (1), or die by
  SIM_EXIT_CODE=C           SIM_EXIT_SIGNAL (KILL, SEGV, ABRT, TERM ...)
  SIM_EXIT_SIGNAL=NAME
  SIM_ONCE_DIR=DIR          SIM_FAIL_AT_START and SIM_EXIT_AFTER_MS fire once per instance code
                            (a marker file DIR/<code>.<knob>), so a restarted process behaves
  SIM_IGNORE_SIGTERM=1      ignore SIGTERM (for the launcher's SIGKILL after 30 s)
  SIM_LINGER_MS=N           keep the port N ms after SIGTERM (a process still shutting down)
  SIM_REFUSE_HEALTH=1       answer /health with 503
  SIM_REFUSE=1              refuse every request with 503 + Retry-After, as the memory guard
                            does (not /dashboard/status.json); status says refusing
  SIM_MEMORY_LIMIT_MB=N     the memory guard's limit reported in ready (memoryLimit)
  SIM_COUNTS_SECONDS=60     how often a worker sends requestCounts

PATHS (any process; never counted or refused)
  GET  /sim/info              argv, flags, environment, code, role, pid, port, start time
  GET  /sim/received          what the launcher sent (hello, snapshots, worker counts, events,
                              history); the master acknowledges events (eventsReceived) as it
                              takes them in
  POST /sim/refuse?on=1|0     turn the memory-guard refusal on or off
  POST /sim/channel?pause=S   stop reading the IPC channel for S seconds (0: read again now);
                              what the launcher sends waits in the socket meanwhile
  POST /sim/alloc?mb=N        allocate N MiB and touch every page; POST /sim/free frees it all
  ANY  /sim/hang              never begin a response (also ?_sim_hang=1 on any path)
  ?_sim_delay_ms=N            on any tx path: begin the response N ms late (no CPU burnt)
  ?_sim_exit=CODE|SIGNAL      on any tx path: exit with CODE, or die by SIGNAL (SEGV, ABRT ...),
                              with the request unanswered (a query of death)
  GET  /sim/stream?seconds=N  a response that begins at once and lasts N s (also ?_sim_stream=N)
  GET  /sim/large?mb=N        an N MiB response (also ?_sim_large_mb=N on any path, tx or not)

Every response has X-Served-By: <code>, and echoes X-Sim-Forwarded-For, X-Sim-Forwarded-Proto,
X-Sim-Content-Length (or none), X-Sim-Chunked and X-Sim-Body-Length.
";
