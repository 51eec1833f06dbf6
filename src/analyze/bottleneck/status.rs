//! What the server's own status counters say where its sessions' waits do
//! not: MariaDB and MySQL without performance_schema (their default) show a
//! running statement as `CPU` whatever it waits on, and a user without the
//! PROCESS privilege shows no waits at all. Their SHOW GLOBAL STATUS
//! counters still tell where each operation's time went, by Little's law
//! on the server's own queues:
//!
//! - **commit I/O** — the log's fsyncs in flight on average
//!   (`Innodb_os_log_pending_fsyncs`, read ten times a second; MySQL and
//!   MariaDB before 10.8, see [`commit_flush`]) over the fsyncs per second is the
//!   time each fsync took; a commit waits for at least one, so when that
//!   time is ≥ 30% of the mean response time and the log was flushing
//!   ≥ 30% of the time, the log's flushes set the pace. The fsyncs per
//!   commit say whether commits were grouped.
//! - **row locks** — `Innodb_row_lock_time` over the operations is the time
//!   each waited on row locks; ≥ 30% of the response time is contention.
//! - **reads** — the reads in flight (`Innodb_data_pending_reads`) over the
//!   users is the share of the users' time spent reading; with the buffer
//!   pool's misses (`Innodb_buffer_pool_reads` against its read requests).
//!
//! Counters a server does not have are left out, and a figure that cannot
//! be computed is no evidence either way.

use super::super::capacity::load_text;
use super::super::points::StepPoint;
use crate::units::{Bytes, Latency, Percent};

/// Share of the response time from which a wait the counters show names
/// the limit (as a wait class's share of samples does).
pub(crate) const DOMINANT: f64 = 0.3;

/// The log's flushes at one step, from the server's counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CommitFlush {
    /// Fsyncs per committed transaction (below 1: commits were grouped).
    pub(crate) fsyncs_per_commit: f64,
    /// Fsyncs in flight on average: the share of time the log flushed.
    pub(crate) in_flight: f64,
    /// Seconds each fsync took (in flight over fsyncs per second).
    pub(crate) per_fsync_s: f64,
    /// That time over the mean response time.
    pub(crate) share: f64,
}

/// The step's measured window, seconds.
fn window_s(p: &StepPoint) -> Option<f64> {
    (p.throughput > 0.0 && p.completed > 0).then(|| p.completed as f64 / p.throughput)
}

/// The log's flushes at step `p`, from the log's own fsync counters
/// (MySQL, MariaDB before 10.8). MariaDB 10.8+ counts its log's fsyncs
/// among the data files' and has no gauge of them in flight (its
/// `Innodb_data_pending_fsyncs` stays 0 while its log flushes a thousand
/// times a second, and the log's LSN is ahead of its flush whenever a
/// transaction has written, fast disk or not): there nothing is said.
pub(crate) fn commit_flush(p: &StepPoint) -> Option<CommitFlush> {
    let db = &p.db;
    let (fsyncs, pending) = (*db.get("log_fsyncs")?, *db.get("log_fsyncs_pending")?);
    let looks = *db.get("pending_looks")?;
    let commits = db
        .get("commits")
        .copied()
        .filter(|c| *c > 0.0)
        .or_else(|| db.get("handler_commits").copied())
        .filter(|c| *c > 0.0)?;
    let window = window_s(p)?;
    if fsyncs <= 0.0 || looks <= 0.0 {
        return None;
    }
    let in_flight = pending / looks;
    let per_fsync_s = in_flight / (fsyncs / window);
    Some(CommitFlush {
        fsyncs_per_commit: fsyncs / commits,
        in_flight,
        per_fsync_s,
        share: per_fsync_s / p.response_s().max(f64::MIN_POSITIVE),
    })
}

/// The log's flushes set the pace at step `p`.
pub(crate) fn commit_bound(p: &StepPoint) -> Option<CommitFlush> {
    commit_flush(p).filter(|f| f.share >= DOMINANT && f.in_flight >= DOMINANT)
}

/// The evidence of commit I/O at step `p`, from the counters.
pub(crate) fn commit_evidence(p: &StepPoint, f: &CommitFlush) -> String {
    format!(
        "at {} the server's log was flushing {} of the time (fsyncs in flight, SHOW GLOBAL STATUS), each fsync taking {} by Little's law: {} of each operation's {} response, with {:.2} fsyncs per commit{}",
        load_text(p),
        Percent(f.in_flight.min(1.0)),
        Latency::secs(f.per_fsync_s),
        Percent(f.share.min(1.0)),
        Latency(p.response.mean),
        f.fsyncs_per_commit,
        if f.fsyncs_per_commit < 0.9 {
            " (commits grouped into each flush)"
        } else {
            ""
        }
    )
}

/// Row-lock waits at step `p`: waits per operation, seconds waited per
/// operation, and that over the mean response time.
pub(crate) fn row_locks(p: &StepPoint) -> Option<(f64, f64, f64)> {
    let waited_ms = *p.db.get("row_lock_time_ms")?;
    let waits = p.db.get("row_lock_waits").copied().unwrap_or(0.0);
    let ops = p.completed as f64;
    if ops <= 0.0 || waited_ms <= 0.0 {
        return None;
    }
    let per_op = waited_ms / 1e3 / ops;
    Some((
        waits / ops,
        per_op,
        per_op / p.response_s().max(f64::MIN_POSITIVE),
    ))
}

/// The evidence of row-lock contention at step `p`, from the counters,
/// when its time is a real share of the response time.
pub(crate) fn row_lock_evidence(p: &StepPoint) -> Option<String> {
    let (waits, per_op, share) = row_locks(p).filter(|(_, _, s)| *s >= DOMINANT)?;
    Some(format!(
        "at {} each operation waited {} on InnoDB row locks ({waits:.2} waits per operation, Innodb_row_lock_time): {} of its {} response",
        load_text(p),
        Latency::secs(per_op),
        Percent(share.min(1.0)),
        Latency(p.response.mean)
    ))
}

/// Reads at step `p`: the share of the users' time spent reading (reads in
/// flight over the users, closed loops), and the buffer pool's misses as a
/// share of its read requests.
pub(crate) fn reads(p: &StepPoint) -> Option<(f64, Option<f64>)> {
    let pending = *p.db.get("data_reads_pending")?;
    let looks = *p.db.get("pending_looks")?;
    if looks <= 0.0 || p.load <= 0.0 || !matches!(p.level, crate::plan::Level::Users(_)) {
        return None;
    }
    let misses = match (
        p.db.get("buffer_pool_reads"),
        p.db.get("buffer_pool_read_requests"),
    ) {
        (Some(r), Some(q)) if *q > 0.0 => Some(r / q),
        _ => None,
    };
    Some(((pending / looks) / p.load, misses))
}

/// The least share of its read requests a buffer pool misses for it to be
/// short of memory when the tables' size is unknown (a pool that holds its
/// tables misses its odd first touch of a page, far less).
const POOL_MISSES: f64 = 0.01;

/// The least share when the tables are known to be larger than the pool:
/// every miss is then a page the pool had no room for, and a random read
/// of one row makes a dozen read requests or more (the index's levels,
/// the row's page), so a pool half the tables' size misses near 1%, on
/// either side of it from one run to the next.
const POOL_MISSES_SHORT: f64 = 0.001;

/// The evidence that InnoDB's buffer pool is short of the data at step
/// `p`: it is smaller than the tables (when performance_schema reported
/// them) and missed at least [`POOL_MISSES_SHORT`] of its read requests,
/// or, the tables' size unknown, at least [`POOL_MISSES`].
pub(crate) fn pool_evidence(p: &StepPoint) -> Option<String> {
    let asked =
        p.db.get("buffer_pool_read_requests")
            .filter(|q| **q > 0.0)?;
    let misses = p.db.get("buffer_pool_reads")? / asked;
    let pool = p.db.get("buffer_pool_pages")? * p.db.get("page_bytes")?;
    let data: f64 =
        p.db.iter()
            .filter(|(k, _)| k.starts_with(crate::probe::RELATION_BYTES))
            .map(|(_, v)| *v)
            .sum();
    let (floor, tables) = if data > 0.0 {
        if data <= pool {
            return None;
        }
        (
            POOL_MISSES_SHORT,
            format!(" for its tables' {}", Bytes(data as u64)),
        )
    } else {
        (POOL_MISSES, String::new())
    };
    if misses < floor {
        return None;
    }
    Some(format!(
        "InnoDB's buffer pool of {} (innodb_buffer_pool_size){tables} missed {} of its read requests at {} (Innodb_buffer_pool_reads): its working set does not fit",
        Bytes(pool as u64),
        Percent(misses),
        load_text(p)
    ))
}

/// The evidence of reads setting the pace at step `p`, from the counters.
pub(crate) fn read_evidence(p: &StepPoint) -> Option<String> {
    let (share, misses) = reads(p).filter(|(s, _)| *s >= DOMINANT)?;
    Some(format!(
        "at {} the users spent {} of their time waiting on data reads (reads in flight, SHOW GLOBAL STATUS){}",
        load_text(p),
        Percent(share.min(1.0)),
        misses.map_or_else(String::new, |m| format!(
            ", the buffer pool missing {} of its read requests",
            Percent(m)
        ))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::fixture::mva_points;
    use std::time::Duration;

    /// A step of 10 s at 32 users and 320/s, each operation 100 ms.
    fn step() -> StepPoint {
        let mut p = mva_points(0.0004, 0.0006, 0.0, &[32]).remove(0);
        p.throughput = 320.0;
        p.completed = 3200;
        p.response.mean = Duration::from_millis(100);
        p
    }

    /// A server with the log's own gauge: one fsync in flight nearly all
    /// the time, ten a second, so each took ~95 ms of a 100 ms response;
    /// 32 commits per flush.
    #[test]
    fn a_log_flushing_all_the_time_holds_each_commit() {
        let mut p = step();
        for (k, v) in [
            ("commits", 3200.0),
            ("log_fsyncs", 100.0),
            ("log_fsyncs_pending", 95.0),
            ("pending_looks", 100.0),
        ] {
            p.db.insert(k.to_string(), v);
        }
        let f = commit_bound(&p).expect("commit-bound");
        assert!((f.per_fsync_s - 0.095).abs() < 1e-9, "{f:?}");
        assert!((f.fsyncs_per_commit - 1.0 / 32.0).abs() < 1e-9);
        let text = commit_evidence(&p, &f);
        assert!(text.contains("commits grouped"), "{text}");
        // Fast flushes, one per commit: a sliver of the response time.
        p.db.insert("log_fsyncs".to_string(), 3200.0);
        p.db.insert("log_fsyncs_pending".to_string(), 2.0);
        let f = commit_flush(&p).unwrap();
        assert!(f.share < DOMINANT && commit_bound(&p).is_none(), "{f:?}");
        // Without the gauge's looks, or with the data files' fsyncs alone
        // (MariaDB 10.8+), nothing is said.
        p.db.remove("pending_looks");
        assert_eq!(commit_flush(&p), None);
        p.db.insert("pending_looks".to_string(), 100.0);
        p.db.remove("log_fsyncs");
        p.db.insert("data_fsyncs".to_string(), 100.0);
        p.db.insert("data_fsyncs_pending".to_string(), 95.0);
        assert_eq!(commit_flush(&p), None);
    }

    /// Row-lock time that is most of the response time is contention;
    /// a sliver is not.
    #[test]
    fn row_lock_time_is_weighed_against_the_response_time() {
        let mut p = step();
        p.db.insert("row_lock_waits".to_string(), 3200.0);
        p.db.insert("row_lock_time_ms".to_string(), 3200.0 * 60.0);
        let (waits, per_op, share) = row_locks(&p).unwrap();
        assert!((waits - 1.0).abs() < 1e-9 && (per_op - 0.06).abs() < 1e-9);
        assert!((share - 0.6).abs() < 1e-9);
        assert!(row_lock_evidence(&p).unwrap().contains("60.0ms"));
        p.db.insert("row_lock_time_ms".to_string(), 3200.0 * 5.0);
        assert_eq!(row_lock_evidence(&p), None);
    }

    /// A pool smaller than its tables is short at a few misses in a
    /// thousand; without the tables' size it takes one in a hundred, and a
    /// pool that holds its tables is never short.
    #[test]
    fn a_pool_smaller_than_its_tables_is_short_from_a_few_misses_in_a_thousand() {
        let mut p = step();
        for (k, v) in [
            ("buffer_pool_reads", 4.0),
            ("buffer_pool_read_requests", 1000.0),
            ("buffer_pool_pages", 760.0),
            ("page_bytes", 16384.0),
        ] {
            p.db.insert(k.to_string(), v);
        }
        assert_eq!(pool_evidence(&p), None, "0.4% with the tables unknown");
        let key = format!("{}accounts", crate::probe::RELATION_BYTES);
        p.db.insert(key.clone(), 25.6 * 1048576.0);
        let said = pool_evidence(&p).expect("a pool of 11.9 MiB for 25.6 MiB");
        assert!(said.contains("missed 0.4%"), "{said}");
        p.db.insert("buffer_pool_reads".to_string(), 0.5);
        assert_eq!(pool_evidence(&p), None, "0.05% is a pool's first touches");
        p.db.insert("buffer_pool_reads".to_string(), 40.0);
        p.db.insert(key, 8.0 * 1048576.0);
        assert_eq!(pool_evidence(&p), None, "a pool that holds its tables");
    }

    /// Reads in flight over the users: half the users reading at a time.
    #[test]
    fn reads_in_flight_are_the_users_time_reading() {
        let mut p = step();
        for (k, v) in [
            ("data_reads_pending", 1600.0),
            ("pending_looks", 100.0),
            ("buffer_pool_reads", 50.0),
            ("buffer_pool_read_requests", 1000.0),
        ] {
            p.db.insert(k.to_string(), v);
        }
        let (share, misses) = reads(&p).unwrap();
        assert!((share - 0.5).abs() < 1e-9 && misses == Some(0.05));
        assert!(read_evidence(&p).unwrap().contains("5.0%"));
    }
}
