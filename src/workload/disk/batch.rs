//! The disk's users of one worker thread as one loop ([`Batch`]): on
//! io_uring, with no delay between bursts, the engine runs no task per
//! user. Each round every idle user readies its I/O (a place claimed, a
//! write stamped) and queues it on the thread's ring, the target registered
//! with the ring as a fixed file; one `io_uring_enter`
//! submits the round and waits for the first completion; each completion
//! is checked and acknowledged as a user's task would, and its user starts
//! again in the next round. No poll, wake-up, eventfd or yield per I/O.
//!
//! A loop that sleeps in the kernel for each I/O and is woken on another
//! CPU than the one before at most of 256 waits in a row is held from then
//! on to the CPU it runs on ([`Placement`]). On ext4 over a loop device whose
//! file is in tmpfs, the loop device's kernel worker and the woken thread
//! took turns on the two CPUs: at depth 1 the thread moved at 0.62 of its
//! sleeps (fio's job at 0.31), and made 0.78 of fio's IOPS at 1.11 times
//! its CPU per I/O (`bench/fio.sh`, three rounds of 5 s); held, 0.84 at
//! 1.03 times (27,000-31,000 IOPS a run unheld, 35,000-39,000 held). A
//! thread whose completions come from one CPU (a virtual disk's one
//! interrupt) is woken there and stays: held by turn to the CPUs instead,
//! it made 0.75 of fio's IOPS at depth 1 on the virtual disk, where
//! unheld it is level. A wait that reaps several I/Os pays its wake-up
//! once for them: a loop whose waits reap two or more on average (depth
//! 32) is left as it is.

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
    placement: Placement,
}

/// Where the loop's thread was woken over its last waits.
#[derive(Debug, Default)]
struct Placement {
    /// Waits seen in this watch (up to [`WATCHED`]), those woken on
    /// another CPU than the wait before, and the I/Os they reaped.
    waits: u32,
    moves: u32,
    reaped: u32,
    /// The CPU of the last wait; none before the first.
    cpu: Option<usize>,
    /// The thread is held: nothing more is watched.
    held: bool,
}

/// The waits of one watch: each watch ends in holding the thread or in
/// another watch.
const WATCHED: u32 = 256;

impl Placement {
    /// Counts one wait that ended on `cpu` having reaped `reaped` I/Os;
    /// at the end of a watch in which the thread moved at more than half
    /// its waits, each of which reaped fewer than two I/Os, the CPU to hold
    /// it to.
    fn after_wait(&mut self, cpu: Option<usize>, reaped: usize) -> Option<usize> {
        if self.held {
            return None;
        }
        self.waits += 1;
        self.moves += u32::from(self.cpu.is_some() && cpu != self.cpu);
        self.reaped = self
            .reaped
            .saturating_add(u32::try_from(reaped).unwrap_or(u32::MAX));
        self.cpu = cpu;
        if self.waits < WATCHED {
            return None;
        }
        let hold = self.moves * 2 > self.waits && self.reaped < 2 * self.waits;
        (self.waits, self.moves, self.reaped) = (0, 0, 0);
        self.held = hold && cpu.is_some();
        cpu.filter(|_| self.held)
    }
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
            placement: Placement::default(),
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
        if !self.placement.held {
            // SAFETY: no arguments; the CPU the thread runs on, or -1.
            let cpu = usize::try_from(unsafe { libc::sched_getcpu() }).ok();
            if let Some(cpu) = self.placement.after_wait(cpu, self.done.len()) {
                hold_to(cpu);
            }
        }
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

/// Holds the calling thread to `cpu`, one it runs on (so within any set
/// the user gave it: taskset, a cpuset). A refusal (a cpuset changed
/// meanwhile) leaves it as it was.
fn hold_to(cpu: usize) {
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut one) };
    // SAFETY: `one` is a set of the size given; 0 names the calling thread.
    let _ = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) };
}

#[cfg(test)]
mod tests {
    use super::{hold_to, Placement, WATCHED};

    /// The CPUs the calling thread may run on.
    fn allowed() -> Vec<usize> {
        // SAFETY: a zeroed set, written within its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: as above; 0 names the calling thread.
        assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: within the set's size.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    }

    /// The wait at which `placement` asks to hold the thread, and to which
    /// CPU, over four watches whose waits are woken on the CPU
    /// `cpu_of(wait)` having reaped `reaped` I/Os.
    fn watch(cpu_of: impl Fn(u32) -> Option<usize>, reaped: usize) -> Option<(u32, usize)> {
        let mut p = Placement::default();
        let mut asked = None;
        for wait in 0..WATCHED * 4 {
            if let Some(cpu) = p.after_wait(cpu_of(wait), reaped) {
                assert!(asked.is_none(), "asked twice, at {wait}");
                asked = Some((wait, cpu));
            }
        }
        asked
    }

    /// Woken on the other CPU at every wait of one I/O: held at the end of
    /// the first watch, to the CPU of its last wait, once; where the moves
    /// begin in the third watch, at its end. Woken on one CPU (a device's
    /// one interrupt), moved at half the waits or fewer, or reaping two
    /// I/Os a wait (a deep queue): left as it is. No CPU read: left.
    #[test]
    fn a_loop_woken_by_turns_on_two_cpus_for_each_io_is_held() {
        let turns = |w: u32| Some(w as usize % 2);
        assert_eq!(watch(turns, 1), Some((WATCHED - 1, 1)));
        let later = |w: u32| Some(if w < 2 * WATCHED { 0 } else { w as usize % 2 });
        assert_eq!(watch(later, 1), Some((3 * WATCHED - 1, 1)));
        assert_eq!(watch(|_| Some(0), 1), None);
        assert_eq!(watch(|w| Some(usize::from(w % 4 == 0)), 1), None);
        assert_eq!(watch(turns, 2), None);
        assert_eq!(watch(|_| None, 1), None);
    }

    /// On a thread of its own: held to one CPU of those it may run on, it
    /// runs there alone; a CPU past the set's size changes nothing.
    #[test]
    fn a_thread_held_to_a_cpu_runs_there_alone() {
        std::thread::spawn(|| {
            let given = allowed();
            let last = *given.last().unwrap();
            hold_to(libc::CPU_SETSIZE as usize);
            assert_eq!(allowed(), given);
            hold_to(last);
            assert_eq!(allowed(), vec![last]);
            // SAFETY: no arguments.
            assert_eq!(unsafe { libc::sched_getcpu() }, last as i32);
        })
        .join()
        .unwrap();
    }
}
