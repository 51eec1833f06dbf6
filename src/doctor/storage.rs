//! Block devices: the I/O scheduler, request queue and device queue depth
//! (the HBA queue depth a lab fights over), rotational or not, and the
//! write cache, from /sys/block/DEV/queue and /sys/block/DEV/device.

use super::{shown, Finding, Report, Root, Severity};

/// The selected scheduler of `none [mq-deadline] kyber`.
fn selected(text: &str) -> Option<&str> {
    text.split_whitespace()
        .find_map(|s| s.strip_prefix('[')?.strip_suffix(']'))
        .or_else(|| text.split_whitespace().next())
}

pub(crate) fn check(root: &Root, report: &mut Report) {
    let disks: Vec<String> = root
        .list("sys/block")
        .into_iter()
        .filter(|d| {
            !["loop", "ram", "zram", "dm-", "sr"]
                .iter()
                .any(|p| d.starts_with(p))
        })
        .collect();
    if disks.is_empty() {
        report.missing("block devices (/sys/block)");
    }
    for dev in disks {
        let q = |f: &str| root.read(&format!("sys/block/{dev}/queue/{f}"));
        let rotational = q("rotational").as_deref() == Some("1");
        let scheduler = q("scheduler");
        if let Some(s) = scheduler.as_deref().and_then(selected) {
            if rotational && s == "none" {
                report.add(Finding {
                    severity: Severity::Info,
                    area: "storage".to_string(),
                    title: format!("{dev} is a spinning disk with no I/O scheduler"),
                    evidence: vec![
                        shown(&format!("/sys/block/{dev}/queue/rotational"), 1),
                        shown(&format!("/sys/block/{dev}/queue/scheduler"), scheduler.as_deref().unwrap_or("")),
                    ],
                    why: "without reordering, a spinning disk seeks for every request in arrival order".to_string(),
                    fix: format!("echo mq-deadline > /sys/block/{dev}/queue/scheduler"),
                });
            }
        }
        if let Some(depth) = root
            .number(&format!("sys/block/{dev}/device/queue_depth"))
            .filter(|d| *d > 0 && *d < 32)
        {
            report.add(Finding {
                severity: Severity::Warning,
                area: "storage".to_string(),
                title: format!("{dev}'s device queue depth is {depth}"),
                evidence: vec![shown(&format!("/sys/block/{dev}/device/queue_depth"), depth)],
                why: "no more than this many I/Os are in flight at the device: a fast array or SSD is held back under concurrent load".to_string(),
                fix: format!("echo 32 > /sys/block/{dev}/device/queue_depth (or the HBA's maximum; check its driver's setting)"),
            });
        }
        if let Some(n) = q("nr_requests")
            .and_then(|n| n.parse::<i64>().ok())
            .filter(|n| *n < 64)
        {
            report.add(Finding {
                severity: Severity::Info,
                area: "storage".to_string(),
                title: format!("{dev}'s request queue holds {n} requests"),
                evidence: vec![shown(&format!("/sys/block/{dev}/queue/nr_requests"), n)],
                why: "a short queue limits how many requests the scheduler can merge and reorder"
                    .to_string(),
                fix: format!("echo 256 > /sys/block/{dev}/queue/nr_requests"),
            });
        }
        if let Some(cache) = q("write_cache") {
            if !rotational && cache == "write through" {
                report.add(Finding {
                    severity: Severity::Info,
                    area: "storage".to_string(),
                    title: format!("{dev} writes through its cache"),
                    evidence: vec![shown(&format!("/sys/block/{dev}/queue/write_cache"), &cache)],
                    why: "every write waits for the medium; with a power-safe cache, write-back is faster".to_string(),
                    fix: "only with a battery- or capacitor-backed cache: enable write-back in the controller".to_string(),
                });
            }
        }
    }
}

/// The filesystem holding `path` (a target's data): its mount options from
/// /proc/mounts and, on a live host, its free space.
pub(crate) fn target_filesystem(root: &Root, path: &std::path::Path, report: &mut Report) {
    let Some(mounts) = root.read("proc/mounts") else {
        report.missing("/proc/mounts");
        return;
    };
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let Some((device, point, fs, options)) = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4).then(|| (f[0], f[1], f[2], f[3]))
        })
        .filter(|(_, point, _, _)| path.starts_with(point))
        .max_by_key(|(_, point, _, _)| point.len())
    else {
        return;
    };
    let opts: Vec<&str> = options.split(',').collect();
    let evidence = vec![format!(
        "/proc/mounts: {device} on {point} type {fs} ({options})"
    )];
    if opts.contains(&"sync") {
        report.add(Finding {
            severity: Severity::Warning,
            area: "storage".to_string(),
            title: format!("{} is on a filesystem mounted sync", path.display()),
            evidence: evidence.clone(),
            why: "every write waits for the disk, on top of the database's own flushes".to_string(),
            fix: format!("mount -o remount,async {point}"),
        });
    }
    if opts.iter().any(|o| *o == "nobarrier" || *o == "barrier=0") {
        report.add(Finding {
            severity: Severity::Warning,
            area: "storage".to_string(),
            title: format!("{} is on a filesystem without write barriers", path.display()),
            evidence: evidence.clone(),
            why: "flushes return before the data is safe: faster, and not durable without a power-safe cache".to_string(),
            fix: format!("mount -o remount,barrier=1 {point} (unless the cache is battery-backed)"),
        });
    }
    if opts.contains(&"strictatime") {
        report.add(Finding {
            severity: Severity::Info,
            area: "storage".to_string(),
            title: format!("{point} updates access times on every read"),
            evidence: evidence.clone(),
            why: "each read of a file writes its inode".to_string(),
            fix: format!("mount -o remount,noatime {point}"),
        });
    }
    if root.live {
        if let Some((free, total)) = free_space(&path) {
            let share = free as f64 / total.max(1) as f64;
            if share < 0.1 {
                report.add(Finding {
                    severity: Severity::Warning,
                    area: "storage".to_string(),
                    title: format!(
                        "{point} has {:.1}% free ({} MiB of {} MiB)",
                        share * 100.0,
                        free >> 20,
                        total >> 20
                    ),
                    evidence: vec![format!(
                        "statvfs({}): {free} of {total} bytes free",
                        path.display()
                    )],
                    why:
                        "a filesystem near full fragments and slows; a database that fills it stops"
                            .to_string(),
                    fix: "free space or move the data to a larger filesystem".to_string(),
                });
            }
        }
    }
}

/// Free and total bytes of the filesystem holding `path`.
fn free_space(path: &std::path::Path) -> Option<(u64, u64)> {
    let space = crate::util::sys::space(path).ok()?;
    Some((space.free, space.total))
}
