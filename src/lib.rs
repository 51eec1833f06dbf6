//! perflab: a server performance lab in one binary. It drives a server under
//! test with realistic load, sweeps that load to saturation, records every
//! operation in HdrHistograms, stores each step the moment it ends, and
//! reports how much the server took.
//!
//! Data flows one way: `cli` → `plan` → `engine` (with `workload` sessions,
//! `measure` recorders and `probe` samples) → `store` → `analyze` (the
//! verdict, from what the store holds alone) → `report` → `commands`.

// Functions over 80 lines (clippy.toml) are refused outside tests; CI's
// `cargo clippy --all-targets -- -D warnings` turns this into an error.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod agent;
pub mod analyze;
pub mod cli;
pub mod commands;
pub mod doctor;
pub mod engine;
pub mod error;
pub mod kube;
pub mod lab;
pub mod live;
pub mod measure;
pub mod plan;
pub mod probe;
pub mod record;
pub mod report;
pub mod secret;
pub mod store;
pub mod sut;
pub mod units;
pub(crate) mod util;
pub mod wire;
pub mod workload;

#[cfg(test)]
mod layers;
