//! The scheduler's vocabulary: what the shell tells it and what it answers.

use std::time::Duration;

use crate::process::ProcessId;

/// The shell's name for one request, unique among the requests the scheduler holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// What the supervisor says about a process.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ProcessState {
    /// Not running, starting or restarting: takes nothing (ROUTE-4c).
    Down,
    /// Ready: takes requests.
    Ready,
    /// Being drained (recycle, rolling restart): takes no new requests, and its cache-ids are
    /// lost (DEC-15); what it has in flight finishes.
    Draining,
}

/// How a dispatched request ended, as the shell saw it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The process began a response with this status (its slot frees when the response ends;
    /// the shell reports it then, STREAM-1). A `503` starts a cooldown (COOL-1, DEC-8).
    Responded { status: u16 },
    /// No response began within `upstreamTimeoutSeconds` (TIMEOUT-1, TIMEOUT-3); three in a row
    /// start a cooldown (COOL-4).
    TimedOut,
    /// Nothing was sent (connecting failed): the request is tried once more on another process;
    /// the scheduler answers with a second `Dispatch` or with `Fail`.
    NotSent,
    /// Sent, then the process failed without a response (connection reset ...): the shell
    /// answers `502`.
    Failed,
}

/// Why the launcher refuses a request itself.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Waited its whole wait (`queueSeconds`, or `ownerQueueSeconds` for a cache-id, `waited`)
    /// without a slot: `503`, `Retry-After: 5`, `Connection: close` (QUEUE-4, QUEUE-5).
    QueueTimeout { waited: Duration },
    /// `predictiveAdmission` (DEC-50), once the service times are measured: the same `503` as
    /// `QueueTimeout`, with `Retry-After` the whole seconds (1-5) until a slot is expected.
    /// `early`: refused as it arrived, since it could not be admitted within `waited` (every
    /// slot it could take is busy with work expected to last longer, or taken by those ahead
    /// of it); otherwise it waited all of `waited`.
    Forecast {
        waited: Duration,
        retry_after: u8,
        early: bool,
    },
    /// The cache-id's issuer is down or draining: `404` `cache-id-unknown`, lost to a server
    /// restart (ROUTE-3b, DEC-15).
    OwnerGone(ProcessId),
    /// No ready process could ever take it now: `503` at once (QUEUE-16, DEC-10).
    NoProcessReady,
    /// The launcher is stopping and the request would have to wait: `503` (QUEUE-15).
    Stopping,
}

/// What the shell must do next.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send the request to this process now; report its end with `finish` (or `cancel`).
    Dispatch { id: RequestId, process: ProcessId },
    /// Answer the client now; the request is over.
    Refuse { id: RequestId, reason: Refusal },
    /// A request not sent to `process` could go nowhere else now: answer `502` naming
    /// `process`; the request is over.
    Fail { id: RequestId, process: ProcessId },
}

/// One process's load, for status and tests.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct Load {
    /// Counted tx requests in flight.
    pub in_flight: u32,
    /// `maxOutstanding` + `fastLaneExtra`; `None` with no limit.
    pub slots: Option<u32>,
    /// Normal-lane requests in flight.
    pub normal_running: u32,
    /// Requests waiting for this process only.
    pub queued: usize,
    /// In cooldown now.
    pub cooling: bool,
    /// Its event loop is saturated (normal requests held, see `held`).
    pub saturated: bool,
    /// While saturated: how many normal requests it may run at once (the meter's limit; the
    /// scheduler takes it as 1 ..= `normalMinSlots`).
    pub held: Option<u32>,
}
