//! The I/Os in flight at once, counted without crossing threads: each
//! worker thread counts the places its users' I/Os hold (in flight, or
//! abandoned at a timeout and not yet settled) in a thread-local, and
//! hands the most it saw, with when it counted, to the run's tally as a
//! user ends. The threads that counted at the same time, summed, bound
//! the I/Os in flight at any instant; worker threads of successive steps
//! do not add up.

use std::cell::Cell;
use std::collections::HashMap;
use std::thread::ThreadId;
use std::time::Instant;

/// A worker thread's count for one run: the places held now and at most,
/// and from when to when it counted them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    /// The run counted for (its shared state's address).
    run: usize,
    now: u32,
    pub(crate) most: u32,
    pub(crate) since: Instant,
    pub(crate) until: Instant,
}

/// Each worker thread's count, as the run's tally keeps them.
pub(crate) type PerThread = HashMap<ThreadId, Held>;

thread_local! {
    static HELD: Cell<Option<Held>> = const { Cell::new(None) };
}

/// Counts a place taken (`taken`) or given back on this thread for `run`.
pub(crate) fn count(run: usize, taken: bool) {
    HELD.with(|h| {
        let mut held = match h.get() {
            Some(held) if held.run == run => held,
            _ => {
                let now = Instant::now();
                Held {
                    run,
                    now: 0,
                    most: 0,
                    since: now,
                    until: now,
                }
            }
        };
        held.now = if taken {
            held.now + 1
        } else {
            held.now.saturating_sub(1)
        };
        held.most = held.most.max(held.now);
        h.set(Some(held));
    });
}

/// This thread's count for `run`, into the run's tally (at a user's end).
pub(crate) fn report(run: usize, threads: &mut PerThread) {
    let Some(mut held) = HELD.with(Cell::get).filter(|h| h.run == run) else {
        return;
    };
    held.until = Instant::now();
    let at = threads.entry(std::thread::current().id()).or_insert(held);
    at.most = at.most.max(held.most);
    at.since = at.since.min(held.since);
    at.until = at.until.max(held.until);
}

/// The most I/Os in flight at once, bounded from the threads' counts: at
/// the start of each thread's counting, the sum of the most of every
/// thread counting then.
pub(crate) fn most(threads: &PerThread) -> u64 {
    threads
        .values()
        .map(|at| {
            threads
                .values()
                .filter(|h| h.since <= at.since && at.since <= h.until)
                .map(|h| u64::from(h.most))
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}
