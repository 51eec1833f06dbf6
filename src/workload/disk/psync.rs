//! The `psync` engine: each user's I/O on a thread of its own with
//! `pread`/`pwrite`, for kernels without io_uring (or where it is
//! disabled). The user hands its thread an I/O over a channel and awaits
//! the answer; the buffer travels with the request and back, so the thread
//! and the user never hold it at once. One channel hop and one small
//! allocation (the answer's channel) per I/O: io_uring is the engine for
//! measuring a fast device.

use super::mapping::PageBuffer;
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
    buf: PageBuffer,
    reply: oneshot::Sender<(i32, PageBuffer)>,
}

/// One user's I/O thread, and its buffer while the user holds it.
pub(crate) struct Psync {
    jobs: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
    buf: Option<PageBuffer>,
    /// The answer of an I/O abandoned at a timeout, with the buffer.
    pending: Option<oneshot::Receiver<(i32, PageBuffer)>>,
}

impl Psync {
    /// Starts the thread of a user whose transfers are at most `len` bytes.
    pub(crate) fn start(len: usize) -> std::io::Result<Psync> {
        let (jobs, inbox) = mpsc::channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("perflab-psync".to_string())
            .spawn(move || {
                for mut r in inbox {
                    let buf = r.buf.prefix_mut(r.len);
                    // SAFETY: pread/pwrite into/from the buffer we own, no
                    // longer than it.
                    let n = unsafe {
                        if r.write {
                            libc::pwrite(r.fd, buf.as_ptr().cast(), buf.len(), r.offset as i64)
                        } else {
                            libc::pread(r.fd, buf.as_mut_ptr().cast(), buf.len(), r.offset as i64)
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
            buf: Some(PageBuffer::new(len.max(4096))?),
            pending: None,
        })
    }

    /// The buffer, for filling before a write or reading after a read;
    /// empty while an abandoned I/O still holds it (the next I/O waits for
    /// it first).
    pub(crate) fn buffer(&mut self, len: usize) -> &mut [u8] {
        match self.buf.as_mut() {
            Some(b) => b.prefix_mut(len),
            None => &mut [],
        }
    }

    /// Waits for an I/O abandoned at a timeout to give the buffer back;
    /// false when the thread is gone.
    pub(crate) async fn settle(&mut self) -> bool {
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
    pub(crate) async fn io(&mut self, fd: RawFd, write: bool, offset: u64, len: u32) -> i32 {
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
