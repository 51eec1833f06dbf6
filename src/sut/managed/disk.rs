//! The disk under a managed server, throttled for a lab
//! (`--disk-read-iops`, `--disk-write-iops`, `--disk-read-bps`,
//! `--disk-write-bps`): a limit on the I/O the server's processes send to
//! the block device holding its files, set in its cgroup — v1's
//! `blkio.throttle.*_device` files, v2's `io.max` (the kernel's
//! admin-guide/cgroup-v1/blkio-controller.rst and cgroup-v2.rst). The
//! device is the whole disk under the server's directory (a partition's
//! limit is set on its disk, where the kernel applies it).
//!
//! A throttle holds back the I/O a process issues itself: synchronous
//! writes (PostgreSQL's WAL with `wal_sync_method=open_datasync`, every
//! `fsync`) and reads. Under cgroup v1, buffered writes flushed later by
//! the kernel's writeback threads are not charged to the server.

use crate::error::PlanError;
use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The limits of the server's disk I/O, each `None` when not held.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoLimits {
    pub(crate) read_iops: Option<u64>,
    pub(crate) write_iops: Option<u64>,
    pub(crate) read_bps: Option<Bytes>,
    pub(crate) write_bps: Option<Bytes>,
}

impl IoLimits {
    /// Reads the four flags; `None` when none is given.
    pub(crate) fn from_flags(
        read_iops: Option<&str>,
        write_iops: Option<&str>,
        read_bps: Option<&str>,
        write_bps: Option<&str>,
    ) -> Result<Option<IoLimits>, PlanError> {
        let iops = |flag: &str, text: Option<&str>| {
            text.map(|t| {
                t.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        PlanError::flag(
                            flag,
                            format!("'{t}' is not a number of I/Os per second"),
                            &format!("e.g. {flag} 100"),
                        )
                    })
            })
            .transpose()
        };
        let bps = |flag: &str, text: Option<&str>| {
            text.map(|t| {
                Bytes::parse(t)
                    .and_then(|b| match b.0 >= 4096 {
                        true => Ok(b),
                        false => Err(format!("{b} a second is less than one page")),
                    })
                    .map_err(|e| PlanError::flag(flag, e, &format!("e.g. {flag} 10MiB")))
            })
            .transpose()
        };
        let limits = IoLimits {
            read_iops: iops("--disk-read-iops", read_iops)?,
            write_iops: iops("--disk-write-iops", write_iops)?,
            read_bps: bps("--disk-read-bps", read_bps)?,
            write_bps: bps("--disk-write-bps", write_bps)?,
        };
        Ok((limits != IoLimits::default()).then_some(limits))
    }

    /// The first of the flags given, for messages.
    pub(crate) fn flag(&self) -> &'static str {
        if self.read_iops.is_some() {
            "--disk-read-iops"
        } else if self.write_iops.is_some() {
            "--disk-write-iops"
        } else if self.read_bps.is_some() {
            "--disk-read-bps"
        } else {
            "--disk-write-bps"
        }
    }

    /// In words: `100 writes/s, 10.0 MiB/s read`.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.read_iops {
            parts.push(format!("{n} reads/s"));
        }
        if let Some(n) = self.write_iops {
            parts.push(format!("{n} writes/s"));
        }
        if let Some(b) = self.read_bps {
            parts.push(format!("{b}/s read"));
        }
        if let Some(b) = self.write_bps {
            parts.push(format!("{b}/s written"));
        }
        parts.join(", ")
    }

    /// cgroup v1: each `blkio.throttle.*_device` file and its line.
    pub(crate) fn v1_files(&self, device: (u32, u32)) -> Vec<(&'static str, String)> {
        let (major, minor) = device;
        [
            ("blkio.throttle.read_iops_device", self.read_iops),
            ("blkio.throttle.write_iops_device", self.write_iops),
            ("blkio.throttle.read_bps_device", self.read_bps.map(|b| b.0)),
            (
                "blkio.throttle.write_bps_device",
                self.write_bps.map(|b| b.0),
            ),
        ]
        .into_iter()
        .filter_map(|(file, n)| n.map(|n| (file, format!("{major}:{minor} {n}"))))
        .collect()
    }

    /// cgroup v1: the same files, each with the line that lifts its
    /// limit (`0`, no limit).
    pub(crate) fn v1_lifted(&self, device: (u32, u32)) -> Vec<(&'static str, String)> {
        let (major, minor) = device;
        self.v1_files(device)
            .into_iter()
            .map(|(file, _)| (file, format!("{major}:{minor} 0")))
            .collect()
    }

    /// cgroup v2: the `io.max` line that lifts each limit it sets (`max`).
    pub(crate) fn v2_lifted(&self, device: (u32, u32)) -> String {
        self.v2_with(device, |_| "max".to_string())
    }

    /// cgroup v2: the `io.max` line.
    pub(crate) fn v2_line(&self, device: (u32, u32)) -> String {
        self.v2_with(device, |n| n.to_string())
    }

    /// The `io.max` line with each limit set written by `value`.
    fn v2_with(&self, device: (u32, u32), value: impl Fn(u64) -> String) -> String {
        let (major, minor) = device;
        let mut line = format!("{major}:{minor}");
        for (key, n) in [
            ("riops", self.read_iops),
            ("wiops", self.write_iops),
            ("rbps", self.read_bps.map(|b| b.0)),
            ("wbps", self.write_bps.map(|b| b.0)),
        ] {
            if let Some(n) = n {
                line.push_str(&format!(" {key}={}", value(n)));
            }
        }
        line
    }
}

/// The server's disk I/O limits and the disk they hold on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IoThrottle {
    pub(crate) limits: IoLimits,
    /// The disk's major and minor numbers.
    pub(crate) device: (u32, u32),
    /// Its name (`vda`).
    pub(crate) disk: String,
}

/// The throttle of `limits` on the disk under `dir` (a managed server's).
pub(crate) fn throttle_under(dir: &Path, limits: &IoLimits) -> Result<IoThrottle, PlanError> {
    let (device, disk) = disk_of(dir, Path::new("/sys"), limits.flag())?;
    Ok(IoThrottle {
        limits: limits.clone(),
        device,
        disk,
    })
}

/// The whole disk holding `path` (its major and minor numbers, and its
/// name), under `sys` (`/sys`); one line naming the fix when the path is
/// on no block device (a tmpfs, an overlay).
pub(crate) fn disk_of(
    path: &Path,
    sys: &Path,
    flag: &str,
) -> Result<((u32, u32), String), PlanError> {
    use std::os::unix::fs::MetadataExt;
    let not_block = |what: String| {
        PlanError::flag(
            flag,
            format!(
                "the server's files in {} are {what}, and a disk throttle needs a block device",
                path.display()
            ),
            "put TMPDIR on a disk (the managed server's files go there), or drop the flag",
        )
    };
    let dev = std::fs::metadata(path)
        .map_err(|e| not_block(format!("unreadable ({e})")))?
        .dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let block = sys.join(format!("dev/block/{major}:{minor}"));
    if major == 0 || !block.exists() {
        return Err(not_block("on no block device".to_string()));
    }
    // A partition's directory sits in its disk's: the disk's `dev` is
    // where the throttle goes.
    let disk = match block.join("partition").exists() {
        true => block.join(".."),
        false => block,
    };
    let numbers = std::fs::read_to_string(disk.join("dev")).unwrap_or_default();
    let parsed = numbers
        .trim()
        .split_once(':')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| not_block("on a device whose numbers cannot be read".to_string()))?;
    let name = std::fs::canonicalize(&disk)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("{}:{}", parsed.0, parsed.1));
    Ok((parsed, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_become_the_kernels_lines() {
        assert_eq!(IoLimits::from_flags(None, None, None, None).unwrap(), None);
        let l = IoLimits::from_flags(None, Some("100"), None, Some("10MiB"))
            .unwrap()
            .unwrap();
        assert_eq!(l.describe(), "100 writes/s, 10.0 MiB/s written");
        assert_eq!(
            l.v1_files((254, 0)),
            vec![
                ("blkio.throttle.write_iops_device", "254:0 100".to_string()),
                (
                    "blkio.throttle.write_bps_device",
                    "254:0 10485760".to_string()
                ),
            ]
        );
        assert_eq!(l.v2_line((8, 16)), "8:16 wiops=100 wbps=10485760");
        // Lifted while a workload prepares its data, the same files.
        assert_eq!(
            l.v1_lifted((254, 0)),
            vec![
                ("blkio.throttle.write_iops_device", "254:0 0".to_string()),
                ("blkio.throttle.write_bps_device", "254:0 0".to_string()),
            ]
        );
        assert_eq!(l.v2_lifted((8, 16)), "8:16 wiops=max wbps=max");
        assert_eq!(l.flag(), "--disk-write-iops");
        for (args, flag) in [
            ([Some("0"), None, None, None], "--disk-read-iops"),
            ([None, Some("many"), None, None], "--disk-write-iops"),
            ([None, None, Some("12"), None], "--disk-read-bps"),
            ([None, None, None, Some("fast")], "--disk-write-bps"),
        ] {
            let e = IoLimits::from_flags(args[0], args[1], args[2], args[3]).unwrap_err();
            assert!(e.to_string().contains(flag), "{e}");
        }
    }

    #[test]
    fn a_partition_is_throttled_on_its_disk() {
        let sys = tempfile::tempdir().unwrap();
        let disk = sys.path().join("devices/virtual/block/vdb");
        std::fs::create_dir_all(disk.join("vdb1")).unwrap();
        std::fs::write(disk.join("dev"), "252:16\n").unwrap();
        std::fs::write(disk.join("vdb1/dev"), "252:17\n").unwrap();
        std::fs::write(disk.join("vdb1/partition"), "1\n").unwrap();
        std::fs::create_dir_all(sys.path().join("dev/block")).unwrap();
        // The real device of a real path, mapped to the fixture's partition.
        let here = tempfile::tempdir().unwrap();
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(here.path()).unwrap().dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        std::os::unix::fs::symlink(
            disk.join("vdb1"),
            sys.path().join(format!("dev/block/{major}:{minor}")),
        )
        .unwrap();
        let found = disk_of(here.path(), sys.path(), "--disk-write-iops");
        if major == 0 {
            assert!(found.unwrap_err().to_string().contains("no block device"));
        } else {
            assert_eq!(found.unwrap(), ((252, 16), "vdb".to_string()));
        }
        let e = disk_of(Path::new("/proc"), sys.path(), "--disk-write-iops").unwrap_err();
        assert!(e.to_string().contains("needs a block device"), "{e}");
    }
}
