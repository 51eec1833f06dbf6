//! io_uring on a worker thread: one ring per worker, shared by the users
//! of that thread. Each user owns a slot — a buffer of the spec's largest
//! transfer, mapped anonymously and registered with the ring (fixed
//! buffers: pages pinned once, not per I/O) — and has at most one I/O in
//! flight in it. A user pushes its submission and, while the kernel holds
//! fewer than half of the ring's I/Os, submits it at once: a device is
//! not left short of work while the users woken with it take their turns
//! (on the virtual disk here, at depth 32, one submission for every woken
//! user's I/O left about a third of the 32 out of the device at a time:
//! 4k random reads at 0.78 of fio's rate and writes at 0.70 (medians of 5
//! rounds of 5 s); submitting early, 1.01 and 0.95).
//! Otherwise it wakes the thread's submitter task, which runs after every
//! user woken before it has pushed its own: one `io_uring_enter` submits
//! them all. Completions are announced on an eventfd that a reaper task
//! waits on, which hands each result to its slot and wakes the user. When
//! every user of the ring has an I/O in flight (nothing of the thread's
//! can run until one completes), the last user to push waits in the
//! kernel for the first completion itself, at most 50 ms, with the eventfd
//! muted — one system call per round of I/Os instead of three, and no
//! task between (at depth 1, one poll of the user per I/O instead of a
//! poll of the submitter and a wake-up of the user). The bound only matters
//! to a device that stalls (the thread's timers — step ends, I/O timeouts
//! — run up to 50 ms late then); a bound near the I/O's own time arms the
//! CPU's timer on every wait, which in a virtual machine cost more than
//! the I/O: 1 ms gave 17,000 IOPS at depth 1 on a RAM-backed device at 29
//! µs of CPU per I/O, 50 ms 24,000 at 19 µs. No allocation and no other
//! thread on the way of an I/O.
//!
//! A thread whose users run as one loop (no think time, no delay between
//! bursts: [`super::batch`]) drives the ring itself instead: it queues a
//! round of I/Os, submits them and waits for the first completion in one
//! `io_uring_enter`, and reaps the completions; the eventfd is muted and
//! the reaper and submitter tasks end ([`Ring::drive`]).
//!
//! An I/O abandoned by its user (a timeout) keeps its slot busy until the
//! kernel completes it, so its buffer is never reused early; the ring is
//! closed before the buffers are unmapped.

use super::mapping::{PageArena, PageBuffer};
use io_uring::{opcode, squeue, types, IoUring};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};
use tokio::io::unix::AsyncFd;

/// Registered buffer slots per ring: users one worker thread can hold.
pub(crate) const MAX_SLOTS: u32 = 4096;
/// Submission queue entries.
const ENTRIES: u32 = 1024;
/// The longest the submitter waits in the kernel for a completion: far
/// above an I/O's time, so that the kernel's timer for it is not the next
/// to expire and arming it reprograms nothing.
const WAIT_IN_KERNEL: types::Timespec = types::Timespec::new().nsec(50_000_000);

thread_local! {
    static RING: RefCell<Weak<Ring>> = const { RefCell::new(Weak::new()) };
}

impl Drop for Ring {
    /// Gives the target file back before the ring closes: a closed ring is
    /// torn down by the kernel after the process may have ended, and until
    /// then its registered file kept the file system busy (`umount` right
    /// after a run failed, every time, on a tmpfs).
    fn drop(&mut self) {
        if self.fixed.get().is_some() {
            let _ = self.uring.submitter().unregister_files();
        }
    }
}

/// Where one slot's I/O stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    InFlight,
    Done(i32),
}

struct Slot {
    /// The user's buffer, registered with the ring.
    buffer: RefCell<PageBuffer>,
    state: Cell<State>,
    waker: RefCell<Option<Waker>>,
}

/// A worker thread's ring. Fields drop in order: the ring closes before
/// the slots' buffers it may still be writing are unmapped.
pub(crate) struct Ring {
    uring: IoUring,
    event: AsyncFd<OwnedFd>,
    slots: RefCell<Vec<Slot>>,
    /// Where the slots' buffers are carved from (chunks that may be huge
    /// pages: a buffer in contiguous memory).
    arena: RefCell<PageArena>,
    /// I/Os pushed and not yet submitted, and the submitter's waker.
    unsubmitted: Cell<u32>,
    submitter: RefCell<Option<Waker>>,
    /// I/Os submitted whose completion has not been drained.
    in_flight: Cell<u32>,
    /// One loop of the thread submits, waits and reaps itself
    /// ([`Ring::drive`]): the reaper and submitter tasks have ended.
    driven: Cell<bool>,
    /// The descriptor registered with the ring as its fixed file 0: its
    /// I/Os name that, and the kernel takes no reference to the file per I/O.
    fixed: Cell<Option<RawFd>>,
}

impl Ring {
    /// This worker thread's ring, made (with its reaper task) on first use.
    /// Must run inside the worker's `LocalSet`.
    pub(crate) fn for_thread() -> std::io::Result<Rc<Ring>> {
        if let Some(ring) = RING.with(|r| r.borrow().upgrade()) {
            return Ok(ring);
        }
        // Completions are taken when the thread next enters the kernel (it
        // does so to wait, and its reaper to read the eventfd), not by an
        // interrupt of whatever it runs in user space (kernels 5.19 on;
        // older ones build the ring without it).
        let uring = IoUring::builder()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(ENTRIES)
            .or_else(|_| IoUring::builder().build(ENTRIES))?;
        uring.submitter().register_buffers_sparse(MAX_SLOTS)?;
        // SAFETY: eventfd with flags only; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just created and owned by nothing else.
        let event = unsafe { OwnedFd::from_raw_fd(fd) };
        uring.submitter().register_eventfd(event.as_raw_fd())?;
        let ring = Rc::new(Ring {
            uring,
            // SAFETY: an OwnedFd returns the one descriptor it owns, open
            // until the AsyncFd (which owns it) is dropped.
            event: unsafe { AsyncFd::register_with_interest(event, tokio::io::Interest::READABLE) }
                .map_err(|e| e.into_parts().1)?,
            slots: RefCell::new(Vec::new()),
            arena: RefCell::new(PageArena::default()),
            unsubmitted: Cell::new(0),
            submitter: RefCell::new(None),
            in_flight: Cell::new(0),
            driven: Cell::new(false),
            fixed: Cell::new(None),
        });
        tokio::task::spawn_local(reap(ring.clone()));
        tokio::task::spawn_local(submit(ring.clone()));
        RING.with(|r| *r.borrow_mut() = Rc::downgrade(&ring));
        Ok(ring)
    }

    /// A new slot with a registered buffer of `len` bytes, for one user:
    /// its index. The ring keeps the buffer mapped until it is closed.
    pub(crate) fn slot(&self, len: usize) -> std::io::Result<usize> {
        let index = self.slots.borrow().len();
        if index >= MAX_SLOTS as usize {
            return Err(std::io::Error::other(format!(
                "more than {MAX_SLOTS} users on one worker thread; give more --threads"
            )));
        }
        let mut buffer = self.arena.borrow_mut().take(len.max(4096))?;
        let iov = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: buffer.len(),
        };
        // SAFETY: the buffer stays mapped until the ring is closed (field
        // order), and the kernel writes it only during an I/O of the slot.
        unsafe {
            self.uring
                .submitter()
                .register_buffers_update(index as u32, &[iov], None)?
        };
        self.slots.borrow_mut().push(Slot {
            buffer: RefCell::new(buffer),
            state: Cell::new(State::Idle),
            waker: RefCell::new(None),
        });
        Ok(index)
    }

    /// Runs `f` on the first `len` bytes of slot `index`'s buffer, for
    /// filling before a write or reading after a read: only while no I/O
    /// of the slot is in flight (after [`Ring::settle`], before
    /// [`Ring::io`]).
    pub(crate) fn with_buffer<R>(
        &self,
        index: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        let slots = self.slots.borrow();
        let mut buffer = slots[index].buffer.borrow_mut();
        f(buffer.prefix_mut(len))
    }

    /// Waits for an I/O of slot `index` abandoned at a timeout to end, so
    /// that its buffer may be reused.
    pub(crate) async fn settle(&self, index: usize) {
        let busy = self.slots.borrow()[index].state.get();
        match busy {
            State::InFlight => {
                Completion { ring: self, index }.await;
            }
            State::Done(_) => self.slots.borrow()[index].state.set(State::Idle),
            State::Idle => {}
        }
    }

    /// Reads (`write` false) or writes `len` bytes of slot `index`'s buffer
    /// at `offset` of `fd` (after [`Ring::settle`]); the result as the kernel gives it (bytes, or a
    /// negated errno).
    pub(crate) async fn io(
        &self,
        index: usize,
        fd: RawFd,
        write: bool,
        offset: u64,
        len: u32,
    ) -> i32 {
        if let Err(e) = self.queue(index, fd, write, offset, len) {
            return -e.raw_os_error().unwrap_or(libc::EIO);
        }
        if self.everyone_waits() {
            // The last user to go in flight: nothing of the thread's can
            // run until an I/O completes, so it submits them all and waits
            // in the kernel itself (no wake-up of the submitter between).
            self.wait_in_kernel();
        } else {
            self.submit_if_short();
            if self.unsubmitted.get() == 1 {
                if let Some(w) = self.submitter.borrow_mut().take() {
                    w.wake();
                }
            }
        }
        Completion { ring: self, index }.await
    }

    /// Queues a read (`write` false) or write of `len` bytes of slot
    /// `index`'s buffer at `offset` of `fd`, not yet submitted; the slot is
    /// in flight from now.
    pub(crate) fn queue(
        &self,
        index: usize,
        fd: RawFd,
        write: bool,
        offset: u64,
        len: u32,
    ) -> std::io::Result<()> {
        let buf = self.slots.borrow()[index].buffer.borrow_mut().as_mut_ptr();
        // The file registered as the ring's fixed file 0 is named by its
        // index, with the fixed-file flag: the kernel takes no reference
        // to it per I/O.
        let fixed = self.fixed.get() == Some(fd);
        let target = types::Fd(if fixed { 0 } else { fd });
        let entry = if write {
            opcode::WriteFixed::new(target, buf, len, index as u16)
                .offset(offset)
                .build()
        } else {
            opcode::ReadFixed::new(target, buf, len, index as u16)
                .offset(offset)
                .build()
        };
        let entry = if fixed {
            entry.flags(squeue::Flags::FIXED_FILE)
        } else {
            entry
        }
        .user_data(index as u64);
        self.push(&entry)?;
        self.slots.borrow()[index].state.set(State::InFlight);
        self.in_flight.set(self.in_flight.get() + 1);
        self.unsubmitted.set(self.unsubmitted.get() + 1);
        Ok(())
    }

    /// Submits what is queued at once when the kernel holds fewer than
    /// half of the ring's I/Os: a device is not left short of work while
    /// the other users of the round ready theirs.
    pub(crate) fn submit_if_short(&self) {
        let in_kernel = self.in_flight.get() - self.unsubmitted.get();
        if (in_kernel as usize) < self.slots.borrow().len() / 2 {
            let _ = self.uring.submit();
            self.unsubmitted.set(0);
        }
    }

    /// Hands the ring to one loop that runs every user of the thread and
    /// submits, waits and reaps itself ([`Ring::submit_and_reap`]), all on
    /// the file `fd`, which is registered with the ring (where the kernel
    /// refuses, its I/Os name the descriptor as before): the eventfd is
    /// muted for good and the reaper and submitter tasks end, so that no
    /// completion is taken from that loop.
    pub(crate) fn drive(&self, fd: RawFd) {
        if self.fixed.get().is_none() && self.uring.submitter().register_files(&[fd]).is_ok() {
            self.fixed.set(Some(fd));
        }
        self.driven.set(true);
        // SAFETY: only this thread touches the completion queue.
        unsafe { self.uring.completion_shared() }.disable_eventfd();
        if let Some(w) = self.submitter.borrow_mut().take() {
            w.wake();
        }
    }

    /// For a driven ring: submits every I/O queued, waits in the kernel
    /// until one completes or `bound` has passed (or a signal arrives),
    /// then gives `done` each completion's slot and result. One system
    /// call for a round of I/Os.
    pub(crate) fn submit_and_reap(
        &self,
        bound: std::time::Duration,
        mut done: impl FnMut(usize, i32),
    ) {
        self.unsubmitted.set(0);
        let bound = types::Timespec::from(bound);
        let args = types::SubmitArgs::new().timespec(&bound);
        // A timeout (ETIME) or a signal (EINTR) only ends the wait early.
        let _ = self.uring.submitter().submit_with_args(1, &args);
        // SAFETY: only this thread touches the completion queue.
        let cq = unsafe { self.uring.completion_shared() };
        let slots = self.slots.borrow();
        for cqe in cq {
            let index = cqe.user_data() as usize;
            if let Some(slot) = slots.get(index) {
                self.in_flight.set(self.in_flight.get().saturating_sub(1));
                slot.state.set(State::Idle);
                done(index, cqe.result());
            }
        }
    }

    /// Submits every I/O pushed and waits in the kernel for the first
    /// completion (eventfd muted, at most [`WAIT_IN_KERNEL`]), then hands
    /// the completions out: one system call for a round of I/Os.
    fn wait_in_kernel(&self) {
        self.unsubmitted.set(0);
        // SAFETY: only this thread touches the completion queue.
        let cq = unsafe { self.uring.completion_shared() };
        cq.disable_eventfd();
        let args = types::SubmitArgs::new().timespec(&WAIT_IN_KERNEL);
        let _ = self.uring.submitter().submit_with_args(1, &args);
        cq.enable_eventfd();
        drop(cq);
        self.drain();
    }

    /// Every user of the ring has an I/O in flight: nothing of the thread's
    /// can run until one completes.
    fn everyone_waits(&self) -> bool {
        self.in_flight.get() as usize == self.slots.borrow().len()
    }

    /// Queues one entry, entering the kernel first when the queue is full.
    fn push(&self, entry: &squeue::Entry) -> std::io::Result<()> {
        loop {
            // SAFETY: the entry's buffer is a registered slot that stays
            // mapped, and the slot is marked in flight before it is submitted.
            let pushed = unsafe { self.uring.submission_shared().push(entry) };
            if pushed.is_ok() {
                return Ok(());
            }
            self.uring.submit()?;
            self.unsubmitted.set(0);
        }
    }

    /// Hands every completion to its slot and wakes its user (not on a
    /// driven ring, whose loop reaps its own).
    fn drain(&self) {
        if self.driven.get() {
            return;
        }
        // SAFETY: only the reaper of this thread reads the completion queue.
        let cq = unsafe { self.uring.completion_shared() };
        let slots = self.slots.borrow();
        for cqe in cq {
            if let Some(slot) = slots.get(cqe.user_data() as usize) {
                self.in_flight.set(self.in_flight.get().saturating_sub(1));
                slot.state.set(State::Done(cqe.result()));
                if let Some(w) = slot.waker.borrow_mut().take() {
                    w.wake();
                }
            }
        }
    }
}

/// The completion of slot `index`'s I/O.
struct Completion<'a> {
    ring: &'a Ring,
    index: usize,
}

impl Future for Completion<'_> {
    type Output = i32;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<i32> {
        let slots = self.ring.slots.borrow();
        let slot = &slots[self.index];
        match slot.state.get() {
            State::Done(result) => {
                slot.state.set(State::Idle);
                Poll::Ready(result)
            }
            State::Idle => Poll::Ready(-libc::ECANCELED),
            State::InFlight => {
                let mut waker = slot.waker.borrow_mut();
                match waker.as_mut() {
                    Some(w) => w.clone_from(cx.waker()),
                    None => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

/// The submitter of a thread's ring: woken by the first I/O pushed and not
/// submitted, it runs after the users woken before it, and submits every
/// I/O they pushed at once; if by then every user's I/O is in flight, it
/// waits for the first completion in the kernel and hands the completions
/// out itself (as the last user to push does). Ends with the worker's
/// runtime.
async fn submit(ring: Rc<Ring>) {
    loop {
        std::future::poll_fn(|cx| {
            if ring.driven.get() || ring.unsubmitted.get() > 0 || ring.everyone_waits() {
                Poll::Ready(())
            } else {
                let mut w = ring.submitter.borrow_mut();
                match w.as_mut() {
                    Some(w) => w.clone_from(cx.waker()),
                    None => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        })
        .await;
        if ring.driven.get() {
            return;
        }
        if ring.everyone_waits() {
            ring.wait_in_kernel();
        } else {
            ring.unsubmitted.set(0);
            let _ = ring.uring.submit();
        }
    }
}

/// The reaper of a thread's ring: waits on the eventfd, drains the
/// completions. Ends with the worker's runtime.
async fn reap(ring: Rc<Ring>) {
    loop {
        let Ok(mut guard) = ring.event.readable().await else {
            return;
        };
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into a local array from our eventfd.
        unsafe {
            libc::read(
                ring.event.get_ref().as_raw_fd(),
                count.as_mut_ptr().cast(),
                8,
            )
        };
        guard.clear_ready();
        if ring.driven.get() {
            return;
        }
        ring.drain();
    }
}
