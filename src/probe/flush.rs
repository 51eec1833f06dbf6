//! The flush latency of a directory's device, measured the way a
//! database's commit meets it: a page of 8 KiB written into a file perflab
//! makes there and flushed with `fdatasync`, one writer, one flush at a
//! time, for a set time. The file is written whole and synced before the
//! first timed flush, so that no flush carries a change of its size (a
//! log segment is allocated ahead the same way); the pages are written in
//! turn through it. The file is perflab's own (created new, never an
//! existing one) and is removed when the probe ends, however it ends.
//! Used by `perflab doctor --flush-latency DIR`, by a managed server whose
//! log was moved (`--log-dir`) and by the log's what-if
//! (`analyze --log-flush-dir`).
//!
//! One session commits at most once per flush; a log on this device would
//! make each commit wait about this long, less what group commit shares.

use crate::error::PlanError;
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
