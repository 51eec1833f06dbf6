//! The per-worker recorder: mutable, owned by one worker thread, never
//! shared. At each interval boundary the worker takes its [`Tally`] and
//! starts a fresh one.

use super::outcome::Outcome;
use super::tally::{micros, record, Tally};
use std::time::Duration;

/// Counts the operations of one worker during the current interval.
#[derive(Debug)]
pub struct Recorder {
    tally: Tally,
}

impl Recorder {
    /// A recorder for a workload with `op_count` kinds of operation.
    pub fn new(op_count: usize) -> Self {
        Recorder {
            tally: Tally::new(op_count),
        }
    }

    /// Records one finished operation of kind `op`.
    pub fn record(&mut self, op: usize, outcome: &Outcome, service: Duration, response: Duration) {
        if let Some(slot) = self.tally.ops.get_mut(op) {
            slot.record(outcome, service, response);
        }
    }

    /// Records a think time drawn by a closed-loop user.
    pub fn record_think(&mut self, think: Duration) {
        self.tally.think_total += think;
        self.tally.thinks += 1;
    }

    /// Records an open-loop arrival dropped because too many were outstanding.
    pub fn record_drop(&mut self) {
        self.tally.dropped += 1;
    }

    /// Records how late the open-loop generator dispatched an arrival.
    pub fn record_lag(&mut self, lag: Duration) {
        record(&mut self.tally.lag, micros(lag));
    }

    /// Hands over everything recorded since the last call and starts afresh.
    pub fn take(&mut self) -> Tally {
        let fresh = Tally::new(self.tally.ops.len());
        std::mem::replace(&mut self.tally, fresh)
    }
}
