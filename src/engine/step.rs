//! A step as the sweep ends it ([`FinishedStep`]: its intervals already
//! handed over one by one), and whether the server still answered in it.
//! What a step recorded, whole as stored, is [`crate::record`]'s.

use crate::measure::{StepSummary, Tally};
use crate::plan::Level;
use crate::probe::SelfUsage;
use crate::record::{GeneratorStep, IntervalRecord, StepStatus};
use std::time::{Duration, SystemTime};

/// Whether the server still answered as a step's measured window went
/// on: a server killed in the step answers nothing after the interval in
/// which its connections went; one that refuses the connections past its
/// limit answers in every interval after the first refusal.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Answering {
    /// Measured intervals with operations completed after the first in
    /// which a connection was reset or refused.
    pub(crate) after_lost: u32,
    lost_seen: bool,
}

impl Answering {
    /// The next measured interval: `completed` operations, `lost` of them
    /// to a connection reset or refused.
    pub(crate) fn interval(&mut self, completed: u64, lost: u64) {
        if self.lost_seen && completed > 0 {
            self.after_lost = self.after_lost.saturating_add(1);
        }
        self.lost_seen |= lost > 0;
    }
}

/// A step as the sweep ends it. Its complete intervals went to the observer
/// one by one as they ended (a long step would otherwise hold them all:
/// hundreds of tallies and host samples); it keeps their merged figures and
/// its drain.
#[derive(Debug, Clone)]
pub struct FinishedStep {
    pub index: usize,
    pub level: Level,
    pub started_at: SystemTime,
    pub status: StepStatus,
    /// perflab's own CPU and memory over the step.
    pub usage: SelfUsage,
    /// How many intervals went to the observer (the drain's index).
    pub(crate) handed_over: usize,
    /// The measured intervals among them.
    pub(crate) measured_intervals: usize,
    /// Whether the server still answered as the window went on.
    pub(crate) answering: Answering,
    /// What ended after the last complete interval.
    pub drain: IntervalRecord,
    /// The measured window merged (the drain's failures absorbed, as
    /// [`StepResult::measured`] does), and its length.
    pub(crate) measured: Tally,
    pub(crate) measured_length: Duration,
    /// Every interval of every phase merged, the drain included.
    pub(crate) everything: Tally,
    /// On generators: what each did (its usage is the step's `usage`
    /// when it was the busiest); empty for a local run.
    pub generators: Vec<GeneratorStep>,
    /// The crew's workers lost in the step (generators), by number.
    pub(crate) lost: Vec<usize>,
    /// The step judged by the run's objectives, when it has any.
    pub(crate) judgement: Option<super::judge::LevelJudgement>,
}

impl FinishedStep {
    /// The step's summary figures.
    pub(crate) fn summary(&self) -> StepSummary {
        StepSummary::of(&self.measured, self.measured_length)
    }

    /// A step of two measured seconds that ran whole, for tests: `tally`
    /// is its measured window and everything it did, `answering` how the
    /// server answered in its intervals.
    #[cfg(test)]
    pub(crate) fn of_two_seconds(
        index: usize,
        level: Level,
        tally: Tally,
        answering: Answering,
        drain: IntervalRecord,
    ) -> Self {
        FinishedStep {
            index,
            level,
            started_at: SystemTime::now(),
            status: StepStatus::Ok,
            usage: SelfUsage::default(),
            handed_over: 2,
            measured_intervals: 2,
            answering,
            drain,
            measured: tally.clone(),
            measured_length: Duration::from_secs(2),
            everything: tally,
            generators: Vec::new(),
            lost: Vec::new(),
            judgement: None,
        }
    }
}
