//! Memory mappings the disk workload owns: the page-aligned buffers direct
//! I/O reads into and writes from, and the ledger's file mapped shared.
//! This module holds the disk workload's only `mmap`/`munmap`; everything
//! else sees safe slices.
//!
//! Why the slices handed out are sound, once for every function below:
//! - a [`Region`] is made only from a successful `mmap` of `len > 0` bytes
//!   readable and writable, and is unmapped exactly once, in its `Drop`;
//!   every slice borrows the owner, so it cannot outlive the mapping;
//! - an anonymous private mapping ([`PageBuffer`]) is memory no one else
//!   can reach: `&[u8]` from `&self` and `&mut [u8]` from `&mut self` follow
//!   Rust's usual aliasing, as a `Box<[u8]>` does;
//! - a shared file mapping ([`SharedWords`]) may change under us (another
//!   process with the file open, the kernel writing the page back), so it
//!   is only ever seen as `&[AtomicU64]`: every access is atomic, any bit
//!   pattern is a valid `u64`, and the page-aligned base satisfies the
//!   8-byte alignment. It is never seen as bytes.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

/// A mapping of `len` bytes at `base`, unmapped on drop.
struct Region {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a Region is plain memory owned by this value; which views of it
// may be shared between threads is decided by the public types below.
unsafe impl Send for Region {}

impl Region {
    /// Maps `len` bytes readable and writable: anonymous and private
    /// (`fd` none) or `fd`'s first `len` bytes, shared.
    fn map(len: usize, fd: Option<RawFd>) -> std::io::Result<Region> {
        if len == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a mapping of zero bytes",
            ));
        }
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED, fd),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
        };
        // SAFETY: a new mapping at an address the kernel picks, so no
        // existing memory is touched; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(base.cast()).ok_or_else(|| std::io::Error::other("mmap gave 0"))?;
        Ok(Region { base, len })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no slice of it
        // outlives `self` (module header).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A page-aligned buffer of whole pages, anonymous and private: what
/// direct I/O reads into and writes from.
pub(crate) struct PageBuffer(Region);

// SAFETY: `&PageBuffer` gives only `&[u8]` (module header).
unsafe impl Sync for PageBuffer {}

impl PageBuffer {
    /// A zeroed buffer of at least `len` bytes, rounded up to whole 4 KiB
    /// pages; `len` 0 is an error.
    pub(crate) fn new(len: usize) -> std::io::Result<PageBuffer> {
        let pages = len
            .checked_next_multiple_of(4096)
            .ok_or_else(|| std::io::Error::other("a buffer larger than memory"))?;
        Region::map(pages, None).map(PageBuffer)
    }

    /// Its length, bytes (whole pages).
    pub(crate) fn len(&self) -> usize {
        self.0.len
    }

    /// The start, for handing to the kernel (io_uring's registered
    /// buffers), which writes there only while the owner waits for it.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.0.base.as_ptr()
    }

    /// The whole buffer.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: module header (private mapping, borrowed from the owner).
        unsafe { std::slice::from_raw_parts(self.0.base.as_ptr(), self.0.len) }
    }

    /// The whole buffer, to fill.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: module header (private mapping, borrowed mutably).
        unsafe { std::slice::from_raw_parts_mut(self.0.base.as_ptr(), self.0.len) }
    }

    /// The first `len` bytes (all of them when `len` is longer).
    pub(crate) fn prefix_mut(&mut self, len: usize) -> &mut [u8] {
        let bytes = self.bytes_mut();
        let len = len.min(bytes.len());
        &mut bytes[..len]
    }
}

/// A file's first bytes mapped shared, seen as atomic 64-bit words, so
/// that every store is in the page cache at once (and outlives the
/// process).
pub(crate) struct SharedWords {
    region: Region,
    _file: File,
}

// SAFETY: every access goes through `&[AtomicU64]` (module header).
unsafe impl Sync for SharedWords {}

impl SharedWords {
    /// Maps the first `len` bytes of `file` (kept open while mapped);
    /// `len` must be a non-zero multiple of 8 no longer than the file.
    pub(crate) fn map(file: File, len: usize) -> std::io::Result<SharedWords> {
        if len % 8 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a mapping of part of a word",
            ));
        }
        let region = Region::map(len, Some(file.as_raw_fd()))?;
        Ok(SharedWords {
            region,
            _file: file,
        })
    }

    /// The mapping, word by word.
    pub(crate) fn words(&self) -> &[AtomicU64] {
        // SAFETY: module header (shared mapping seen only atomically,
        // page-aligned, `len` a multiple of 8).
        unsafe {
            std::slice::from_raw_parts(
                self.region.base.as_ptr().cast::<AtomicU64>(),
                self.region.len / 8,
            )
        }
    }

    /// Flushes the mapping to the file.
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        // SAFETY: the whole mapping, page-aligned; msync reads no memory of ours.
        let rc = unsafe {
            libc::msync(
                self.region.base.as_ptr().cast(),
                self.region.len,
                libc::MS_SYNC,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_page_buffer_is_whole_pages_kept_until_dropped() {
        let mut buf = PageBuffer::new(5000).unwrap();
        assert_eq!(buf.len(), 8192);
        assert_eq!(buf.as_mut_ptr() as usize % 4096, 0);
        assert!(buf.bytes().iter().all(|b| *b == 0));
        for (i, b) in buf.bytes_mut().iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        assert!(buf
            .bytes()
            .iter()
            .enumerate()
            .all(|(i, b)| *b == (i % 251) as u8));
        assert_eq!(buf.prefix_mut(3), [0, 1, 2]);
        assert_eq!(buf.prefix_mut(1 << 20).len(), 8192);
        drop(buf);
        assert_eq!(PageBuffer::new(1).unwrap().len(), 4096);
    }

    #[test]
    fn a_mapping_of_nothing_is_an_error() {
        let zero = PageBuffer::new(0).err().unwrap();
        assert_eq!(zero.kind(), std::io::ErrorKind::InvalidInput);
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        let zero = SharedWords::map(file.try_clone().unwrap(), 0)
            .err()
            .unwrap();
        assert_eq!(zero.kind(), std::io::ErrorKind::InvalidInput);
        assert!(SharedWords::map(file, 12).is_err());
    }

    #[test]
    fn shared_words_reach_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("words");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(4096).unwrap();
        let words = SharedWords::map(file, 4096).unwrap();
        assert_eq!(words.words().len(), 512);
        words.words()[1].store(0x0102_0304_0506_0708, Ordering::Relaxed);
        words.sync().unwrap();
        drop(words);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes[8..16], 0x0102_0304_0506_0708u64.to_ne_bytes());
    }
}
