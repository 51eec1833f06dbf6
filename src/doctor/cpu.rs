//! CPUs: the frequency governor (where cpufreq exists), SMT, NUMA nodes,
//! CPUs offline, steal time (a virtual machine sharing its host's CPUs,
//! read from /proc/stat twice) and the CPU quota of the server's cgroup.

use super::{shown, Finding, Report, Root, Scope, Severity};

/// Steal and total ticks of the `cpu` line of /proc/stat.
fn steal_ticks(root: &Root) -> Option<(u64, u64)> {
    let text = root.read("proc/stat")?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let cols: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|c| c.parse().ok())
        .collect();
    let total: u64 = cols.iter().take(8).sum();
    Some((cols.get(7).copied().unwrap_or(0), total))
}

pub(crate) fn check(before: &Root, after: &Root, scope: &Scope, report: &mut Report) {
    let root = after;
    let cpus: Vec<String> = root
        .list("sys/devices/system/cpu")
        .into_iter()
        .filter(|n| {
            n.strip_prefix("cpu")
                .is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    governors(root, &cpus, report);
    offline(root, report);
    smt(root, report);
    numa(root, report);
    steal(before, after, report);
    quota(root, scope, cpus.len(), report);
}

/// CPUs whose frequency governor is not `performance`.
fn governors(root: &Root, cpus: &[String], report: &mut Report) {
    let governors: Vec<(String, String)> = cpus
        .iter()
        .filter_map(|c| {
            let g = root.read(&format!(
                "sys/devices/system/cpu/{c}/cpufreq/scaling_governor"
            ))?;
            Some((c.clone(), g))
        })
        .collect();
    if governors.is_empty() {
        report.missing("CPU frequency governor (no cpufreq: a VM, or a fixed-frequency CPU)");
    }
    let slow: Vec<&(String, String)> = governors
        .iter()
        .filter(|(_, g)| g != "performance")
        .collect();
    if !slow.is_empty() {
        report.add(Finding {
            severity: Severity::Warning,
            area: "cpu".to_string(),
            title: format!(
                "{} of {} CPUs use the '{}' frequency governor",
                slow.len(),
                governors.len(),
                slow[0].1
            ),
            evidence: slow
                .iter()
                .take(4)
                .map(|(c, g)| shown(&format!("/sys/devices/system/cpu/{c}/cpufreq/scaling_governor"), g))
                .collect(),
            why: "the CPU clocks down between bursts and takes time to clock up: latency at low load is worse and results vary from run to run".to_string(),
            fix: "cpupower frequency-set -g performance (for the length of the tests)".to_string(),
        });
    }
}

/// CPUs taken offline.
fn offline(root: &Root, report: &mut Report) {
    if let Some(offline) = root
        .read("sys/devices/system/cpu/offline")
        .filter(|o| !o.is_empty())
    {
        report.add(Finding {
            severity: Severity::Warning,
            area: "cpu".to_string(),
            title: format!("CPUs {offline} are offline"),
            evidence: vec![shown("/sys/devices/system/cpu/offline", &offline)],
            why: "the host runs on fewer CPUs than it has".to_string(),
            fix: format!("echo 1 > /sys/devices/system/cpu/cpuN/online for each of {offline}"),
        });
    }
}

/// Simultaneous multithreading, when it is on.
fn smt(root: &Root, report: &mut Report) {
    if let Some(smt) = root.read("sys/devices/system/cpu/smt/active") {
        if smt == "1" {
            report.add(Finding {
                severity: Severity::Info,
                area: "cpu".to_string(),
                title: "simultaneous multithreading is on".to_string(),
                evidence: vec![shown("/sys/devices/system/cpu/smt/active", 1)],
                why: "two hardware threads share each core: utilisation near 50% can already mean a core is saturated".to_string(),
                fix: "read CPU utilisation per core, or compare with SMT off (echo off > /sys/devices/system/cpu/smt/control)".to_string(),
            });
        }
    }
}

/// More than one NUMA node.
fn numa(root: &Root, report: &mut Report) {
    let nodes = root
        .list("sys/devices/system/node")
        .into_iter()
        .filter(|n| n.starts_with("node"))
        .count();
    if nodes > 1 {
        report.add(Finding {
            severity: Severity::Info,
            area: "cpu".to_string(),
            title: format!("{nodes} NUMA nodes"),
            evidence: vec![format!("/sys/devices/system/node: {nodes} nodes")],
            why: "memory on the other node is slower to reach; a server spread over nodes without care pays for it".to_string(),
            fix: "pin the server and its memory to one node to compare (numactl --cpunodebind=0 --membind=0)".to_string(),
        });
    }
}

/// Steal time while sampling: a share worth a warning, or the sign of a
/// virtual machine.
fn steal(before: &Root, after: &Root, report: &mut Report) {
    if let (Some((s0, t0)), Some((s1, t1))) = (steal_ticks(before), steal_ticks(after)) {
        let share = if t1 > t0 {
            s1.saturating_sub(s0) as f64 / (t1 - t0) as f64
        } else {
            0.0
        };
        if share >= 0.05 {
            report.add(Finding {
                severity: Severity::Warning,
                area: "cpu".to_string(),
                title: format!("{:.1}% of CPU time was stolen by the hypervisor", share * 100.0),
                evidence: vec![format!("/proc/stat steal: {s0} → {s1} ticks of {} while sampling", t1 - t0)],
                why: "this virtual machine shares its physical CPUs with others: its throughput depends on its neighbours".to_string(),
                fix: "use dedicated CPUs (a dedicated instance or pinned vCPUs), or repeat runs and compare medians".to_string(),
            });
        } else if s1 > 0 {
            report.add(Finding {
                severity: Severity::Info,
                area: "cpu".to_string(),
                title: "this is a virtual machine (the hypervisor has taken steal time)"
                    .to_string(),
                evidence: vec![shown("/proc/stat steal ticks", s1)],
                why: "results can vary with the load of other guests on the same host".to_string(),
                fix: "repeat runs (--repeat) and compare medians".to_string(),
            });
        }
    }
}

/// A cgroup CPU quota on the server below the host's `cpu_count` CPUs.
fn quota(root: &Root, scope: &Scope, cpu_count: usize, report: &mut Report) {
    if let Some(pid) = scope.server_pid {
        let limit = crate::probe::cgroup::CpuLimit::read(&root.dir, &pid.to_string());
        if let Some(quota) = limit.quota_cpus.filter(|q| *q < cpu_count.max(1) as f64) {
            report.add(Finding {
                severity: Severity::Warning,
                area: "cpu".to_string(),
                title: format!(
                    "the server (pid {pid}) is limited to {quota:.2} CPUs by its cgroup"
                ),
                evidence: vec![format!("cgroup CPU quota of pid {pid}: {quota:.2} CPUs")],
                why: "the server cannot use the host's other CPUs whatever the load".to_string(),
                fix: "raise or remove the quota (cpu.max / cpu.cfs_quota_us), or account for it"
                    .to_string(),
            });
        }
    }
}
