//! perflab's own resource use, from getrusage(2) and /proc/self/status,
//! and the CPU it was allowed (affinity, cgroup quota and throttling).

use super::cgroup::CpuLimit;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// perflab's CPU and memory over one step.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SelfUsage {
    /// Wall-clock time the step took, warm-up and drain included.
    #[serde(with = "crate::util::serde_duration", default)]
    pub wall: Duration,
    /// User-mode CPU time of the whole perflab process (all threads).
    #[serde(with = "crate::util::serde_duration", default)]
    pub cpu_user: Duration,
    /// Kernel-mode CPU time of the whole perflab process.
    #[serde(with = "crate::util::serde_duration", default)]
    pub cpu_system: Duration,
    /// Resident memory at the end of the measured window, bytes.
    pub rss_bytes: Option<u64>,
    /// CPUs perflab could use (its affinity mask and cgroup quota).
    #[serde(default)]
    pub cpu_capacity: Option<f64>,
    /// Time its cgroup's CPU quota held it back during the step.
    #[serde(with = "crate::util::serde_duration::option", default)]
    pub throttled: Option<Duration>,
}

impl SelfUsage {
    /// Marks the start of a step.
    pub(crate) fn start() -> UsageMark {
        let (cpu_user, cpu_system) = rusage();
        UsageMark {
            at: Instant::now(),
            cpu_user,
            cpu_system,
            limit: own_limit(),
        }
    }

    /// perflab's CPU use as a share of one CPU.
    pub(crate) fn cpu_share(&self) -> f64 {
        let wall = self.wall.as_secs_f64();
        if wall > 0.0 {
            (self.cpu_user + self.cpu_system).as_secs_f64() / wall
        } else {
            0.0
        }
    }
}

/// The CPU counters at the start of a step.
#[derive(Debug, Clone, Copy)]
pub struct UsageMark {
    at: Instant,
    cpu_user: Duration,
    cpu_system: Duration,
    limit: CpuLimit,
}

/// perflab's own CPU allowance now.
fn own_limit() -> CpuLimit {
    CpuLimit::read(std::path::Path::new("/"), "self")
}

impl UsageMark {
    /// The usage since the mark.
    pub(crate) fn finish(self, rss_bytes: Option<u64>) -> SelfUsage {
        let (cpu_user, cpu_system) = rusage();
        let limit = own_limit();
        SelfUsage {
            wall: self.at.elapsed(),
            cpu_user: cpu_user.saturating_sub(self.cpu_user),
            cpu_system: cpu_system.saturating_sub(self.cpu_system),
            rss_bytes,
            cpu_capacity: limit.capacity(),
            throttled: limit
                .throttled
                .zip(self.limit.throttled)
                .map(|(b, a)| b.saturating_sub(a)),
        }
    }
}

/// User and system CPU time of this process so far.
fn rusage() -> (Duration, Duration) {
    // SAFETY: getrusage writes into the struct we pass and reads nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    (tv(usage.ru_utime), tv(usage.ru_stime))
}

/// Resident set size of this process now, from /proc/self/status.
pub fn self_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_kib(&status, "VmRSS:").map(|kib| kib * 1024)
}

/// Reads a `Name:   1234 kB` line of /proc/PID/status.
fn parse_status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse() {
        let status = "Name:\tperflab\nVmRSS:\t   12345 kB\nThreads:\t3\n";
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(12345));
        assert_eq!(parse_status_kib(status, "VmHWM:"), None);
    }

    #[test]
    fn own_usage_is_read_from_the_kernel() {
        let mark = SelfUsage::start();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let usage = mark.finish(self_rss());
        assert!(usage.cpu_user + usage.cpu_system > Duration::ZERO);
        assert!(usage.rss_bytes.unwrap_or(0) > 0);
    }
}
