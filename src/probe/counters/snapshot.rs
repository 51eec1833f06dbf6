//! The host's cumulative counters at one moment ([`HostSnapshot`]): what
//! the host reader gathers and an agent sends; two of them make a
//! [`super::HostSample`]. Plain data: the readers fill it, the sample
//! computes from it.

use super::{process, stack, threads};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// Cumulative counters of one link.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NicCounters {
    pub(crate) dev: procfs_core::net::DeviceStatus,
    /// Link speed, Mb/s, when the driver reports one.
    pub(crate) speed_mbps: Option<u64>,
    /// `full`, `half` or `unknown`, when reported.
    pub(crate) duplex: Option<String>,
    pub(crate) carrier_changes: Option<u64>,
    pub(crate) rx_crc_errors: Option<u64>,
    /// Late collisions, the mark of a duplex mismatch.
    pub(crate) tx_window_errors: Option<u64>,
}

/// The host's cumulative counters at one moment. It travels as JSON from
/// an agent; `at` is then the moment it arrived.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostSnapshot {
    #[serde(skip, default = "Instant::now")]
    pub(crate) at: Instant,
    pub(crate) stat: Option<procfs_core::KernelStats>,
    /// Interrupts since boot (the first number of /proc/stat's `intr` line).
    pub(crate) interrupts: Option<u64>,
    /// Interrupts since boot per source, per CPU (/proc/interrupts).
    pub(crate) irqs: BTreeMap<String, Vec<u64>>,
    pub(crate) meminfo: Option<procfs_core::Meminfo>,
    pub(crate) vmstat: Option<BTreeMap<String, i64>>,
    pub(crate) disks: Vec<procfs_core::DiskStat>,
    /// What each stacked disk (loop, dm, md) hands its I/O to: disks, or
    /// `memory` for a file on tmpfs.
    #[serde(default)]
    pub(crate) disk_lower: BTreeMap<String, Vec<String>>,
    /// The kernel threads that serve a stacked disk's I/O, with their CPU.
    #[serde(default)]
    pub(crate) kernel_workers: Vec<stack::KernelWorker>,
    pub(crate) nics: BTreeMap<String, NicCounters>,
    /// `Tcp:` of /proc/net/snmp and `TcpExt:` of /proc/net/netstat.
    pub(crate) tcp: BTreeMap<String, u64>,
    /// The host's stall counters (an older agent's 10 s averages, sent
    /// under other field names, read as none).
    #[serde(default)]
    pub(crate) pressure: PressureTotals,
    /// The followed process groups and their processes' counters.
    pub(crate) processes: Vec<(process::ProcessGroup, process::GroupCounters)>,
    /// The cgroup of the server group's first process.
    #[serde(default)]
    pub(crate) server_cgroup: Option<crate::probe::cgroup::CgroupCounters>,
    /// The cgroup of perflab's own process, when it is followed.
    #[serde(default)]
    pub(crate) perflab_cgroup: Option<crate::probe::cgroup::CgroupCounters>,
    /// The qdiscs of the host's namespace and of the server's.
    #[serde(default)]
    pub(crate) qdiscs: Vec<crate::probe::qdisc::QdiscCounters>,
    /// The threads of each followed group, by the group's label.
    #[serde(default)]
    pub(crate) threads: Vec<(String, threads::GroupThreads)>,
    /// The kernel schedules each session as a group of its own
    /// (`/proc/sys/kernel/sched_autogroup_enabled`): a nice value then
    /// weighs only within its session.
    #[serde(default)]
    pub(crate) autogroup: Option<bool>,
}

impl HostSnapshot {
    /// The threads of the followed group `label`, when they were read.
    pub(crate) fn threads_of(&self, label: &str) -> Option<&threads::GroupThreads> {
        self.threads
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, t)| t)
    }
}

/// The host's stall counters at one moment (`total=` of /proc/pressure's
/// `some` and `full` lines), µs since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PressureTotals {
    pub(crate) cpu_some_us: Option<u64>,
    pub(crate) memory_some_us: Option<u64>,
    pub(crate) memory_full_us: Option<u64>,
    pub(crate) io_some_us: Option<u64>,
    pub(crate) io_full_us: Option<u64>,
}
