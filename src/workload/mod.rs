//! Workloads: what one virtual user does. A [`Workload`] is shared by every
//! worker thread and opens [`Session`]s; a session belongs to one worker and
//! runs one operation at a time. Blocking backends keep their connection on a
//! thread of its own and answer the session over a channel, so the engine has
//! one asynchronous code path for every target.

pub mod bank;
pub mod null;

use crate::measure::Outcome;
use serde::Serialize;
use std::future::Future;

/// A kind of load a user can offer.
pub trait Workload: Send + Sync + 'static {
    /// The per-user state.
    type Session: Session + 'static;

    /// The operation kinds, in a fixed order; an operation is named by its index.
    fn op_names(&self) -> &[&'static str];

    /// Opens the session of virtual user `user`, seeded for reproducibility.
    /// Runs on a worker thread before the step starts.
    fn open_session(
        &self,
        user: u32,
        seed: u64,
    ) -> impl Future<Output = anyhow::Result<Self::Session>>;

    /// After the sweep: proves that nothing was lost, given how many
    /// operations of each kind the run saw end, in every phase.
    fn check(&self, run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>>;
}

/// One virtual user's state: its connection, its random stream.
pub trait Session {
    /// Chooses the kind of the next operation (an index into `op_names`).
    fn choose(&mut self) -> usize;

    /// Runs one operation of the chosen kind.
    fn execute(&mut self, op: usize) -> impl Future<Output = Outcome>;
}

/// How many operations of one kind ended each way over a whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpCounts {
    pub ok: u64,
    pub refused: u64,
    /// Ended in an error that leaves the outcome on the server unknown (a
    /// timeout, a lost connection).
    pub indeterminate: u64,
}

/// The result of a workload's consistency check.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CheckReport {
    /// True when every rule held.
    pub passed: bool,
    /// One line per rule: what was compared and the values seen.
    pub lines: Vec<CheckLine>,
}

/// One rule of a check.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CheckLine {
    pub rule: String,
    pub passed: bool,
    pub detail: String,
}

impl CheckReport {
    /// Builds a report from its lines; it passes when every line does.
    pub fn from_lines(lines: Vec<CheckLine>) -> Self {
        CheckReport {
            passed: lines.iter().all(|l| l.passed),
            lines,
        }
    }
}
