//! What the database's sessions waited on, by what it means for the
//! verdict. PostgreSQL names a wait `Type:Event` (pg_stat_activity's
//! `wait_event_type` and `wait_event`; the events are listed in the
//! PostgreSQL manual, "Wait Event Types", table 28.4 onwards); MariaDB's
//! sampler maps its sessions' states onto the same vocabulary. Runs stored
//! before event names were sampled carry the type alone (`Lock`, `IO`).
//!
//! - `LWLock:WALWrite`, `LWLock:WALInsert`, `IO:WALSync`, `IO:WALWrite`, … →
//!   the commit log: commits wait for the log's device, busy or not (a
//!   throttled, remote or fsync-bound device shows as long waits, not as
//!   utilisation).
//! - `IO:DataFileRead`, `IO:DataFilePrefetch`, `IO:data file` → reads that
//!   missed the database's memory.
//! - `Lock:transactionid`, `Lock:tuple`, `Lock:row lock` → row contention;
//!   other `Lock:` events → heavier locks (relations, advisory).
//! - other `LWLock:` events → the server's internal locks.
//! - `Client:` → the server waiting on its client or the network between.
//! - `CPU` → an active session not waiting: on a CPU, or runnable.

use super::super::points::StepPoint;
use std::collections::BTreeMap;

/// What a wait means for the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WaitMeaning {
    Cpu,
    Client,
    CommitLog,
    DataRead,
    OtherIo,
    RowLock,
    OtherLock,
    InternalLock,
    Other,
}

impl WaitMeaning {
    /// Reads a sampled wait key (`Type:Event`, or a stored type alone).
    pub(crate) fn of(key: &str) -> Self {
        let (class, event) = key.split_once(':').unwrap_or((key, ""));
        match (class, event) {
            ("CPU", _) => WaitMeaning::Cpu,
            ("Client", _) => WaitMeaning::Client,
            ("LWLock", e) | ("IO", e) if e.starts_with("WAL") || e == "log file" => {
                WaitMeaning::CommitLog
            }
            ("IO", "DataFileRead" | "DataFilePrefetch" | "data file") => WaitMeaning::DataRead,
            ("IO", _) => WaitMeaning::OtherIo,
            ("Lock", "transactionid" | "tuple" | "row lock") => WaitMeaning::RowLock,
            ("Lock", _) => WaitMeaning::OtherLock,
            ("LWLock", _) => WaitMeaning::InternalLock,
            _ => WaitMeaning::Other,
        }
    }

    /// Waits that are the server's own contention between sessions.
    pub(crate) fn is_contention(self) -> bool {
        matches!(
            self,
            WaitMeaning::RowLock | WaitMeaning::OtherLock | WaitMeaning::InternalLock
        )
    }

    /// Waits on storage.
    pub(crate) fn is_io(self) -> bool {
        matches!(
            self,
            WaitMeaning::CommitLog | WaitMeaning::DataRead | WaitMeaning::OtherIo
        )
    }
}

/// The sessions' wait samples over a range of steps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Waits {
    /// Samples per key.
    pub(crate) by_key: BTreeMap<String, u64>,
    pub(crate) total: u64,
}

impl Waits {
    /// The samples of `points`.
    pub(crate) fn over(points: &[StepPoint]) -> Self {
        let mut by_key = BTreeMap::new();
        for p in points {
            for (k, v) in &p.waits {
                *by_key.entry(k.clone()).or_insert(0) += v;
            }
        }
        let total = by_key.values().sum();
        Waits { by_key, total }
    }

    /// Share of samples whose meaning passes `keep`.
    pub(crate) fn share(&self, keep: impl Fn(WaitMeaning) -> bool) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let n: u64 = self
            .by_key
            .iter()
            .filter(|(k, _)| keep(WaitMeaning::of(k)))
            .map(|(_, n)| n)
            .sum();
        n as f64 / self.total as f64
    }

    /// The most sampled key whose meaning passes `keep`, with its share.
    pub(crate) fn top(&self, keep: impl Fn(WaitMeaning) -> bool) -> Option<(&str, f64)> {
        self.by_key
            .iter()
            .filter(|(k, _)| keep(WaitMeaning::of(k)))
            .max_by_key(|(_, n)| **n)
            .filter(|_| self.total > 0)
            .map(|(k, n)| (k.as_str(), *n as f64 / self.total as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_events_mean_what_an_engineer_reads_in_them() {
        for (key, meaning) in [
            ("LWLock:WALWrite", WaitMeaning::CommitLog),
            ("LWLock:WALInsert", WaitMeaning::CommitLog),
            ("IO:WALSync", WaitMeaning::CommitLog),
            ("IO:log file", WaitMeaning::CommitLog),
            ("IO:DataFileRead", WaitMeaning::DataRead),
            ("IO:BufFileRead", WaitMeaning::OtherIo),
            ("Lock:transactionid", WaitMeaning::RowLock),
            ("Lock:tuple", WaitMeaning::RowLock),
            ("Lock:row lock", WaitMeaning::RowLock),
            ("Lock:relation", WaitMeaning::OtherLock),
            ("Lock", WaitMeaning::OtherLock),
            ("LWLock:BufferMapping", WaitMeaning::InternalLock),
            ("LWLock", WaitMeaning::InternalLock),
            ("Client:ClientRead", WaitMeaning::Client),
            ("Client", WaitMeaning::Client),
            ("CPU", WaitMeaning::Cpu),
            ("IPC:ProcArrayGroupUpdate", WaitMeaning::Other),
        ] {
            assert_eq!(WaitMeaning::of(key), meaning, "{key}");
        }
    }
}
