//! Whether a curve still rose at its last step. Throughput has "stopped
//! growing" only when its last step's gain over the step before lies
//! within the run's noise: each step's mean throughput has a 95% interval
//! from its intervals (Student's t, [`crate::analyze::stats::mean_interval`]),
//! and the gain must exceed the two half-widths combined in quadrature,
//! and at least [`MIN_GROWTH`], to count as growth. A leaf that the
//! device's and the rising curve's rules both read.

use super::super::points::StepPoint;
use super::super::stats::mean_interval;

/// The smallest gain of the last step over the one before that counts as
/// growth whatever the noise: steps repeated on one host agree within
/// about this much.
pub(crate) const MIN_GROWTH: f64 = 0.05;

/// The last step's gain over the step before, beyond the noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rise {
    /// X_last / X_before − 1.
    pub(crate) growth: f64,
    /// The gain the noise could make: the two steps' 95% half-widths,
    /// relative to their means, combined (0 without intervals).
    pub(crate) noise: f64,
}

/// A step's 95% half-width relative to its mean throughput, from its
/// intervals; 0 when it has fewer than two.
pub(crate) fn relative_half_width(p: &StepPoint) -> f64 {
    mean_interval(&p.interval_throughputs)
        .filter(|(m, _, _)| *m > 0.0)
        .map_or(0.0, |(m, _, hi)| (hi - m) / m)
}

/// Whether throughput still grew at the last step beyond the noise of
/// the two last steps; none for fewer than two steps or a last step
/// that did not raise the load.
pub(crate) fn still_rising(points: &[StepPoint]) -> Option<Rise> {
    let [.., before, last] = points else {
        return None;
    };
    if before.throughput <= 0.0 || last.load <= before.load {
        return None;
    }
    let growth = last.throughput / before.throughput - 1.0;
    let noise = relative_half_width(before).hypot(relative_half_width(last));
    (growth > noise.max(MIN_GROWTH)).then_some(Rise { growth, noise })
}

/// The last step's gain as the evidence says it: `X at L → X' at L'
/// (×g for ×l the load)`.
pub(crate) fn gain_text(before: &StepPoint, last: &StepPoint, rise: Rise) -> String {
    format!(
        "{} at {} → {} at {} (×{:.2} for ×{:.2} the load)",
        before.rate(before.throughput),
        super::super::capacity::load_text(before),
        last.rate(last.throughput),
        super::super::capacity::load_text(last),
        1.0 + rise.growth,
        last.load / before.load
    )
}
