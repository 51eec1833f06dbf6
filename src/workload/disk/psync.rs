//! The `psync` engine: each user's I/O on a thread of its own with
//! `pread`/`pwrite`, for kernels without io_uring (or where it is
//! disabled). The user hands its thread an I/O over a channel and awaits
//! the answer; the buffer travels with the request and back, so the thread
//! and the user never hold it at once. One channel hop and one small
//! allocation (the answer's channel) per I/O: io_uring is the engine for
//! measuring a fast device.

use std::os::fd::RawFd;
use std::sync::mpsc;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// One I/O for the thread, with the buffer.
struct Request {
    fd: RawFd,
    write: bool,
    offset: u64,
    len: usize,
    buf: Buffer,
    reply: oneshot::Sender<(i32, Buffer)>,
}

/// A page-aligned buffer, as direct I/O wants.
pub struct Buffer {
    base: *mut u8,
    len: usize,
}

// SAFETY: the buffer is owned by one side at a time (moved with the request).
unsafe impl Send for Buffer {}

impl Buffer {
    pub fn new(len: usize) -> std::io::Result<Buffer> {
        let len = len.max(4096).next_multiple_of(4096);
        // SAFETY: an anonymous private mapping; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Buffer {
            base: base.cast(),
            len,
        })
    }

    /// The first `len` bytes.
    pub fn bytes(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: inside the mapping, which this value owns.
        unsafe { std::slice::from_raw_parts_mut(self.base, len.min(self.len)) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// One user's I/O thread, and its buffer while the user holds it.
pub struct Psync {
    jobs: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
    buf: Option<Buffer>,
    /// The answer of an I/O abandoned at a timeout, with the buffer.
    pending: Option<oneshot::Receiver<(i32, Buffer)>>,
}

impl Psync {
    /// Starts the thread of a user whose transfers are at most `len` bytes.
    pub fn start(len: usize) -> std::io::Result<Psync> {
        let (jobs, inbox) = mpsc::channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("perflab-psync".to_string())
            .spawn(move || {
                for mut r in inbox {
                    let buf = r.buf.bytes(r.len);
                    // SAFETY: pread/pwrite into/from a buffer of `len` bytes we own.
                    let n = unsafe {
                        if r.write {
                            libc::pwrite(r.fd, buf.as_ptr().cast(), r.len, r.offset as i64)
                        } else {
                            libc::pread(r.fd, buf.as_mut_ptr().cast(), r.len, r.offset as i64)
                        }
                    };
                    let result = if n < 0 {
                        -std::io::Error::last_os_error()
                            .raw_os_error()
                            .unwrap_or(libc::EIO)
                    } else {
                        n as i32
                    };
                    let _ = r.reply.send((result, r.buf));
                }
            })?;
        Ok(Psync {
            jobs: Some(jobs),
            thread: Some(thread),
            buf: Some(Buffer::new(len)?),
            pending: None,
        })
    }

    /// The buffer, for filling before a write or reading after a read;
    /// empty while an abandoned I/O still holds it (the next I/O waits for
    /// it first).
    pub fn buffer(&mut self, len: usize) -> &mut [u8] {
        match self.buf.as_mut() {
            Some(b) => b.bytes(len),
            None => &mut [],
        }
    }

    /// Waits for an I/O abandoned at a timeout to give the buffer back;
    /// false when the thread is gone.
    pub async fn settle(&mut self) -> bool {
        if self.buf.is_none() {
            let answered = match self.pending.as_mut() {
                Some(answer) => answer.await.ok(),
                None => None,
            };
            self.pending = None;
            if let Some((_, buf)) = answered {
                self.buf = Some(buf);
            }
        }
        self.buf.is_some()
    }

    /// Runs one I/O on the thread (after [`Psync::settle`]); the result as
    /// the kernel gives it.
    pub async fn io(&mut self, fd: RawFd, write: bool, offset: u64, len: u32) -> i32 {
        let (Some(jobs), Some(buf)) = (self.jobs.as_ref(), self.buf.take()) else {
            return -libc::EPIPE;
        };
        let (reply, answer) = oneshot::channel();
        let request = Request {
            fd,
            write,
            offset,
            len: len as usize,
            buf,
            reply,
        };
        if jobs.send(request).is_err() {
            return -libc::EPIPE;
        }
        let answer = self.pending.insert(answer);
        let answered = answer.await;
        self.pending = None;
        match answered {
            Ok((result, buf)) => {
                self.buf = Some(buf);
                result
            }
            Err(_) => -libc::EPIPE,
        }
    }
}

impl Drop for Psync {
    fn drop(&mut self) {
        // Closing the channel ends the thread after its last I/O.
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
