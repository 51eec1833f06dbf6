//! Probes: sources of resource samples. This module holds what the
//! foundation needs: perflab's own CPU and memory use (the generator watches
//! itself) and the host facts stored with every run.

mod host;
mod self_usage;

pub use host::HostFacts;
pub use self_usage::{self_rss, SelfUsage, UsageMark};
