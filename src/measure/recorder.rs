//! The per-worker recorder: mutable, owned by one worker thread, never
//! shared. At each interval boundary the worker takes its [`Tally`] and
//! starts a fresh one, with room made there for the error kinds of the
//! next interval so that recording a failed operation does not allocate.

use super::outcome::Outcome;
use super::tally::{micros, record, Tally};
use std::time::Duration;

/// Error kinds of one operation kind that one interval records without
/// allocating; a further kind in the same interval grows the room.
const ERROR_KINDS_PER_INTERVAL: usize = 8;

/// Counts the operations of one worker during the current interval.
#[derive(Debug)]
pub(crate) struct Recorder {
    tally: Tally,
}

impl Recorder {
    /// A recorder for a workload with `op_count` kinds of operation.
    pub(crate) fn new(op_count: usize) -> Self {
        Recorder {
            tally: fresh_tally(op_count),
        }
    }

    /// Records one finished operation of kind `op`.
    pub(crate) fn record(
        &mut self,
        op: usize,
        outcome: &Outcome,
        service: Duration,
        response: Duration,
    ) {
        if let Some(slot) = self.tally.ops.get_mut(op) {
            slot.record(outcome, service, response);
        }
    }

    /// What was recorded since the last [`Recorder::take`].
    #[cfg(test)]
    pub(crate) fn peek(&self) -> &Tally {
        &self.tally
    }

    /// Records a think time drawn by a closed-loop user.
    pub(crate) fn record_think(&mut self, think: Duration) {
        self.tally.think_total += think;
        self.tally.thinks += 1;
    }

    /// Records an open-loop arrival dropped because too many were outstanding.
    pub(crate) fn record_drop(&mut self) {
        self.tally.dropped += 1;
    }

    /// Records how late the open-loop generator dispatched an arrival.
    pub(crate) fn record_lag(&mut self, lag: Duration) {
        record(&mut self.tally.lag, micros(lag));
    }

    /// Hands over everything recorded since the last call and starts afresh.
    pub(crate) fn take(&mut self) -> Tally {
        let fresh = fresh_tally(self.tally.ops.len());
        std::mem::replace(&mut self.tally, fresh)
    }
}

/// An empty tally with room for each operation kind's errors.
fn fresh_tally(op_count: usize) -> Tally {
    let mut tally = Tally::new(op_count);
    for op in &mut tally.ops {
        op.errors.reserve(ERROR_KINDS_PER_INTERVAL);
    }
    tally
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{ErrorKind, SqlCode};

    use crate::util::counting_alloc::allocations;

    #[test]
    fn recording_failed_operations_does_not_allocate() {
        let before = allocations();
        let probe = vec![0u8; 16];
        assert!(allocations() > before, "the counter sees allocations");
        drop(probe);

        let mut recorder = Recorder::new(2);
        let took = Duration::from_micros(250);
        // Warm the histograms of the kind that succeeds, so that what is
        // measured below is the recording of errors alone.
        recorder.record(0, &Outcome::ok(), took, took);
        let before = allocations();
        for _ in 0..1_000 {
            // Built here, as a workload builds them: kinds carrying data too.
            let kinds = [
                ErrorKind::Timeout,
                ErrorKind::Connect,
                ErrorKind::Busy,
                ErrorKind::Sql(SqlCode::new("40001")),
                ErrorKind::Sql(SqlCode::of(format_args!("sqlite-{}", 517))),
                ErrorKind::Io(libc::EIO),
                ErrorKind::Http(503),
                ErrorKind::Corrupt,
            ];
            for kind in kinds {
                recorder.record(1, &Outcome::error(kind), took, took);
            }
        }
        assert_eq!(allocations() - before, 0, "recording errors allocated");
        let tally = recorder.take();
        let errors = &tally.ops[1].errors;
        assert_eq!(errors.total(), 8_000);
        assert_eq!(errors.count(ErrorKind::Http(503)), 1_000);
        assert_eq!(errors.count(ErrorKind::Io(libc::EIO)), 1_000);
    }
}
