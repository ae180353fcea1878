//! One client connection, from its accept to its close, in three phases: the lobby (`lobby`),
//! hyper (`served`) and parked (`park`). `phase::Phase` states the transitions; `serve_client`
//! runs them.

mod lobby;
mod park;
mod phase;
mod served;

pub(crate) use phase::{serve_client, ConnContext};
