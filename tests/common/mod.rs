//! Helpers for integration tests: a cluster builder over the real `fhircluster` binary with
//! `fhirsmith-sim` as the server, free loopback ports, a temporary data directory per test, the
//! launcher's output captured line by line, and a small HTTP/1.1 client on raw sockets (so tests
//! control every byte and read every header exactly as sent).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const LAUNCHER: &str = env!("CARGO_BIN_EXE_fhircluster");
pub const SIM: &str = env!("CARGO_BIN_EXE_fhirsmith-sim");

mod balancer;
mod cgroup;
mod check;
mod cluster;
mod front;
mod http;
mod netns;
mod nginx;
mod ops;
mod ports;
mod procs;
mod prometheus;
mod reliability;
mod sim;
mod source;
mod status;
mod supervision;
mod wait;

pub use balancer::*;
pub use cgroup::*;
pub use check::*;
pub use cluster::*;
pub use front::*;
pub use http::*;
pub use netns::*;
pub use nginx::*;
pub use ops::*;
pub use ports::*;
pub use procs::*;
pub use prometheus::*;
pub use reliability::*;
pub use sim::*;
pub use source::*;
pub use status::*;
pub use supervision::*;
pub use wait::*;
