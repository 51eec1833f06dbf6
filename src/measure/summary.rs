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
}

impl StepSummary {
    /// Summarises a merged measured-window tally.
    pub(crate) fn of(tally: &Tally, measured: Duration) -> Self {
        let all: OpTally = tally.all_ops();
        let errors = all.error_count();
        let attempted = all.completed() + errors + tally.dropped;
        let seconds = measured.as_secs_f64();
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
            response: LatencySummary::of(&all.response),
            service: LatencySummary::of(&all.service),
            lag: LatencySummary::of(&tally.lag),
            mean_think: if tally.thinks > 0 {
                Duration::from_secs_f64(tally.think_total.as_secs_f64() / tally.thinks as f64)
            } else {
                Duration::ZERO
            },
        }
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
