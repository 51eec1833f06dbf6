//! The flush latency of a directory's device (`perflab doctor
//! --flush-latency DIR`), measured the way a database's commit meets it:
//! a page of 8 KiB written into a file perflab makes there and flushed
//! with `fdatasync`, one writer, one flush at a time, for a set time. The
//! file is written whole and synced before the first timed flush, so that
//! no flush carries a change of its size (a log segment is allocated
//! ahead the same way); the pages are written in turn through it. The
//! file is perflab's own (created new, never an existing one) and is
//! removed when the probe ends, however it ends.
//!
//! One session commits at most once per flush; a log on this device would
//! make each commit wait about this long, less what group commit shares.

use super::{Finding, Severity};
use crate::error::PlanError;
use crate::units::Latency;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A log page, as PostgreSQL's WAL writes it.
pub(crate) const PAGE: usize = 8192;
/// Pages the probe's file holds, written in turn: 1 MiB.
const FILE_PAGES: u64 = 128;
/// The most flushes a probe makes, however fast the device.
const MOST_FLUSHES: u64 = 200_000;
/// A median flush above this is a slow log device (a disk without a
/// write cache it may trust, a network volume): a warning.
const SLOW_FLUSH: Duration = Duration::from_millis(2);

/// What the probe measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FlushLatency {
    /// The directory, as given.
    pub(crate) dir: String,
    /// Flushes timed.
    pub(crate) flushes: u64,
    /// Their time, in seconds.
    pub(crate) seconds: f64,
    /// Each flush's time (the page's write and its fdatasync), in seconds.
    pub(crate) mean: f64,
    pub(crate) p50: f64,
    pub(crate) p95: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
}

impl FlushLatency {
    /// The finding the doctor prints: information, or a warning when the
    /// median flush is slow.
    pub(crate) fn finding(&self) -> Finding {
        let l = |s: f64| Latency::secs(s).to_string();
        let per_second = if self.p50 > 0.0 { 1.0 / self.p50 } else { 0.0 };
        Finding {
            severity: if self.p50 > SLOW_FLUSH.as_secs_f64() {
                Severity::Warning
            } else {
                Severity::Info
            },
            area: "storage".to_string(),
            title: format!(
                "flush latency of {}: p50 {}, p99 {}",
                self.dir,
                l(self.p50),
                l(self.p99)
            ),
            evidence: vec![
                format!(
                    "{} flushes of {} KiB (a write and fdatasync, one writer) in {:.1} s",
                    self.flushes,
                    PAGE / 1024,
                    self.seconds
                ),
                format!(
                    "mean {}, p50 {}, p95 {}, p99 {}, max {}",
                    l(self.mean),
                    l(self.p50),
                    l(self.p95),
                    l(self.p99),
                    l(self.max)
                ),
            ],
            why: format!(
                "a commit waits for its log's flush: one session commits at most about {per_second:.0} times a second with its log here, more sessions only as group commit shares a flush"
            ),
            fix: "for a log that must be durable, a device whose write cache survives a power loss flushes in microseconds; else group commits (commit_delay, innodb_flush_log_at_trx_commit) or accept losing the last ones (synchronous_commit=off)".to_string(),
        }
    }
}

/// The probe's file, removed when dropped.
struct ProbeFile {
    path: PathBuf,
    file: File,
}

impl ProbeFile {
    /// A new file in `dir` (never an existing one), written whole and
    /// synced.
    fn create(dir: &Path) -> std::io::Result<ProbeFile> {
        let path = dir.join(format!(
            ".perflab-flush-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        let probe = ProbeFile { path, file };
        let zeros = vec![0u8; PAGE];
        for page in 0..FILE_PAGES {
            probe.file.write_all_at(&zeros, page * PAGE as u64)?;
        }
        probe.file.sync_all()?;
        Ok(probe)
    }
}

impl Drop for ProbeFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Refuses a directory the probe cannot write in: one line naming it and
/// the flag that gave it.
fn refused(flag: &str, dir: &Path, why: impl std::fmt::Display) -> PlanError {
    PlanError::flag(
        flag,
        format!(
            "cannot write a probe file in {}: {why}",
            crate::util::clipped(&dir.display().to_string())
        ),
        "give a directory on the device to measure, one this user may write in",
    )
}

/// Times flushes in `dir` (given by `flag`) for `time` (at most
/// [`MOST_FLUSHES`]), stopping at the first Ctrl-C or SIGTERM after the
/// flush in progress.
pub(crate) fn measure(dir: &Path, time: Duration, flag: &str) -> anyhow::Result<FlushLatency> {
    if !dir.is_dir() {
        return Err(refused(flag, dir, "it is not a directory").into());
    }
    let probe = ProbeFile::create(dir).map_err(|e| refused(flag, dir, e))?;
    let mut histogram = crate::measure::new_histogram();
    let page = vec![0x5au8; PAGE];
    let (started, mut total, mut max) = (Instant::now(), Duration::ZERO, Duration::ZERO);
    let mut flushes = 0u64;
    while flushes < MOST_FLUSHES && (flushes == 0 || started.elapsed() < time) {
        crate::util::check_interrupt("timing flushes")?;
        let offset = (flushes % FILE_PAGES) * PAGE as u64;
        let t0 = Instant::now();
        probe
            .file
            .write_all_at(&page, offset)
            .and_then(|()| probe.file.sync_data())
            .map_err(|e| refused(flag, dir, e))?;
        let took = t0.elapsed();
        crate::measure::record(
            &mut histogram,
            took.as_nanos().try_into().unwrap_or(u64::MAX),
        );
        total += took;
        max = max.max(took);
        flushes += 1;
    }
    let at = |q: f64| histogram.value_at_quantile(q) as f64 / 1e9;
    Ok(FlushLatency {
        dir: dir.display().to_string(),
        flushes,
        seconds: total.as_secs_f64(),
        mean: total.as_secs_f64() / flushes.max(1) as f64,
        p50: at(0.50),
        p95: at(0.95),
        p99: at(0.99),
        max: max.as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a real directory: flushes were timed, their percentiles in
    /// order, and the probe's file is gone; nothing else in the
    /// directory was touched.
    #[test]
    fn the_probe_times_flushes_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("theirs"), "kept").unwrap();
        let m = measure(dir.path(), Duration::from_millis(200), "--flush-latency").unwrap();
        assert!(m.flushes >= 1, "{m:?}");
        // A write and a flush are two system calls: never under 100 ns,
        // whatever the device (a histogram that clamped would say 2 ns).
        assert!(m.p50 > 1e-7, "{m:?}");
        assert!(m.p50 <= m.p95 && m.p95 <= m.p99, "{m:?}");
        assert!(m.p99 <= m.max * 1.01 && m.mean <= m.max, "{m:?}");
        assert!(
            (m.mean * m.flushes as f64 - m.seconds).abs() < 1e-6,
            "{m:?}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["theirs"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("theirs")).unwrap(),
            "kept"
        );
    }

    #[test]
    fn a_slow_median_flush_is_a_warning_naming_the_commits_it_allows() {
        let m = FlushLatency {
            dir: "/var/lib/log".into(),
            flushes: 200,
            seconds: 2.0,
            mean: 0.010,
            p50: 0.008,
            p95: 0.020,
            p99: 0.030,
            max: 0.050,
        };
        let f = m.finding();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.title,
            "flush latency of /var/lib/log: p50 8.00ms, p99 30.0ms"
        );
        assert!(
            f.why.contains("at most about 125 times a second"),
            "{}",
            f.why
        );
        let fast = FlushLatency { p50: 0.0002, ..m };
        assert_eq!(fast.finding().severity, Severity::Info);
    }

    #[test]
    fn a_missing_directory_is_one_line_naming_the_flag() {
        let e = measure(
            Path::new("/nonexistent/perflab"),
            Duration::from_millis(10),
            "--flush-latency",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--flush-latency"), "{e}");
        assert!(e.contains("it is not a directory"), "{e}");
        assert_eq!(e.lines().count(), 1);
    }
}
