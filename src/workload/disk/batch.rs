//! The disk's users of one worker thread as one loop ([`Batch`]): on
//! io_uring, with no delay between bursts, the engine runs no task per
//! user. Each round every idle user readies its I/O (a place claimed, a
//! write stamped) and queues it on the thread's ring, the target registered
//! with the ring as a fixed file; one `io_uring_enter`
//! submits the round and waits for the first completion; each completion
//! is checked and acknowledged as a user's task would, and its user starts
//! again in the next round. No poll, wake-up, eventfd or yield per I/O.

use super::session::{DiskSession, Prepared, Shared, DRAWS, PLACE_ROUNDS};
use super::uring::Ring;
use super::Engine;
use crate::measure::{ErrorKind, Outcome};
use crate::workload::{Batch, Issued, Session};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

/// A worker thread's disk users and their ring.
pub(super) struct DiskBatch {
    /// Dropped before the ring they share (their buffers outlive it).
    sessions: Vec<DiskSession>,
    ring: Rc<Ring>,
    fd: RawFd,
    /// Per user: its slot of the ring, and its I/O queued or in flight.
    slot: Vec<usize>,
    pending: Vec<Option<Prepared>>,
    /// Per user: its I/O was given up at a timeout and has not ended.
    abandoned: Vec<bool>,
    /// The user of each slot of the ring.
    user_of_slot: Vec<usize>,
    /// The last wait's completions (slot, result), and the next to hand out.
    done: Vec<(usize, i32)>,
    next: usize,
}

impl DiskBatch {
    /// The thread's users as one loop, when they can run so: all on one
    /// ring (io_uring) and no delay owed between bursts. Otherwise the
    /// sessions back.
    pub(super) fn new(
        sessions: Vec<DiskSession>,
        shared: &Shared,
    ) -> Result<DiskBatch, Vec<DiskSession>> {
        let no_delays = shared.spec.lines.iter().all(|l| l.delay.is_zero());
        if shared.engine != Engine::Uring || !no_delays {
            return Err(sessions);
        }
        let mut ring: Option<Rc<Ring>> = None;
        let mut slot = Vec::with_capacity(sessions.len());
        for s in &sessions {
            match (s.ring_slot(), &ring) {
                (Some((r, i)), None) => {
                    ring = Some(r.clone());
                    slot.push(i);
                }
                (Some((r, i)), Some(first)) if Rc::ptr_eq(r, first) => slot.push(i),
                _ => return Err(sessions),
            }
        }
        let Some(ring) = ring else {
            return Err(sessions);
        };
        let slots = slot.iter().max().map_or(0, |m| m + 1);
        let mut user_of_slot = vec![usize::MAX; slots];
        for (user, &i) in slot.iter().enumerate() {
            user_of_slot[i] = user;
        }
        let fd = shared.file.as_raw_fd();
        ring.drive(fd);
        let users = sessions.len();
        Ok(DiskBatch {
            sessions,
            ring,
            fd,
            slot,
            pending: vec![None; users],
            abandoned: vec![false; users],
            user_of_slot,
            done: Vec::with_capacity(users),
            next: 0,
        })
    }
}

impl Batch for DiskBatch {
    fn users(&self) -> usize {
        self.sessions.len()
    }

    fn start(&mut self, user: usize) -> Issued {
        let session = &mut self.sessions[user];
        let op = session.choose();
        let io = match session.begin(op, DRAWS * PLACE_ROUNDS) {
            Ok(Some(io)) => io,
            Ok(None) => return Issued::Ended(op, Outcome::error(ErrorKind::Busy)),
            Err(outcome) => return Issued::Ended(op, outcome),
        };
        let queued = self
            .ring
            .queue(self.slot[user], self.fd, io.write, io.offset, io.len as u32);
        if let Err(e) = queued {
            let result = -e.raw_os_error().unwrap_or(libc::EIO);
            return Issued::Ended(op, session.finish(io, result));
        }
        self.pending[user] = Some(io);
        self.ring.submit_if_short();
        Issued::Queued(op)
    }

    fn wait(&mut self, bound: Duration) {
        self.done.clear();
        self.next = 0;
        let done = &mut self.done;
        self.ring
            .submit_and_reap(bound, |slot, result| done.push((slot, result)));
    }

    fn next_done(&mut self) -> Option<(usize, Option<Outcome>)> {
        while let Some(&(slot, result)) = self.done.get(self.next) {
            self.next += 1;
            let Some(&user) = self.user_of_slot.get(slot) else {
                continue;
            };
            if user == usize::MAX {
                continue;
            }
            if std::mem::take(&mut self.abandoned[user]) {
                return Some((user, None));
            }
            if let Some(io) = self.pending[user].take() {
                return Some((user, Some(self.sessions[user].finish(io, result))));
            }
        }
        None
    }

    fn abandon(&mut self, user: usize) {
        if self.pending[user].take().is_some() {
            self.abandoned[user] = true;
        }
    }
}
