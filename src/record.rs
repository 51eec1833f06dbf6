//! What one step recorded, as the store keeps it and every later stage
//! reads it: its intervals (each one's tally and probe samples), how it
//! ended, and each generator's part. Below the workloads, so that a
//! workload can compute figures of its own from stored steps
//! ([`crate::workload::figures`]); the engine makes these and re-exports
//! them.

use crate::measure::{PackedTally, Phase, StepSummary, Tally};
use crate::plan::Level;
use crate::probe::counters::HostSample;
use crate::probe::{DbSample, ProbeSample, SelfUsage};
use std::time::{Duration, SystemTime};

/// One interval's merged tally.
#[derive(Debug, Clone)]
pub struct IntervalRecord {
    pub phase: Phase,
    /// Offset of its start from the step's start.
    pub start: Duration,
    /// Its length (the drain interval's is however long draining took).
    pub length: Duration,
    /// Its tally, histograms packed (a long step keeps many).
    pub tally: PackedTally,
    /// What the database reported over the interval, when a probe watched it.
    pub db: Option<DbSample>,
    /// What this host's counters did over the interval.
    pub host: Option<HostSample>,
    /// What each remote probe saw over the interval, in `--probe` order.
    pub probes: Vec<ProbeSample>,
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepStatus {
    /// Ran its whole window.
    Ok,
    /// Ran, but its failed share broke `--max-error-rate`; the sweep ends here.
    Failed(String),
    /// Cut short (Ctrl-C) after at least one measured interval.
    Partial(String),
    /// Ran to its end, but a generator was lost in it: its load is
    /// missing from the rest of the step.
    Degraded(String),
    /// Ran its whole window, but the target held an operation for much of
    /// it, longer than any that ended: its figures are what the target did,
    /// the stall among them.
    Stalled(String),
}

impl StepStatus {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            StepStatus::Ok => "ok",
            StepStatus::Failed(_) => "failed",
            StepStatus::Partial(_) => "partial",
            StepStatus::Degraded(_) => "degraded",
            StepStatus::Stalled(_) => "stalled",
        }
    }

    /// The status stored as `word` with `reason` (the same words
    /// [`StepStatus::as_str`] gives); none for a word no perflab writes.
    pub(crate) fn parse(word: &str, reason: String) -> Option<Self> {
        Some(match word {
            "ok" => StepStatus::Ok,
            "failed" => StepStatus::Failed(reason),
            "partial" => StepStatus::Partial(reason),
            "degraded" => StepStatus::Degraded(reason),
            "stalled" => StepStatus::Stalled(reason),
            _ => return None,
        })
    }

    pub(crate) fn reason(&self) -> Option<&str> {
        match self {
            StepStatus::Ok => None,
            StepStatus::Failed(r)
            | StepStatus::Partial(r)
            | StepStatus::Degraded(r)
            | StepStatus::Stalled(r) => Some(r),
        }
    }

    /// The step ran its whole window with all its load: its figures
    /// stand for the load (a stalled step's as much as a smooth one's).
    pub(crate) fn ran_whole(&self) -> bool {
        matches!(self, StepStatus::Ok | StepStatus::Stalled(_))
    }
}

/// Everything one step recorded.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// Position in the sweep, from 0.
    pub index: usize,
    pub level: Level,
    pub started_at: SystemTime,
    pub intervals: Vec<IntervalRecord>,
    pub status: StepStatus,
    /// perflab's own CPU and memory over the step (on generators, the
    /// busiest generator's).
    pub usage: SelfUsage,
    /// On generators: what each did; empty for a local run.
    pub generators: Vec<GeneratorStep>,
}

impl StepResult {
    /// The measured window merged into one tally, and its length; the
    /// failures of operations in flight at its end, which ended in the
    /// drain, are the window's (see [`Tally::absorb_late`]).
    pub fn measured(&self) -> (Tally, Duration) {
        let (mut tally, length) = self.merged(|i| i.phase == Phase::Measured);
        tally.absorb_late(&self.merged(|i| i.phase == Phase::Drain).0);
        (tally, length)
    }

    /// The intervals that `keep` selects, merged, and their total length.
    fn merged(&self, keep: impl Fn(&IntervalRecord) -> bool) -> (Tally, Duration) {
        let op_count = self.intervals.first().map_or(0, |i| i.tally.ops.len());
        let mut tally = Tally::new(op_count);
        let mut length = Duration::ZERO;
        for interval in self.intervals.iter().filter(|i| keep(i)) {
            tally.merge(&interval.tally.unpack());
            length += interval.length;
        }
        (tally, length)
    }

    /// The database's samples over the measured window, merged.
    pub(crate) fn measured_db(&self) -> Option<DbSample> {
        let mut merged: Option<DbSample> = None;
        for interval in self.intervals.iter().filter(|i| i.phase == Phase::Measured) {
            if let Some(db) = &interval.db {
                merged.get_or_insert_with(DbSample::default).merge(db);
            }
        }
        merged
    }

    /// The step's summary figures.
    pub fn summary(&self) -> StepSummary {
        let (tally, length) = self.measured();
        StepSummary::of(&tally, length)
    }

    /// Every interval of every phase merged: all the operations the target saw.
    pub(crate) fn everything(&self) -> Tally {
        self.merged(|_| true).0
    }
}

/// One generator's part of one step, as the coordinator saw it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GeneratorStep {
    /// As given: `agent://HOST:PORT`.
    pub(crate) generator: String,
    /// Its clock minus the coordinator's, seconds, and the round trip
    /// that was read from (the offset's error is at most half of it).
    pub(crate) clock_offset: f64,
    pub(crate) clock_delay: f64,
    /// When its clock started, seconds since the Unix epoch by the
    /// coordinator's clock (its own reading less the offset).
    pub(crate) started: f64,
    /// Its measured window's figures.
    pub(crate) completed: u64,
    pub(crate) errors: u64,
    /// Operations per second.
    pub(crate) throughput: f64,
    /// p95 of the response time, seconds.
    pub(crate) p95: f64,
    /// Its process's CPU and memory over the step.
    pub(crate) usage: SelfUsage,
    /// Its host's CPU over the step, all CPUs together: busy share, and
    /// the share stolen by the hypervisor (a generator on a VM whose
    /// host is oversubscribed is not the generator it seems).
    #[serde(default)]
    pub(crate) host_busy: Option<f64>,
    #[serde(default)]
    pub(crate) host_steal: Option<f64>,
    /// Its own use over each interval handed over, in order: CPUs its
    /// process used, and its host's stolen share.
    #[serde(default)]
    pub(crate) intervals: Vec<IntervalUsage>,
}

/// A generator's own use over one interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct IntervalUsage {
    /// CPUs its process used (user + system time over the interval).
    pub(crate) cpu: f64,
    /// Its host's share of CPU time stolen by the hypervisor.
    pub(crate) steal: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_status_reads_back_from_its_stored_word() {
        let why = || "why".to_string();
        for status in [
            StepStatus::Ok,
            StepStatus::Failed(why()),
            StepStatus::Partial(why()),
            StepStatus::Degraded(why()),
            StepStatus::Stalled(why()),
        ] {
            let reason = status.reason().unwrap_or("why").to_string();
            assert_eq!(StepStatus::parse(status.as_str(), reason), Some(status));
        }
        assert_eq!(StepStatus::parse("running", why()), None);
        assert_eq!(StepStatus::parse("done", why()), None);
    }
}
