//! The ledger: `PATH.perflab-ledger` beside a target file, mapped shared
//! into memory. It holds the file's size and id, whether it was
//! preconditioned to the end, the counter of its writes, and per sector the
//! generation of the last write acknowledged there. A write is recorded by
//! one store into the mapping when its completion arrives, so a process
//! killed with `kill -9` leaves the ledger of every write it saw
//! acknowledged (the page cache outlives the process), and `perflab check
//! disk` can name a lost write afterwards.
//!
//! The ledger also names the target file it belongs to ([`FileIdentity`]:
//! device, inode and birth time), so that a file removed and written again
//! by someone else under the same name is not taken for perflab's.
//!
//! Layout: a 4 KiB header — magic `PLEDGER1`, size u64, file id u64,
//! complete u64, next generation u64, identity recorded u64 (1; 0 in
//! ledgers older than it, and in a device's), the file's device u64,
//! inode u64, birth seconds u64 and nanoseconds u64 — then one
//! little-endian u64 per 512-byte sector of the file.

use super::access::SECTOR;
use super::mapping::SharedWords;
use anyhow::{bail, Context};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: &[u8; 8] = b"PLEDGER1";
const HEADER: usize = 4096;

/// Which file a ledger belongs to: the same path may later name another
/// file. The inode number alone is not enough (a file system reuses the
/// number of a removed file at once), so the birth time is kept too where
/// the file system records one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    /// The file system's device (`st_dev`).
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    /// The birth time, seconds and nanoseconds since the epoch; none where
    /// the file system does not report it.
    pub(crate) born: Option<(i64, u32)>,
}

impl FileIdentity {
    /// The identity of the file open as `file`.
    pub(crate) fn of(file: &File) -> std::io::Result<FileIdentity> {
        // An empty path with AT_EMPTY_PATH names the open file.
        let stx = crate::util::sys::statx(
            file.as_raw_fd(),
            c"",
            libc::AT_EMPTY_PATH,
            libc::STATX_INO | libc::STATX_BTIME,
        )?;
        Ok(FileIdentity {
            dev: libc::makedev(stx.stx_dev_major, stx.stx_dev_minor),
            ino: stx.stx_ino,
            born: (stx.stx_mask & libc::STATX_BTIME != 0)
                .then_some((stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec)),
        })
    }
}

/// A target file's ledger, mapped.
pub(crate) struct Ledger {
    words: SharedWords,
    sectors: u64,
}

impl Ledger {
    /// Where the ledger of a target file lives: beside it.
    pub(crate) fn path_for(target: &Path) -> PathBuf {
        let mut name = target.as_os_str().to_owned();
        name.push(".perflab-ledger");
        PathBuf::from(name)
    }

    /// The ledger at `path` when there is one; an error when the file
    /// there is not a ledger.
    pub(crate) fn open(path: &Path) -> anyhow::Result<Option<Ledger>> {
        // A ledger is a regular file perflab made, never a link to another.
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            // A FIFO or a device is opened without waiting on it.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => bail!(
                "{} is a symbolic link, not a perflab ledger; remove it",
                path.display()
            ),
            Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
        };
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            // Bad input (exit 2): what the user put where the ledger goes.
            return Err(crate::error::PlanError::new(format!(
                "{} is {}, not a regular file: it cannot be perflab's ledger of the target beside it; remove it",
                path.display(),
                crate::util::kind_of(meta.file_type())
            ))
            .into());
        }
        let len = meta.len();
        if len < HEADER as u64 {
            bail!(
                "{} is not a perflab ledger (too short); remove it",
                path.display()
            );
        }
        let ledger = Ledger::map(file, len as usize)?;
        let magic = ledger.header(0).load(Ordering::Relaxed).to_ne_bytes();
        if &magic != MAGIC
            || ledger.header(1).load(Ordering::Relaxed).div_ceil(SECTOR) != ledger.sectors
        {
            bail!(
                "{} is not a perflab ledger of this file; remove it and the file",
                path.display()
            );
        }
        Ok(Some(ledger))
    }

    /// The bytes of the ledger of a target of `size` bytes.
    pub(crate) fn bytes_for(size: u64) -> u64 {
        HEADER as u64 + size.div_ceil(SECTOR) * 8
    }

    /// A fresh ledger at `path` for a target of `size` bytes, with a new
    /// id, belonging to the file `identity` names (none: a device);
    /// nothing written yet. It replaces a ledger there (perflab's own:
    /// [`Ledger::open`] said so first) but follows no symbolic link.
    pub(crate) fn create(
        path: &Path,
        size: u64,
        file_id: u64,
        identity: Option<FileIdentity>,
    ) -> anyhow::Result<Ledger> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let len = Ledger::bytes_for(size);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        file.set_len(len)
            .with_context(|| format!("cannot size {}", path.display()))?;
        let ledger = Ledger::map(file, len as usize)?;
        ledger
            .header(0)
            .store(u64::from_ne_bytes(*MAGIC), Ordering::Relaxed);
        ledger.header(1).store(size, Ordering::Relaxed);
        ledger.header(2).store(file_id, Ordering::Relaxed);
        ledger.header(3).store(0, Ordering::Relaxed);
        ledger.header(4).store(1, Ordering::Relaxed);
        if let Some(id) = identity {
            let (secs, nanos) = id.born.unwrap_or((0, 0));
            ledger.header(6).store(id.dev, Ordering::Relaxed);
            ledger.header(7).store(id.ino, Ordering::Relaxed);
            ledger.header(8).store(secs as u64, Ordering::Relaxed);
            ledger.header(9).store(u64::from(nanos), Ordering::Relaxed);
            ledger.header(5).store(1, Ordering::Relaxed);
        }
        Ok(ledger)
    }

    /// Maps the whole words of `file`'s first `len` bytes (at least
    /// [`HEADER`]); a stray tail is left out, as is a sector it cannot hold.
    fn map(file: File, len: usize) -> anyhow::Result<Ledger> {
        let words = SharedWords::map(file, len / 8 * 8).context("cannot map the ledger")?;
        Ok(Ledger {
            words,
            sectors: (len - HEADER) as u64 / 8,
        })
    }

    /// Header word `i` (0 is the magic).
    fn header(&self, i: usize) -> &AtomicU64 {
        &self.words.words()[i]
    }

    fn word(&self, sector: u64) -> Option<&AtomicU64> {
        (sector < self.sectors).then(|| &self.words.words()[HEADER / 8 + sector as usize])
    }

    /// The file's size, bytes.
    pub(crate) fn size(&self) -> u64 {
        self.header(1).load(Ordering::Relaxed)
    }

    /// The file's id, in every sector perflab writes.
    pub(crate) fn file_id(&self) -> u64 {
        self.header(2).load(Ordering::Relaxed)
    }

    /// The file this ledger belongs to, when it records one.
    pub(crate) fn identity(&self) -> Option<FileIdentity> {
        (self.header(5).load(Ordering::Relaxed) == 1).then(|| {
            let (secs, nanos) = (
                self.header(8).load(Ordering::Relaxed) as i64,
                self.header(9).load(Ordering::Relaxed) as u32,
            );
            FileIdentity {
                dev: self.header(6).load(Ordering::Relaxed),
                ino: self.header(7).load(Ordering::Relaxed),
                born: (secs != 0 || nanos != 0).then_some((secs, nanos)),
            }
        })
    }

    /// Whether `file` is the file this ledger was made for: the same
    /// device and inode, born at the same instant where both birth times
    /// are known. `None` for a ledger that records no file (older ledgers,
    /// a device's): the caller must judge by the file's content.
    pub(crate) fn belongs_to(&self, file: &FileIdentity) -> Option<bool> {
        let mine = self.identity()?;
        Some(
            mine.dev == file.dev
                && mine.ino == file.ino
                && match (mine.born, file.born) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                },
        )
    }

    /// Whether a preconditioning pass wrote the file to its end.
    pub(crate) fn complete(&self) -> bool {
        self.header(3).load(Ordering::Acquire) == 1
    }

    /// Records that every sector has been written.
    pub(crate) fn set_complete(&self) {
        self.header(3).store(1, Ordering::Release);
    }

    /// The generation of a new write.
    pub(crate) fn next_generation(&self) -> u64 {
        self.header(4).fetch_add(1, Ordering::Relaxed)
    }

    /// The last write acknowledged at the sector holding `offset` (0: none).
    pub(crate) fn acknowledged(&self, offset: u64) -> u64 {
        self.word(offset / SECTOR)
            .map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Records write `generation` of `len` bytes at `offset` as acknowledged.
    pub(crate) fn acknowledge(&self, offset: u64, len: u64, generation: u64) {
        for sector in offset / SECTOR..(offset + len).div_ceil(SECTOR) {
            if let Some(w) = self.word(sector) {
                w.store(generation, Ordering::Release);
            }
        }
    }

    /// Flushes the mapping to the file (after preconditioning).
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        self.words.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_keeps_what_was_acknowledged_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t.bin");
        {
            let l = Ledger::create(&Ledger::path_for(&target), 1 << 20, 99, None).unwrap();
            assert_eq!(l.next_generation(), 1);
            assert_eq!(l.next_generation(), 2);
            l.acknowledge(4096, 8192, 2);
            assert!(!l.complete());
        }
        let l = Ledger::open(&Ledger::path_for(&target)).unwrap().unwrap();
        assert_eq!(
            (l.size(), l.file_id(), l.next_generation()),
            (1 << 20, 99, 3)
        );
        assert_eq!(l.acknowledged(4096), 2);
        assert_eq!(l.acknowledged(4096 + 8191), 2);
        assert_eq!(l.acknowledged(4096 + 8192), 0);
        assert_eq!(l.acknowledged(1 << 30), 0);
        assert!(Ledger::open(&dir.path().join("none")).unwrap().is_none());
        std::fs::write(dir.path().join("bad"), b"garbage").unwrap();
        assert!(Ledger::open(&dir.path().join("bad")).is_err());
        assert_eq!(l.identity(), None);
    }

    #[test]
    fn a_ledger_knows_its_file_and_not_one_written_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t.bin");
        let file = File::create(&target).unwrap();
        let id = FileIdentity::of(&file).unwrap();
        let at = Ledger::path_for(&target);
        Ledger::create(&at, 1 << 20, 7, Some(id)).unwrap();
        let l = Ledger::open(&at).unwrap().unwrap();
        assert_eq!(l.identity(), Some(id));
        assert_eq!(l.belongs_to(&id), Some(true));
        drop(file);
        std::fs::remove_file(&target).unwrap();
        let other = File::create(&target).unwrap();
        let other = FileIdentity::of(&other).unwrap();
        // The file system may hand the new file the old inode number; the
        // birth time tells them apart where it is known.
        if other.ino != id.ino || other.born.is_some() {
            assert_eq!(l.belongs_to(&other), Some(false));
        }
        // A ledger is never a symbolic link.
        let link = dir.path().join("link.perflab-ledger");
        std::os::unix::fs::symlink(&at, &link).unwrap();
        assert!(Ledger::open(&link).is_err());
        assert!(Ledger::create(&link, 1 << 20, 1, None).is_err());
    }
}
