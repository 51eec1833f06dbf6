//! What a storage device's own figures say, beside its busy share. A
//! device serves several I/Os at once, so busy (the share of time with any
//! I/O in flight, `io_ticks`) reaches 100% long before it runs out; its
//! queue and await decide instead. Little's law holds at the device as at
//! the users: the I/Os it holds on average are its I/Os per second times
//! its await (`aqu-sz = IOPS × await`, iostat's columns). When each
//! operation of the run is one I/O of the device (its IOPS within a
//! quarter of the throughput), the users are outstanding I/Os, and:
//!
//! - **the depth too shallow** — throughput still grew with the users,
//!   and the device held about the I/Os perflab kept outstanding with no
//!   queue of its own lengthening their wait: more outstanding I/Os would
//!   be served in parallel;
//! - **the device saturated** — throughput stopped growing while the
//!   device's queue and await grew with the users: deeper queues only
//!   wait longer.
//!
//! A disk busy with others' I/O is not the run's limit: when the server's
//! and perflab's own storage bytes (`/proc/PID/io`) are under a tenth of
//! what the device moved, the device served someone else.

use super::super::capacity::load_text;
use super::super::points::{ResourceKind, ResourceUse, StepPoint};
use crate::units::{Latency, Percent, Rate, RateUnit};

/// The device IOPS, within this share of the throughput, that make each
/// operation one I/O of the device.
const ONE_IO_PER_OP: f64 = 0.25;

/// Share of the load's growth from the level before that throughput must
/// keep for a device to be still scaling at the last level.
pub(crate) const SCALING: f64 = 0.5;

/// Whether throughput was still growing with load at step `at`, the last:
/// from the level before, it grew by at least [`SCALING`] of the load's
/// growth, or beyond the two steps' noise ([`super::rising`]). A device serves I/Os in parallel (an SSD's channels, an
/// array's disks, a virtual disk's host): busy — the share of time with
/// any I/O in flight — reaches 100% long before it has run out, so a busy
/// disk is its limit only where throughput stopped growing.
pub(crate) fn still_scaling(points: &[StepPoint], at: usize) -> bool {
    if at + 1 != points.len() || at == 0 {
        return false;
    }
    let (before, last) = (&points[at - 1], &points[at]);
    if before.load <= 0.0 || before.throughput <= 0.0 || last.load <= before.load {
        return false;
    }
    let load_growth = last.load / before.load - 1.0;
    last.throughput / before.throughput - 1.0 >= SCALING * load_growth
        || super::growth::still_rising(points).is_some()
}

/// Share of a disk's bytes below which the run's own I/O leaves the disk
/// to others.
pub(crate) const OTHERS: f64 = 0.1;
/// Bytes per second under which a disk moved too little to judge whose.
const JUDGED_FROM: f64 = 1e6;

/// The share of a disk's bytes at step `p` that the run moved — the
/// server's and perflab's own reads and writes over the device's; None
/// when the server's I/O is not known or the disk moved too little.
pub(crate) fn own_share(p: &StepPoint, disk: &ResourceUse) -> Option<f64> {
    let device = *p.disk_bytes_per_s.get(&disk.name)?;
    if device < JUDGED_FROM {
        return None;
    }
    let ours = p.extras.server_io_bytes_per_s? + p.extras.perflab_io_bytes_per_s.unwrap_or(0.0);
    Some((ours / device).min(1.0))
}

/// Whether a disk at step `p` was busy with others' I/O, not the run's.
pub(crate) fn others_io(p: &StepPoint, disk: &ResourceUse) -> bool {
    own_share(p, disk).is_some_and(|s| s < OTHERS)
}

/// The caveat for a busy disk that served others at step `p`.
pub(crate) fn others_caveat(p: &StepPoint) -> Option<String> {
    let disk = busiest_disk(p).filter(|d| d.utilisation >= 0.5)?;
    let share = own_share(p, disk).filter(|s| *s < OTHERS)?;
    let device = p.disk_bytes_per_s.get(&disk.name).copied().unwrap_or(0.0);
    Some(format!(
        "at {} {} was {} busy moving {:.1} MB/s, of which the server and perflab moved {}: it was busy with others' I/O, not the run's",
        load_text(p),
        disk.name,
        Percent(disk.utilisation),
        device / 1e6,
        Percent(share)
    ))
}

/// The busiest disk of a step.
fn busiest_disk(p: &StepPoint) -> Option<&ResourceUse> {
    p.resources
        .iter()
        .filter(|r| r.kind == ResourceKind::Disk)
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))
}

/// The device's queue, IOPS and await at a step, when each operation of
/// the run is one of its I/Os.
fn one_io_per_op(p: &StepPoint, disk: &ResourceUse) -> Option<(f64, f64, f64)> {
    let iops = *p.disk_iops.get(&disk.name)?;
    let awaited = *p.disk_await_s.get(&disk.name)?;
    let queue = disk.saturation.as_ref().map(|(_, q)| *q)?;
    let near = (iops - p.throughput).abs() <= ONE_IO_PER_OP * p.throughput.max(f64::MIN_POSITIVE);
    near.then_some((queue, iops, awaited))
}

/// Little's law at the device at step `p`: what it held, served and
/// waited.
fn little_line(p: &StepPoint, disk: &ResourceUse, queue: f64, iops: f64, awaited: f64) -> String {
    format!(
        "Little's law at {} at {}: {} × await {} = {:.1} I/Os held on average (its queue {queue:.1})",
        disk.name,
        load_text(p),
        Rate(iops, RateUnit::Iops),
        Latency::secs(awaited),
        iops * awaited,
    )
}

/// For a sweep that did not reach a limit: a busy disk that still served
/// more with each level is not saturated, and when the users are its
/// outstanding I/Os, the depth was too shallow to saturate it. Empty when
/// no disk was `busy` (a share) at the last step.
pub(crate) fn not_saturated(points: &[StepPoint], busy: f64) -> Vec<String> {
    let at = points.len() - 1;
    let last = &points[at];
    let Some(disk) = busiest_disk(last).filter(|d| d.utilisation >= busy && !others_io(last, d))
    else {
        return Vec::new();
    };
    if at == 0 || !still_scaling(points, at) {
        return Vec::new();
    }
    let before = &points[at - 1];
    let mut out = vec![format!(
        "{} was {} busy at {}, yet throughput grew ×{:.2} from {} for ×{:.2} the load: busy counts the time with any I/O in flight, and this device serves several at once, so it had not run out",
        disk.name,
        Percent(disk.utilisation),
        load_text(last),
        last.throughput / before.throughput,
        load_text(before),
        last.load / before.load
    )];
    if let Some((queue, iops, awaited)) = one_io_per_op(last, disk) {
        out.push(little_line(last, disk, queue, iops, awaited));
        // The device held the users' I/Os and hardly any others'.
        let held_ours = (queue - last.load).abs() <= ONE_IO_PER_OP * last.load;
        if matches!(last.level, crate::plan::Level::Users(_)) && held_ours {
            let first = &points[0];
            out.push(format!(
                "each operation was one I/O of {}, so the {:.0} users were its outstanding I/Os, and it held {queue:.1} of them: latency went {} → {} from {} to {} while throughput went {} → {} — the depth, not the device, set the pace: it is too shallow to saturate the device",
                disk.name,
                last.load,
                Latency::secs(first.response_s()),
                Latency::secs(last.response_s()),
                load_text(first),
                load_text(last),
                first.rate(first.throughput),
                last.rate(last.throughput),
            ));
        }
    }
    out
}

/// For a saturated disk at step `at`: Little's law at the device, and how
/// its await grew past the peak while throughput did not.
pub(crate) fn saturated(
    points: &[StepPoint],
    peak: usize,
    at: usize,
    disk: &ResourceUse,
) -> Vec<String> {
    let q = &points[at];
    let Some((queue, iops, awaited)) = one_io_per_op(q, disk) else {
        return Vec::new();
    };
    let mut out = vec![little_line(q, disk, queue, iops, awaited)];
    let first = &points[0];
    if let Some(first_await) = first.disk_await_s.get(&disk.name).filter(|a| **a > 0.0) {
        if at > 0 && awaited > 1.5 * first_await {
            out.push(format!(
                "its await grew ×{:.1} ({} → {}) from {} to {} while throughput grew ×{:.2} (the peak, {}, at {}): deeper queues only waited longer",
                awaited / first_await,
                Latency::secs(*first_await),
                Latency::secs(awaited),
                load_text(first),
                load_text(q),
                q.throughput / first.throughput.max(f64::MIN_POSITIVE),
                points[peak].rate(points[peak].throughput),
                load_text(&points[peak])
            ));
        }
    }
    out
}

/// Growth of the device's await and queue, from the level before, that
/// says its I/Os queued instead of being served in parallel.
const QUEUED: f64 = 1.5;

/// Busy share under which a device is not judged out of room by its
/// queue alone.
const QUEUED_BUSY: f64 = 0.5;

/// A device that ran out though its busy share at the last level is under
/// [`super::hardware::SATURATED`]: throughput stopped growing at the last
/// level (the caller has ruled out a rise beyond the noise), each
/// operation one I/O of the device, while its queue and await grew with
/// the users — deeper queues only waited longer. A busy share is the time
/// with any I/O in flight: a device serving several at once can run out
/// short of 100%, and a noisy level can read under the one before.
pub(crate) fn queued(points: &[StepPoint]) -> Option<super::Bottleneck> {
    let [.., before, last] = points else {
        return None;
    };
    let disk =
        busiest_disk(last).filter(|d| d.utilisation >= QUEUED_BUSY && !others_io(last, d))?;
    let (queue, iops, awaited) = one_io_per_op(last, disk)?;
    let before_disk = before.resource(&disk.name)?;
    let (queue_before, _, await_before) = one_io_per_op(before, before_disk)?;
    let deeper = last.load / before.load.max(f64::MIN_POSITIVE);
    if deeper <= 1.0
        || queue < QUEUED * queue_before
        || awaited < QUEUED * await_before
        || await_before <= 0.0
    {
        return None;
    }
    let evidence = vec![
        format!(
            "throughput stopped growing: {} at {} → {} at {} (×{:.2} for ×{deeper:.2} the depth)",
            before.rate(before.throughput),
            load_text(before),
            last.rate(last.throughput),
            load_text(last),
            last.throughput / before.throughput.max(f64::MIN_POSITIVE),
        ),
        format!(
            "{}'s queue grew {queue_before:.1} → {queue:.1} and its await ×{:.1} ({} → {}) while it served no more: deeper queues only waited longer, so it had run out, though {} busy (the time with any I/O in flight)",
            disk.name,
            awaited / await_before,
            Latency::secs(await_before),
            Latency::secs(awaited),
            Percent(disk.utilisation)
        ),
        little_line(last, disk, queue, iops, awaited),
    ];
    Some(super::Bottleneck {
        kind: super::BottleneckKind::Resource,
        name: disk.name.clone(),
        evidence,
        ruled_out: Vec::new(),
        unreliable: false,
        next: None,
        resource: Some(disk.name.clone()),
    })
}
