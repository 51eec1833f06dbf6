//! A cgroup's limits besides its CPU, memory maximum and block I/O: the
//! v2 memory throttle `memory.high` (above it the kernel reclaims the
//! cgroup's pages and slows its allocations; `memory.events` `high`
//! counts the times), the pages reclaimed from it (v2 `memory.stat`
//! `pgsteal`), and the task limit `pids.max` with `pids.current` and the
//! forks refused at it (`pids.events` `max`), v1 or v2
//! (Documentation/admin-guide/cgroup-v2.rst "Memory", "PID";
//! cgroup-v1/pids.rst). Limits are the lowest along the path, and their
//! counters are read where that lowest limit sits.

use super::{stat_value, text, CgroupDirs, Hierarchy};
use crate::probe::counters::believe::{increase, per_second};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A cgroup's other limits and their counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct MoreLimits {
    /// The lowest `memory.high` along the path, bytes, when below the
    /// host's memory (v2 only).
    pub(crate) memory_high_bytes: Option<u64>,
    /// Times the cgroup went over it since it was made.
    pub(crate) memory_high_hits: Option<u64>,
    /// Pages reclaimed from the cgroup since it was made (v2 `pgsteal`).
    pub(crate) reclaimed_pages: Option<u64>,
    /// Tasks (processes and threads) in the cgroup now.
    pub(crate) pids_current: Option<u64>,
    /// The lowest `pids.max` along the path.
    pub(crate) pids_max: Option<u64>,
    /// Forks refused at that limit since the cgroup was made.
    pub(crate) pids_limit_hits: Option<u64>,
}

/// A cgroup's other limits over one interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct MoreLimitsSample {
    /// The `memory.high` that binds it, bytes.
    pub(crate) memory_high_bytes: Option<u64>,
    /// Times it went over `memory.high` in the interval.
    pub(crate) memory_high_hits: Option<u64>,
    /// Pages reclaimed from it per second.
    pub(crate) reclaimed_pages_per_s: Option<f64>,
    /// Its tasks at the end of the interval.
    pub(crate) pids_current: Option<u64>,
    /// The `pids.max` that binds it.
    pub(crate) pids_max: Option<u64>,
    /// Forks refused at `pids.max` in the interval.
    pub(crate) pids_limit_hits: Option<u64>,
}

impl MoreLimitsSample {
    /// What the counters did between readings `a` and `b`, `seconds` apart;
    /// none when the cgroup has none of these limits or counters.
    pub(crate) fn between(a: &MoreLimits, b: &MoreLimits, seconds: f64) -> Option<Self> {
        if *b == MoreLimits::default() {
            return None;
        }
        let grew = |x: Option<u64>, y: Option<u64>| {
            x.zip(y).map(|(x, y)| increase(x, y, seconds.max(1.0)))
        };
        Some(MoreLimitsSample {
            memory_high_bytes: b.memory_high_bytes,
            memory_high_hits: grew(a.memory_high_hits, b.memory_high_hits),
            reclaimed_pages_per_s: grew(a.reclaimed_pages, b.reclaimed_pages)
                .filter(|_| seconds > 0.0)
                .map(|n| per_second(n, seconds)),
            pids_current: b.pids_current,
            pids_max: b.pids_max,
            pids_limit_hits: grew(a.pids_limit_hits, b.pids_limit_hits),
        })
    }
}

/// The lowest number in `file` along `h`'s path (`max` is no limit), with
/// the directory it sits in.
fn lowest(h: &Hierarchy, file: &str) -> Option<(u64, PathBuf)> {
    h.ancestors()
        .into_iter()
        .filter_map(|dir| {
            let n = text(&dir, file)?.trim().parse::<u64>().ok()?;
            Some((n, dir))
        })
        .min_by_key(|(n, _)| *n)
}

impl CgroupDirs {
    /// The cgroup's memory.high, reclaim and pids limits; `host_memory`
    /// in bytes (a memory.high at or above it binds nothing).
    pub(super) fn read_more(&self, host_memory: Option<u64>) -> MoreLimits {
        let mut out = MoreLimits::default();
        if self.memory.is_none() {
            if let Some(unified) = self.unified_with("memory.current") {
                let high = lowest(unified, "memory.high")
                    .filter(|(n, _)| *n < host_memory.unwrap_or(1 << 62));
                if let Some((n, dir)) = high {
                    out.memory_high_bytes = Some(n);
                    out.memory_high_hits =
                        text(&dir, "memory.events").and_then(|t| stat_value(&t, "high"));
                }
                out.reclaimed_pages =
                    text(&unified.dir(), "memory.stat").and_then(|t| stat_value(&t, "pgsteal"));
            }
        }
        let pids = self
            .pids
            .as_ref()
            .or_else(|| self.unified_with("pids.current"));
        if let Some(h) = pids {
            out.pids_current = text(&h.dir(), "pids.current").and_then(|t| t.trim().parse().ok());
            if let Some((n, dir)) = lowest(h, "pids.max") {
                out.pids_max = Some(n);
                out.pids_limit_hits = text(&dir, "pids.events").and_then(|t| stat_value(&t, "max"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::counters;
    use super::super::CgroupSample;

    /// A v2 server under a 256 MiB memory.high on its own cgroup (its
    /// memory.max 512 MiB), over it 30 times in 2 s with 2,000 pages
    /// reclaimed, and 64 tasks at a pids.max of 64 set on its parent that
    /// refused 12 forks.
    #[test]
    fn a_v2_memory_high_and_pids_max_are_read() {
        let host = 8 << 30;
        let a = counters("cgroup-server-more-v2", "t0", "4100", host);
        let b = counters("cgroup-server-more-v2", "t1", "4100", host);
        assert_eq!(b.memory_limit_bytes, Some(512 << 20));
        assert_eq!(b.more.memory_high_bytes, Some(256 << 20));
        assert_eq!(b.more.pids_max, Some(64), "the parent's pids.max binds");
        let s = CgroupSample::between(&a, &b, 2.0).more.expect("its limits");
        assert_eq!(s.memory_high_bytes, Some(256 << 20));
        assert_eq!(s.memory_high_hits, Some(30));
        assert_eq!(s.reclaimed_pages_per_s, Some(1000.0));
        assert_eq!(s.pids_current, Some(64));
        assert_eq!(s.pids_max, Some(64));
        assert_eq!(s.pids_limit_hits, Some(12), "counted where the limit sits");
    }

    /// A v1 server (pids in a hierarchy of its own): pids.max 100 on its
    /// cgroup, 40 tasks, no fork refused; v1 has no memory.high.
    #[test]
    fn a_v1_pids_max_is_read() {
        let a = counters("cgroup-server-more-v1", "t0", "4200", 8 << 30);
        let b = counters("cgroup-server-more-v1", "t1", "4200", 8 << 30);
        let s = CgroupSample::between(&a, &b, 2.0).more.expect("its limits");
        assert_eq!(s.pids_max, Some(100));
        assert_eq!(s.pids_current, Some(40));
        assert_eq!(s.pids_limit_hits, Some(0));
        assert_eq!(s.memory_high_bytes, None);
        assert_eq!(b.memory_limit_bytes, Some(1 << 30), "memory.limit_in_bytes");
    }

    /// No limit of these kinds: nothing to say.
    #[test]
    fn a_cgroup_without_these_limits_has_none() {
        let a = counters("cgroup-server-v1", "t0", "900", 8 << 30);
        let b = counters("cgroup-server-v1", "t1", "900", 8 << 30);
        assert_eq!(CgroupSample::between(&a, &b, 2.0).more, None);
    }
}
