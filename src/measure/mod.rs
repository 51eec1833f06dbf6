//! Measurement: what one operation produced ([`Outcome`]), the per-worker
//! [`Recorder`] that counts outcomes into HdrHistograms, and the immutable,
//! mergeable [`Tally`] it hands over at every interval boundary. Percentiles
//! are only ever read from merged histograms, never averaged. Failed
//! operations are counted by typed [`ErrorKind`] ([`ErrorCounts`]), turned
//! into text only where they are printed or stored.

mod error_counts;
mod error_kind;
mod outcome;
mod packed;
mod recorder;
mod summary;
mod tally;

pub(crate) use error_counts::ErrorCounts;
pub(crate) use error_kind::{ErrorKind, SqlCode};
pub(crate) use outcome::{OpResult, Outcome};
pub(crate) use packed::{PackedOp, PackedTally};
pub(crate) use recorder::Recorder;
pub(crate) use summary::{LatencySummary, StepSummary};
pub(crate) use tally::record;
pub use tally::{
    decode_histogram, encode_histogram, new_histogram, OpTally, Phase, Tally, TallyCounts,
};
