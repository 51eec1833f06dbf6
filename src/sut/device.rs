//! Block devices as targets (`device:/dev/NAME`): what perflab must know
//! before it reads or writes one — its size, whether it is a block device
//! at all, who holds it, and what writing would destroy.
//!
//! A device is *held* when it or one of its partitions is mounted in any
//! mount namespace (every process's `/proc/PID/mountinfo`, one per
//! namespace), is active swap (`/proc/swaps`), or has a holder in sysfs
//! (`/sys/class/block/NAME/holders/`: device-mapper, md RAID, bcache).
//! Nothing writes a held device, whatever the flags; a writing run also
//! opens the device with `O_EXCL`, which the kernel refuses while anyone
//! holds it and which keeps anyone from mounting it during the run.
//!
//! What a device *holds* is libblkid's answer (`blkid -p -o export`, the
//! low-level probe of util-linux: every file system it knows, swap, LVM,
//! RAID members, encrypted volumes, partition tables). perflab keeps no
//! list of signatures of its own.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why nothing may write a device, whatever the flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Held {
    /// The device or its partition `part` is mounted at `at`, in this
    /// process's mount namespace (`pid` none) or in that of process `pid`.
    Mounted {
        part: Option<String>,
        at: String,
        pid: Option<u32>,
    },
    /// Active swap.
    Swap { part: Option<String> },
    /// A kernel holder of the device or of partition `part`, described
    /// (`device-mapper dm-0 (vg-data)`, `md RAID md0`).
    Holder { part: Option<String>, by: String },
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = |part: &Option<String>| match part {
            Some(p) => format!("its partition {p}"),
            None => "it".to_string(),
        };
        match self {
            Held::Mounted { part, at, pid } => {
                write!(f, "{} is mounted at {at}", who(part))?;
                if let Some(pid) = pid {
                    write!(f, " in the mount namespace of process {pid}")?;
                    if let Some(comm) = comm_of(*pid) {
                        write!(f, " ({comm})")?;
                    }
                }
                Ok(())
            }
            Held::Swap { part } => write!(f, "{} is in use as swap", who(part)),
            Held::Holder { part, by } => write!(f, "{} is held by {by}", who(part)),
        }
    }
}

/// A block device's size in bytes, or why it is not one.
pub(crate) fn size(path: &Path) -> Result<u64, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.file_type().is_block_device() {
        return Err(format!("{} is not a block device", path.display()));
    }
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes: u64 = 0;
    // BLKGETSIZE64 = _IOR(0x12, 114, size_t).
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    // SAFETY: the ioctl writes one u64 into `bytes`; the result is checked.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut bytes) };
    if rc != 0 {
        return Err(format!(
            "{}: cannot read its size: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(bytes)
}

/// A device as the kernel names it, with its partitions.
struct Disk {
    /// Its name in `/sys/class/block` (`loop0`, `sdb`).
    name: String,
    major: u32,
    minor: u32,
    /// The kernel's partitions of it: (name, major, minor).
    partitions: Vec<(String, u32, u32)>,
}

impl Disk {
    fn of(path: &Path) -> Result<Disk, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let rdev = meta.rdev();
        let (major, minor) = (libc::major(rdev), libc::minor(rdev));
        let name = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let partitions = partitions_of(Path::new(SYS_BLOCK), &name);
        Ok(Disk {
            name,
            major,
            minor,
            partitions,
        })
    }

    /// The partition named by `major:minor`: `None` for the device itself,
    /// `Some(None)` for neither.
    fn part_of(&self, major: u32, minor: u32) -> Option<Option<String>> {
        if (major, minor) == (self.major, self.minor) {
            return Some(None);
        }
        self.partitions
            .iter()
            .find(|p| (p.1, p.2) == (major, minor))
            .map(|p| Some(p.0.clone()))
    }
}

/// Where the kernel lists block devices.
const SYS_BLOCK: &str = "/sys/class/block";

/// Why nothing may write the device at `path` now, if anything holds it.
pub(crate) fn held(path: &Path) -> Result<Option<Held>, String> {
    let disk = Disk::of(path)?;
    if let Some(found) = mounted_anywhere(&disk)? {
        return Ok(Some(found));
    }
    if let Some(found) = swap(&disk) {
        return Ok(Some(found));
    }
    Ok(holders(Path::new(SYS_BLOCK), &disk.name, &disk.partitions))
}

/// The kernel's partitions of disk `name` under `sys` (`/sys/class/block`).
fn partitions_of(sys: &Path, name: &str) -> Vec<(String, u32, u32)> {
    if name.is_empty() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(sys.join(name)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.path().join("partition").exists())
        .filter_map(|e| {
            let dev = std::fs::read_to_string(e.path().join("dev")).ok()?;
            let (ma, mi) = dev.trim().split_once(':')?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                ma.parse().ok()?,
                mi.parse().ok()?,
            ))
        })
        .collect()
}

/// A mount of the device or of a partition in any mount namespace: this
/// process's first, then each other namespace once, through the first
/// process seen in it.
fn mounted_anywhere(disk: &Disk) -> Result<Option<Held>, String> {
    let own = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    if let Some((part, at)) = mounted_in(&own, disk) {
        return Ok(Some(Held::Mounted {
            part,
            at,
            pid: None,
        }));
    }
    let namespace = |pid: &str| {
        std::fs::metadata(format!("/proc/{pid}/ns/mnt"))
            .ok()
            .map(|m| (m.dev(), m.ino()))
    };
    let mut seen: std::collections::HashSet<(u64, u64)> = namespace("self").into_iter().collect();
    let entries = std::fs::read_dir("/proc").map_err(|e| format!("cannot read /proc: {e}"))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<u32>() else {
            continue;
        };
        // A process that ended meanwhile, or one we may not look into,
        // has no namespace to read.
        let Some(ns) = namespace(&name) else {
            continue;
        };
        if !seen.insert(ns) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")) else {
            continue;
        };
        if let Some((part, at)) = mounted_in(&text, disk) {
            return Ok(Some(Held::Mounted {
                part,
                at,
                pid: Some(pid),
            }));
        }
    }
    Ok(None)
}

/// A mount of the device or a partition in a mountinfo text: which one,
/// and where.
fn mounted_in(text: &str, disk: &Disk) -> Option<(Option<String>, String)> {
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let dev = fields.nth(2)?;
        let at = fields.nth(1)?;
        let (ma, mi) = dev.split_once(':')?;
        let part = disk.part_of(ma.parse().ok()?, mi.parse().ok()?)?;
        Some((part, unescape(at)))
    })
}

/// A path as the kernel writes it in mountinfo and /proc/swaps, with
/// space, tab, newline and backslash as octal escapes.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            d.iter()
                .all(|c| (b'0'..=b'7').contains(c))
                .then(|| d.iter().fold(0u32, |n, c| n * 8 + u32::from(c - b'0')))
        });
        match (bytes[i], octal) {
            (b'\\', Some(n)) if n < 256 => {
                out.push(n as u8);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The device or a partition as active swap.
fn swap(disk: &Disk) -> Option<Held> {
    let text = std::fs::read_to_string("/proc/swaps").ok()?;
    text.lines().skip(1).find_map(|line| {
        let name = unescape(line.split_whitespace().next()?);
        let meta = std::fs::metadata(&name).ok()?;
        if !meta.file_type().is_block_device() {
            return None;
        }
        let rdev = meta.rdev();
        let part = disk.part_of(libc::major(rdev), libc::minor(rdev))?;
        Some(Held::Swap { part })
    })
}

/// A kernel holder (device-mapper, md, bcache) of disk `name` or of one
/// of its partitions, under `sys` (`/sys/class/block`).
fn holders(sys: &Path, name: &str, partitions: &[(String, u32, u32)]) -> Option<Held> {
    if name.is_empty() {
        return None;
    }
    let parts = std::iter::once(None).chain(partitions.iter().map(|p| Some(p.0.clone())));
    for part in parts {
        let own = part.as_deref().unwrap_or(name);
        let Ok(entries) = std::fs::read_dir(sys.join(own).join("holders")) else {
            continue;
        };
        let mut found: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        found.sort();
        if let Some(holder) = found.first() {
            return Some(Held::Holder {
                part,
                by: describe_holder(sys, holder),
            });
        }
    }
    None
}

/// A holder as a reader knows it: `device-mapper dm-0 (vg-data)`, `md
/// RAID md0`, or its kernel name.
fn describe_holder(sys: &Path, holder: &str) -> String {
    let dir = sys.join(holder);
    if let Ok(name) = std::fs::read_to_string(dir.join("dm/name")) {
        return format!("device-mapper {holder} ({})", name.trim());
    }
    if dir.join("md").exists() {
        return format!("md RAID {holder}");
    }
    holder.to_string()
}

/// The command name of process `pid`.
fn comm_of(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(crate::util::printable(comm.trim()).into_owned())
}

/// What libblkid finds on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Contents {
    /// Signatures, described (`an ext4 file system`, `a dos partition table`).
    Signatures(String),
    /// More than one signature that contradict each other (blkid's
    /// "ambivalent" result).
    Ambivalent,
    /// No signature blkid knows: raw data, or nothing written yet.
    Unknown,
}

impl std::fmt::Display for Contents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Contents::Signatures(what) => write!(f, "it holds {what}"),
            Contents::Ambivalent => f.write_str("it holds several contradicting signatures"),
            Contents::Unknown => {
                f.write_str("it holds no signature blkid knows (raw data, or nothing yet)")
            }
        }
    }
}

/// How long `blkid` may take to probe a device.
const BLKID_DEADLINE: Duration = Duration::from_secs(30);

/// What the device at `path` holds, as util-linux's `blkid -p` probes it.
pub(crate) fn contents(path: &Path) -> Result<Contents, String> {
    let mut child = spawn_blkid(path)?;
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = wait_for(&mut child, path)?;
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    // blkid -p: 0 found, 2 nothing found, 8 ambivalent; anything else failed.
    match status.code() {
        Some(0) => Ok(described(&out)
            .map(Contents::Signatures)
            .unwrap_or(Contents::Ambivalent)),
        Some(2) => Ok(Contents::Unknown),
        Some(8) => Ok(Contents::Ambivalent),
        _ => Err(format!(
            "blkid cannot probe {}: {}",
            path.display(),
            crate::util::printable(err.lines().next().unwrap_or("no reason given").trim())
        )),
    }
}

/// `blkid -p -o export PATH`, found where root's PATH or another user's
/// has it (root's PATH has /usr/sbin; another user's often has not).
fn spawn_blkid(path: &Path) -> Result<std::process::Child, String> {
    for program in ["blkid", "/usr/sbin/blkid", "/sbin/blkid"] {
        match Command::new(program)
            .args(["-p", "-o", "export"])
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(child) => return Ok(child),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot run blkid: {e}")),
        }
    }
    Err("blkid is not installed (util-linux's; perflab asks it what a device holds)".to_string())
}

/// Reads up to 1 MiB of `pipe` on a thread of its own, so that neither
/// of a child's pipes fills while the other is read.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(pipe) = pipe {
            let _ =
                std::io::Read::read_to_string(&mut std::io::Read::take(pipe, 1 << 20), &mut text);
        }
        text
    })
}

/// Waits for blkid to end, killing it at [`BLKID_DEADLINE`].
fn wait_for(
    child: &mut std::process::Child,
    path: &Path,
) -> Result<std::process::ExitStatus, String> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if started.elapsed() < BLKID_DEADLINE => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "blkid did not finish probing {} within {} s",
                    path.display(),
                    BLKID_DEADLINE.as_secs()
                ));
            }
        }
    }
}

/// blkid's `KEY=value` lines as words: `an ext4 file system`, `a dos
/// partition table`, `a swap area`.
fn described(export: &str) -> Option<String> {
    let value = |key: &str| {
        export.lines().find_map(|l| {
            l.strip_prefix(key)
                .and_then(|v| v.strip_prefix('='))
                .map(|v| crate::util::printable(v.trim()).into_owned())
        })
    };
    let article = |word: &str| {
        if word.starts_with(['a', 'e', 'i', 'o', 'u', 'A', 'E', 'I', 'O', 'U']) {
            format!("an {word}")
        } else {
            format!("a {word}")
        }
    };
    let mut found = Vec::new();
    if let Some(kind) = value("TYPE") {
        found.push(match (kind.as_str(), value("USAGE").as_deref()) {
            ("swap", _) => "a swap area".to_string(),
            (_, Some("filesystem")) => format!("{} file system", article(&kind)),
            (_, Some("raid")) => format!("{} RAID member", article(&kind)),
            (_, Some("crypto")) => format!("{} encrypted volume", article(&kind)),
            _ => format!("{} signature", article(&kind)),
        });
    }
    if let Some(table) = value("PTTYPE") {
        found.push(format!("{} partition table", article(&table)));
    }
    (!found.is_empty()).then(|| found.join(" and "))
}

/// The device opened read-write for a writing run, claimed exclusively
/// (`O_EXCL`): refused by the kernel while anything holds it, and keeping
/// anything from mounting it until the run ends.
pub(crate) fn claim(path: &Path, direct: bool) -> Result<File, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true);
    options.custom_flags(libc::O_EXCL | if direct { libc::O_DIRECT } else { 0 });
    options.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::EBUSY) {
            format!(
                "{} is busy: mounted (in some mount namespace), in use as swap, held by device-mapper or md, or opened exclusively by another program",
                path.display()
            )
        } else {
            format!("cannot open {}: {e}", path.display())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk() -> Disk {
        Disk {
            name: "vda".to_string(),
            major: 254,
            minor: 0,
            partitions: vec![("vda1".to_string(), 254, 1)],
        }
    }

    #[test]
    fn a_mount_of_the_device_or_its_partition_is_found() {
        let info = "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
                    30 22 7:0 / /mnt/my\\040disk rw - ext4 /dev/loop0 rw\n";
        assert_eq!(
            mounted_in(info, &disk()),
            Some((Some("vda1".to_string()), "/".to_string()))
        );
        let loop0 = Disk {
            name: "loop0".to_string(),
            major: 7,
            minor: 0,
            partitions: Vec::new(),
        };
        assert_eq!(
            mounted_in(info, &loop0),
            Some((None, "/mnt/my disk".to_string()))
        );
        let loop1 = Disk { minor: 1, ..loop0 };
        assert_eq!(mounted_in(info, &loop1), None);
        assert_eq!(mounted_in("garbage\n\n1 2", &disk()), None);
    }

    #[test]
    fn blkid_answers_read_as_words() {
        assert_eq!(
            described("DEVNAME=/dev/loop0\nTYPE=ext4\nUSAGE=filesystem\n").as_deref(),
            Some("an ext4 file system")
        );
        assert_eq!(
            described("TYPE=minix\nUSAGE=filesystem\n").as_deref(),
            Some("a minix file system")
        );
        assert_eq!(
            described("TYPE=swap\nUSAGE=other\n").as_deref(),
            Some("a swap area")
        );
        assert_eq!(
            described("TYPE=LVM2_member\nUSAGE=raid\n").as_deref(),
            Some("a LVM2_member RAID member")
        );
        assert_eq!(
            described("TYPE=crypto_LUKS\nUSAGE=crypto\n").as_deref(),
            Some("a crypto_LUKS encrypted volume")
        );
        assert_eq!(
            described("PTUUID=1\nPTTYPE=gpt\n").as_deref(),
            Some("a gpt partition table")
        );
        assert_eq!(described("DEVNAME=/dev/loop0\n"), None);
    }

    #[test]
    fn holders_of_the_device_and_its_partitions_are_named() {
        let sys = tempfile::tempdir().unwrap();
        let mk = |p: &str| std::fs::create_dir_all(sys.path().join(p)).unwrap();
        mk("sdb/holders");
        mk("sdb/sdb1/holders");
        std::fs::write(sys.path().join("sdb/sdb1/partition"), "1\n").unwrap();
        std::fs::write(sys.path().join("sdb/sdb1/dev"), "8:17\n").unwrap();
        // sysfs lists a partition both under its disk and at the top.
        mk("sdb1/holders");
        let parts = partitions_of(sys.path(), "sdb");
        assert_eq!(parts, vec![("sdb1".to_string(), 8, 17)]);
        assert_eq!(holders(sys.path(), "sdb", &parts), None);
        mk("dm-3/dm");
        std::fs::write(sys.path().join("dm-3/dm/name"), "vg-data\n").unwrap();
        mk("sdb1/holders/dm-3");
        assert_eq!(
            holders(sys.path(), "sdb", &parts),
            Some(Held::Holder {
                part: Some("sdb1".to_string()),
                by: "device-mapper dm-3 (vg-data)".to_string()
            })
        );
        mk("md0/md");
        mk("sdb/holders/md0");
        let found = holders(sys.path(), "sdb", &parts).unwrap();
        assert_eq!(found.to_string(), "it is held by md RAID md0");
    }

    #[test]
    fn what_holds_a_device_reads_as_one_clause() {
        let held = Held::Mounted {
            part: Some("sdb1".to_string()),
            at: "/srv".to_string(),
            pid: None,
        };
        assert_eq!(held.to_string(), "its partition sdb1 is mounted at /srv");
        assert_eq!(
            Held::Swap { part: None }.to_string(),
            "it is in use as swap"
        );
    }
}
