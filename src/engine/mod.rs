//! The load engine: runs one step at a time on worker threads, each with its
//! own single-threaded tokio runtime and its own [`Recorder`]; the
//! coordinator (the calling thread) merges their interval tallies as they
//! arrive. Workers share no lock on the hot path: they hand a tally over a
//! channel once per interval.
//!
//! [`Recorder`]: crate::measure::Recorder

mod batch;
mod closed;
mod crew;
mod find;
mod judge;
mod open;
mod polled;
pub(crate) mod refusal;
mod remote;
mod schedule;
mod share;
mod split;
mod state;
mod step;
mod sweep;
mod worker;

pub use crate::record::{GeneratorStep, IntervalRecord, StepResult, StepStatus};
pub(crate) use find::{estimate as capacity_estimate, fitted_estimate, within, Probe};
pub(crate) use judge::{
    judge, offered, value as slo_value, Batch, Decision, Judgement, LevelJudgement,
};
pub(crate) use remote::{GeneratorPeer, Generators};
pub use schedule::{IntervalSpec, Schedule};
pub(crate) use share::{run_share, Share, ShareEvent};
pub(crate) use split::{MAX_THREADS, MAX_WAIT};
#[cfg(test)]
pub(crate) use step::Answering;
pub use step::FinishedStep;
pub use sweep::{coefficient_of_variation, run_sweep, run_sweep_on, SweepEnd, SweepObserver};
