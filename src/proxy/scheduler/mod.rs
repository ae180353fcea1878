//! Admission and scheduling of tx requests (pure): per-process slots and the fast lane, the
//! launcher's wait queues, cooldowns. Events and `now` in, actions and the next deadline out, in
//! the manner of quinn-proto: the shell feeds `submit` / `finish` / `cancel` / `set_process` /
//! `handle_timeout`, then drains `poll_action` and sleeps until `poll_timeout`.

pub mod bench;
mod config;
mod cooldown;
mod estimate;
mod forecast;
mod machine;
mod queue;
mod slots;
mod timers;
mod types;

pub(crate) use config::SchedulerConfig;
pub(crate) use machine::{IdHasher, Scheduler};
pub(crate) use types::{Action, Finish, Load, ProcessState, Refusal, RequestId};

#[cfg(test)]
mod lane_cool_tests;
#[cfg(test)]
mod predict_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod saturation_tests;
#[cfg(test)]
mod tests;
