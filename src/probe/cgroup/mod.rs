//! What a process's cgroup allows it and how hard that bit: its CPUs (the
//! cpuset, and the affinity mask `Cpus_allowed_list` of /proc/PID/status),
//! its CPU quota, usage and throttling, its memory limit, usage, limit hits
//! and memory stalls — cgroup v1, v2, or both at once (hybrid mounts, where
//! each controller sits in whichever hierarchy holds it).
//!
//! Files, from the kernel's Documentation/admin-guide/cgroup-v1/ and
//! cgroup-v2.rst: v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us`, `cpu.stat`
//! (`nr_periods`, `nr_throttled`, `throttled_time` ns), `cpuacct.usage` ns,
//! `cpuset.effective_cpus`/`cpuset.cpus`, `memory.stat`
//! (`hierarchical_memory_limit`, `total_rss`), `memory.limit_in_bytes`,
//! `memory.usage_in_bytes`, `memory.failcnt`; v2 `cpu.max`, `cpu.stat`
//! (`usage_usec`, `nr_periods`, `nr_throttled`, `throttled_usec`),
//! `cpuset.cpus.effective`, `memory.max`, `memory.current`, `memory.stat`
//! (`anon`), `memory.events` (`max`), `memory.pressure` (`some … total=` µs).
//!
//! Block I/O (Documentation/admin-guide/cgroup-v1/blkio-controller.rst and
//! cgroup-v2.rst "IO"): [`io`] — v1 `blkio.throttle.{read,write}_{iops,bps}_device`
//! (`MAJ:MIN N`) and the I/Os and bytes through the throttle,
//! `blkio.throttle.io_serviced` / `io_service_bytes` (`MAJ:MIN Read N`);
//! v2 `io.max` (`MAJ:MIN rbps=N wbps=max riops=N wiops=max`), `io.stat`
//! (`MAJ:MIN rbytes= wbytes= rios= wios=`) and `io.pressure`.
//!
//! A limit set on an ancestor binds its descendants too, so quotas and
//! memory limits are the lowest along the path up to the hierarchy's root,
//! and the throttling and limit-hit counters are read where that lowest
//! limit sits (the kernel counts them there). Every reader takes the /proc
//! and cgroup mount directories, so fixture trees stand in for the host.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod io;
mod more;
pub(crate) use io::{CgroupIoSample, IoCounters, IoLimit};
pub(crate) use more::MoreLimitsSample;

/// A process's CPU allowance and its throttling so far.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct CpuLimit {
    /// CPUs in its affinity mask.
    pub(crate) affinity_cpus: Option<usize>,
    /// Its cgroup's quota in CPUs (quota / period); none when unlimited.
    pub(crate) quota_cpus: Option<f64>,
    /// Time its cgroup was throttled since the cgroup was made.
    pub(crate) throttled: Option<Duration>,
}

impl CpuLimit {
    /// The CPUs it can use at most: the smaller of affinity and quota.
    pub(crate) fn capacity(&self) -> Option<f64> {
        match (self.affinity_cpus.map(|n| n as f64), self.quota_cpus) {
            (Some(a), Some(q)) => Some(a.min(q)),
            (a, q) => a.or(q),
        }
    }

    /// Reads a process's limit; `root` is `/` on a live host, a fixture
    /// tree in tests; `pid` is a number or `self`.
    pub(crate) fn read(root: &Path, pid: &str) -> Self {
        let proc_dir = root.join("proc");
        let affinity_cpus = affinity_cpus(&proc_dir, pid);
        let Some(cgroup) = CgroupCounters::read(&proc_dir, &root.join("sys/fs/cgroup"), pid, None)
        else {
            return CpuLimit {
                affinity_cpus,
                ..CpuLimit::default()
            };
        };
        CpuLimit {
            affinity_cpus,
            quota_cpus: cgroup.cpu_quota_cpus,
            throttled: cgroup.cpu_throttled_ns.map(Duration::from_nanos),
        }
    }
}

/// The cgroup of the server under test over one interval (v1 or v2).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CgroupSample {
    /// The cgroup's path inside its hierarchy (`/system.slice/x.service`).
    pub(crate) path: String,
    /// CPUs the server may run on (its cpuset, or its affinity), counted.
    pub(crate) cpus_allowed: Option<f64>,
    /// The CPU quota as CPUs (quota over period), when one is set.
    pub(crate) cpu_quota_cpus: Option<f64>,
    /// CPUs the cgroup used over the interval (its usage counter).
    pub(crate) cpu_used_cpus: Option<f64>,
    /// Share of the interval's enforcement periods in which the quota
    /// throttled it (`nr_throttled / nr_periods` increases).
    pub(crate) throttled_share: Option<f64>,
    /// The memory limit, when one is set below the host's memory.
    pub(crate) memory_limit_bytes: Option<u64>,
    /// Memory charged to the cgroup at the end of the interval (with its
    /// page cache).
    pub(crate) memory_usage_bytes: Option<u64>,
    /// Of it, the processes' own memory (anonymous pages), which no cache
    /// can use: v1 `memory.stat` `total_rss`, v2 `anon`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) memory_anon_bytes: Option<u64>,
    /// Times the memory limit was hit over the interval (v1 `failcnt`, v2
    /// `memory.events` `max`).
    pub(crate) memory_limit_hits: Option<u64>,
    /// Share of the interval some of its tasks stalled on memory (v2
    /// `memory.pressure`, `some` total).
    pub(crate) memory_stall_share: Option<f64>,
    /// The block-I/O limits that bind it (v1 blkio throttle, v2 io.max).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) io_limits: Vec<IoLimit>,
    /// Its I/O on each device over the interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) io: Vec<CgroupIoSample>,
    /// Share of the interval some of its tasks stalled on I/O
    /// (`io.pressure`, `some` total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) io_stall_share: Option<f64>,
    /// Its other limits (memory.high, reclaim, pids.max) over the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) more: Option<more::MoreLimitsSample>,
}

/// A cgroup's cumulative counters and current limits at one moment; two of
/// them give a [`CgroupSample`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct CgroupCounters {
    /// The cgroup's path inside its hierarchy: the first that is not the
    /// root among the CPU, memory, cpuset and unified hierarchies.
    pub(crate) path: String,
    /// CPUs the process may run on: the smaller of its cpuset and its
    /// affinity mask.
    pub(crate) cpus_allowed: Option<f64>,
    /// The lowest CPU quota along the path, as CPUs.
    pub(crate) cpu_quota_cpus: Option<f64>,
    /// CPU time the cgroup used since it was made, ns.
    pub(crate) cpu_usage_ns: Option<u64>,
    /// Enforcement periods elapsed, and those in which it was throttled,
    /// where the lowest quota sits.
    pub(crate) cpu_periods: Option<u64>,
    pub(crate) cpu_throttled_periods: Option<u64>,
    /// Time throttled, ns.
    pub(crate) cpu_throttled_ns: Option<u64>,
    /// The lowest memory limit along the path, when below the host's memory.
    pub(crate) memory_limit_bytes: Option<u64>,
    /// Memory charged to the cgroup now, page cache included, bytes.
    pub(crate) memory_usage_bytes: Option<u64>,
    /// Of it, the processes' anonymous memory, bytes.
    #[serde(default)]
    pub(crate) memory_anon_bytes: Option<u64>,
    /// Times the memory limit was hit since the cgroup was made.
    pub(crate) memory_limit_hits: Option<u64>,
    /// Time some of its tasks stalled on memory since it was made, µs.
    pub(crate) memory_stall_us: Option<u64>,
    /// The block-I/O limits that bind it: the lowest of each kind on each
    /// device along its path.
    #[serde(default)]
    pub(crate) io_limits: Vec<IoLimit>,
    /// I/Os and bytes its tasks issued to each device since it was made.
    #[serde(default)]
    pub(crate) io_devices: Vec<IoCounters>,
    /// Time some of its tasks stalled on I/O since it was made, µs (v2
    /// `io.pressure`, or the unified hierarchy's on a hybrid host).
    #[serde(default)]
    pub(crate) io_stall_us: Option<u64>,
    /// Its other limits (memory.high, reclaim, pids.max) and their counters.
    #[serde(default)]
    pub(crate) more: more::MoreLimits,
}

impl CgroupCounters {
    /// Reads the cgroup of process `pid` (a number or `self`): `proc` is
    /// `/proc`, `cgroup_fs` is `/sys/fs/cgroup` (fixture trees in tests),
    /// `host_memory` the host's memory in bytes (a limit at or above it
    /// binds nothing). None when the process or its cgroup file is gone.
    pub(crate) fn read(
        proc: &Path,
        cgroup_fs: &Path,
        pid: &str,
        host_memory: Option<u64>,
    ) -> Option<Self> {
        let membership = std::fs::read_to_string(proc.join(pid).join("cgroup")).ok()?;
        let dirs = CgroupDirs::parse(cgroup_fs, &membership);
        let mut out = CgroupCounters {
            path: dirs.path(),
            ..CgroupCounters::default()
        };
        dirs.read_cpu(&mut out);
        dirs.read_memory(&mut out, host_memory);
        // cgroup_fs is SYS/fs/cgroup: device numbers are named under SYS.
        let sys = cgroup_fs
            .parent()
            .and_then(Path::parent)
            .unwrap_or(cgroup_fs);
        dirs.read_io(&mut out, sys);
        out.more = dirs.read_more(host_memory);
        let cpuset = dirs.cpuset_cpus();
        let affinity = affinity_cpus(proc, pid).map(|n| n as f64);
        out.cpus_allowed = match (cpuset, affinity) {
            (Some(c), Some(a)) => Some(c.min(a)),
            (c, a) => c.or(a),
        };
        Some(out)
    }
}

impl CgroupSample {
    /// What the cgroup did between two readings `seconds` apart.
    pub(crate) fn between(a: &CgroupCounters, b: &CgroupCounters, seconds: f64) -> Self {
        use crate::probe::counters::believe::{increase, per_second};
        // A counter that went backwards or leapt beyond belief grew by none.
        let grew = |x: Option<u64>, y: Option<u64>| {
            x.zip(y).map(|(x, y)| increase(x, y, seconds.max(1.0)))
        };
        let cpu_used_cpus = grew(a.cpu_usage_ns, b.cpu_usage_ns)
            .filter(|_| seconds > 0.0)
            .map(|ns| per_second(ns, seconds) / 1e9);
        let periods = grew(a.cpu_periods, b.cpu_periods);
        let throttled = grew(a.cpu_throttled_periods, b.cpu_throttled_periods);
        let throttled_share = match (periods, throttled) {
            (Some(p), Some(t)) if p > 0 => Some((t as f64 / p as f64).min(1.0)),
            // No period elapsed: an idle cgroup under a quota was not held back.
            (Some(_), Some(_)) if b.cpu_quota_cpus.is_some() => Some(0.0),
            _ => None,
        };
        let memory_stall_share = grew(a.memory_stall_us, b.memory_stall_us)
            .filter(|_| seconds > 0.0)
            .map(|us| (us as f64 / 1e6 / seconds).min(1.0));
        let io_stall_share = grew(a.io_stall_us, b.io_stall_us)
            .filter(|_| seconds > 0.0)
            .map(|us| (us as f64 / 1e6 / seconds).min(1.0));
        let io = b
            .io_devices
            .iter()
            .filter(|_| seconds > 0.0)
            .map(|after| {
                let before = a.io_devices.iter().find(|d| d.device == after.device);
                let rate = |f: fn(&IoCounters) -> u64| {
                    let grew = increase(before.map_or(f(after), f), f(after), seconds);
                    per_second(grew, seconds)
                };
                CgroupIoSample {
                    device: after.device.clone(),
                    reads_per_s: rate(|d| d.read_ios),
                    writes_per_s: rate(|d| d.write_ios),
                    read_bytes_per_s: rate(|d| d.read_bytes),
                    write_bytes_per_s: rate(|d| d.write_bytes),
                }
            })
            .collect();
        CgroupSample {
            more: MoreLimitsSample::between(&a.more, &b.more, seconds),
            io_limits: b.io_limits.clone(),
            io,
            io_stall_share,
            path: b.path.clone(),
            cpus_allowed: b.cpus_allowed,
            cpu_quota_cpus: b.cpu_quota_cpus,
            cpu_used_cpus,
            throttled_share,
            memory_limit_bytes: b.memory_limit_bytes,
            memory_usage_bytes: b.memory_usage_bytes,
            memory_anon_bytes: b.memory_anon_bytes,
            memory_limit_hits: grew(a.memory_limit_hits, b.memory_limit_hits),
            memory_stall_share,
        }
    }
}

/// CPUs in the affinity mask of a process (`Cpus_allowed_list`).
fn affinity_cpus(proc: &Path, pid: &str) -> Option<usize> {
    std::fs::read_to_string(proc.join(pid).join("status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|list| cpu_list_len(list.trim()))
        })
}

/// The number of CPUs in a list such as `0-3,6,8-9`.
fn cpu_list_len(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// The value of `key value` in a flat-keyed file (cpu.stat, memory.stat,
/// memory.events).
fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// `total=` of the `some` line of a pressure file, µs.
fn pressure_some_total_us(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))
        .and_then(|v| v.parse().ok())
}

/// A cgroup in one hierarchy: the hierarchy's mount directory and the
/// cgroup's path inside it.
#[derive(Debug, Clone)]
struct Hierarchy {
    mount: PathBuf,
    path: String,
}

impl Hierarchy {
    fn dir(&self) -> PathBuf {
        self.mount.join(self.path.trim_start_matches('/'))
    }

    /// The cgroup's directory, then its parents' up to the hierarchy's root.
    fn ancestors(&self) -> Vec<PathBuf> {
        let mut out = vec![self.dir()];
        let mut rel = self.path.trim_matches('/').to_string();
        while !rel.is_empty() {
            rel = rel
                .rsplit_once('/')
                .map_or(String::new(), |(p, _)| p.to_string());
            out.push(self.mount.join(&rel));
        }
        out
    }
}

/// A cgroup file's text; None when the file is absent (the controller is
/// not there, or the kernel is too old).
fn text(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file)).ok()
}

/// Where a process's cgroup sits in each hierarchy it belongs to.
#[derive(Debug, Default)]
struct CgroupDirs {
    /// v1 hierarchies holding these controllers.
    cpu: Option<Hierarchy>,
    cpuacct: Option<Hierarchy>,
    cpuset: Option<Hierarchy>,
    memory: Option<Hierarchy>,
    blkio: Option<Hierarchy>,
    pids: Option<Hierarchy>,
    /// The v2 (unified) hierarchy: all controllers on a pure v2 host, only
    /// pressure files and those not bound to v1 on a hybrid one.
    unified: Option<Hierarchy>,
}

impl CgroupDirs {
    /// From the lines `ID:controllers:path` of /proc/PID/cgroup.
    fn parse(fs: &Path, membership: &str) -> Self {
        let mut dirs = CgroupDirs::default();
        for line in membership.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if controllers.is_empty() {
                // Mounted at the root, or under unified/ in hybrid mode.
                let unified = fs.join("unified");
                let mount = if unified.is_dir() {
                    unified
                } else {
                    fs.to_path_buf()
                };
                dirs.unified = Some(Hierarchy {
                    mount,
                    path: path.to_string(),
                });
                continue;
            }
            for name in controllers.split(',') {
                let slot = match name {
                    "cpu" => &mut dirs.cpu,
                    "cpuacct" => &mut dirs.cpuacct,
                    "cpuset" => &mut dirs.cpuset,
                    "memory" => &mut dirs.memory,
                    "blkio" => &mut dirs.blkio,
                    "pids" => &mut dirs.pids,
                    _ => continue,
                };
                // Co-mounted controllers live in `cpu,cpuacct` (with symlinks
                // by each name on most systems); a lone one in its own name.
                let joint = fs.join(controllers);
                let mount = if joint.is_dir() { joint } else { fs.join(name) };
                *slot = Some(Hierarchy {
                    mount,
                    path: path.to_string(),
                });
            }
        }
        dirs
    }

    /// The path that says most: on a v1 host a server may sit in a memory
    /// cgroup of its own while its cpu cgroup is the root.
    fn path(&self) -> String {
        let paths = || {
            [&self.cpu, &self.memory, &self.cpuset, &self.unified]
                .into_iter()
                .flatten()
                .map(|h| h.path.as_str())
        };
        paths()
            .find(|p| !p.trim_matches('/').is_empty())
            .or_else(|| paths().next())
            .unwrap_or_default()
            .to_string()
    }

    /// The unified hierarchy, when it holds this controller's files.
    fn unified_with(&self, file: &str) -> Option<&Hierarchy> {
        self.unified
            .as_ref()
            .filter(|h| h.dir().join(file).exists())
    }

    fn read_cpu(&self, out: &mut CgroupCounters) {
        // The lowest quota along the path, and the directory it sits in.
        let mut lowest: Option<(f64, PathBuf)> = None;
        let mut consider = |cpus: f64, dir: &Path| {
            if lowest.as_ref().is_none_or(|(q, _)| cpus < *q) {
                lowest = Some((cpus, dir.to_path_buf()));
            }
        };
        let (stat_dir, v1) = if let Some(cpu) = &self.cpu {
            for dir in cpu.ancestors() {
                let number = |f: &str| text(&dir, f)?.trim().parse::<f64>().ok();
                if let (Some(q), Some(p)) =
                    (number("cpu.cfs_quota_us"), number("cpu.cfs_period_us"))
                {
                    if q > 0.0 && p > 0.0 {
                        consider(q / p, &dir);
                    }
                }
            }
            (Some(cpu.dir()), true)
        } else if let Some(unified) = self.unified_with("cpu.stat") {
            for dir in unified.ancestors() {
                if let Some(cpus) = text(&dir, "cpu.max").and_then(|t| cpu_max(&t)) {
                    consider(cpus, &dir);
                }
            }
            (Some(unified.dir()), false)
        } else {
            (None, false)
        };
        out.cpu_quota_cpus = lowest.as_ref().map(|(q, _)| *q);
        let stat_dir = lowest.map(|(_, d)| d).or(stat_dir);
        if let Some(stat) = stat_dir.and_then(|d| std::fs::read_to_string(d.join("cpu.stat")).ok())
        {
            out.cpu_periods = stat_value(&stat, "nr_periods");
            out.cpu_throttled_periods = stat_value(&stat, "nr_throttled");
            out.cpu_throttled_ns = if v1 {
                stat_value(&stat, "throttled_time")
            } else {
                stat_value(&stat, "throttled_usec").map(|us| us.saturating_mul(1000))
            };
        }
        out.cpu_usage_ns = if let Some(acct) = &self.cpuacct {
            text(&acct.dir(), "cpuacct.usage").and_then(|t| t.trim().parse().ok())
        } else {
            self.unified_with("cpu.stat")
                .and_then(|u| text(&u.dir(), "cpu.stat"))
                .and_then(|t| stat_value(&t, "usage_usec"))
                .map(|us| us.saturating_mul(1000))
        };
    }

    fn read_memory(&self, out: &mut CgroupCounters, host_memory: Option<u64>) {
        // v1 reports "no limit" as a huge page-aligned number; anything at or
        // above the host's memory (or 2^62 when that is unknown) binds nothing.
        let binds = |bytes: u64| bytes < host_memory.unwrap_or(1 << 62);
        let mut lowest: Option<(u64, PathBuf)> = None;
        if let Some(memory) = &self.memory {
            for dir in memory.ancestors() {
                let limit =
                    text(&dir, "memory.limit_in_bytes").and_then(|t| t.trim().parse::<u64>().ok());
                if let Some(limit) = limit {
                    if lowest.as_ref().is_none_or(|(l, _)| limit < *l) {
                        lowest = Some((limit, dir));
                    }
                }
            }
            let dir = memory.dir();
            // The kernel's own view of the effective limit, when it gives one.
            let hierarchical =
                text(&dir, "memory.stat").and_then(|t| stat_value(&t, "hierarchical_memory_limit"));
            if let Some(h) = hierarchical {
                if lowest.as_ref().is_none_or(|(l, _)| h < *l) {
                    lowest = Some((h, dir.clone()));
                }
            }
            out.memory_usage_bytes =
                text(&dir, "memory.usage_in_bytes").and_then(|t| t.trim().parse().ok());
            out.memory_anon_bytes =
                text(&dir, "memory.stat").and_then(|t| stat_value(&t, "total_rss"));
            let hits_dir = lowest.as_ref().map_or(dir, |(_, d)| d.clone());
            out.memory_limit_hits =
                text(&hits_dir, "memory.failcnt").and_then(|t| t.trim().parse().ok());
        } else if let Some(unified) = self.unified_with("memory.current") {
            for dir in unified.ancestors() {
                let limit = text(&dir, "memory.max").and_then(|t| t.trim().parse::<u64>().ok());
                if let Some(limit) = limit {
                    if lowest.as_ref().is_none_or(|(l, _)| limit < *l) {
                        lowest = Some((limit, dir));
                    }
                }
            }
            let dir = unified.dir();
            out.memory_usage_bytes =
                text(&dir, "memory.current").and_then(|t| t.trim().parse().ok());
            out.memory_anon_bytes = text(&dir, "memory.stat").and_then(|t| stat_value(&t, "anon"));
            let hits_dir = lowest.as_ref().map_or(dir, |(_, d)| d.clone());
            out.memory_limit_hits =
                text(&hits_dir, "memory.events").and_then(|t| stat_value(&t, "max"));
        }
        out.memory_limit_bytes = lowest.map(|(l, _)| l).filter(|l| binds(*l));
        out.memory_stall_us = self.own_pressure_us("memory.pressure");
    }

    /// The stalled time in the unified hierarchy's pressure `file`
    /// (`memory.pressure`, `io.pressure`) as this cgroup's own: none at
    /// the root, whose pressure is the whole host's (the host's sample
    /// has it as PSI, and names it so).
    fn own_pressure_us(&self, file: &str) -> Option<u64> {
        let unified = self
            .unified
            .as_ref()
            .filter(|u| !u.path.trim_matches('/').is_empty())?;
        text(&unified.dir(), file).and_then(|t| pressure_some_total_us(&t))
    }

    /// CPUs in the cgroup's cpuset.
    fn cpuset_cpus(&self) -> Option<f64> {
        let list = if let Some(cpuset) = &self.cpuset {
            let dir = cpuset.dir();
            text(&dir, "cpuset.effective_cpus").or_else(|| text(&dir, "cpuset.cpus"))
        } else {
            self.unified
                .as_ref()
                .and_then(|u| text(&u.dir(), "cpuset.cpus.effective"))
        }?;
        cpu_list_len(list.trim()).map(|n| n as f64)
    }
}

/// A directory's path inside its hierarchy's mount, `/` for the root.
fn relative(mount: &Path, dir: &Path) -> String {
    let rel = dir.strip_prefix(mount).unwrap_or(dir).to_string_lossy();
    format!("/{}", rel.trim_matches('/'))
}

/// A v2 `cpu.max` line (`quota period`, or `max period`) as CPUs.
fn cpu_max(text: &str) -> Option<f64> {
    let mut parts = text.split_whitespace();
    let quota = parts.next()?.parse::<f64>().ok()?;
    let period = parts.next()?.parse::<f64>().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
    }

    #[test]
    fn cpu_lists_count() {
        assert_eq!(cpu_list_len("0-3,6,8-9"), Some(7));
        assert_eq!(cpu_list_len("1"), Some(1));
        assert_eq!(cpu_list_len(""), None);
        assert_eq!(cpu_list_len("3-1"), None);
    }

    /// A process in a v1 cpu cgroup with a quota of 0.25 CPU, throttled
    /// for 1.5 s, allowed on CPUs 0-3.
    #[test]
    fn a_v1_quota_and_its_throttling_are_read() {
        let limit = CpuLimit::read(&fixture("cgroup-v1"), "4242");
        assert_eq!(limit.affinity_cpus, Some(4));
        assert_eq!(limit.quota_cpus, Some(0.25));
        assert_eq!(limit.throttled, Some(Duration::from_millis(1500)));
        assert_eq!(limit.capacity(), Some(0.25));
    }

    /// A v2 cgroup limited to 1.5 CPUs on a 2-CPU affinity mask.
    #[test]
    fn a_v2_quota_and_its_throttling_are_read() {
        let limit = CpuLimit::read(&fixture("cgroup-v2"), "77");
        assert_eq!(limit.affinity_cpus, Some(2));
        assert_eq!(limit.quota_cpus, Some(1.5));
        assert_eq!(limit.throttled, Some(Duration::from_micros(250_000)));
        assert_eq!(limit.capacity(), Some(1.5));
    }

    #[test]
    fn this_process_has_an_affinity_mask() {
        let limit = CpuLimit::read(Path::new("/"), "self");
        assert!(limit.affinity_cpus.unwrap() >= 1);
    }

    pub(super) fn counters(tree: &str, at: &str, pid: &str, host_memory: u64) -> CgroupCounters {
        let root = fixture(tree).join(at);
        CgroupCounters::read(
            &root.join("proc"),
            &root.join("sys/fs/cgroup"),
            pid,
            Some(host_memory),
        )
        .expect("the fixture process has a cgroup file")
    }

    /// A v1 server (separate cpu and cpuacct mounts, as on this lab's
    /// hosts) under a 0.5-CPU quota set on its parent, in a cpuset of 2
    /// CPUs, with a 256 MiB memory limit hit 40 times in 2 s.
    #[test]
    fn a_v1_server_cgroup_over_an_interval() {
        let host = 8 << 30;
        let a = counters("cgroup-server-v1", "t0", "900", host);
        let b = counters("cgroup-server-v1", "t1", "900", host);
        assert_eq!(b.path, "/lab/pg");
        assert_eq!(b.cpu_quota_cpus, Some(0.5), "the parent's quota binds");
        let s = CgroupSample::between(&a, &b, 2.0);
        assert_eq!(s.path, "/lab/pg");
        assert_eq!(s.cpus_allowed, Some(2.0));
        assert_eq!(s.cpu_quota_cpus, Some(0.5));
        assert_eq!(s.cpu_used_cpus, Some(0.5));
        assert_eq!(s.throttled_share, Some(0.75));
        assert_eq!(s.memory_limit_bytes, Some(256 << 20));
        assert_eq!(s.memory_usage_bytes, Some(268_066_816));
        assert_eq!(
            s.memory_anon_bytes,
            Some(60 << 20),
            "the cgroup's and its children's"
        );
        assert_eq!(s.memory_limit_hits, Some(40));
        assert_eq!(s.memory_stall_share, None, "v1 has no memory.pressure");
    }

    /// A v2 server under `cpu.max` 1.5 CPUs of its own and a 512 MiB
    /// `memory.max` on its parent (its own is `max`), its affinity 4 CPUs
    /// inside a cpuset of 3.
    #[test]
    fn a_v2_server_cgroup_over_an_interval() {
        let host = 8 << 30;
        let a = counters("cgroup-server-v2", "t0", "321", host);
        let b = counters("cgroup-server-v2", "t1", "321", host);
        let s = CgroupSample::between(&a, &b, 2.0);
        assert_eq!(s.path, "/bench.slice/db.service");
        assert_eq!(s.cpus_allowed, Some(3.0));
        assert_eq!(s.cpu_quota_cpus, Some(1.5));
        assert_eq!(s.cpu_used_cpus, Some(1.5));
        assert_eq!(s.throttled_share, Some(0.25));
        assert_eq!(s.memory_limit_bytes, Some(512 << 20), "the parent's limit");
        assert_eq!(s.memory_usage_bytes, Some(536_805_376));
        assert_eq!(s.memory_anon_bytes, Some(100 << 20));
        assert_eq!(s.memory_limit_hits, Some(120));
        assert_eq!(s.memory_stall_share, Some(0.3));
    }

    /// A limit above the host's memory binds nothing: v1's "unlimited".
    #[test]
    fn a_limit_above_the_hosts_memory_is_no_limit() {
        let b = counters("cgroup-server-v1", "t1", "900", 128 << 20);
        assert_eq!(b.memory_limit_bytes, None);
    }

    #[test]
    fn a_process_without_a_cgroup_file_has_no_cgroup() {
        let root = fixture("cgroup-server-v1").join("t0");
        let none = CgroupCounters::read(&root.join("proc"), &root.join("sys/fs/cgroup"), "1", None);
        assert_eq!(none, None);
    }

    #[test]
    fn this_process_has_a_cgroup_with_its_cpu_usage() {
        let c = CgroupCounters::read(
            Path::new("/proc"),
            Path::new("/sys/fs/cgroup"),
            "self",
            None,
        )
        .expect("/proc/self/cgroup");
        assert!(c.cpus_allowed.unwrap_or(0.0) >= 1.0);
        assert!(c.cpu_usage_ns.unwrap_or(0) > 0, "{c:?}");
    }

    /// A process at the unified hierarchy's root (a hybrid host that
    /// puts the server in v1 cgroups alone): the root's pressure files are
    /// the whole host's, not the server's; one level down they are its own.
    #[test]
    fn the_unified_roots_pressure_is_the_hosts_not_the_cgroups() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let write = |path: &str, text: &str| {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        let pressure = "some avg10=1.00 avg60=1.00 avg300=1.00 total=5000\n\
                        full avg10=0.00 avg60=0.00 avg300=0.00 total=10\n";
        for at in ["", "lab/"] {
            write(
                &format!("sys/fs/cgroup/unified/{at}memory.pressure"),
                pressure,
            );
            write(&format!("sys/fs/cgroup/unified/{at}io.pressure"), pressure);
        }
        write("sys/fs/cgroup/memory/srv/memory.usage_in_bytes", "1000\n");
        let read = |unified: &str| {
            write("proc/7/cgroup", &format!("4:memory:/srv\n0::{unified}\n"));
            CgroupCounters::read(
                &dir.path().join("proc"),
                &dir.path().join("sys/fs/cgroup"),
                "7",
                None,
            )
            .unwrap()
        };
        let root = read("/");
        assert_eq!((root.memory_stall_us, root.io_stall_us), (None, None));
        assert_eq!(root.memory_usage_bytes, Some(1000));
        let own = read("/lab");
        assert_eq!(
            (own.memory_stall_us, own.io_stall_us),
            (Some(5000), Some(5000))
        );
    }

    /// A v1 host that puts each job in a memory cgroup of its own and
    /// leaves cpu at the root: the path shown is the memory one.
    #[test]
    fn the_path_shown_is_the_first_below_the_root() {
        let membership = "9:name=systemd:/\n4:memory:/jobs/42\n1:cpu:/\n0::/\n";
        let dirs = CgroupDirs::parse(Path::new("/nonexistent"), membership);
        assert_eq!(dirs.path(), "/jobs/42");
        assert_eq!(CgroupDirs::parse(Path::new("/x"), "0::/\n").path(), "/");
    }
}
