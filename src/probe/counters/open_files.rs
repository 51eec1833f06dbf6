//! A process's open files against its limit: the descriptors it holds
//! (the entries of /proc/PID/fd) and the soft limit on them (`Max open
//! files` in /proc/PID/limits, RLIMIT_NOFILE). A server at its limit can
//! accept no connection and open no file (EMFILE): nginx logs
//! "accept4() failed (24: Too many open files)" and answers 500 to the
//! requests whose file it cannot open; other servers refuse or stall.
//! Both files need ptrace access to the process (perflab's own, or root):
//! without it nothing is read, never a zero.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The process of a group nearest its open-file limit at an interval's
/// end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenFiles {
    pub pid: u32,
    /// Descriptors it held.
    pub files: u64,
    /// Its soft limit on them.
    pub limit: u64,
}

impl OpenFiles {
    /// The share of its limit it held (a limit of 0 counts as 1).
    pub(crate) fn share(&self) -> f64 {
        self.files as f64 / self.limit.max(1) as f64
    }

    /// The one of `processes` (pid, held and limit) nearest its limit.
    pub(crate) fn nearest(processes: impl Iterator<Item = (u32, (u64, u64))>) -> Option<Self> {
        processes
            .map(|(pid, (files, limit))| OpenFiles { pid, files, limit })
            .max_by(|a, b| a.share().total_cmp(&b.share()))
    }
}

/// Whether a process holding `files` descriptors is at its `limit`,
/// within 2% of it (at least 2): it is read at an interval's end, after
/// a failed accept or open closed what it had begun.
pub(crate) fn at_limit(files: u64, limit: u64) -> bool {
    limit > 0 && files.saturating_add(margin(limit)) >= limit
}

fn margin(limit: u64) -> u64 {
    (limit / 50).max(2)
}

/// Each followed process's soft limit, read once per process (its pid and
/// start time): /proc/PID/limits costs as much to read as its stat, and
/// a limit seldom changes under a running server. Those not seen at a
/// reading are forgotten at the next.
#[derive(Debug, Default)]
pub(crate) struct Limits {
    now: BTreeMap<u32, (u64, Option<u64>)>,
    before: BTreeMap<u32, (u64, Option<u64>)>,
}

impl Limits {
    /// Starts a reading of every group: what the last one did not see
    /// is dropped.
    pub(crate) fn begin(&mut self) {
        self.before = std::mem::take(&mut self.now);
    }

    /// The descriptors the process of /proc/PID `dir` holds and its soft
    /// limit on them; none when either cannot be read, the limit is
    /// unlimited, or its descriptor table (`FDSize` of its `status`
    /// text, never smaller than the descriptors it holds) is too small
    /// to reach the limit: then its fd directory is not listed.
    pub(crate) fn read(
        &mut self,
        dir: &Path,
        pid: u32,
        started: u64,
        status: &str,
    ) -> Option<(u64, u64)> {
        let known = self
            .now
            .get(&pid)
            .or_else(|| self.before.get(&pid))
            .filter(|(at, _)| *at == started)
            .copied();
        let (_, limit) = known.unwrap_or_else(|| {
            let limit = std::fs::read_to_string(dir.join("limits"))
                .ok()
                .and_then(|t| soft_limit(&t));
            (started, limit)
        });
        self.now.insert(pid, (started, limit));
        let limit = limit?;
        let table = fd_size(status);
        if table.is_some_and(|t| !at_limit(t, limit)) {
            return None;
        }
        let files = std::fs::read_dir(dir.join("fd")).ok()?.count();
        Some((u64::try_from(files).ok()?, limit))
    }
}

/// `FDSize` of a /proc/PID/status text: the slots of its descriptor
/// table.
fn fd_size(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("FDSize:"))?
        .trim()
        .parse()
        .ok()
}

/// The soft limit of the `Max open files` line of a /proc/PID/limits
/// text (`Max open files  1024  524288  files`); none when it is
/// `unlimited`, absent or not a number.
fn soft_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str =
        "Limit                     Soft Limit           Hard Limit           Units     \n\
Max cpu time              unlimited            unlimited            seconds   \n\
Max processes             95789                95789                processes \n\
Max open files            128                  524288               files     \n\
Max locked memory         8388608              8388608              bytes     \n";

    #[test]
    fn the_soft_limit_is_read_and_unlimited_or_garbage_is_none() {
        assert_eq!(soft_limit(LIMITS), Some(128));
        let unlimited = LIMITS.replace("128                  524288", "unlimited unlimited");
        assert_eq!(soft_limit(&unlimited), None);
        assert_eq!(soft_limit("Max open files   many  files"), None);
        assert_eq!(soft_limit("Max processes 12 12 processes"), None);
        assert_eq!(soft_limit(""), None);
    }

    fn own(limits: &mut Limits) -> Option<(u64, u64)> {
        let status = std::fs::read_to_string("/proc/self/status").expect("own status");
        limits.read(Path::new("/proc/self"), std::process::id(), 1, &status)
    }

    /// This process's descriptors and limit: its soft RLIMIT_NOFILE, read
    /// once; a table too small to reach it is not listed.
    #[test]
    fn this_process_holds_the_files_it_opened_under_the_limit_it_has() {
        let files: Vec<std::fs::File> = (0..5)
            .map(|_| std::fs::File::open("/proc/self/limits").expect("open"))
            .collect();
        let mut own_rlimit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given and nothing else.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut own_rlimit) },
            0
        );
        let mut limits = Limits::default();
        let status = std::fs::read_to_string("/proc/self/status").expect("own status");
        let table = fd_size(&status).expect("FDSize");
        match own(&mut limits) {
            Some((held, limit)) => {
                assert_eq!(limit, own_rlimit.rlim_cur);
                assert!(held >= 5 && held <= table, "{held} in a table of {table}");
            }
            None => assert!(!at_limit(table, own_rlimit.rlim_cur), "{table}"),
        }
        assert_eq!(
            limits.now.get(&std::process::id()),
            Some(&(1, Some(own_rlimit.rlim_cur)))
        );
        // A table as large as the limit is listed; the limit is not read
        // again (a fake one stands in for it).
        limits.now.insert(std::process::id(), (1, Some(table)));
        let (held, limit) = own(&mut limits).expect("listed");
        assert_eq!(limit, table);
        assert!(held >= 5, "{held}");
        // Forgotten after a reading that did not see it.
        limits.begin();
        limits.begin();
        assert!(limits.now.is_empty() && limits.before.is_empty());
        drop(files);
    }

    #[test]
    fn the_table_size_is_read_and_the_margin_is_two_percent() {
        assert_eq!(fd_size("Name:\tnginx\nFDSize:\t128\nGid:\t0\n"), Some(128));
        assert_eq!(fd_size("Name:\tnginx\n"), None);
        assert!(at_limit(126, 128) && !at_limit(125, 128));
        assert!(at_limit(1004, 1024) && !at_limit(1003, 1024));
        assert!(!at_limit(0, 0));
    }

    #[test]
    fn the_nearest_is_the_highest_share_not_the_most_files() {
        let near =
            OpenFiles::nearest([(1, (500, 65536)), (2, (120, 128)), (3, (0, 0))].into_iter());
        assert_eq!(
            near,
            Some(OpenFiles {
                pid: 2,
                files: 120,
                limit: 128
            })
        );
        assert_eq!(OpenFiles::nearest(std::iter::empty()), None);
    }
}
