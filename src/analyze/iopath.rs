//! The I/O path of a step: the block-I/O limits on the cgroups of the
//! server and of perflab itself (a disk or files run's I/O is perflab's),
//! the I/Os that went through each, the share of time tasks stalled on
//! I/O (the host's PSI and the cgroups' `io.pressure`, each the stalled
//! share of its interval), what each stacked disk hands its I/O to, and
//! the CPU of the kernel threads that serve it (a loop device's worker, a
//! journal). See `probe::cgroup` and `probe::counters::stack`. Beside
//! them, the server cgroup's other limits a flush or a fork meets
//! (`memory.high` and its reclaim, `pids.max`).

use crate::probe::cgroup::{IoLimit, MoreLimitsSample};
use crate::probe::counters::{weighted_mean, CgroupSample, HostSample};
use serde::Serialize;
use std::collections::BTreeMap;

/// A block-I/O limit on a followed cgroup, and the I/O through it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LimitUse {
    /// Whose cgroup: `perflab's own cgroup` or `the server's cgroup`.
    pub(crate) owner: String,
    pub(crate) limit: IoLimit,
    /// The cgroup's reads and writes per second on the limited device,
    /// and its bytes per second each way, mean over the step.
    pub(crate) reads_per_s: f64,
    pub(crate) writes_per_s: f64,
    pub(crate) read_bytes_per_s: f64,
    pub(crate) write_bytes_per_s: f64,
}

impl LimitUse {
    /// An empty use of no limit, to fill in tests.
    #[cfg(test)]
    pub(crate) fn default_for_tests() -> Self {
        LimitUse {
            owner: String::new(),
            limit: IoLimit::default(),
            reads_per_s: 0.0,
            writes_per_s: 0.0,
            read_bytes_per_s: 0.0,
            write_bytes_per_s: 0.0,
        }
    }

    /// The limit's kinds, each with the share of it the cgroup used:
    /// (`read IOPS`, limit, used share).
    pub(crate) fn shares(&self) -> Vec<(&'static str, u64, f64)> {
        let l = &self.limit;
        [
            ("read IOPS", l.read_iops, self.reads_per_s),
            ("write IOPS", l.write_iops, self.writes_per_s),
            ("read bytes/s", l.read_bps, self.read_bytes_per_s),
            ("write bytes/s", l.write_bps, self.write_bytes_per_s),
        ]
        .into_iter()
        .filter_map(|(what, limit, used)| {
            let limit = limit.filter(|n| *n > 0)?;
            Some((what, limit, used / limit as f64))
        })
        .collect()
    }

    /// The limit with `value` in words: `a blkio throttle of 100 write
    /// IOPS on the server's cgroup`.
    pub(crate) fn described(&self, value: &str) -> String {
        let l = &self.limit;
        let article = if l.interface == "io.max" { "an" } else { "a" };
        format!("{article} {} of {value} on {}", l.interface, self.owner)
    }

    /// The most used of its limits, with its share.
    pub(crate) fn tightest(&self) -> Option<(&'static str, u64, f64)> {
        self.shares().into_iter().max_by(|a, b| a.2.total_cmp(&b.2))
    }
}

/// What a step's I/O passed through.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub(crate) struct IoPath {
    /// Block-I/O limits on the followed cgroups, with their use.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) limits: Vec<LimitUse>,
    /// Share of the time some of the host's tasks stalled on I/O (PSI).
    pub(crate) io_pressure: Option<f64>,
    /// Share of the time some tasks of perflab's or the server's cgroup
    /// stalled on I/O (`io.pressure`), the higher of the two.
    pub(crate) cgroup_io_stall: Option<f64>,
    /// What each stacked disk hands its I/O to (disks, or `memory`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) lower: BTreeMap<String, Vec<String>>,
    /// CPUs of the kernel threads serving each stacked disk, mean.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) kernel_cpus: BTreeMap<String, f64>,
    /// The server cgroup's memory.high and pids.max, and what they did.
    #[serde(skip_serializing_if = "ServerLimits::is_empty")]
    pub(crate) server_limits: ServerLimits,
}

/// The server cgroup's memory.high and pids.max over a step.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub(crate) struct ServerLimits {
    /// The memory.high that binds it, bytes.
    pub(crate) memory_high_bytes: Option<u64>,
    /// Times it went over memory.high in the step.
    pub(crate) memory_high_hits: Option<f64>,
    /// Pages reclaimed from it per second, mean.
    pub(crate) reclaimed_pages_per_s: Option<f64>,
    /// Its tasks at most.
    pub(crate) pids_current: Option<f64>,
    /// The pids.max that binds it.
    pub(crate) pids_max: Option<u64>,
    /// Forks refused at pids.max in the step.
    pub(crate) pids_limit_hits: Option<f64>,
}

impl ServerLimits {
    fn is_empty(&self) -> bool {
        *self == ServerLimits::default()
    }

    /// The step's limits over its samples.
    fn of(samples: &[&HostSample]) -> Self {
        let more = |s: &HostSample| s.server_cgroup.as_ref()?.more.clone();
        let all: Vec<MoreLimitsSample> = samples.iter().filter_map(|s| more(s)).collect();
        let sum = |f: fn(&MoreLimitsSample) -> Option<u64>| {
            let v: Vec<u64> = all.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64)
        };
        ServerLimits {
            memory_high_bytes: all.iter().rev().find_map(|m| m.memory_high_bytes),
            memory_high_hits: sum(|m| m.memory_high_hits),
            reclaimed_pages_per_s: weighted_mean(samples, |s| more(s)?.reclaimed_pages_per_s),
            pids_current: all
                .iter()
                .filter_map(|m| m.pids_current)
                .max()
                .map(|n| n as f64),
            pids_max: all.iter().rev().find_map(|m| m.pids_max),
            pids_limit_hits: sum(|m| m.pids_limit_hits),
        }
    }
}

impl IoPath {
    /// The step's I/O path over its samples.
    pub(crate) fn of(samples: &[&HostSample]) -> Self {
        let mut limits = Vec::new();
        for (owner, pick) in [
            (
                "perflab's own cgroup",
                (|s: &HostSample| s.perflab_cgroup.as_ref())
                    as fn(&HostSample) -> Option<&CgroupSample>,
            ),
            ("the server's cgroup", |s| s.server_cgroup.as_ref()),
        ] {
            let Some(last) = samples.iter().rev().find_map(|s| pick(s)) else {
                continue;
            };
            for limit in &last.io_limits {
                let io = |f: fn(&crate::probe::counters::CgroupIoSample) -> f64| {
                    weighted_mean(samples, |s| {
                        pick(s)?.io.iter().find(|d| d.device == limit.device).map(f)
                    })
                    .unwrap_or(0.0)
                };
                limits.push(LimitUse {
                    owner: owner.to_string(),
                    limit: limit.clone(),
                    reads_per_s: io(|d| d.reads_per_s),
                    writes_per_s: io(|d| d.writes_per_s),
                    read_bytes_per_s: io(|d| d.read_bytes_per_s),
                    write_bytes_per_s: io(|d| d.write_bytes_per_s),
                });
            }
        }
        let stall = |pick: fn(&HostSample) -> Option<&CgroupSample>| {
            weighted_mean(samples, |s| pick(s)?.io_stall_share)
        };
        let cgroup_io_stall = match (
            stall(|s| s.perflab_cgroup.as_ref()),
            stall(|s| s.server_cgroup.as_ref()),
        ) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let mut lower = BTreeMap::new();
        for d in samples.iter().flat_map(|s| &s.disks) {
            if !d.lower.is_empty() {
                lower.insert(d.name.clone(), d.lower.clone());
            }
        }
        let mut devices: Vec<&String> = samples
            .iter()
            .flat_map(|s| s.kernel_io_cpus.keys())
            .collect();
        devices.sort();
        devices.dedup();
        let kernel_cpus = devices
            .into_iter()
            .filter_map(|d| {
                let cpus =
                    weighted_mean(samples, |s| Some(*s.kernel_io_cpus.get(d).unwrap_or(&0.0)))?;
                Some((d.clone(), cpus))
            })
            .collect();
        IoPath {
            limits,
            io_pressure: weighted_mean(samples, |s| s.pressure.io_some.map(|p| p / 100.0)),
            cgroup_io_stall,
            lower,
            kernel_cpus,
            server_limits: ServerLimits::of(samples),
        }
    }

    /// CPUs the kernel's I/O threads used in all.
    pub(crate) fn kernel_cpus_total(&self) -> f64 {
        self.kernel_cpus.values().sum()
    }

    /// The devices below `disk`, all the way down (`dm-0` → `loop0` →
    /// `memory`), nearest first.
    pub(crate) fn below(&self, disk: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut next = vec![disk.to_string()];
        while let Some(d) = next.pop() {
            for l in self.lower.get(&d).into_iter().flatten() {
                if !out.contains(l) && l != disk {
                    out.push(l.clone());
                    next.push(l.clone());
                }
            }
        }
        out
    }

    /// The highest share of time tasks stalled on I/O, the host's or a
    /// followed cgroup's.
    pub(crate) fn stall(&self) -> Option<f64> {
        match (self.io_pressure, self.cgroup_io_stall) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}
