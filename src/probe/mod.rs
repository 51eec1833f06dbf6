//! Probes: sources of resource samples. This module holds what the
//! foundation needs: perflab's own CPU and memory use (the generator watches
//! itself) and the host facts stored with every run.

mod db;
mod host;
mod self_usage;

pub use db::{DbProbe, DbSample, DbStatsSource};
pub use host::HostFacts;
pub use self_usage::{self_rss, SelfUsage, UsageMark};
