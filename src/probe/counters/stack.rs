//! What each block device is made of, and the kernel threads that do its
//! work. A loop device, a device-mapper target (LVM, dm-crypt, a
//! throttling `dm-delay`), an md array and an NVMe namespace are disks as
//! much as a SCSI disk is; the stacked ones hand their I/O down to what
//! holds them:
//!
//! - `/sys/block/X/slaves/*` — the devices a dm target or md array is built
//!   on (the kernel's holder/slave links, Documentation/ABI/testing/sysfs-block);
//! - `/sys/block/loopN/loop/backing_file` — the file a loop device reads and
//!   writes; the file system that holds it is found by the longest mount
//!   point that contains it (`/proc/self/mountinfo`), named by its device
//!   number (`/sys/dev/block/MAJ:MIN/uevent`), or `memory` for a tmpfs or
//!   ramfs, whose "device" is RAM and whose I/O is CPU work.
//!
//! The kernel threads that serve a device's I/O spend CPU that is the
//! run's even though no process of the run spends it: the loop device's
//! worker (`kworker/u8:3-loop0`, or the `loop0` thread of older kernels),
//! the file system's journal (`jbd2/loop0-8`), dm's (`kdmflush/253:0`,
//! `kcryptd/253:0`, `dmcrypt_write/253:0`) and md's (`md0_raid1`). A
//! kworker's name carries the work queue it last ran, so its time is
//! counted for the device it names at the end of each interval.

use super::HostRoot;
use procfs_core::FromBufRead;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long the block devices' stack — which loop devices have a file
/// behind them, what each stacked device is made of — is taken as read
/// on this host while the disks listed stay the same. Walking those sysfs
/// paths and formatting /proc/self/mountinfo on every sample was about a
/// third of a sample's CPU; a loop device attached to another file under
/// the same name is seen within this time (one that does I/O after being
/// attached anew shows at once, as the disks followed change).
pub(super) const STACK_FRESH: Duration = Duration::from_secs(10);

/// The block devices' stack as last read.
#[derive(Debug, Default)]
pub(super) struct StackSeen {
    /// Every disk of /proc/diskstats (RAM disks aside) when it was read,
    /// and the loop devices among them with a file behind them.
    listed: Vec<String>,
    backed: Vec<String>,
    /// The disks followed, and what the stacked ones among them are made of.
    followed: Vec<String>,
    lower: BTreeMap<String, Vec<String>>,
    at: Option<Instant>,
}

impl StackSeen {
    /// Whether the stack must be read again for the disks `listed`.
    fn stale(&self, listed: &[&str], fresh: Duration) -> bool {
        self.at.is_none_or(|at| at.elapsed() >= fresh)
            || self
                .listed
                .iter()
                .map(String::as_str)
                .ne(listed.iter().copied())
    }
    /// Every disk of /proc/diskstats — loop, device-mapper, md and NVMe
    /// namespaces too, since a run's I/O may pass through any — but RAM
    /// disks (`ram0`, no I/O path) and loop devices with no file behind
    /// them and no I/O counted (the idle `loop0`…`loop7` a host keeps
    /// ready). Which loop devices have a file is read again when the stack
    /// is stale (`fresh`), and what the disks followed are made of whenever
    /// they change (see [`StackSeen::lower`]).
    pub(super) fn read(&mut self, root: &HostRoot, fresh: Duration) -> Vec<procfs_core::DiskStat> {
        let all: Vec<procfs_core::DiskStat> = root
            .proc_file("diskstats")
            .and_then(|f| procfs_core::DiskStats::from_buf_read(f).ok())
            .map(|d| d.0)
            .unwrap_or_default()
            .into_iter()
            .filter(|d| !d.name.starts_with("ram"))
            .collect();
        let listed: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
        if self.stale(&listed, fresh) {
            self.backed = listed
                .iter()
                .filter(|name| name.starts_with("loop"))
                .filter(|name| {
                    root.text(&format!("sys/block/{name}/loop/backing_file"))
                        .is_some()
                })
                .map(|name| name.to_string())
                .collect();
            self.listed = listed.iter().map(|name| name.to_string()).collect();
            self.followed.clear();
            self.at = Some(Instant::now());
        }
        let disks: Vec<procfs_core::DiskStat> = all
            .into_iter()
            .filter(|d| {
                !d.name.starts_with("loop")
                    || d.reads + d.writes > 0
                    || self.backed.contains(&d.name)
            })
            .collect();
        let names: Vec<&str> = disks.iter().map(|d| d.name.as_str()).collect();
        if self
            .followed
            .iter()
            .map(String::as_str)
            .ne(names.iter().copied())
        {
            self.lower = lower_devices(root, &names);
            self.followed = names.iter().map(|n| n.to_string()).collect();
        }
        disks
    }

    /// What the stacked disks of the last [`StackSeen::read`] are made of.
    pub(super) fn lower(&self) -> &BTreeMap<String, Vec<String>> {
        &self.lower
    }
}

/// The devices (or `memory`) that a stacked device hands its I/O to, by
/// device name; devices that are not stacked are absent.
pub(crate) fn lower_devices(root: &HostRoot, disks: &[&str]) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mounts = root.text("proc/self/mountinfo").unwrap_or_default();
    for &name in disks {
        let mut lower: Vec<String> = root
            .list(&format!("sys/block/{name}/slaves"))
            .into_iter()
            .map(|slave| whole_disk(root, &slave))
            .collect();
        if let Some(file) = root.text(&format!("sys/block/{name}/loop/backing_file")) {
            let file = file.trim().trim_end_matches(" (deleted)");
            if let Some(holder) = holder_of(root, &mounts, file) {
                lower.push(holder);
            }
        }
        lower.sort();
        lower.dedup();
        if !lower.is_empty() {
            out.insert(name.to_string(), lower);
        }
    }
    out
}

/// A partition's whole disk (`vda1` → `vda`), the name itself otherwise:
/// the disk's counters are the ones followed.
fn whole_disk(root: &HostRoot, name: &str) -> String {
    if root
        .text(&format!("sys/class/block/{name}/partition"))
        .is_some()
    {
        // The partition's directory sits inside its disk's.
        let known = root.list("sys/block");
        if let Some(disk) = known
            .iter()
            .filter(|d| name.starts_with(d.as_str()) && d.as_str() != name)
            .max_by_key(|d| d.len())
        {
            return disk.clone();
        }
    }
    name.to_string()
}

/// The device holding file `path`: the mount with the longest mount point
/// that contains it, by device number; `memory` for tmpfs and ramfs.
fn holder_of(root: &HostRoot, mountinfo: &str, path: &str) -> Option<String> {
    let mut best: Option<(usize, &str, &str, &str)> = None;
    for line in mountinfo.lines() {
        // id parent MAJ:MIN root mountpoint options … - fstype source …
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(majmin), Some(point)) = (fields.get(2), fields.get(4)) else {
            continue;
        };
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(fstype), source) = (fields.get(dash + 1), fields.get(dash + 2).copied()) else {
            continue;
        };
        let point = point.replace("\\040", " ");
        let inside = path == point
            || point == "/"
            || path.starts_with(&format!("{}/", point.trim_end_matches('/')));
        if inside && best.is_none_or(|(len, ..)| point.len() >= len) {
            best = Some((point.len(), majmin, fstype, source.unwrap_or("")));
        }
    }
    let (_, majmin, fstype, source) = best?;
    if matches!(fstype, "tmpfs" | "ramfs") {
        return Some("memory".to_string());
    }
    if !majmin.starts_with("0:") {
        let name = root
            .text(&format!("sys/dev/block/{majmin}/uevent"))
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("DEVNAME="))
                    .map(|n| n.trim().to_string())
            });
        if let Some(name) = name {
            return Some(whole_disk(root, &name));
        }
    }
    // A file system with no block device number of its own (btrfs, an
    // overlay): its source, when that is a device.
    source
        .strip_prefix("/dev/")
        .map(|d| whole_disk(root, d.trim_start_matches("mapper/")))
        .or_else(|| Some(format!("{fstype} {source}")))
}

/// A kernel thread's CPU so far, and the device it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KernelWorker {
    pub(crate) pid: u32,
    /// The device whose I/O it served, by the name the kernel gave it.
    pub(crate) device: String,
    /// User and system time since it started, clock ticks.
    pub(crate) ticks: u64,
}

/// The device a kernel thread's name says it works for, among `disks`
/// (names) and `numbers` (`MAJ:MIN` → name): `kworker/u8:3-loop0` (or
/// `+loop0` while it runs that queue's work),
/// `loop0`, `jbd2/loop0-8`, `kdmflush/253:0`, `kcryptd/253:0`, `md0_raid1`.
pub(crate) fn served_device(
    comm: &str,
    disks: &[&str],
    numbers: &BTreeMap<String, String>,
) -> Option<String> {
    let known = |d: &str| disks.contains(&d).then(|| d.to_string());
    // `-` after the pool: the queue it last ran; `+`: the one it runs now.
    if let Some((_, queue)) = comm
        .strip_prefix("kworker/")
        .and_then(|w| w.split_once(['-', '+']))
    {
        // The work queue: `loop0`, `kcryptd/253:0`, `dm-thin` (no device).
        return known(queue).or_else(|| {
            let (_, number) = queue.split_once('/')?;
            numbers.get(number).cloned()
        });
    }
    if let Some(rest) = comm.strip_prefix("jbd2/") {
        // jbd2/DEV-INODE: DEV may itself hold a dash (dm-0).
        let dev = rest.rsplit_once('-').map_or(rest, |(d, _)| d);
        return known(dev);
    }
    if let Some((_, number)) = comm
        .split_once('/')
        .filter(|(kind, _)| matches!(*kind, "kdmflush" | "kcryptd" | "dmcrypt_write" | "kverityd"))
    {
        return numbers.get(number).cloned();
    }
    if let Some((md, _)) = comm.split_once('_').filter(|(md, _)| md.starts_with("md")) {
        return known(md);
    }
    known(comm).filter(|d| d.starts_with("loop"))
}

/// The kernel threads (children of kthreadd, pid 2) that serve one of the
/// stacked `disks`, with their CPU so far. Read only where there is a
/// stacked disk to serve.
pub(crate) fn kernel_workers(root: &HostRoot, disks: &[&str]) -> Vec<KernelWorker> {
    let Some(proc) = root.proc_dir() else {
        return Vec::new();
    };
    let numbers: BTreeMap<String, String> = disks
        .iter()
        .filter_map(|d| {
            let n = root.text(&format!("sys/block/{d}/dev"))?;
            Some((n.trim().to_string(), d.to_string()))
        })
        .collect();
    let mut out = Vec::new();
    for (pid, entry) in super::numbered(proc) {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // PID (COMM) STATE PPID … utime(14) stime(15); COMM may hold spaces.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if rest.get(1) != Some(&"2") {
            continue;
        }
        let Some(device) = served_device(comm, disks, &numbers) else {
            continue;
        };
        let tick = |i: usize| rest.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        out.push(KernelWorker {
            pid,
            device,
            ticks: tick(11) + tick(12),
        });
    }
    out
}

/// CPUs each device's kernel workers used between two readings `seconds`
/// apart (clock ticks of `ticks_per_s`); a worker seen only once counts
/// from the second reading on.
pub(crate) fn worker_cpus(
    a: &[KernelWorker],
    b: &[KernelWorker],
    seconds: f64,
    ticks_per_s: f64,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    if seconds <= 0.0 {
        return out;
    }
    for w in b {
        let Some(before) = a.iter().find(|x| x.pid == w.pid) else {
            continue;
        };
        // A counter that went backwards or leapt beyond belief grew by none.
        let grew = super::believe::increase(before.ticks, w.ticks, seconds);
        let used = super::believe::per_second(grew, seconds) / ticks_per_s;
        *out.entry(w.device.clone()).or_insert(0.0) += used;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host (sysfs as text) with a dm target over a loop device whose
    /// file is on tmpfs, an md mirror of two NVMe namespaces, a loop device
    /// over a file on the host's disk's partition, an idle unconfigured
    /// loop device and a RAM disk.
    fn stacked_host() -> HostRoot {
        let mut f = BTreeMap::new();
        let mut put = |k: &str, v: &str| {
            f.insert(k.to_string(), v.to_string());
        };
        let line = |n: &str, name: &str, ios: u64| {
            format!("{n} {name} {ios} 0 {ios} 10 {ios} 0 {ios} 10 0 20 20\n")
        };
        let disks = [
            line("254 0", "vda", 100),
            line("254 1", "vda1", 100),
            line("7 0", "loop0", 500),
            line("7 1", "loop1", 0),
            line("7 2", "loop2", 0),
            line("253 0", "dm-0", 500),
            line("9 0", "md0", 300),
            line("259 0", "nvme0n1", 300),
            line("259 1", "nvme1n1", 300),
            line("1 0", "ram0", 0),
            line("252 0", "zram0", 5),
        ];
        put("proc/diskstats", &disks.concat());
        put("sys/block/dm-0/slaves/loop0", "");
        put("sys/block/dm-0/dev", "253:0\n");
        put("sys/block/md0/slaves/nvme0n1", "");
        put("sys/block/md0/slaves/nvme1n1", "");
        put(
            "sys/block/loop0/loop/backing_file",
            "/dev/shm/lab/disk.img\n",
        );
        put(
            "sys/block/loop2/loop/backing_file",
            "/var/lib/images/a.img (deleted)\n",
        );
        put("sys/block/vda/dev", "254:0\n");
        put("sys/class/block/vda1/partition", "1\n");
        put(
            "sys/dev/block/254:1/uevent",
            "MAJOR=254\nMINOR=1\nDEVNAME=vda1\nDEVTYPE=partition\n",
        );
        put(
            "proc/self/mountinfo",
            "1 0 254:1 / / rw,relatime - ext4 /dev/vda1 rw\n\
             25 1 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw\n\
             40 1 0:45 / /var/lib/images/cache rw - tmpfs tmpfs rw\n",
        );
        HostRoot::Texts(f)
    }

    /// On this host the stack is kept between samples: read again when
    /// the disks listed change or when it is stale, not on every sample.
    #[test]
    fn the_stack_is_read_again_when_the_disks_change_or_it_is_stale() {
        let HostRoot::Texts(mut files) = stacked_host() else {
            unreachable!("a tree of texts")
        };
        let mut seen = StackSeen::default();
        let mut loop0 = |files: &BTreeMap<String, String>, fresh: Duration| {
            seen.read(&HostRoot::Texts(files.clone()), fresh);
            seen.lower().get("loop0").cloned().unwrap_or_default()
        };
        let hour = Duration::from_secs(3600);
        assert_eq!(loop0(&files, hour), ["memory"]);
        // loop0 now over a file on the root file system: kept as read.
        let backing = "sys/block/loop0/loop/backing_file".to_string();
        files.insert(backing.clone(), "/srv/disk.img\n".to_string());
        assert_eq!(loop0(&files, hour), ["memory"]);
        // A disk appears: everything is read again.
        let disks = files.get("proc/diskstats").cloned().unwrap_or_default();
        files.insert(
            "proc/diskstats".to_string(),
            format!("{disks}7 3 loop3 1 0 1 10 1 0 1 10 0 20 20\n"),
        );
        assert_eq!(loop0(&files, hour), ["vda"]);
        // Stale: read again though the disks stayed the same.
        files.insert(backing, "/dev/shm/lab/disk.img\n".to_string());
        assert_eq!(loop0(&files, Duration::ZERO), ["memory"]);
    }

    /// Loop, dm, md and NVMe are disks; each stacked one names what holds
    /// it, down to memory for a file on tmpfs and to the whole disk for a
    /// file on a partition.
    #[test]
    fn stacked_devices_are_followed_down_to_what_holds_them() {
        let root = stacked_host();
        let snap = super::super::HostSnapshot::read(&root, &[]);
        let names: Vec<&str> = snap.disks.iter().map(|d| d.name.as_str()).collect();
        for d in [
            "vda", "loop0", "dm-0", "md0", "nvme0n1", "nvme1n1", "zram0", "loop2",
        ] {
            assert!(names.contains(&d), "{d} is followed: {names:?}");
        }
        assert!(!names.contains(&"ram0"), "{names:?}");
        assert!(
            !names.contains(&"loop1"),
            "idle, with no file behind it: {names:?}"
        );
        let lower = |d: &str| snap.disk_lower.get(d).cloned().unwrap_or_default();
        assert_eq!(lower("dm-0"), ["loop0"]);
        assert_eq!(lower("loop0"), ["memory"]);
        assert_eq!(lower("md0"), ["nvme0n1", "nvme1n1"]);
        assert_eq!(lower("loop2"), ["vda"], "the file's partition's disk");
        assert!(lower("vda").is_empty());
        assert!(
            snap.kernel_workers.is_empty(),
            "text roots have no processes"
        );
    }

    /// This host: an ext4 on a real loop device over a file on tmpfs. The
    /// loop device is followed, held by memory, and its worker and journal
    /// threads are found while it writes.
    #[test]
    fn a_real_loop_device_on_tmpfs_is_followed_with_its_kernel_worker() {
        use crate::probe::realdev::Loop;
        let mut dev = Loop::new("/dev/shm", "stack", 64);
        let mnt = dev.ext4();
        let mut reader = super::super::HostReader::new(HostRoot::live());
        let a = reader.read(&[]);
        // Synced writes: each goes through the loop worker and the journal.
        let file = mnt.join("f");
        let status = std::process::Command::new("dd")
            .args(["if=/dev/zero", "bs=4k", "count=2000", "oflag=dsync"])
            .arg(format!("of={}", file.display()))
            .stderr(std::process::Stdio::null())
            .status()
            .expect("dd runs");
        assert!(status.success());
        let b = reader.read(&[]);
        let name = dev.name().to_string();
        assert_eq!(
            b.disk_lower.get(&name).map(Vec::as_slice),
            Some(&["memory".to_string()][..])
        );
        let s = super::super::HostSample::between(&a, &b);
        let disk = s
            .disks
            .iter()
            .find(|d| d.name == name)
            .expect("the loop device's sample");
        assert!(disk.writes_per_s > 0.0, "{disk:?}");
        assert_eq!(disk.lower, ["memory"]);
        assert!(
            b.kernel_workers.iter().any(|w| w.device == name),
            "a kernel thread serving {name}: {:?}",
            b.kernel_workers
        );
    }

    #[test]
    fn kernel_threads_are_matched_to_the_device_they_serve() {
        let disks = ["loop0", "dm-0", "md0", "vda", "nvme0n1"];
        let numbers = BTreeMap::from([("253:0".to_string(), "dm-0".to_string())]);
        let served = |c: &str| served_device(c, &disks, &numbers);
        assert_eq!(served("kworker/u8:3-loop0").as_deref(), Some("loop0"));
        assert_eq!(
            served("kworker/u8:3+loop0").as_deref(),
            Some("loop0"),
            "a worker running the queue's work now"
        );
        assert_eq!(served("loop0").as_deref(), Some("loop0"));
        assert_eq!(served("jbd2/loop0-8").as_deref(), Some("loop0"));
        assert_eq!(served("jbd2/dm-0-8").as_deref(), Some("dm-0"));
        assert_eq!(served("kdmflush/253:0").as_deref(), Some("dm-0"));
        assert_eq!(
            served("kworker/u8:1-kcryptd/253:0").as_deref(),
            Some("dm-0")
        );
        assert_eq!(served("md0_raid1").as_deref(), Some("md0"));
        assert_eq!(served("kworker/u8:2-writeback"), None);
        assert_eq!(served("kworker/R-kblockd"), None);
        assert_eq!(served("jbd2/vdb1-8"), None, "not a known disk");
        assert_eq!(
            served("vda"),
            None,
            "only loop threads go by the device's name"
        );
    }

    #[test]
    fn a_workers_cpu_is_its_ticks_over_the_interval() {
        let w = |pid, device: &str, ticks| KernelWorker {
            pid,
            device: device.to_string(),
            ticks,
        };
        let a = [w(10, "loop0", 100), w(11, "loop0", 50)];
        let b = [
            w(10, "loop0", 250),
            w(11, "loop0", 100),
            w(12, "loop0", 900),
        ];
        let cpus = worker_cpus(&a, &b, 2.0, 100.0);
        assert_eq!(cpus.get("loop0"), Some(&1.0), "(150 + 50) ticks over 2 s");
    }
}
