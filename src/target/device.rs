//! Block devices as targets (`device:/dev/NAME`): what perflab must know
//! before it reads or writes one — its size, whether it is a block device
//! at all, and whether writing would destroy something: a mounted file
//! system (of the device or of a partition on it), a partition table, or
//! a file system, swap or volume signature in its first blocks.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// What a device holds that writing would destroy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InUse {
    /// Mounted at this place (the device or a partition of it).
    Mounted(String),
    /// A partition table (MBR or GPT), or partitions the kernel knows.
    Partitions(String),
    /// A signature in the first blocks: ext4, XFS, swap, LUKS, …
    Signature(&'static str),
}

impl std::fmt::Display for InUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InUse::Mounted(at) => write!(f, "it is mounted at {at}"),
            InUse::Partitions(what) => write!(f, "it holds {what}"),
            InUse::Signature(name) => write!(f, "it holds a {name} signature"),
        }
    }
}

/// A block device's size in bytes, or why it is not one.
pub fn size(path: &Path) -> Result<u64, String> {
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

/// The first thing found that writing to the device would destroy.
pub fn in_use(path: &Path) -> Result<Option<InUse>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let name = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let partitions = partitions_of(&name);
    if let Some(at) = mounted(major, minor, &partitions)? {
        return Ok(Some(InUse::Mounted(at)));
    }
    if !partitions.is_empty() {
        return Ok(Some(InUse::Partitions(format!(
            "partitions ({})",
            partitions
                .iter()
                .map(|(n, _, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))));
    }
    let mut head = vec![0u8; 70 * 1024];
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let n = std::os::unix::fs::FileExt::read_at(&file, &mut head, 0)
        .map_err(|e| format!("{}: cannot read its first blocks: {e}", path.display()))?;
    head.truncate(n);
    Ok(signature(&head))
}

/// The kernel's partitions of disk `name`: (name, major, minor).
fn partitions_of(name: &str) -> Vec<(String, u32, u32)> {
    let Ok(entries) = std::fs::read_dir(format!("/sys/class/block/{name}")) else {
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

/// Where the device or one of its partitions is mounted, if anywhere.
fn mounted(
    major: u32,
    minor: u32,
    partitions: &[(String, u32, u32)],
) -> Result<Option<String>, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    Ok(mounted_in(&text, major, minor, partitions))
}

/// [`mounted`] on a mountinfo text.
fn mounted_in(
    text: &str,
    major: u32,
    minor: u32,
    partitions: &[(String, u32, u32)],
) -> Option<String> {
    let ours = |dev: &str| {
        dev.split_once(':')
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
            .is_some_and(|(a, b)| {
                (a, b) == (major, minor) || partitions.iter().any(|p| (p.1, p.2) == (a, b))
            })
    };
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let dev = fields.nth(2)?;
        let at = fields.nth(1)?;
        ours(dev).then(|| at.to_string())
    })
}

/// A signature in a device's first bytes: the partition tables and file
/// systems, swap and volumes of `blkid`'s commonest kinds, at their
/// documented offsets.
pub fn signature(head: &[u8]) -> Option<InUse> {
    let at = |offset: usize, magic: &[u8]| head.get(offset..offset + magic.len()) == Some(magic);
    if at(512, b"EFI PART") || at(4096, b"EFI PART") {
        return Some(InUse::Partitions("a GPT partition table".to_string()));
    }
    let found = [
        (1080, &b"\x53\xef"[..], "ext2/3/4"),
        (0, b"XFSB", "XFS"),
        (65600, b"_BHRfS_M", "btrfs"),
        (4086, b"SWAPSPACE2", "swap"),
        (0, b"LUKS\xba\xbe", "LUKS"),
        (3, b"NTFS    ", "NTFS"),
        (82, b"FAT32   ", "FAT32"),
        (54, b"FAT1", "FAT"),
        (0x418, b"LVM2 001", "LVM2"),
        (0x1018, b"\xe2\xe1\xf5\xe0", "F2FS"),
    ]
    .into_iter()
    .find(|(offset, magic, _)| at(*offset, magic))
    .map(|(_, _, name)| InUse::Signature(name));
    if found.is_some() {
        return found;
    }
    // An MBR: the boot signature and at least one partition entry in use.
    if at(510, b"\x55\xaa") && (0..4).any(|i| head.get(446 + i * 16 + 4).is_some_and(|t| *t != 0)) {
        return Some(InUse::Partitions("an MBR partition table".to_string()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_found_at_their_offsets() {
        let mut head = vec![0u8; 70 * 1024];
        assert_eq!(signature(&head), None);
        head[1080..1082].copy_from_slice(b"\x53\xef");
        assert_eq!(signature(&head), Some(InUse::Signature("ext2/3/4")));
        let mut head = vec![0u8; 70 * 1024];
        head[512..520].copy_from_slice(b"EFI PART");
        assert!(matches!(signature(&head), Some(InUse::Partitions(t)) if t.contains("GPT")));
        let mut head = vec![0u8; 70 * 1024];
        head[510..512].copy_from_slice(b"\x55\xaa");
        assert_eq!(signature(&head), None, "a boot signature alone is no table");
        head[446 + 4] = 0x83;
        assert!(matches!(signature(&head), Some(InUse::Partitions(t)) if t.contains("MBR")));
        let mut head = vec![0u8; 5000];
        head[4086..4096].copy_from_slice(b"SWAPSPACE2");
        assert_eq!(signature(&head), Some(InUse::Signature("swap")));
        assert_eq!(signature(&[]), None);
    }

    #[test]
    fn a_mount_of_the_device_or_its_partition_is_found() {
        let info = "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
                    30 22 7:0 / /mnt/x rw - ext4 /dev/loop0 rw\n";
        assert_eq!(mounted_in(info, 7, 0, &[]), Some("/mnt/x".to_string()));
        assert_eq!(
            mounted_in(info, 254, 0, &[("vda1".into(), 254, 1)]),
            Some("/".to_string())
        );
        assert_eq!(mounted_in(info, 7, 1, &[]), None);
        assert_eq!(mounted_in("garbage\n\n1 2", 7, 0, &[]), None);
    }
}
