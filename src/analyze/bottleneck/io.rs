//! Waits on storage that utilisation does not show. A throttled device, a
//! remote array or a cloud volume's IOPS limit keeps sessions waiting
//! while the device the host sees looks idle, so waits decide here, not
//! busy shares:
//!
//! - **commit I/O** — the sessions wait on the commit log (`WALWrite`,
//!   `WALSync`, `WALInsert`, a redo log file) in ≥ 30% of samples from the
//!   knee on, more than on anything but the CPU; or, with sessions queued
//!   on row locks, the log holds at least half of the samples of those not
//!   queued — the lock holders are the ones waiting on the log, and the
//!   lock queue is its symptom: each commit waits for the log's device. By Little's law the time a transaction waited is the
//!   sessions waiting over the throughput, which is set against the
//!   devices' own await to say where the time goes.
//! - **data reads** — the sessions wait on reading data (`DataFileRead`)
//!   or other I/O in ≥ 30% of samples: `memory → disk reads` when memory is
//!   short (the server's cgroup at its limit, stalls on memory, page
//!   faults), else the I/O path; with the database's buffer hit ratio and
//!   the server's own read bytes, since a database reading with read(2)
//!   shows no page faults.
//!
//! Where no wait sample names I/O at all (MariaDB and MySQL without
//! performance_schema call a running statement `CPU`), the server's own
//! counters decide instead ([`super::status`]): the log's fsyncs in flight
//! and their time against the response time for commit I/O, the reads in
//! flight against the users for data reads.

use super::super::capacity::load_text;
use super::super::demands::Demands;
use super::super::points::StepPoint;
use super::waits::{WaitMeaning, Waits};
use super::{memory_evidence, Bottleneck, BottleneckKind};
use super::{server_cgroup, status};
use crate::units::{Bytes, Latency, Percent};

/// Share of the sessions' samples from which a wait names the limit.
pub(crate) const DOMINANT: f64 = 0.3;

/// The verdict when the sessions mostly waited on storage.
pub(crate) fn verdict(
    points: &[StepPoint],
    from: usize,
    waits: &Waits,
    demands: &Demands,
) -> Option<Bottleneck> {
    let shares = Shares::of(waits);
    if shares.commit >= shares.reads
        && ((shares.commit >= DOMINANT && shares.commit > shares.rival)
            || shares.holders_on_the_log)
    {
        return commit_io(points, from, waits, &shares);
    }
    if shares.reads >= DOMINANT && shares.reads > shares.rival {
        return data_reads(points, from, waits, shares.reads, demands);
    }
    if shares.commit == 0.0 && shares.reads == 0.0 {
        return from_counters(points, from, demands);
    }
    None
}

/// Storage waits the server's counters show where no wait sample named
/// I/O: the log's flushes holding each commit, or reads in flight holding
/// the users, at the last step.
fn from_counters(points: &[StepPoint], from: usize, demands: &Demands) -> Option<Bottleneck> {
    let last = &points[points.len() - 1];
    let window = &points[from..];
    if let Some(flush) = status::commit_bound(last) {
        let mut evidence = vec![status::commit_evidence(last, &flush)];
        evidence.extend(
            status::row_lock_evidence(last)
                .map(|rows| format!("{rows}: the lock holders were the ones waiting on the log")),
        );
        evidence.extend(devices(window));
        return Some(commit_io_verdict(last, evidence, false));
    }
    let read = status::read_evidence(last)?;
    let mut evidence = vec![read];
    evidence.extend(
        read_figures(last)
            .into_iter()
            .filter(|l| !l.starts_with("the database found")),
    );
    evidence.extend(devices(window));
    Some(reads_verdict(points, from, evidence, demands))
}

/// Shares of the sessions' wait samples that decide between the log and
/// the data.
struct Shares {
    /// On the commit log.
    commit: f64,
    /// On reading data, or on other I/O.
    reads: f64,
    /// On anything but the CPU, I/O and the client.
    rival: f64,
    /// Queued on locks.
    locks: f64,
    /// On the log, of the samples neither queued on locks nor on the client.
    of_the_rest: f64,
    /// Sessions queue on locks while those not queued wait on the log.
    holders_on_the_log: bool,
}

impl Shares {
    fn of(waits: &Waits) -> Self {
        let commit = waits.share(|m| m == WaitMeaning::CommitLog);
        let reads = waits.share(|m| m == WaitMeaning::DataRead || m == WaitMeaning::OtherIo);
        let other =
            |m: WaitMeaning| m != WaitMeaning::Cpu && !m.is_io() && m != WaitMeaning::Client;
        let rival = waits.share(other);
        let locks = waits.share(WaitMeaning::is_contention);
        let clients = waits.share(|m| m == WaitMeaning::Client);
        let of_the_rest = commit / (1.0 - locks - clients).max(f64::MIN_POSITIVE);
        let holders_on_the_log = locks >= DOMINANT && commit >= 0.1 && of_the_rest >= 0.5;
        Shares {
            commit,
            reads,
            rival,
            locks,
            of_the_rest,
            holders_on_the_log,
        }
    }
}

/// Commit I/O: the sessions (or the lock holders) waited on the log.
fn commit_io(
    points: &[StepPoint],
    from: usize,
    waits: &Waits,
    shares: &Shares,
) -> Option<Bottleneck> {
    let last = &points[points.len() - 1];
    let window = &points[from..];
    let (event, _) = waits.top(|m| m == WaitMeaning::CommitLog)?;
    let mut evidence = vec![format!(
        "the database's sessions waited on the commit log ({event} most) in {} of samples from {} on",
        Percent(shares.commit),
        load_text(&points[from])
    )];
    if shares.holders_on_the_log {
        evidence.push(format!(
            "the sessions also queued on locks in {} of samples, and of those not queued {} waited on the log: the lock holders were committing, so the lock queue is the log's symptom",
            Percent(shares.locks),
            Percent(shares.of_the_rest)
        ));
    }
    evidence.extend(commit_time(last, shares.commit));
    evidence.extend(devices(window));
    Some(commit_io_verdict(last, evidence, true))
}

/// What the devices' line guesses of a wait above an idle device.
const PATH_GUESS: &str = "(a throttle, a remote or fsync-bound device)";

/// The commit I/O verdict on its evidence at the `last` step; `sampled`
/// when the sessions' waits showed it (else the server's counters did).
/// A write limit on the server's cgroup that its writes reached is named.
fn commit_io_verdict(last: &StepPoint, mut evidence: Vec<String>, sampled: bool) -> Bottleneck {
    let limit = server_cgroup::write_limit(last);
    if let Some(l) = &limit {
        // The path's guess gives way to the limit read from the cgroup.
        for line in &mut evidence {
            *line = line.replace(PATH_GUESS, "(the throttle on the server's cgroup)");
        }
        evidence.insert(1.min(evidence.len()), l.evidence(last));
    }
    let ruled_out = if sampled {
        "software contention: the sessions waited on the log, not on each other's locks"
    } else {
        "software contention: each commit's time went to the log's flushes, by the server's own counters, not to waiting on each other"
    };
    Bottleneck {
        kind: BottleneckKind::Resource,
        name: commit_name(last),
        evidence,
        ruled_out: vec![ruled_out.to_string()],
        unreliable: false,
        next: Some(limit.map_or_else(
            || "put the log on a faster device or one without a throttle, or group commits (commit_delay, synchronous_commit=off, innodb_flush_log_at_trx_commit=2 where losing the last commits is acceptable)"
                .to_string(),
            |l| l.next(),
        )),
        resource: None,
    }
}

/// The commit I/O verdict's name at the `last` step: the write limit of
/// the server's cgroup its writes reached, else the log's device.
pub(crate) fn commit_name(last: &StepPoint) -> String {
    match server_cgroup::write_limit(last) {
        Some(l) => format!("commit I/O ({})", l.name()),
        None => "commit I/O (the log's device)".to_string(),
    }
}

/// Data reads: the sessions waited on reading data, from a short memory or
/// a slow I/O path.
fn data_reads(
    points: &[StepPoint],
    from: usize,
    waits: &Waits,
    reads: f64,
    demands: &Demands,
) -> Option<Bottleneck> {
    let last = &points[points.len() - 1];
    let window = &points[from..];
    let (event, _) = waits.top(|m| m == WaitMeaning::DataRead || m == WaitMeaning::OtherIo)?;
    let mut evidence = vec![format!(
        "the database's sessions waited on reading data ({event} most) in {} of samples from {} on",
        Percent(reads),
        load_text(&points[from])
    )];
    evidence.extend(read_figures(last));
    evidence.extend(devices(window));
    Some(reads_verdict(points, from, evidence, demands))
}

/// The data reads verdict on its evidence: memory when the server was
/// short of it at a step from `from` on (the last such step's figures:
/// a cgroup's usage swings below its limit as the kernel reclaims, so
/// the last step alone can miss what the steps before it showed), else
/// the I/O path.
fn reads_verdict(
    points: &[StepPoint],
    from: usize,
    mut evidence: Vec<String>,
    demands: &Demands,
) -> Bottleneck {
    let memory = points[from..].iter().rev().find_map(memory_evidence);
    let short = memory.is_some();
    evidence.extend(memory.unwrap_or_default());
    // With the data in memory the reads go; the CPU is what is left.
    if let Some(cpu) = demands
        .resources
        .iter()
        .filter(|d| d.kind.is_cpu())
        .min_by(|a, b| a.bound.total_cmp(&b.bound))
    {
        evidence.push(format!(
            "with its reads served from memory, the next limit would be {} at about {}, {:.1}× the peak",
            cpu.resource,
            points[0].rate(cpu.bound),
            cpu.bound / points.iter().map(|p| p.throughput).fold(f64::MIN_POSITIVE, f64::max)
        ));
    }
    let (name, next) = if short {
        (
            "memory → disk reads",
            "give the server memory for its working set (or a smaller working set): every read it makes from disk is one it would serve from memory",
        )
    } else {
        (
            "disk reads (the I/O path)",
            "look at the path to the data's device: a throttle, a remote array or a volume's IOPS limit waits without showing the device busy",
        )
    };
    Bottleneck {
        kind: BottleneckKind::Resource,
        name: name.to_string(),
        evidence,
        ruled_out: vec![
            "software contention: the sessions waited on storage, not on each other's locks"
                .to_string(),
        ],
        unreliable: false,
        next: Some(next.to_string()),
        resource: None,
    }
}

/// The time each transaction waited on the log, by Little's law: the
/// users waiting at a time over the throughput.
fn commit_time(p: &StepPoint, share: f64) -> Option<String> {
    if p.throughput <= 0.0 || p.load <= 0.0 || !matches!(p.level, crate::plan::Level::Users(_)) {
        return None;
    }
    let waiting = share * p.load;
    let per_op = waiting / p.throughput;
    Some(format!(
        "at {} about {waiting:.1} users waited on the log at any time: {} of each operation's {} response, at {}",
        load_text(p),
        Latency::secs(per_op),
        Latency(p.response.mean),
        p.rate(p.throughput)
    ))
}

/// What the database and the server said of their reads.
fn read_figures(p: &StepPoint) -> Vec<String> {
    let mut out = Vec::new();
    let hit = p.db.get("blocks_hit").copied();
    let read = p.db.get("blocks_read").copied();
    let ratio = match (hit, read) {
        (Some(h), Some(r)) if h + r > 0.0 => Some(h / (h + r)),
        _ => {
            let requests = p.db.get("buffer_pool_read_requests").copied();
            let reads = p.db.get("buffer_pool_reads").copied();
            match (requests, reads) {
                (Some(q), Some(r)) if q > 0.0 => Some(1.0 - r / q),
                _ => None,
            }
        }
    };
    if let Some(ratio) = ratio {
        out.push(format!(
            "the database found {} of the blocks it needed in its buffers at {}",
            Percent(ratio),
            load_text(p)
        ));
    }
    if let Some(bytes) = p.extras.server_read_bytes_per_s.filter(|b| *b > 0.0) {
        out.push(format!(
            "the server read {}/s from storage at {} ({} per operation)",
            Bytes(bytes as u64),
            load_text(p),
            Bytes((bytes / p.throughput.max(f64::MIN_POSITIVE)) as u64)
        ));
    }
    out
}

/// The devices as the host saw them: busy shares, so a wait on a device
/// that looks idle is shown as such.
fn devices(window: &[StepPoint]) -> Option<String> {
    let p = window.last()?;
    let mut disks: Vec<&super::super::points::ResourceUse> = p
        .resources
        .iter()
        .filter(|r| r.kind == super::super::points::ResourceKind::Disk)
        .collect();
    disks.sort_by(|a, b| b.utilisation.total_cmp(&a.utilisation));
    let busy: Vec<String> = disks
        .iter()
        .take(3)
        .map(|d| {
            format!(
                "{} {}",
                d.name.trim_start_matches("disk "),
                Percent(d.utilisation)
            )
        })
        .collect();
    let top = disks.first()?.utilisation;
    let reading = if top < 0.5 {
        "the wait is in the path to the device (a throttle, a remote or fsync-bound device), not in its utilisation"
    } else {
        "busy, but short of saturated: the wait is in each I/O's latency as much as in the device's utilisation"
    };
    Some(format!(
        "the disks were at most {} busy at {} ({}): {reading}",
        Percent(top),
        load_text(p),
        busy.join(", ")
    ))
}
