//! fhircluster: the front door and supervisor for a FHIRsmith master and its tx-workers.
//!
//! The crate is a pure core (routing, admission, sizing, restart and recycle policy: no I/O, time
//! passed in) and a thin shell (processes, sockets, timers) around it. Module roots only declare.
//!
//! The library is the product. Public is only what its clients use: the launcher binary
//! (`src/main.rs`: `cli`, `launcher`, `fatal`, `tree::guardian_main`, `logs::logging::fatal`), the
//! simulated server `src/bin/fhirsmith-sim` (`ipc`, `outcome`, `process::Role`,
//! `settings::jsonc`, `system::ffi`), the load tool `src/bin/fhircluster-load`
//! (`proxy::scheduler::bench`, `system::ffi`) and
//! the integration tests (`ipc`, and a few items, each saying which test reads it). The rest is
//! `pub(crate)` or private, so the compiler reports what nothing uses.
//!
//! # A map of the code
//!
//! Where each part of the launcher lives, for a contributor (README.md is for operators).
//!
//! * `src/settings/` — every setting, typed and validated (`config.json` with comments, flags,
//!   environment); `table.rs` defines each once: its path, flag, variable, default, bound and what a
//!   reload does with it, and the loader, the reload (`src/reload.rs`) and the docs' checks follow
//!   it; the rest of the code names a setting by `settings::paths`, never by a string of its own
//!   (`tests/setting_names.rs` holds that). `src/sizing/`, `src/system/` — the worker count from CPU topology, CPU quota and
//!   cgroup memory (`src/launcher/host.rs` reads this host for the pure rules). `src/plan/` — the
//!   processes to run, their command lines and environment.
//! * `src/supervisor/` — the restart policy and the process lifecycle (`lifecycle.rs` and
//!   `lifecycle/`: pure state machines, with a model-based property test), and the shell
//!   (`shell.rs` and `shell/`) that spawns children with their IPC channel on fd 3 (`src/ipc/`),
//!   reads the machine (`readings.rs`) and takes the memory recycle decision (`recycle_watch.rs`,
//!   the pure rule in `recycle.rs`).
//! * `src/proxy/` — the front door. Pure: routing (`route.rs`, `lane.rs`), admission with slots,
//!   queues and cooldowns (`scheduler/`), the launcher's own answers (`answer.rs`). The shell:
//!   `listener.rs` accepts and drains; `conn/` is one client connection in its phases (lobby,
//!   hyper, parked: `conn/phase.rs` states the transitions); `pipeline.rs` is one request's named
//!   steps (route, rewrite, admit, pick, forward, respond, record), and `failure.rs` the one place
//!   a failure becomes an answer and is counted (`counters.rs`); `forward/` sends over keep-alive
//!   pools; `front.rs` holds the shared state: `admission.rs` (the scheduler behind its lock, the
//!   waiters, the timer, `Ticket`) and `roster.rs` (which processes are present and ready, pids,
//!   down counts, and the watch the launcher follows). `src/log_throttle.rs` is the one rule for
//!   log lines that could flood.
//! * `src/status/` — the cluster snapshot, graph history and events the master shows and reports
//!   (pure), the SQLite outbox that keeps what waits for the master, and the keeper that joins
//!   them: status only, each process's state taken from the supervisor's lifecycle, the machine
//!   read through `readings.rs`'s interface. `status/` imports nothing of `supervisor/`.
//! * `src/logs/` — the log pipeline every layer writes through: the launcher's own log, the
//!   bounded queue to stdout or the journal, the children's lines, journald's protocol, the access
//!   log and its file. `src/exposition/` — the Prometheus text format's floor: the histogram, the
//!   family and series helpers, this process's own figures. `src/signals.rs` — what each signal
//!   means (pure); `src/build_info.rs` — what `--version` prints; `src/node_report.rs` — the Node
//!   preload. `src/cli.rs` (and `cli/print.rs`) — the command line as clap parses it.
//! * `src/ops/` — the operator's edge, on top of the rest: systemd notify, where `server.port`
//!   listens, the launcher's own read-only endpoints (`/livez`, `/readyz`, `/status`,
//!   `/metrics`), the control socket the actions go to (`control_socket.rs`; its protocol, pure,
//!   `control_proto.rs`), and `fhircluster status` and `upgrade` (`control_client.rs`).
//!   `src/kit/` — what `fhircluster print` prints. `src/launcher.rs` — the launcher's run in
//!   phases (wire, wait for the master, serve, stop), and `launcher/host.rs`, the shell that reads
//!   this host for sizing and the plan.
//! * `src/lib.rs` is the product: the launcher (`src/main.rs`) and everything it runs. Two more
//!   binaries are its outside clients, each a module tree of its own under `src/bin/`:
//!   `src/bin/fhirsmith-sim/` — the simulated FHIRsmith server the tests and the demo use (it
//!   speaks the IPC protocol through `fhircluster::ipc`, as any child could); `src/bin/fhircluster-load/`
//!   — the load tool (`surge`, `sessions`, `compare`; its scheduler benchmark runs
//!   `fhircluster::proxy::scheduler` in process).
//! * `cluster.md` — how fhircluster works, every setting, the IPC protocol. `nginx.md` — behind
//!   nginx.
//!
//! # Layers
//!
//! Which top-level module may import which: each imports only modules on lines below its own
//! (none on its own line), so there is no import cycle. `tests/layers.rs` holds the code (test
//! code aside) to this list.
//!
//! * `launcher`
//! * `kit`
//! * `ops`
//! * `reload`, `upgrade`
//! * `held_ports`, `proxy`
//! * `fatal`, `plan`, `supervisor`
//! * `logs`, `sizing`, `status`
//! * `settings`, `tree`
//! * `cli`, `process`
//! * `build_info`, `clock`, `deadline`, `digest`, `exposition`, `ipc`, `log_throttle`,
//!   `node_report`, `outcome`, `per_kind`, `signals`
//! * `system` (the machine; its ffi.rs is the one home of the FFI), `test_hooks` (what the
//!   integration tests may make happen by a FHIRCLUSTER_TEST_ variable; nothing when unset)

// `unsafe` only in `system::ffi`, each block with its `SAFETY:` comment: the compiler holds both.
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

/// The lib's own tests run on the launcher's allocator (`main.rs`, DEC-60), so what they see of
/// memory is what the launcher does.
#[cfg(test)]
#[global_allocator]
static TEST_ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

pub mod build_info;
pub mod cli;
mod clock;
pub(crate) mod deadline;
pub(crate) mod digest;
pub(crate) mod exposition;
pub mod fatal;
pub(crate) mod held_ports;
pub mod ipc;
pub(crate) mod kit;
pub mod launcher;
pub(crate) mod log_throttle;
pub mod logs;
pub(crate) mod node_report;
pub mod ops;
pub mod outcome;
pub(crate) mod per_kind;
pub(crate) mod plan;
pub mod process;
pub mod proxy;
pub(crate) mod reload;
pub mod settings;
pub mod signals;
pub(crate) mod sizing;
pub(crate) mod status;
pub mod supervisor;
pub mod system;
pub mod test_hooks;
pub mod tree;
pub mod upgrade;
