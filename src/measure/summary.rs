//! Summaries read off merged tallies: latency percentiles (clamped to the
//! observed maximum, as HdrHistogram's bucket edges can exceed it) and the
//! per-step figures of the final table.

use super::tally::{OpTally, Tally};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Percentiles of one latency histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Operations in the histogram.
    pub(crate) count: u64,
    #[serde(with = "crate::util::serde_duration")]
    pub mean: Duration,
    #[serde(with = "crate::util::serde_duration")]
    pub(crate) p50: Duration,
    #[serde(with = "crate::util::serde_duration")]
    pub(crate) p90: Duration,
    #[serde(with = "crate::util::serde_duration")]
    pub(crate) p95: Duration,
    #[serde(with = "crate::util::serde_duration")]
    pub p99: Duration,
    #[serde(with = "crate::util::serde_duration")]
    pub(crate) p999: Duration,
    #[serde(with = "crate::util::serde_duration")]
    pub max: Duration,
}

impl LatencySummary {
    /// Reads the percentiles of a microsecond histogram.
    pub(crate) fn of(h: &Histogram<u64>) -> Self {
        let max = h.max();
        let at = |q: f64| Duration::from_micros(h.value_at_quantile(q).min(max));
        LatencySummary {
            count: h.len(),
            mean: Duration::from_secs_f64(h.mean() / 1e6),
            p50: at(0.50),
            p90: at(0.90),
            p95: at(0.95),
            p99: at(0.99),
            p999: at(0.999),
            max: Duration::from_micros(max),
        }
    }
}

/// The figures of one step's measured window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSummary {
    /// Length of the measured window.
    #[serde(with = "crate::util::serde_duration")]
    pub(crate) measured: Duration,
    /// Operations served (ok + refused).
    pub completed: u64,
    pub(crate) ok: u64,
    pub(crate) refused: u64,
    pub errors: u64,
    /// Open loop: arrivals dropped.
    pub dropped: u64,
    pub(crate) retries: u64,
    /// Served operations per second.
    pub throughput: f64,
    /// (errors + dropped) / (completed + errors + dropped).
    pub error_rate: f64,
    /// Response time from the intended start.
    pub response: LatencySummary,
    /// Service time.
    pub service: LatencySummary,
    /// Open loop: lateness of the generator's dispatch.
    pub(crate) lag: LatencySummary,
    /// Closed loop: mean think time drawn.
    #[serde(with = "crate::util::serde_duration")]
    pub mean_think: Duration,
    /// Operations still in flight (or queued) when the window ended; their
    /// times so far are in `response`, their later failures in `errors`.
    pub unfinished: u64,
    /// The longest any of them had been in flight at the window's end.
    #[serde(with = "crate::util::serde_duration")]
    pub longest_unfinished: Duration,
    /// Of them, those that failed after the window (in `errors`).
    pub late_errors: u64,
    /// One of them had waited longer than every operation that ended, and
    /// for at least a quarter of the window: the target stalled.
    pub stalled: bool,
}

impl StepSummary {
    /// Summarises a merged measured-window tally.
    pub(crate) fn of(tally: &Tally, measured: Duration) -> Self {
        let all: OpTally = tally.all_ops();
        let errors = all.error_count();
        let unfinished = tally.unfinished.len();
        // Each operation of the step once: those that ended in the window,
        // and those in flight at its end (a late failure among them is
        // already in `errors`).
        let attempted = (all.completed() + errors + tally.dropped + unfinished)
            .saturating_sub(tally.late_errors.min(unfinished));
        let seconds = measured.as_secs_f64();
        let longest_unfinished = Duration::from_micros(tally.unfinished.max());
        let served_max = Duration::from_micros(all.response.max());
        let stalled =
            unfinished > 0 && longest_unfinished > served_max && longest_unfinished * 4 >= measured;
        StepSummary {
            measured,
            completed: all.completed(),
            ok: all.ok,
            refused: all.refused,
            errors,
            dropped: tally.dropped,
            retries: all.retries,
            throughput: if seconds > 0.0 {
                all.completed() as f64 / seconds
            } else {
                0.0
            },
            error_rate: if attempted > 0 {
                (errors + tally.dropped) as f64 / attempted as f64
            } else {
                0.0
            },
            response: LatencySummary::of(&tally.response()),
            service: LatencySummary::of(&all.service),
            lag: LatencySummary::of(&tally.lag),
            mean_think: if tally.thinks > 0 {
                Duration::from_secs_f64(tally.think_total.as_secs_f64() / tally.thinks as f64)
            } else {
                Duration::ZERO
            },
            unfinished,
            longest_unfinished,
            late_errors: tally.late_errors,
            stalled,
        }
    }

    /// What a stalled step's status says: how many operations were held
    /// at the window's end, for how long, and how many of them failed
    /// after it.
    pub(crate) fn stall_words(&self) -> String {
        let held = match self.unfinished {
            1 => "1 operation in flight".to_string(),
            n => format!("{n} operations in flight at the window's end, the longest"),
        };
        let failed = match (self.unfinished, self.late_errors) {
            (_, 0) => String::new(),
            (1, _) => "; it failed after the window".to_string(),
            (_, n) => format!("; {n} of them failed after the window"),
        };
        format!(
            "{held} for the last {} of the {} window{failed}",
            crate::units::Latency(self.longest_unfinished),
            crate::units::Latency(self.measured),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::tally::new_histogram;

    #[test]
    fn percentiles_never_exceed_the_maximum() {
        let mut h = new_histogram();
        h.record(1_234_567).unwrap();
        let s = LatencySummary::of(&h);
        assert_eq!(s.max, Duration::from_micros(h.max()));
        assert!(h.max() >= 1_234_567 && h.max() < 1_236_000);
        assert!(s.p999 <= s.max);
        assert!(s.p50 <= s.max);
    }
}
