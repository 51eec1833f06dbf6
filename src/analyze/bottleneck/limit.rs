//! A rate limit above the device: a blkio throttle or `io.max` on a
//! cgroup, a cloud volume's IOPS or bandwidth cap, a `dm-delay` or
//! `dm-throttle` target. Its mark is a closed loop whose throughput stays
//! flat — within the run's own noise, the steps' interval CV — from the
//! first step on while the load grows, so that by Little's law (N = X·R,
//! with X fixed) each operation's response time grows in proportion to
//! the concurrency, and no device the I/O passes through is busy: the
//! operations wait above the devices, not in them.
//!
//! A CPU or a lock gives the same flat curve past its knee, so the rule
//! stands only where those are ruled out: no CPU (the host's, one CPU, a
//! quota, the server's busiest single thread) near saturation, the
//! sessions not waiting on each other's locks, nothing retried. Where a
//! followed cgroup (the server's, or perflab's own: a disk or files run's
//! I/O is perflab's) carries a block-I/O limit that its I/O reached, the
//! limit is named with its value; otherwise the flat figure is given as a
//! limit of about that much above the device. A server's curve counts
//! only with its tasks stalled on I/O (PSI) or a limit it reached, and
//! never when its memory is short (its reads are the cause: see
//! `hardware`, `io`).

use super::super::capacity::load_text;
use super::super::iopath::LimitUse;
use super::super::points::{ResourceKind, StepPoint};
use super::waits::{WaitMeaning, Waits};
use super::{memory_evidence, Bottleneck, BottleneckKind, RunShape};
use crate::units::{Bytes, Latency, Percent};
use std::time::Duration;

/// Busy share from which a device is a candidate itself.
const DEVICE_BUSY: f64 = 0.5;
/// Busy share of a CPU (any: the host's, one, a quota, one thread) that
/// leaves the CPU a candidate for a flat curve.
const CPU_BUSY: f64 = 0.8;
/// The load must grow at least this much over the run for a flat curve to
/// say anything.
const LOAD_GROWTH: f64 = 4.0;
/// The narrowest and widest band a flat curve may move in around its mean.
const BAND_MIN: f64 = 0.05;
const BAND_MAX: f64 = 0.15;
/// Share of a cgroup's limit its I/O must reach for the limit to be named.
const REACHED: f64 = 0.8;
/// The most the throughput may grow under a limit reached at every step,
/// as a share of the load's growth.
const CREEP: f64 = 0.5;
/// Share of time stalled on I/O that marks a server's flat curve as I/O's.
const STALLED: f64 = 0.3;
/// Share of wait samples on locks that makes the sessions contend.
const LOCKED: f64 = 0.2;

/// The verdict when a rate limit above the device holds throughput flat.
pub(crate) fn verdict(all: &[StepPoint], shape: RunShape, waits: &Waits) -> Option<Bottleneck> {
    if !shape.closed || all.len() < 3 {
        return None;
    }
    let (first, last) = (&all[0], &all[all.len() - 1]);
    if first.load <= 0.0 || last.load < LOAD_GROWTH * first.load {
        return None;
    }
    // A followed cgroup's limit reached from some step on: the curve is
    // judged from there, since below it the limit did not bind yet (one
    // user's synced write also waits on the journal, unthrottled).
    let from = (0..all.len())
        .find(|&k| all[k..].iter().all(|p| reached_limit(p).is_some()))
        .filter(|&k| all.len() - k >= 2 && all[all.len() - 1].load >= 2.0 * all[k].load);
    let points = &all[from.unwrap_or(0)..];
    let flat = flatness(points)?;
    // Under a limit reached at every one of these steps, what stays flat
    // is the cgroup's I/O: more operations may share each limited I/O as
    // the load grows (synced writes, one journal flush), so throughput
    // may still creep up, by less than half the load's growth. Only for
    // the run's own I/O: a server's commits sharing a flush are named
    // with the limit by the storage waits (`io`).
    let pinned = shape.kernel_served && from.is_some() && crept(points);
    if flat.spread > flat.band && !pinned {
        return None;
    }
    // Ruled out first: a CPU near its end, locks, retries, a short memory.
    let cpu = busiest_cpu(all);
    if cpu.as_ref().is_some_and(|(_, u)| *u >= CPU_BUSY) {
        return None;
    }
    if waits.share(WaitMeaning::is_contention) >= LOCKED || all.iter().any(|p| p.retries > 0) {
        return None;
    }
    if !shape.kernel_served && all.iter().any(|p| memory_evidence(p).is_some()) {
        return None;
    }
    let busy_device = all
        .iter()
        .flat_map(|p| &p.resources)
        .filter(|r| r.kind == ResourceKind::Disk)
        .any(|r| r.utilisation >= DEVICE_BUSY);
    if busy_device {
        return None;
    }
    let named = reached_limit(last);
    let stall = all
        .iter()
        .filter_map(|p| p.io_path.stall())
        .max_by(f64::total_cmp);
    if named.is_none() && !shape.kernel_served && stall.is_none_or(|s| s < STALLED) {
        return None;
    }
    Some(limited(&Findings {
        points,
        below: &all[..from.unwrap_or(0)],
        flat,
        named,
        stall,
        cpu,
    }))
}

/// How flat a run's throughput is.
struct Flatness {
    /// The mean throughput, operations per second.
    mean: f64,
    /// Its widest departure from the mean, a share.
    spread: f64,
    /// The departure allowed: three times the noise, within bounds.
    band: f64,
    /// The run's noise: the median interval CV of the steps.
    noise: f64,
}

/// A block-I/O limit of a followed cgroup its I/O reached.
struct Reached {
    limit: LimitUse,
    /// The kind of the limit most used ("read IOPS", "write bytes/s", …).
    what: &'static str,
    /// The limit's value, in the kind's unit.
    value: u64,
    /// The share of it used.
    share: f64,
}

/// What the rule found, for the verdict's text.
struct Findings<'a> {
    /// The flat steps.
    points: &'a [StepPoint],
    /// The steps before them, where the limit did not bind yet.
    below: &'a [StepPoint],
    flat: Flatness,
    named: Option<Reached>,
    /// The largest share of time tasks stalled on I/O.
    stall: Option<f64>,
    /// The busiest CPU and its share.
    cpu: Option<(String, f64)>,
}

/// Whether the throughput of `points` grew by less than half as much as
/// their load did (and grew at all less than twofold).
fn crept(points: &[StepPoint]) -> bool {
    let (first, last) = (&points[0], &points[points.len() - 1]);
    let load = last.load / first.load;
    let x = last.throughput / first.throughput.max(f64::MIN_POSITIVE);
    x < 2.0 && x - 1.0 < CREEP * (load - 1.0)
}

/// How flat the throughput of `points` is; none without throughput.
fn flatness(points: &[StepPoint]) -> Option<Flatness> {
    let mean = points.iter().map(|p| p.throughput).sum::<f64>() / points.len() as f64;
    if mean <= 0.0 {
        return None;
    }
    let spread = points
        .iter()
        .map(|p| (p.throughput / mean - 1.0).abs())
        .fold(0.0, f64::max);
    let mut cvs: Vec<f64> = points.iter().filter_map(StepPoint::interval_cv).collect();
    cvs.sort_by(f64::total_cmp);
    let noise = cvs.get(cvs.len() / 2).copied().unwrap_or(0.0);
    Some(Flatness {
        mean,
        spread,
        band: (3.0 * noise).clamp(BAND_MIN, BAND_MAX),
        noise,
    })
}

/// The busiest CPU of the run, whichever way counted, with its share;
/// the host's CPUs count only where the run itself (perflab, the server,
/// the kernel threads of its devices) kept at least half of their busy
/// time: CPUs others kept busy held back no I/O of the run's.
fn busiest_cpu(points: &[StepPoint]) -> Option<(String, f64)> {
    points
        .iter()
        .flat_map(|p| {
            let own = p.generator.cpus
                + p.extras.server_cpus.unwrap_or(0.0)
                + p.io_path.kernel_cpus_total();
            let others_kept_it = p.extras.busy_cpus.is_some_and(|busy| own < 0.5 * busy);
            let thread = p
                .extras
                .server_single_thread
                .map(|u| ("the server's busiest thread".to_string(), u));
            p.resources
                .iter()
                .filter(|r| r.kind.is_cpu())
                .filter(move |r| r.kind == ResourceKind::CpuQuota || !others_kept_it)
                .map(|r| (r.name.clone(), r.utilisation))
                .chain(thread)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// A block-I/O limit of a followed cgroup that its I/O reached at a step,
/// with its most used kind.
fn reached_limit(last: &StepPoint) -> Option<Reached> {
    last.io_path
        .limits
        .iter()
        .filter_map(|l| {
            let (what, value, share) = l.tightest()?;
            (share >= REACHED).then(|| Reached {
                limit: l.clone(),
                what,
                value,
                share,
            })
        })
        .max_by(|a, b| a.share.total_cmp(&b.share))
}

/// The verdict's text.
fn limited(f: &Findings) -> Bottleneck {
    let last = &f.points[f.points.len() - 1];
    let mut evidence = flat_evidence(f);
    if let Some(disks) = idle_devices(last) {
        evidence.push(disks);
    }
    if let Some(s) = f.stall {
        evidence.push(format!(
            "tasks stalled on I/O {} of the time at most (io pressure, the stalled share of each interval)",
            Percent(s)
        ));
    }
    let name = match &f.named {
        Some(reached) => {
            evidence.push(limit_use(reached, last));
            limit_name(reached)
        }
        None => {
            let figure = match device_rates(f.points) {
                Some((i, b)) => format!("≈{:.0} IOPS ({}/s)", two_figures(i), Bytes(b as u64)),
                None => format!("≈{:.0} operations/s", two_figures(f.flat.mean)),
            };
            format!("a limit of {figure} above the device (a throttle or a volume's cap)")
        }
    };
    let mut ruled_out = Vec::new();
    if let Some((cpu, u)) = &f.cpu {
        ruled_out.push(format!("the CPU: {cpu} at most {} busy", Percent(*u)));
    }
    ruled_out.push("software contention: no lock waits and no retries".to_string());
    ruled_out.push(format!(
        "the device: none was {} busy or more",
        Percent(DEVICE_BUSY)
    ));
    let next = if f.named.is_some() {
        "raise or lift the limit, then run again: throughput should follow it".to_string()
    } else {
        "look for the limit above the device (the volume's provisioned IOPS or bandwidth, a cgroup's io.max or blkio throttle, a dm target) and run again without it".to_string()
    };
    Bottleneck {
        kind: BottleneckKind::Resource,
        name,
        evidence,
        ruled_out,
        unreliable: false,
        next: Some(next),
        resource: None,
    }
}

/// The flat curve's evidence: the throughput held, where the limit did
/// not bind yet, and the latency growing as Little's law gives.
fn flat_evidence(f: &Findings) -> Vec<String> {
    let (first, last) = (&f.points[0], &f.points[f.points.len() - 1]);
    let held = if f.flat.spread <= f.flat.band {
        format!(
            "throughput held at {} (within ±{}) from {} to {}, within the steps' own noise (interval CV {})",
            first.rate(f.flat.mean),
            Percent(f.flat.spread),
            load_text(first),
            load_text(last),
            Percent(f.flat.noise)
        )
    } else {
        format!(
            "the limit was {} used or more at every step from {} to {}, while throughput crept from {} to {} (×{:.2} for ×{:.0} the load): more operations shared each limited I/O",
            Percent(REACHED),
            load_text(first),
            load_text(last),
            first.rate(first.throughput),
            last.rate(last.throughput),
            last.throughput / first.throughput,
            last.load / first.load
        )
    };
    let mut evidence = vec![held];
    if let Some(b) = f.below.last() {
        evidence.push(format!(
            "below it, at {} and under, the limit did not bind yet ({} at {})",
            load_text(b),
            b.rate(b.throughput),
            load_text(b)
        ));
    }
    let per_step: Vec<String> = f
        .below
        .iter()
        .chain(f.points)
        .map(|p| format!("{} at {}", Latency(p.response.mean), load_text(p)))
        .collect();
    let little = Duration::try_from_secs_f64(
        last.load / last.throughput.max(f64::MIN_POSITIVE) - last.think_s,
    )
    .unwrap_or_default();
    evidence.push(format!(
        "mean latency grew with concurrency as Little's law gives for a fixed rate (R ≈ N/X, {} at {}): {}",
        Latency(little),
        load_text(last),
        per_step.join(", ")
    ));
    evidence
}

/// The devices the I/O passes through at the last step and how busy each
/// was (none was busy, or the rule would not stand); none without disks.
fn idle_devices(last: &StepPoint) -> Option<String> {
    let disks: Vec<String> = last
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::Disk)
        .map(|r| {
            let name = r.name.trim_start_matches("disk ");
            let below = last.io_path.below(name);
            let path = if below.is_empty() {
                String::new()
            } else {
                format!(" (on {})", below.join(" on "))
            };
            format!("{} {} busy{path}", r.name, Percent(r.utilisation))
        })
        .collect();
    (!disks.is_empty()).then(|| {
        format!(
            "no device the I/O passes through was busy at {}: {}",
            load_text(last),
            disks.join(", ")
        )
    })
}

/// How much of a reached limit the cgroup's I/O used at the last step.
fn limit_use(r: &Reached, last: &StepPoint) -> String {
    let l = &r.limit;
    let used = match r.what {
        "read IOPS" => format!("{:.0} reads/s", l.reads_per_s),
        "write IOPS" => format!("{:.0} writes/s", l.writes_per_s),
        "read bytes/s" => format!("{}/s read", Bytes(l.read_bytes_per_s as u64)),
        _ => format!("{}/s written", Bytes(l.write_bytes_per_s as u64)),
    };
    format!(
        "{} moved {used} on {} at {}: {} of its limit",
        capitalised(&l.owner),
        l.limit.device,
        load_text(last),
        Percent(r.share)
    )
}

/// A reached limit named with its interface, value and owner, e.g. "an
/// io.max of 500 read IOPS on the server's cgroup (device 7:0)".
fn limit_name(r: &Reached) -> String {
    let l = &r.limit;
    let value = match r.what {
        "read bytes/s" | "write bytes/s" => format!("{}/s", Bytes(r.value)),
        _ => r.value.to_string(),
    };
    let what = match r.what.trim_end_matches(" bytes/s") {
        "read" => "read",
        "write" => "written",
        w => w,
    };
    let article = if l.limit.interface == "io.max" {
        "an"
    } else {
        "a"
    };
    format!(
        "{article} {} of {value} {what} on {} (device {})",
        l.limit.interface, l.owner, l.limit.device
    )
}

/// The mean IOPS and bytes per second over the steps of the disk that
/// did the most I/O at the last step.
fn device_rates(points: &[StepPoint]) -> Option<(f64, f64)> {
    let last = &points[points.len() - 1];
    let (name, _) = last
        .disk_iops
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .filter(|(_, iops)| **iops > 0.0)?;
    let mean = |f: &dyn Fn(&StepPoint) -> Option<f64>| {
        let v: Vec<f64> = points.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    Some((
        mean(&|p| p.disk_iops.get(name).copied())?,
        mean(&|p| p.disk_bytes_per_s.get(name).copied())?,
    ))
}

/// A figure rounded to two significant digits: an estimate, not a count.
fn two_figures(x: f64) -> f64 {
    if x < 100.0 {
        return x.round();
    }
    let scale = 10f64.powi(x.log10().floor() as i32 - 1);
    (x / scale).round() * scale
}

fn capitalised(text: &str) -> String {
    let mut c = text.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::super::fixture::{mva_points, SHAPE};
    use super::super::super::iopath::LimitUse;
    use super::super::super::points::StepPoint;
    use super::super::super::{verdict_of, Verdict, DEFAULT_MAX_CV};
    use super::super::{BottleneckKind, RunShape};
    use crate::probe::cgroup::IoLimit;
    use std::time::Duration;

    const DISK_RUN: RunShape = RunShape {
        kernel_served: true,
        threads: 4,
        ..SHAPE
    };

    /// A disk run from depth 1 to 32 held at `iops` (±1%, each step's
    /// intervals ±2%), latency N/X, the CPUs 20% busy, vda and loop0 idle,
    /// loop0 on a file on vda.
    fn flat(iops: f64) -> Vec<StepPoint> {
        let users = [1, 2, 4, 8, 16, 32];
        let mut points = mva_points(0.0001, 0.0001, 0.0, &users);
        for (i, p) in points.iter_mut().enumerate() {
            let x = iops * (1.0 + [0.0, 0.01, -0.01, 0.005, -0.005, 0.01][i]);
            p.throughput = x;
            let r = Duration::from_secs_f64(p.load / x);
            p.response.mean = r;
            p.response.p50 = r;
            p.response.p95 = r * 2;
            p.interval_throughputs = (0..10)
                .map(|k| x * if k % 2 == 0 { 0.98 } else { 1.02 })
                .collect();
            p.resources[0].utilisation = 0.2;
            p.resources[1].utilisation = 0.03;
            p.resources.push(super::super::super::points::ResourceUse {
                name: "disk loop0".to_string(),
                ..p.resources[1].clone()
            });
            p.disk_iops.insert("disk loop0".to_string(), x);
            p.disk_bytes_per_s
                .insert("disk loop0".to_string(), x * 4096.0);
            p.io_path
                .lower
                .insert("loop0".to_string(), vec!["vda".to_string()]);
            p.io_path.io_pressure = Some(0.9);
        }
        points
    }

    fn throttle(points: &mut [StepPoint], interface: &str) {
        for p in points {
            p.io_path.limits.push(LimitUse {
                owner: "perflab's own cgroup".to_string(),
                limit: IoLimit {
                    device: "loop0".to_string(),
                    cgroup: "/perflab-scn-disk-throttle".to_string(),
                    read_iops: Some(1000),
                    interface: interface.to_string(),
                    ..IoLimit::default()
                },
                reads_per_s: p.throughput,
                ..LimitUse::default_for_tests()
            });
        }
    }

    /// perflab's own cgroup held to 100 write IOPS on loop0, which its
    /// writes used at `writes` per second.
    fn write_throttle(p: &mut StepPoint, writes: f64) {
        p.io_path.limits.push(LimitUse {
            owner: "perflab's own cgroup".to_string(),
            limit: IoLimit {
                device: "loop0".to_string(),
                write_iops: Some(100),
                interface: "blkio throttle".to_string(),
                ..IoLimit::default()
            },
            writes_per_s: writes,
            ..LimitUse::default_for_tests()
        });
    }

    fn judge(points: Vec<StepPoint>, shape: RunShape) -> Verdict {
        verdict_of(points, shape, DEFAULT_MAX_CV, 1)
    }

    /// 1000 read IOPS at every depth under perflab's own blkio throttle:
    /// the throttle, named with its value, never `inconclusive`.
    #[test]
    fn a_flat_disk_run_under_a_blkio_throttle_names_it() {
        let mut points = flat(1000.0);
        throttle(&mut points, "blkio throttle");
        let b = judge(points, DISK_RUN).bottleneck.unwrap();
        assert_eq!(b.kind, BottleneckKind::Resource, "{b:#?}");
        assert_eq!(
            b.name,
            "a blkio throttle of 1000 read IOPS on perflab's own cgroup (device loop0)"
        );
        let all = b.evidence.join("\n");
        assert!(all.contains("throughput held at"), "{all}");
        assert!(all.contains("Little's law"), "{all}");
        assert!(all.contains("disk loop0 3.0% busy (on vda)"), "{all}");
        assert!(all.contains("io pressure"), "{all}");
        assert!(all.contains("of its limit"), "{all}");
    }

    /// Other work kept the host's CPUs busy (another build) while perflab
    /// used 0.05 CPU: the CPUs held back none of the run's I/O.
    #[test]
    fn cpus_others_kept_busy_do_not_hide_the_throttle() {
        let mut points = flat(1000.0);
        throttle(&mut points, "blkio throttle");
        for p in &mut points {
            p.resources[0].utilisation = 0.99;
            p.extras.busy_cpus = Some(1.98);
            p.extras.server_cpus = Some(0.0);
        }
        let b = judge(points, DISK_RUN).bottleneck.unwrap();
        assert!(
            b.name.starts_with("a blkio throttle of 1000 read IOPS"),
            "{b:#?}"
        );
    }

    #[test]
    fn a_v2_io_max_is_named_as_such() {
        let mut points = flat(1000.0);
        throttle(&mut points, "io.max");
        let b = judge(points, DISK_RUN).bottleneck.unwrap();
        assert_eq!(
            b.name,
            "an io.max of 1000 read IOPS on perflab's own cgroup (device loop0)"
        );
    }

    /// Synced writes under a 100 write-IOPS throttle: one user's writes
    /// also wait on the journal and reach 72/s; from two users on the
    /// cgroup's writes sit at the throttle while the load grows sixteenfold.
    #[test]
    fn a_throttle_reached_from_the_second_step_on_is_named() {
        let mut points = flat(100.0);
        let xs = [72.0, 95.0, 99.0, 100.0, 100.0, 99.0];
        for (p, x) in points.iter_mut().zip(xs) {
            p.throughput = x;
            p.response.mean = Duration::from_secs_f64(p.load / x);
            p.interval_throughputs = vec![x; 10];
            write_throttle(p, x);
        }
        let b = judge(points, DISK_RUN).bottleneck.unwrap();
        assert_eq!(
            b.name, "a blkio throttle of 100 write IOPS on perflab's own cgroup (device loop0)",
            "{b:#?}"
        );
        assert!(
            b.evidence
                .iter()
                .any(|e| e.starts_with("below it, at 1 user")),
            "{b:#?}"
        );
    }

    /// Synced file writes, 2 to 16 users, under a 100 write-IOPS throttle
    /// reached at every step: the cgroup's writes sit at the throttle while
    /// the operations creep from 72 to 100/s (more of them share each
    /// journal flush), wider than the steps' noise allows a flat curve.
    /// The throttle still; the same creep with the limit half used is not.
    #[test]
    fn operations_creeping_up_under_a_throttle_reached_throughout_name_it() {
        let creeping = |writes: [f64; 4]| {
            let mut points = flat(100.0);
            points.truncate(4);
            let xs = [72.3, 83.7, 91.7, 100.0];
            for (k, p) in points.iter_mut().enumerate() {
                p.load = [2.0, 4.0, 8.0, 16.0][k];
                p.throughput = xs[k];
                p.response.mean = Duration::from_secs_f64(p.load / xs[k]);
                p.interval_throughputs = vec![xs[k] * 0.98, xs[k] * 1.02];
                write_throttle(p, writes[k]);
            }
            judge(points, DISK_RUN).bottleneck.unwrap()
        };
        let b = creeping([96.0, 99.0, 100.0, 100.0]);
        assert_eq!(
            b.name, "a blkio throttle of 100 write IOPS on perflab's own cgroup (device loop0)",
            "{b:#?}"
        );
        assert!(
            b.evidence.iter().any(|e| e.contains("crept from")),
            "{b:#?}"
        );
        let b = creeping([50.0, 55.0, 58.0, 60.0]);
        assert!(!b.name.contains("throttle"), "{b:#?}");
    }

    /// The same curve with no cgroup limit to read: a limit of about that
    /// much above the device.
    #[test]
    fn a_flat_disk_run_with_no_readable_limit_is_a_limit_above_the_device() {
        let b = judge(flat(1000.0), DISK_RUN).bottleneck.unwrap();
        assert_eq!(b.kind, BottleneckKind::Resource, "{b:#?}");
        assert!(
            b.name.starts_with("a limit of ≈1000 IOPS (")
                && b.name
                    .ends_with("above the device (a throttle or a volume's cap)"),
            "{}",
            b.name
        );
    }

    /// Flat because the CPUs ran out, or because the device did, or
    /// because the sessions waited on each other's locks: not a limit
    /// above the device.
    #[test]
    fn a_flat_curve_of_a_busy_cpu_device_or_lock_is_no_rate_limit() {
        let mut cpu = flat(1000.0);
        for p in &mut cpu {
            p.resources[0].utilisation = 0.97;
        }
        let b = judge(cpu, DISK_RUN).bottleneck.unwrap();
        assert!(!b.name.contains("limit"), "{b:#?}");

        let mut device = flat(1000.0);
        for p in &mut device {
            p.resources[2].utilisation = 0.98;
        }
        let b = judge(device, DISK_RUN).bottleneck.unwrap();
        assert!(!b.name.contains("limit"), "{b:#?}");

        let mut locked = flat(1000.0);
        for p in &mut locked {
            p.waits.insert("Lock:transactionid".to_string(), 60);
            p.waits.insert("CPU".to_string(), 40);
        }
        let b = judge(locked, SHAPE).bottleneck.unwrap();
        assert!(!b.name.contains("limit"), "{b:#?}");
    }

    /// A server's flat curve with its tasks not stalled on I/O and no
    /// limit reached is not claimed for I/O.
    #[test]
    fn a_servers_flat_curve_without_io_stalls_is_not_a_rate_limit() {
        let mut points = flat(1000.0);
        for p in &mut points {
            p.io_path.io_pressure = Some(0.01);
        }
        let b = judge(points, SHAPE).bottleneck.unwrap();
        assert!(!b.name.contains("limit"), "{b:#?}");
    }

    /// A loop device on tmpfs: IOPS grow with depth until perflab (0.9 CPU)
    /// and the loop device's kernel worker (0.9 CPU) use up both CPUs —
    /// the CPU, with the worker named, not a limit above the device.
    #[test]
    fn a_loop_device_on_tmpfs_that_uses_up_the_cpus_is_the_cpu() {
        let mut points = flat(1000.0);
        let xs = [52e3, 82e3, 106e3, 110e3, 110e3, 109e3];
        for (p, x) in points.iter_mut().zip(xs) {
            p.throughput = x;
            p.response.mean = Duration::from_secs_f64(p.load / x);
            p.interval_throughputs = vec![x; 10];
            let busy = (x / 110e3).min(0.99);
            p.resources[0].utilisation = busy;
            p.resources[0].servers = 2.0;
            p.generator.cpus = 0.9 * busy;
            p.io_path
                .kernel_cpus
                .insert("loop0".to_string(), 0.9 * busy);
            p.io_path
                .lower
                .insert("loop0".to_string(), vec!["memory".to_string()]);
            p.extras.server_cpus = Some(0.9 * busy);
            p.extras.busy_cpus = Some(2.0 * busy);
            p.resources[2].utilisation = 0.7;
            p.disk_iops.insert("disk loop0".to_string(), x);
        }
        let b = judge(points, DISK_RUN).bottleneck.unwrap();
        assert_eq!(b.kind, BottleneckKind::Resource, "{b:#?}");
        assert_eq!(b.name, "cpu", "{b:#?}");
        assert!(
            b.evidence
                .iter()
                .any(|e| e
                    .starts_with("the kernel threads serving loop0 (on memory) used 0.89 CPUs")),
            "{b:#?}"
        );
    }

    /// A curve still growing with depth is no limit, however idle the
    /// device.
    #[test]
    fn a_growing_curve_is_no_rate_limit() {
        let mut points = flat(1000.0);
        for (i, p) in points.iter_mut().enumerate() {
            p.throughput *= 1.0 + i as f64 * 0.3;
            p.interval_throughputs = vec![p.throughput; 10];
        }
        let b = judge(points, DISK_RUN).bottleneck.unwrap();
        // Still rising, it may be approaching a resource's limit, never
        // a rate limit above the device.
        assert_ne!(b.kind, super::super::BottleneckKind::Resource, "{b:#?}");
        assert!(!b.name.contains("above the device"), "{b:#?}");
    }
}
