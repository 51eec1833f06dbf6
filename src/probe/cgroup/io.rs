//! A cgroup's block I/O: the limits that bind it on each device (v1
//! `blkio.throttle.*_device`, v2 `io.max`, the lowest of each kind along
//! its path, named after the cgroup it is set on), the I/Os and bytes its
//! tasks issued (v1 `blkio.throttle.io_serviced`/`io_service_bytes`, v2
//! `io.stat`), and its I/O stalls (`io.pressure`). Devices are named
//! through `/sys/dev/block/MAJ:MIN/uevent`.

use super::{relative, text, CgroupCounters, CgroupDirs, Hierarchy};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A cgroup's I/O on one device over one interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct CgroupIoSample {
    pub(crate) device: String,
    pub(crate) reads_per_s: f64,
    pub(crate) writes_per_s: f64,
    pub(crate) read_bytes_per_s: f64,
    pub(crate) write_bytes_per_s: f64,
}

/// The block-I/O limits a cgroup sets on one device; None is no limit.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct IoLimit {
    /// The device's name (`vda`, `loop0`, `dm-0`), or `MAJ:MIN` when sysfs
    /// does not name it.
    pub(crate) device: String,
    /// The device's number, `MAJ:MIN` (empty in runs stored before it
    /// was kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) number: String,
    /// The cgroup the lowest limit is set on (its path in its hierarchy).
    pub(crate) cgroup: String,
    /// That cgroup's directory as the host names it
    /// (`/sys/fs/cgroup/blkio/lab/db`; empty in runs stored before it was
    /// kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) dir: String,
    pub(crate) read_iops: Option<u64>,
    pub(crate) write_iops: Option<u64>,
    /// Bytes per second.
    pub(crate) read_bps: Option<u64>,
    pub(crate) write_bps: Option<u64>,
    /// `blkio throttle` (v1) or `io.max` (v2).
    pub(crate) interface: String,
}

impl IoLimit {
    #[cfg(test)]
    /// The limits in words: `1000 read IOPS`, `2 MiB/s written`.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.read_iops {
            parts.push(format!("{n} read IOPS"));
        }
        if let Some(n) = self.write_iops {
            parts.push(format!("{n} write IOPS"));
        }
        if let Some(n) = self.read_bps {
            parts.push(format!("{}/s read", crate::units::Bytes(n)));
        }
        if let Some(n) = self.write_bps {
            parts.push(format!("{}/s written", crate::units::Bytes(n)));
        }
        parts.join(", ")
    }
}

/// A cgroup's I/O on one device since it was made.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct IoCounters {
    pub(crate) device: String,
    pub(crate) read_ios: u64,
    pub(crate) write_ios: u64,
    pub(crate) read_bytes: u64,
    pub(crate) write_bytes: u64,
}

/// A device's name from its number: `DEVNAME=` of
/// `SYS/dev/block/MAJ:MIN/uevent`, else the number itself.
fn device_name(sys: &Path, majmin: &str) -> String {
    text(&sys.join("dev/block").join(majmin), "uevent")
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("DEVNAME="))
                .map(|n| n.trim().to_string())
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| majmin.to_string())
}

/// Where a limit is set: the cgroup's path in its hierarchy, and its
/// directory as the host names it.
#[derive(Clone)]
struct SetOn {
    cgroup: String,
    dir: String,
}

impl SetOn {
    /// The cgroup of directory `dir` in hierarchy `h`, whose mount the
    /// host names `mount_name` (`/sys/fs/cgroup/blkio`).
    fn new(h: &Hierarchy, mount_name: &str, dir: &Path) -> Self {
        let cgroup = relative(&h.mount, dir);
        let dir = format!(
            "{}/{}",
            mount_name.trim_end_matches('/'),
            cgroup.trim_start_matches('/')
        );
        SetOn {
            dir: dir.trim_end_matches('/').to_string(),
            cgroup,
        }
    }
}

/// A device's lowest limit of each kind (read IOPS, write IOPS, read
/// bytes/s, write bytes/s), each with the cgroup it is set on.
type KindLimits = [Option<(u64, SetOn)>; 4];

/// The block-I/O limits found along a cgroup's path so far: per device
/// number, the lowest of each kind (read IOPS, write IOPS, read B/s,
/// write B/s) with the cgroup it sits in.
#[derive(Default)]
struct LimitsFound(Vec<(String, KindLimits)>);

impl LimitsFound {
    /// A limit of `kind` on `dev`, set in cgroup `at`: kept when it is the
    /// lowest so far.
    fn consider(&mut self, dev: &str, kind: usize, n: u64, at: &SetOn) {
        let i = match self.0.iter().position(|(d, _)| d == dev) {
            Some(i) => i,
            None => {
                self.0.push((dev.to_string(), KindLimits::default()));
                self.0.len() - 1
            }
        };
        let slot = &mut self.0[i].1[kind];
        if slot.as_ref().is_none_or(|(m, _)| n < *m) {
            *slot = Some((n, at.clone()));
        }
    }

    /// One [`IoLimit`] per device that has any, named after the cgroup its
    /// tightest limit sits in.
    fn into_limits(self, sys: &Path, interface: &str) -> Vec<IoLimit> {
        self.0
            .into_iter()
            .filter(|(_, kinds)| kinds.iter().any(Option::is_some))
            .map(|(dev, kinds)| {
                let at = kinds.iter().flatten().map(|(_, at)| at.clone()).next();
                let [r, w, rb, wb] = kinds.map(|k| k.map(|(n, _)| n));
                IoLimit {
                    device: device_name(sys, &dev),
                    cgroup: at.as_ref().map(|a| a.cgroup.clone()).unwrap_or_default(),
                    dir: at.map(|a| a.dir).unwrap_or_default(),
                    number: dev,
                    read_iops: r,
                    write_iops: w,
                    read_bps: rb,
                    write_bps: wb,
                    interface: interface.to_string(),
                }
            })
            .collect()
    }
}

/// v1: the blkio throttle limits along the path into `limits`, and the
/// cgroup's own I/O per device.
fn v1_io(blkio: &Hierarchy, sys: &Path, limits: &mut LimitsFound) -> Vec<IoCounters> {
    let mount_name = host_name(sys, &blkio.mount);
    const FILES: [&str; 4] = [
        "blkio.throttle.read_iops_device",
        "blkio.throttle.write_iops_device",
        "blkio.throttle.read_bps_device",
        "blkio.throttle.write_bps_device",
    ];
    for dir in blkio.ancestors() {
        let at = SetOn::new(blkio, &mount_name, &dir);
        for (kind, file) in FILES.into_iter().enumerate() {
            for (dev, n) in text(&dir, file)
                .map(|t| v1_device_values(&t))
                .unwrap_or_default()
            {
                limits.consider(&dev, kind, n, &at);
            }
        }
    }
    let dir = blkio.dir();
    let ios = text(&dir, "blkio.throttle.io_serviced").unwrap_or_default();
    let bytes = text(&dir, "blkio.throttle.io_service_bytes").unwrap_or_default();
    v1_io_counters(&ios, &bytes)
        .into_iter()
        .map(|mut c| {
            c.device = device_name(sys, &c.device);
            c
        })
        .collect()
}

/// v2: the `io.max` limits along the path into `limits`, and the cgroup's
/// own I/O per device (`io.stat`).
fn v2_io(unified: &Hierarchy, sys: &Path, limits: &mut LimitsFound) -> Vec<IoCounters> {
    let mount_name = host_name(sys, &unified.mount);
    for dir in unified.ancestors() {
        let at = SetOn::new(unified, &mount_name, &dir);
        for (dev, keys) in text(&dir, "io.max")
            .map(|t| v2_device_keys(&t))
            .unwrap_or_default()
        {
            for (k, n) in keys {
                let Some(kind) = ["riops", "wiops", "rbps", "wbps"]
                    .iter()
                    .position(|x| *x == k)
                else {
                    continue;
                };
                limits.consider(&dev, kind, n, &at);
            }
        }
    }
    text(&unified.dir(), "io.stat")
        .map(|t| v2_device_keys(&t))
        .unwrap_or_default()
        .into_iter()
        .map(|(dev, keys)| {
            let key = |k: &str| keys.iter().find(|(x, _)| x == k).map_or(0, |(_, v)| *v);
            IoCounters {
                device: device_name(sys, &dev),
                read_ios: key("rios"),
                write_ios: key("wios"),
                read_bytes: key("rbytes"),
                write_bytes: key("wbytes"),
            }
        })
        .collect()
}

/// A hierarchy's mount as the host names it: `SYS` (a fixture tree in
/// tests) read as `/sys`.
fn host_name(sys: &Path, mount: &Path) -> String {
    match mount.strip_prefix(sys) {
        Ok(rest) => format!("/sys/{}", rest.to_string_lossy()),
        Err(_) => mount.to_string_lossy().into_owned(),
    }
}

/// The `MAJ:MIN N` lines of a v1 throttle file.
fn v1_device_values(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let dev = f.next()?.to_string();
            let n = f.next()?.parse().ok()?;
            dev.contains(':').then_some((dev, n))
        })
        .collect()
}

/// `MAJ:MIN key=value …` lines (v2 `io.max`, `io.stat`): per device, the
/// numbers by key (`max` is no number, so no entry).
fn v2_device_keys(text: &str) -> Vec<(String, Vec<(String, u64)>)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let dev = f.next()?.to_string();
            let keys = f
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_string(), v.parse().ok()?))
                })
                .collect();
            dev.contains(':').then_some((dev, keys))
        })
        .collect()
}

/// The per-device counters of v1 `io_serviced` and `io_service_bytes`
/// (`MAJ:MIN Read N` lines; `Total` lines and other operations left out).
fn v1_io_counters(ios: &str, bytes: &str) -> Vec<IoCounters> {
    let mut out: Vec<IoCounters> = Vec::new();
    for (text, is_bytes) in [(ios, false), (bytes, true)] {
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let (Some(dev), Some(op), Some(n)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            let i = match out.iter().position(|c| c.device == dev) {
                Some(i) => i,
                None => {
                    out.push(IoCounters {
                        device: dev.to_string(),
                        ..IoCounters::default()
                    });
                    out.len() - 1
                }
            };
            let c = &mut out[i];
            match (op, is_bytes) {
                ("Read", false) => c.read_ios = n,
                ("Write", false) => c.write_ios = n,
                ("Read", true) => c.read_bytes = n,
                ("Write", true) => c.write_bytes = n,
                _ => {}
            }
        }
    }
    out
}

impl CgroupDirs {
    /// The block-I/O limits along the path, lowest of each kind per device,
    /// the cgroup's own I/O per device, and its I/O stalls.
    pub(super) fn read_io(&self, out: &mut CgroupCounters, sys: &Path) {
        let mut limits = LimitsFound::default();
        let interface = if let Some(blkio) = &self.blkio {
            out.io_devices = v1_io(blkio, sys, &mut limits);
            "blkio throttle"
        } else if let Some(unified) = self.unified_with("io.stat") {
            out.io_devices = v2_io(unified, sys, &mut limits);
            "io.max"
        } else {
            ""
        };
        out.io_limits = limits.into_limits(sys, interface);
        out.io_stall_us = self.own_pressure_us("io.pressure");
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::counters;
    use super::super::CgroupSample;
    use super::*;

    /// A v1 blkio cgroup (hybrid host) under a 1000 read-IOPS throttle on
    /// loop0 set on its parent (its own says 2000) and 10 MiB/s of writes
    /// of its own; 1000 reads/s through it over 2 s, its tasks stalled on
    /// I/O 80% of the time (unified `io.pressure`).
    #[test]
    fn a_v1_blkio_throttle_and_its_io_are_read() {
        let a = counters("cgroup-io-v1", "t0", "500", 8 << 30);
        let b = counters("cgroup-io-v1", "t1", "500", 8 << 30);
        assert_eq!(
            b.io_limits,
            vec![IoLimit {
                device: "loop0".to_string(),
                number: "7:0".to_string(),
                cgroup: "/perflab-scn".to_string(),
                dir: "/sys/fs/cgroup/blkio/perflab-scn".to_string(),
                read_iops: Some(1000),
                write_iops: None,
                read_bps: None,
                write_bps: Some(10 << 20),
                interface: "blkio throttle".to_string(),
            }]
        );
        assert_eq!(
            b.io_limits[0].describe(),
            "1000 read IOPS, 10.0 MiB/s written"
        );
        let s = CgroupSample::between(&a, &b, 2.0);
        let loop0 =
            s.io.iter()
                .find(|d| d.device == "loop0")
                .expect("loop0's I/O");
        assert_eq!(loop0.reads_per_s, 1000.0);
        assert_eq!(loop0.writes_per_s, 10.0);
        assert_eq!(loop0.read_bytes_per_s, 4_096_000.0);
        let vda =
            s.io.iter()
                .find(|d| d.device == "vda")
                .expect("vda by its number");
        assert_eq!(vda.reads_per_s, 0.0);
        assert_eq!(s.io_stall_share, Some(0.8));
    }

    /// A v2 cgroup under `io.max` riops=500 on dm-0 from its parent (its
    /// own says 800) and wbps 2 MiB/s of its own; 500 reads/s over 2 s;
    /// I/O stalls 90% of the time.
    #[test]
    fn a_v2_io_max_and_its_io_are_read() {
        let a = counters("cgroup-io-v2", "t0", "600", 8 << 30);
        let b = counters("cgroup-io-v2", "t1", "600", 8 << 30);
        assert_eq!(b.io_limits.len(), 1, "8:0 is all max: {:?}", b.io_limits);
        let dm = &b.io_limits[0];
        assert_eq!(dm.device, "dm-0");
        assert_eq!(dm.read_iops, Some(500));
        assert_eq!(dm.write_bps, Some(2 << 20));
        assert_eq!(dm.cgroup, "/bench.slice");
        assert_eq!(dm.number, "253:0");
        assert_eq!(dm.dir, "/sys/fs/cgroup/bench.slice", "as the host names it");
        assert_eq!(dm.interface, "io.max");
        let s = CgroupSample::between(&a, &b, 2.0);
        let d =
            s.io.iter()
                .find(|d| d.device == "dm-0")
                .expect("dm-0's I/O");
        assert_eq!(d.reads_per_s, 500.0);
        assert_eq!(d.read_bytes_per_s, 2_048_000.0);
        assert_eq!(
            s.io.iter()
                .find(|d| d.device == "8:0")
                .map(|d| d.writes_per_s),
            Some(0.0)
        );
        assert_eq!(s.io_stall_share, Some(0.9));
    }

    /// This host's v1 blkio: a throttle of 200 read IOPS on a real loop
    /// device for a cgroup of the test's own, and the direct reads a
    /// process in it made through the throttle.
    #[test]
    fn a_real_v1_blkio_throttle_on_a_loop_device_is_read() {
        use crate::probe::realdev::{Blkio, Loop};
        let dev = Loop::new("/var/tmp", "blkio", 8);
        let mut cg = Blkio::new("blkio");
        cg.set(
            "blkio.throttle.read_iops_device",
            &format!("{} 200", dev.majmin()),
        );
        let pid = cg.spawn(&format!(
            "dd if={} of=/dev/null bs=4k count=40 iflag=direct 2>/dev/null; exec sleep 60",
            dev.path
        ));
        let fs = Path::new("/sys/fs/cgroup");
        let read = || CgroupCounters::read(Path::new("/proc"), fs, &pid.to_string(), None);
        // The reads take 0.2 s at 200 IOPS; wait (bounded) until all are counted.
        let mut c = read();
        for _ in 0..100 {
            let done = c
                .as_ref()
                .and_then(|c| c.io_devices.iter().find(|d| d.device == dev.name()));
            if done.is_some_and(|d| d.read_ios >= 40) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            c = read();
        }
        let c = c.expect("the process's cgroup");
        let limit = c
            .io_limits
            .iter()
            .find(|l| l.device == dev.name())
            .unwrap_or_else(|| panic!("the throttle on {}: {:?}", dev.name(), c.io_limits));
        assert_eq!(limit.read_iops, Some(200));
        assert_eq!(limit.interface, "blkio throttle");
        assert!(
            limit.cgroup.starts_with("/perflab-test-blkio-"),
            "{limit:?}"
        );
        let io = c
            .io_devices
            .iter()
            .find(|d| d.device == dev.name())
            .expect("its I/O");
        assert!(io.read_ios >= 40, "{io:?}");
        assert!(io.read_bytes >= 40 * 4096, "{io:?}");
    }
}
