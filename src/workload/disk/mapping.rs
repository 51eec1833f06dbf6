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
//!   Rust's usual aliasing, as a `Box<[u8]>` does; buffers that a
//!   [`PageArena`] carves from one mapping hold ranges of it that do not
//!   overlap, each handed out once, so the same holds for each;
//! - a shared file mapping ([`SharedWords`]) may change under us (another
//!   process with the file open, the kernel writing the page back), so it
//!   is only ever seen as `&[AtomicU64]`: every access is atomic, any bit
//!   pattern is a valid `u64`, and the page-aligned base satisfies the
//!   8-byte alignment. It is never seen as bytes.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// A mapping of `len` bytes at `base`, unmapped on drop.
struct Region {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a Region is plain memory owned by this value; which views of it
// may be shared between threads is decided by the public types below.
unsafe impl Send for Region {}
// SAFETY: as above; a Region itself gives no view of its memory.
unsafe impl Sync for Region {}

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

    /// Maps `len` bytes (a multiple of [`HUGE`]) anonymous and private at
    /// an address aligned to [`HUGE`], and asks the kernel to back them with
    /// huge pages where it can (a kernel without them, or with them off,
    /// gives small pages: the same memory, only less often contiguous).
    fn map_huge(len: usize) -> std::io::Result<Region> {
        let room = len
            .checked_add(HUGE)
            .ok_or_else(|| std::io::Error::other("a buffer larger than memory"))?;
        let wide = Region::map(room, None)?;
        let start = wide.base.as_ptr() as usize;
        let head = start.next_multiple_of(HUGE) - start;
        let tail = room - head - len;
        std::mem::forget(wide);
        // SAFETY: the head and tail are parts of the mapping just made, of
        // which nothing else knows; what stays is `len` bytes from `start
        // + head`, owned by the Region returned.
        unsafe {
            if head > 0 {
                libc::munmap(start as *mut libc::c_void, head);
            }
            if tail > 0 {
                libc::munmap((start + head + len) as *mut libc::c_void, tail);
            }
        }
        let base = NonNull::new((start + head) as *mut u8)
            .ok_or_else(|| std::io::Error::other("mmap gave 0"))?;
        // SAFETY: advice on our own mapping; a refusal changes nothing.
        unsafe { libc::madvise(base.as_ptr().cast(), len, libc::MADV_HUGEPAGE) };
        Ok(Region { base, len })
    }
}

/// A huge page on x86-64 and arm64 (4 KiB pages), and the chunk a
/// [`PageArena`] carves its buffers from.
const HUGE: usize = 2 << 20;

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no slice of it
        // outlives `self` (module header).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A page-aligned buffer of whole pages, anonymous and private: what
/// direct I/O reads into and writes from. Its own mapping, or `len` bytes
/// at `offset` of a chunk it shares with other buffers of a [`PageArena`].
pub(crate) struct PageBuffer {
    region: Arc<Region>,
    offset: usize,
    len: usize,
}

// SAFETY: `&PageBuffer` gives only `&[u8]` (module header).
unsafe impl Sync for PageBuffer {}

impl PageBuffer {
    /// A zeroed buffer of at least `len` bytes, rounded up to whole 4 KiB
    /// pages; `len` 0 is an error.
    pub(crate) fn new(len: usize) -> std::io::Result<PageBuffer> {
        let pages = whole_pages(len)?;
        let region = Arc::new(Region::map(pages, None)?);
        Ok(PageBuffer {
            region,
            offset: 0,
            len: pages,
        })
    }

    /// Its length, bytes (whole pages).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The start, for handing to the kernel (io_uring's registered
    /// buffers), which writes there only while the owner waits for it.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        // SAFETY: `offset` is within the region (it and `len` end at or
        // before the region's end: PageArena::take).
        unsafe { self.region.base.as_ptr().add(self.offset) }
    }

    /// The whole buffer.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: module header (private mapping, this buffer's own range,
        // borrowed from the owner).
        unsafe { std::slice::from_raw_parts(self.region.base.as_ptr().add(self.offset), self.len) }
    }

    /// The whole buffer, to fill.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: module header (private mapping, this buffer's own range,
        // borrowed mutably).
        unsafe {
            std::slice::from_raw_parts_mut(self.region.base.as_ptr().add(self.offset), self.len)
        }
    }

    /// The first `len` bytes (all of them when `len` is longer).
    pub(crate) fn prefix_mut(&mut self, len: usize) -> &mut [u8] {
        let bytes = self.bytes_mut();
        let len = len.min(bytes.len());
        &mut bytes[..len]
    }
}

/// `len` rounded up to whole 4 KiB pages; 0 is an error.
fn whole_pages(len: usize) -> std::io::Result<usize> {
    if len == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a mapping of zero bytes",
        ));
    }
    len.checked_next_multiple_of(4096)
        .ok_or_else(|| std::io::Error::other("a buffer larger than memory"))
}

/// Page buffers carved one after the other from 2 MiB chunks, each chunk
/// aligned and offered to the kernel for one huge page: a buffer then lies
/// in physically contiguous memory, and a device that takes an I/O as a
/// list of memory segments (a virtual disk's queue) gets one where
/// separately mapped pages made one per page. On a virtual disk
/// (`bench/fio.sh 5 5 256MiB`), a user's job file mixing 4 KiB and 64 KiB
/// I/Os at depth 32 went from 0.81-0.92 of fio's IOPS (three runs) to 1.46
/// (1.38-1.56), the file-server spec from 0.88 to 1.18. A buffer longer
/// than a chunk has chunks of its own.
/// Costs at most one chunk's slack per arena (a worker thread's ring).
#[derive(Default)]
pub(crate) struct PageArena {
    chunk: Option<Arc<Region>>,
    used: usize,
}

impl PageArena {
    /// A zeroed buffer of at least `len` bytes (whole pages), in the
    /// current chunk when it has room, else at the start of a new one.
    pub(crate) fn take(&mut self, len: usize) -> std::io::Result<PageBuffer> {
        let pages = whole_pages(len)?;
        if pages > HUGE {
            let region = Region::map_huge(pages.next_multiple_of(HUGE))?;
            return Ok(PageBuffer {
                region: Arc::new(region),
                offset: 0,
                len: pages,
            });
        }
        let region = match &self.chunk {
            Some(chunk) if HUGE - self.used >= pages => chunk.clone(),
            _ => {
                let chunk = Arc::new(Region::map_huge(HUGE)?);
                self.chunk = Some(chunk.clone());
                self.used = 0;
                chunk
            }
        };
        let offset = self.used;
        self.used += pages;
        Ok(PageBuffer {
            region,
            offset,
            len: pages,
        })
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

    /// The arena's buffers: whole pages, one after the other in a 2 MiB
    /// chunk aligned to 2 MiB, each its own (what is written to one is in
    /// no other), a new chunk where the last has no room, and a buffer
    /// longer than a chunk in chunks of its own; each kept while held,
    /// whatever became of the arena.
    #[test]
    fn an_arena_carves_whole_pages_from_aligned_chunks_each_buffer_its_own() {
        let mut arena = PageArena::default();
        let mut first = arena.take(5000).unwrap();
        let mut second = arena.take(64 << 10).unwrap();
        assert_eq!((first.len(), second.len()), (8192, 64 << 10));
        let start = first.as_mut_ptr() as usize;
        assert_eq!(start % HUGE, 0);
        assert_eq!(second.as_mut_ptr() as usize, start + 8192);
        first.bytes_mut().fill(1);
        second.bytes_mut().fill(2);
        assert!(first.bytes().iter().all(|b| *b == 1));
        assert!(second.bytes().iter().all(|b| *b == 2));
        // The chunk holds 2 MiB: 8 KiB + 64 KiB + 30 × 64 KiB fill all
        // but 56 KiB of it; a 64 KiB buffer starts a new chunk.
        let rest: Vec<_> = (0..30).map(|_| arena.take(64 << 10).unwrap()).collect();
        assert_eq!(
            rest[29].bytes().as_ptr() as usize,
            start + 8192 + (30 << 16)
        );
        let mut next = arena.take(64 << 10).unwrap();
        let next_start = next.as_mut_ptr() as usize;
        assert_eq!(next_start % HUGE, 0);
        assert_ne!(next_start, start);
        assert!(next.bytes().iter().all(|b| *b == 0));
        let mut big = arena.take(HUGE + 1).unwrap();
        assert_eq!(big.len(), HUGE + 4096);
        assert_eq!(big.as_mut_ptr() as usize % HUGE, 0);
        big.bytes_mut().fill(3);
        assert_eq!(
            arena.take(4096).unwrap().as_mut_ptr() as usize,
            next_start + (64 << 10)
        );
        drop(arena);
        drop(rest);
        assert!(first.bytes().iter().all(|b| *b == 1));
        assert!(big.bytes().iter().all(|b| *b == 3));
        assert_eq!(
            PageArena::default().take(0).err().unwrap().kind(),
            std::io::ErrorKind::InvalidInput
        );
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
