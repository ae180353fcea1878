//! One client connection, from its accept to its close, in three phases: the lobby (`lobby`),
//! hyper (`hyper_phase`) and parked (`park`). `phase::Phase` states the transitions; `serve_client`
//! runs them.

mod handed;
mod hyper_phase;
mod lobby;
#[cfg(test)]
pub(crate) mod lobby_differential_tests;
mod park;
mod park_io;
mod phase;
mod refused;
#[cfg(test)]
mod size_tests;
mod unread;

pub(crate) use crate::proxy::http1::request_head::Refused;
pub(crate) use handed::{Collector, HandedClient, HAND_OVER_AT_MOST};
pub(crate) use hyper_phase::pipelined_at_once;
pub(crate) use phase::{serve_client, ConnContext};
