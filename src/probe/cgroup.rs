//! How much CPU a process may use, and how often it was held back: its
//! affinity mask (`Cpus_allowed_list` of /proc/PID/status) and its
//! cgroup's CPU quota and throttling — cgroup v1 (`cpu.cfs_quota_us`,
//! `cpu.cfs_period_us`, `throttled_time` ns in `cpu.stat`) or v2 (`cpu.max`,
//! `throttled_usec` in `cpu.stat`). A generator that is throttled or uses
//! all the CPU it may have is the limit of its own measurement.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A process's CPU allowance and its throttling so far.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuLimit {
    /// CPUs in its affinity mask.
    pub affinity_cpus: Option<usize>,
    /// Its cgroup's quota in CPUs (quota / period); none when unlimited.
    pub quota_cpus: Option<f64>,
    /// Time its cgroup was throttled since the cgroup was made.
    pub throttled: Option<Duration>,
}

impl CpuLimit {
    /// The CPUs it can use at most: the smaller of affinity and quota.
    pub fn capacity(&self) -> Option<f64> {
        match (self.affinity_cpus.map(|n| n as f64), self.quota_cpus) {
            (Some(a), Some(q)) => Some(a.min(q)),
            (a, q) => a.or(q),
        }
    }

    /// Reads a process's limit; `root` is `/` on a live host, a fixture
    /// tree in tests; `pid` is a number or `self`.
    pub fn read(root: &Path, pid: &str) -> Self {
        let proc_dir = root.join("proc").join(pid);
        let affinity_cpus = std::fs::read_to_string(proc_dir.join("status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .and_then(|list| cpu_list_len(list.trim()))
            });
        let Some(dir) = std::fs::read_to_string(proc_dir.join("cgroup"))
            .ok()
            .and_then(|text| cpu_cgroup_dir(root, &text))
        else {
            return CpuLimit {
                affinity_cpus,
                ..CpuLimit::default()
            };
        };
        let read = |file: &str| std::fs::read_to_string(dir.dir.join(file)).ok();
        let number = |file: &str| read(file).and_then(|t| t.trim().parse::<f64>().ok());
        let (quota_cpus, throttled) = if dir.v2 {
            let quota = read("cpu.max").and_then(|t| {
                let mut parts = t.split_whitespace();
                let quota = parts.next()?.parse::<f64>().ok()?;
                let period = parts.next()?.parse::<f64>().ok()?;
                (period > 0.0).then(|| quota / period)
            });
            let throttled = read("cpu.stat")
                .and_then(|t| stat_value(&t, "throttled_usec"))
                .map(Duration::from_micros);
            (quota, throttled)
        } else {
            let quota = number("cpu.cfs_quota_us")
                .zip(number("cpu.cfs_period_us"))
                .filter(|(q, p)| *q > 0.0 && *p > 0.0)
                .map(|(q, p)| q / p);
            let throttled = read("cpu.stat")
                .and_then(|t| stat_value(&t, "throttled_time"))
                .map(Duration::from_nanos);
            (quota, throttled)
        };
        CpuLimit {
            affinity_cpus,
            quota_cpus,
            throttled,
        }
    }
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

fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

struct CgroupDir {
    dir: PathBuf,
    v2: bool,
}

/// The directory of the process's CPU cgroup, from /proc/PID/cgroup: the
/// v1 hierarchy holding the `cpu` controller, else the v2 one.
fn cpu_cgroup_dir(root: &Path, text: &str) -> Option<CgroupDir> {
    let fs = root.join("sys/fs/cgroup");
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        if controllers.is_empty() {
            // The unified hierarchy: mounted at the root, or under unified/ in hybrid mode.
            let unified = fs.join("unified");
            let base = if unified.is_dir() {
                unified
            } else {
                fs.clone()
            };
            v2 = Some(CgroupDir {
                dir: base.join(rel),
                v2: true,
            });
        } else if controllers.split(',').any(|c| c == "cpu") {
            let name = if fs.join(controllers).is_dir() {
                controllers.to_string()
            } else {
                "cpu".to_string()
            };
            return Some(CgroupDir {
                dir: fs.join(name).join(rel),
                v2: false,
            });
        }
    }
    v2.filter(|d| d.dir.join("cpu.max").exists() || d.dir.join("cpu.stat").exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
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
}
