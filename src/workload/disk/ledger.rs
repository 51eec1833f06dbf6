//! The ledger: `PATH.perflab-ledger` beside a target file, mapped shared
//! into memory. It holds the file's size and id, whether it was
//! preconditioned to the end, the counter of its writes, and per sector the
//! generation of the last write acknowledged there. A write is recorded by
//! one store into the mapping when its completion arrives, so a process
//! killed with `kill -9` leaves the ledger of every write it saw
//! acknowledged (the page cache outlives the process), and `perflab check
//! disk` can name a lost write afterwards.
//!
//! Layout: a 4 KiB header — magic `PLEDGER1`, size u64, file id u64,
//! complete u64, next generation u64 — then one little-endian u64 per
//! 512-byte sector of the file.

use super::access::SECTOR;
use anyhow::{bail, Context};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: &[u8; 8] = b"PLEDGER1";
const HEADER: usize = 4096;

/// A target file's ledger, mapped.
pub struct Ledger {
    base: *mut u8,
    len: usize,
    sectors: u64,
    _file: File,
}

// SAFETY: the mapping is only read and written through atomics (the header
// fields and the per-sector words), and it lives as long as the value.
unsafe impl Send for Ledger {}
// SAFETY: as above: every access is atomic.
unsafe impl Sync for Ledger {}

impl Ledger {
    /// Where the ledger of a target file lives: beside it.
    pub fn path_for(target: &Path) -> PathBuf {
        let mut name = target.as_os_str().to_owned();
        name.push(".perflab-ledger");
        PathBuf::from(name)
    }

    /// The ledger at `path` when there is one; an error when the file
    /// there is not a ledger.
    pub fn open(path: &Path) -> anyhow::Result<Option<Ledger>> {
        let file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
        };
        let len = file.metadata()?.len();
        if len < HEADER as u64 {
            bail!(
                "{} is not a perflab ledger (too short); remove it",
                path.display()
            );
        }
        let ledger = Ledger::map(file, len as usize)?;
        let mut magic = [0u8; 8];
        for (i, b) in magic.iter_mut().enumerate() {
            // SAFETY: the header lies inside the mapping.
            *b = unsafe { *ledger.base.add(i) };
        }
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

    /// A fresh ledger at `path` for a target of `size` bytes, with a new
    /// id; nothing written yet.
    pub fn create(path: &Path, size: u64, file_id: u64) -> anyhow::Result<Ledger> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let sectors = size.div_ceil(SECTOR);
        let len = HEADER as u64 + sectors * 8;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        file.set_len(len)
            .with_context(|| format!("cannot size {}", path.display()))?;
        let ledger = Ledger::map(file, len as usize)?;
        for (i, b) in MAGIC.iter().enumerate() {
            // SAFETY: the header lies inside the mapping, which nothing else uses yet.
            unsafe { *ledger.base.add(i) = *b };
        }
        ledger.header(1).store(size, Ordering::Relaxed);
        ledger.header(2).store(file_id, Ordering::Relaxed);
        ledger.header(3).store(0, Ordering::Relaxed);
        ledger.header(4).store(1, Ordering::Relaxed);
        Ok(ledger)
    }

    fn map(file: File, len: usize) -> anyhow::Result<Ledger> {
        // SAFETY: a shared read-write mapping of a file we hold open, of
        // its length; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("cannot map the ledger");
        }
        Ok(Ledger {
            base: base.cast(),
            len,
            sectors: (len - HEADER) as u64 / 8,
            _file: file,
        })
    }

    /// Header word `i` (0 is the magic).
    fn header(&self, i: usize) -> &AtomicU64 {
        // SAFETY: word i < 512 lies in the 4 KiB header, 8-aligned (the
        // mapping is page-aligned), and is only accessed atomically.
        unsafe { &*self.base.add(i * 8).cast::<AtomicU64>() }
    }

    fn word(&self, sector: u64) -> Option<&AtomicU64> {
        (sector < self.sectors).then(|| {
            // SAFETY: inside the mapping (checked above), 8-aligned, atomic only.
            unsafe {
                &*self
                    .base
                    .add(HEADER + sector as usize * 8)
                    .cast::<AtomicU64>()
            }
        })
    }

    /// The file's size, bytes.
    pub fn size(&self) -> u64 {
        self.header(1).load(Ordering::Relaxed)
    }

    /// The file's id, in every sector perflab writes.
    pub fn file_id(&self) -> u64 {
        self.header(2).load(Ordering::Relaxed)
    }

    /// Whether a preconditioning pass wrote the file to its end.
    pub fn complete(&self) -> bool {
        self.header(3).load(Ordering::Acquire) == 1
    }

    /// Records that every sector has been written.
    pub fn set_complete(&self) {
        self.header(3).store(1, Ordering::Release);
    }

    /// The generation of a new write.
    pub fn next_generation(&self) -> u64 {
        self.header(4).fetch_add(1, Ordering::Relaxed)
    }

    /// Writes so far (the next generation).
    pub fn generations(&self) -> u64 {
        self.header(4).load(Ordering::Relaxed)
    }

    /// The last write acknowledged at the sector holding `offset` (0: none).
    pub fn acknowledged(&self, offset: u64) -> u64 {
        self.word(offset / SECTOR)
            .map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Records write `generation` of `len` bytes at `offset` as acknowledged.
    pub fn acknowledge(&self, offset: u64, len: u64, generation: u64) {
        for sector in offset / SECTOR..(offset + len).div_ceil(SECTOR) {
            if let Some(w) = self.word(sector) {
                w.store(generation, Ordering::Release);
            }
        }
    }

    /// Flushes the mapping to the file (after preconditioning).
    pub fn sync(&self) -> std::io::Result<()> {
        // SAFETY: the whole mapping, page-aligned.
        let rc = unsafe { libc::msync(self.base.cast(), self.len, libc::MS_SYNC) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
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
            let l = Ledger::create(&Ledger::path_for(&target), 1 << 20, 99).unwrap();
            assert_eq!(l.next_generation(), 1);
            assert_eq!(l.next_generation(), 2);
            l.acknowledge(4096, 8192, 2);
            assert!(!l.complete());
        }
        let l = Ledger::open(&Ledger::path_for(&target)).unwrap().unwrap();
        assert_eq!((l.size(), l.file_id(), l.generations()), (1 << 20, 99, 3));
        assert_eq!(l.acknowledged(4096), 2);
        assert_eq!(l.acknowledged(4096 + 8191), 2);
        assert_eq!(l.acknowledged(4096 + 8192), 0);
        assert_eq!(l.acknowledged(1 << 30), 0);
        assert!(Ledger::open(&dir.path().join("none")).unwrap().is_none());
        std::fs::write(dir.path().join("bad"), b"garbage").unwrap();
        assert!(Ledger::open(&dir.path().join("bad")).is_err());
    }
}
