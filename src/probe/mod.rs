//! Probes: sources of resource samples — perflab's own CPU and memory use
//! (the generator watches itself), the host's counters from /proc and /sys,
//! the server's cgroup and the qdiscs of its network namespace, the
//! database's statistics, and the host facts stored with every run.

pub(crate) mod agent_client;
#[cfg(test)]
mod agent_props;
pub(crate) mod cgroup;
pub mod counters;
mod db;
pub(crate) mod flush;
mod host;
pub mod netlink;
pub mod node_exporter;
pub mod qdisc;
#[cfg(test)]
pub(crate) mod realdev;
pub(crate) mod remote;
pub(crate) mod route;
mod self_usage;

pub use db::{DbProbe, DbSample, DbStatsSource};
pub(crate) use db::{RELATION_ACCESSES, RELATION_BYTES, RELATION_BYTES_NOW};
pub use host::HostFacts;
pub(crate) use remote::ProbeSample;
pub use self_usage::{self_rss, SelfUsage, UsageMark};
