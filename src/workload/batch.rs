//! A worker thread's users run as one loop. A workload whose operations
//! are requests to the kernel that can be queued and reaped in rounds (the
//! disk's I/Os on io_uring) may take over all the users of a thread: the
//! engine then runs no task per user, but one loop that starts every idle
//! user's operation, lets the workload submit them together and wait in the
//! kernel for the first to end, and records each ended operation as it
//! records a task's — no poll, wake-up or yield per operation.

use crate::measure::Outcome;
use std::time::Duration;

/// How an operation issued by [`Batch::start`] stands.
#[derive(Debug)]
pub enum Issued {
    /// Queued: it ends in a later [`Batch::next_done`]. The operation's kind.
    Queued(usize),
    /// It ended before reaching the kernel (no free place, a full queue):
    /// its kind and how it ended.
    Ended(usize, Outcome),
}

/// The users of one worker thread, driven by the engine's loop.
pub trait Batch {
    /// How many users: they are numbered from 0.
    fn users(&self) -> usize;

    /// Chooses and readies `user`'s next operation and queues it, to be
    /// submitted by the next [`Batch::wait`]. Only for a user with no
    /// operation queued, in flight or abandoned and not yet ended.
    fn start(&mut self, user: usize) -> Issued;

    /// Submits every operation queued and waits until one ends or `bound`
    /// has passed (or a signal arrives).
    fn wait(&mut self, bound: Duration);

    /// The next operation that ended since the last [`Batch::wait`]: its
    /// user, and how it ended — or `None` for an operation that user
    /// abandoned, which only frees the user to start another.
    fn next_done(&mut self) -> Option<(usize, Option<Outcome>)>;

    /// `user` gave up its operation at a timeout: when it ends, it is not
    /// counted, and the user may start again only then.
    fn abandon(&mut self, user: usize);
}
