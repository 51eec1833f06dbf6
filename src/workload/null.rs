//! The `null` workload: an in-process stand-in for a server that answers
//! after a fixed service time (or at once), and can be told to stall for a
//! while. It exists to test the engine: with nothing else in the way, the
//! operational laws must hold to the percent.

use super::{CheckReport, OpCounts, Session, Workload};
use crate::measure::Outcome;
use crate::plan::NullStall;
use std::time::Duration;
use tokio::time::Instant;

/// The null target.
pub struct NullWorkload {
    service: Duration,
    stall: Option<(Instant, Instant)>,
}

impl NullWorkload {
    /// A null target answering after `service`; the stall, if any, is counted
    /// from now (the start of the run).
    pub fn new(service: Duration, stall: Option<NullStall>) -> Self {
        let now = Instant::now();
        NullWorkload {
            service,
            stall: stall.map(|s| (now + s.at, now + s.at + s.length)),
        }
    }
}

/// One null user.
pub struct NullSession {
    service: Duration,
    stall: Option<(Instant, Instant)>,
}

impl Workload for NullWorkload {
    type Session = NullSession;

    fn op_names(&self) -> &[&'static str] {
        &["null"]
    }

    async fn open_session(&self, _user: u32, _seed: u64) -> anyhow::Result<NullSession> {
        Ok(NullSession {
            service: self.service,
            stall: self.stall,
        })
    }

    fn check(&self, _run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        Ok(None)
    }
}

impl Session for NullSession {
    fn choose(&mut self) -> usize {
        0
    }

    async fn execute(&mut self, _op: usize) -> Outcome {
        let start = Instant::now();
        let mut done = start + self.service;
        if let Some((from, until)) = self.stall {
            // A stalled server answers nothing until the stall is over.
            if start < until && done > from {
                done = done.max(until);
            }
        }
        if done > start {
            tokio::time::sleep_until(done).await;
        }
        Outcome::ok()
    }
}
