//! The time plan of one step: warm-up intervals, then measured intervals,
//! each at most `interval` long and laid end to end from the step's start.

use crate::measure::Phase;
use std::time::Duration;

/// One interval of a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalSpec {
    pub(crate) phase: Phase,
    /// Offset of its start from the step's start.
    pub(crate) start: Duration,
    /// Offset of its end from the step's start.
    pub(crate) end: Duration,
}

/// The intervals of one step, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub(crate) intervals: Vec<IntervalSpec>,
}

impl Schedule {
    /// Splits warm-up and measured window into intervals of at most `interval`.
    pub(crate) fn new(warmup: Duration, duration: Duration, interval: Duration) -> Self {
        let mut intervals = Vec::new();
        let mut push = |phase, from: Duration, to: Duration| {
            let mut start = from;
            while start < to {
                let end = (start + interval).min(to);
                intervals.push(IntervalSpec { phase, start, end });
                start = end;
            }
        };
        push(Phase::Warmup, Duration::ZERO, warmup);
        push(Phase::Measured, warmup, warmup + duration);
        Schedule { intervals }
    }

    /// When the measured window ends, from the step's start.
    pub(crate) fn end(&self) -> Duration {
        self.intervals.last().map_or(Duration::ZERO, |i| i.end)
    }

    /// How long the step warms up before it measures.
    pub(crate) fn warmup(&self) -> Duration {
        self.intervals
            .iter()
            .filter(|i| i.phase == Phase::Warmup)
            .map(|i| i.end - i.start)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_then_measured_in_whole_intervals() {
        let s = Schedule::new(
            Duration::from_millis(1500),
            Duration::from_secs(2),
            Duration::from_secs(1),
        );
        let phases: Vec<_> = s.intervals.iter().map(|i| i.phase).collect();
        assert_eq!(
            phases,
            vec![
                Phase::Warmup,
                Phase::Warmup,
                Phase::Measured,
                Phase::Measured
            ]
        );
        assert_eq!(s.intervals[1].end, Duration::from_millis(1500));
        assert_eq!(s.end(), Duration::from_millis(3500));
        assert!(Schedule::new(
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(1)
        )
        .intervals
        .iter()
        .all(|i| i.phase == Phase::Measured));
    }
}
