//! Memory: swap in use and swapping now (vmstat's pswpin/pswpout read
//! twice), transparent huge pages, vm.swappiness and overcommit, and the
//! memory limit of the server's cgroup.

use super::{shown, Finding, Report, Root, Scope, Severity};

fn vmstat(root: &Root, key: &str) -> Option<u64> {
    root.read("proc/vmstat")?.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn meminfo_kib(root: &Root, key: &str) -> Option<u64> {
    root.read("proc/meminfo")?.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

pub(crate) fn check(before: &Root, after: &Root, scope: &Scope, report: &mut Report) {
    swap(before, after, report);
    settings(after, report);
    server_limit(after, scope, report);
}

/// Swapping while sampling, and swap in use.
fn swap(before: &Root, after: &Root, report: &mut Report) {
    let root = after;
    let swapped = |r: &Root| Some(vmstat(r, "pswpin")? + vmstat(r, "pswpout")?);
    if let (Some(a), Some(b)) = (swapped(before), swapped(after)) {
        if b > a {
            report.add(Finding {
                severity: Severity::Warning,
                area: "memory".to_string(),
                title: format!("the host is swapping ({} pages while sampling)", b - a),
                evidence: vec![format!("/proc/vmstat pswpin + pswpout: {a} → {b}")],
                why: "memory is short: pages go to disk and come back at disk speed, and latency follows".to_string(),
                fix: "add memory, or shrink what runs (database buffers, other processes)".to_string(),
            });
        }
    }
    if let (Some(total), Some(free)) = (
        meminfo_kib(root, "SwapTotal"),
        meminfo_kib(root, "SwapFree"),
    ) {
        let used = total.saturating_sub(free);
        if used > 0 {
            report.add(Finding {
                severity: Severity::Info,
                area: "memory".to_string(),
                title: format!("{} MiB of swap in use", used / 1024),
                evidence: vec![format!("/proc/meminfo SwapTotal {total} kB, SwapFree {free} kB")],
                why: "something was pushed out under memory pressure; it comes back slowly when touched".to_string(),
                fix: "find what (grep VmSwap /proc/*/status) and check that it is not the server".to_string(),
            });
        }
    }
}

/// Transparent huge pages, vm.swappiness and strict overcommit.
fn settings(root: &Root, report: &mut Report) {
    if let Some(thp) = root.read("sys/kernel/mm/transparent_hugepage/enabled") {
        if thp.contains("[always]") {
            report.add(Finding {
                severity: Severity::Info,
                area: "memory".to_string(),
                title: "transparent huge pages are always on".to_string(),
                evidence: vec![shown("/sys/kernel/mm/transparent_hugepage/enabled", &thp)],
                why: "databases see latency spikes while the kernel compacts memory for huge pages; most advise madvise or never".to_string(),
                fix: "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled".to_string(),
            });
        }
    } else {
        report.missing("transparent huge pages setting");
    }
    if let Some(s) = root.number("proc/sys/vm/swappiness").filter(|s| *s > 10) {
        report.add(Finding {
            severity: Severity::Info,
            area: "memory".to_string(),
            title: format!("vm.swappiness is {s}"),
            evidence: vec![shown("/proc/sys/vm/swappiness", s)],
            why: "the kernel swaps out idle process memory to keep file cache; a database server usually wants its memory kept".to_string(),
            fix: "sysctl vm.swappiness=1".to_string(),
        });
    }
    if root.number("proc/sys/vm/overcommit_memory") == Some(2) {
        report.add(Finding {
            severity: Severity::Info,
            area: "memory".to_string(),
            title: "strict memory overcommit (vm.overcommit_memory = 2)".to_string(),
            evidence: vec![shown("/proc/sys/vm/overcommit_memory", 2)],
            why: "allocations fail once the commit limit is reached, even with free memory"
                .to_string(),
            fix: "check vm.overcommit_ratio against the server's needs".to_string(),
        });
    }
}

/// A memory cgroup limit on the server below the host's memory.
fn server_limit(root: &Root, scope: &Scope, report: &mut Report) {
    if let Some(pid) = scope.server_pid {
        if let Some(limit) = memory_limit(root, pid) {
            let total = meminfo_kib(root, "MemTotal").unwrap_or(0) * 1024;
            if total == 0 || limit < total {
                report.add(Finding {
                    severity: Severity::Info,
                    area: "memory".to_string(),
                    title: format!("the server (pid {pid}) is limited to {} MiB by its cgroup", limit / 1024 / 1024),
                    evidence: vec![format!("memory cgroup limit of pid {pid}: {limit} bytes")],
                    why: "the server is reclaimed or killed at this limit, whatever the host has free".to_string(),
                    fix: "raise the limit (memory.max / memory.limit_in_bytes) or size the server's buffers under it".to_string(),
                });
            }
        }
    }
}

/// A process's memory cgroup limit (v1 or v2), when it has one.
fn memory_limit(root: &Root, pid: u32) -> Option<u64> {
    let text = root.read(&format!("proc/{pid}/cgroup"))?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        let value = if controllers.split(',').any(|c| c == "memory") {
            root.read(&format!("sys/fs/cgroup/memory/{rel}/memory.limit_in_bytes"))
        } else if controllers.is_empty() {
            root.read(&format!("sys/fs/cgroup/{rel}/memory.max"))
        } else {
            None
        };
        if let Some(v) = value.and_then(|v| v.parse::<u64>().ok()) {
            // v1 writes "no limit" as a huge number.
            if v < (1 << 60) {
                return Some(v);
            }
        }
    }
    None
}
