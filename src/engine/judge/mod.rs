//! Judging a step by the run's service level objectives (`--slo`): each
//! objective **meets**, **breaks** or is **undecided**, by a statistical
//! decision over the step's intervals rather than a point comparison.
//!
//! The statistics, stated. Every objective is a ratio of two sums over the
//! measured window, compared with a bound:
//! - `pX<T`: operations slower than T over all operations (those still in
//!   flight at the window's end counted with their time so far), against
//!   the share 1 − X/100 (p95<200ms holds while under 5% take over 200 ms);
//! - `mean<T`: summed response time over operations, against T;
//! - `errors<x%`: failed and dropped over attempted, against x;
//! - `lag<x%` (open loop): arrivals offered but not served over those
//!   offered, against x;
//! - `max<T`: the longest response against T, a plain comparison (a
//!   maximum has no sampling interval worth the name).
//!
//! The measured intervals are the batches: the ratio's standard error comes
//! from how the intervals' own ratios scatter about it (the ratio
//! estimator over batch means, which holds when operations are correlated
//! within an interval but not across), with Student's t for few batches.
//! When every interval holds hits, a share's interval is drawn on its log
//! scale and widened (a calm window holds a low share in intervals that
//! agree, so its own scatter understates what a window can hold).
//! For shares and counts, the interval is never narrower than a Wilson
//! score interval over the whole count (a few hundred operations, none of
//! them over the limit, prove less than batch means alone would say), nor
//! than the count of the clumps its hits came in, when some intervals hold
//! none (one excursion of a queue in a calm window proves less than the
//! operations it held). The
//! objective meets when the 95% interval lies under the bound, breaks when
//! it lies over it, and is undecided when the bound is inside: too close to
//! call from this step. A step meets when every objective does, breaks
//! when one breaks, and is undecided otherwise.

use crate::measure::{LatencySummary, Tally, TallyCounts};
use crate::plan::{Level, Slo, SloMetric};
use serde::Serialize;
use std::time::Duration;

/// The judgement of one objective, or of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Meets,
    Breaks,
    Undecided,
}

impl Decision {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Decision::Meets => "meets",
            Decision::Breaks => "breaks",
            Decision::Undecided => "undecided",
        }
    }

    /// Several objectives' decisions together: breaks if one breaks,
    /// meets if all meet.
    pub(crate) fn all(decisions: impl IntoIterator<Item = Decision>) -> Decision {
        let mut out = Decision::Meets;
        for d in decisions {
            match d {
                Decision::Breaks => return Decision::Breaks,
                Decision::Undecided => out = Decision::Undecided,
                Decision::Meets => {}
            }
        }
        out
    }
}

/// What one measured interval gives each objective: the two sums of its
/// ratio (`x` over `n`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    sums: Vec<(f64, f64)>,
}

impl Batch {
    /// One interval's sums for `slos`; `offered` is the open loop's
    /// arrivals per second (none in a closed loop).
    pub(crate) fn of(slos: &[Slo], tally: &Tally, length: Duration, offered: Option<f64>) -> Self {
        let counts = tally.counts();
        let response = tally.response();
        let sums = slos
            .iter()
            .map(|slo| sums(slo, &counts, &response, length, offered))
            .collect();
        Batch { sums }
    }

    /// Adds `late` failures to the errors of this interval: those of
    /// operations in flight when the window ended, which ended after it.
    pub(crate) fn add_late_errors(&mut self, slos: &[Slo], late: u64) {
        for (slo, (x, n)) in slos.iter().zip(&mut self.sums) {
            if slo.metric == SloMetric::Errors {
                *x += late as f64;
                *n += late as f64;
            }
        }
    }
}

/// The sums of `slo`'s ratio over one interval.
fn sums(
    slo: &Slo,
    counts: &TallyCounts,
    response: &hdrhistogram::Histogram<u64>,
    length: Duration,
    offered: Option<f64>,
) -> (f64, f64) {
    let n = response.len() as f64;
    let limit_us = (slo.limit * 1e6) as u64;
    match slo.metric {
        SloMetric::Errors => {
            let failed = (counts.errors + counts.dropped) as f64;
            (failed, failed + counts.completed as f64)
        }
        SloMetric::Lag => {
            let due = offered.unwrap_or(0.0) * length.as_secs_f64();
            (due - counts.completed as f64, due)
        }
        SloMetric::Mean => (response.mean() * n / 1e6, n),
        SloMetric::Max => ((response.max() as f64 / 1e6), 1.0),
        _ => {
            let within = response.count_between(0, limit_us) as f64;
            ((n - within).max(0.0), n)
        }
    }
}

/// One objective judged over some intervals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    /// The objective, as given (`p95<200ms`).
    pub(crate) objective: String,
    pub(crate) decision: Decision,
    /// The ratio judged (the share over the limit, the mean, the failed
    /// share, the shortfall, the maximum) and its 95% interval.
    pub(crate) estimate: f64,
    pub(crate) low: f64,
    pub(crate) high: f64,
    /// What the ratio must stay under.
    pub(crate) bound: f64,
    /// `share` when the ratio is a fraction (over the limit, failed,
    /// short), `seconds` when it is a time (mean, max).
    pub(crate) unit: &'static str,
}

/// The objectives judged over the intervals of one level (one step, or
/// the runs of a level pooled).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelJudgement {
    pub(crate) decision: Decision,
    pub(crate) objectives: Vec<Judgement>,
}

/// Judges `slos` over `batches` (each measured interval's sums).
pub(crate) fn judge(slos: &[Slo], batches: &[Batch]) -> LevelJudgement {
    let objectives: Vec<Judgement> = slos
        .iter()
        .enumerate()
        .map(|(k, slo)| {
            let pairs: Vec<(f64, f64)> = batches
                .iter()
                .filter_map(|b| b.sums.get(k).copied())
                .collect();
            judge_one(slo, &pairs)
        })
        .collect();
    LevelJudgement {
        decision: Decision::all(objectives.iter().map(|j| j.decision)),
        objectives,
    }
}

/// How much narrower a level's interval is expected to be with its
/// intervals doubled by another run: 1/√2.
const NARROWER_BY_A_RUN: f64 = std::f64::consts::FRAC_1_SQRT_2;

impl LevelJudgement {
    /// A level that broke --max-error-rate: it breaks the objectives
    /// whatever their figures.
    pub(crate) fn broken() -> Self {
        LevelJudgement {
            decision: Decision::Breaks,
            objectives: Vec::new(),
        }
    }

    /// Whether another run of a level may change its judgement: for an
    /// undecided level, when some undecided objective lies further from
    /// its bound than its interval's half-width would be with twice the
    /// intervals (one whose estimate sits on the bound is too close to
    /// call, and running it again only spends the budget); with
    /// `to_meet`, only when every undecided objective lies that far
    /// under its bound, so that the level may turn out to meet. For a
    /// level that met, when its estimate lies near a bound. A level that
    /// broke is not run again. Whether the search wants another run is
    /// its own call ([`super::find::Search::runs_again`]).
    pub(crate) fn another_run_may_decide(&self, to_meet: bool) -> bool {
        match self.decision {
            Decision::Meets => return self.near_a_bound(),
            Decision::Breaks => return false,
            Decision::Undecided => {}
        }
        let far = |j: &&Judgement| {
            let half = (j.high - j.low) / 2.0;
            let margin = if to_meet {
                j.bound - j.estimate
            } else {
                (j.estimate - j.bound).abs()
            };
            !half.is_finite() || margin >= NARROWER_BY_A_RUN * half
        };
        let mut undecided = self
            .objectives
            .iter()
            .filter(|j| j.decision == Decision::Undecided);
        if to_meet {
            undecided.all(|j| far(&j))
        } else {
            undecided.any(|j| far(&j))
        }
    }
}

impl LevelJudgement {
    /// Whether some objective was decided by less than [`MARGIN`] times
    /// its interval's half-width. One window of a queue near saturation
    /// can be calm or stormy (at 93% busy, the share of operations over a
    /// p99 limit scatters from 0.5% to 16% between 3 s windows, and a calm
    /// one's intervals agree with each other), so a decision that narrow
    /// rests on the one window as much as on the load: it earns another
    /// run before the search builds on it.
    fn near_a_bound(&self) -> bool {
        self.objectives.iter().any(|j| {
            let half = (j.high - j.low) / 2.0;
            half.is_finite() && (j.estimate - j.bound).abs() < MARGIN * half
        })
    }
}

/// How many half-widths of its interval a decided objective must clear
/// its bound by not to be run again.
const MARGIN: f64 = 2.0;

/// The share an objective on a percentile allows over its limit: 5% for
/// p95; none for objectives that are not percentiles.
fn allowed_share(metric: SloMetric) -> Option<f64> {
    Some(match metric {
        SloMetric::P50 => 0.5,
        SloMetric::P90 => 0.1,
        SloMetric::P95 => 0.05,
        SloMetric::P99 => 0.01,
        SloMetric::P999 => 0.001,
        _ => return None,
    })
}

/// One objective over its intervals' sums.
fn judge_one(slo: &Slo, pairs: &[(f64, f64)]) -> Judgement {
    let objective = slo.to_string();
    if slo.metric == SloMetric::Max {
        let max = pairs.iter().map(|p| p.0).fold(0.0, f64::max);
        let decision = if pairs.is_empty() {
            Decision::Undecided
        } else if max < slo.limit {
            Decision::Meets
        } else {
            Decision::Breaks
        };
        return Judgement {
            objective,
            decision,
            estimate: max,
            low: max,
            high: max,
            bound: slo.limit,
            unit: "seconds",
        };
    }
    let bound = allowed_share(slo.metric).unwrap_or(slo.limit);
    let (estimate, mut low, mut high) = batch_interval(pairs);
    let (x, n) = pairs
        .iter()
        .fold((0.0, 0.0), |(x, n), p| (x + p.0, n + p.1));
    let share = allowed_share(slo.metric).is_some() || slo.metric == SloMetric::Errors;
    if share {
        (low, high) = spread_with_the_share(pairs, estimate, low, high);
    }
    // With one interval there is no scatter to read: the count's own
    // spread is all there is to go on.
    let floor = |(l, h): (f64, f64), low: f64, high: f64| {
        if low.is_finite() {
            (low.min(l), high.max(h))
        } else {
            (l, h)
        }
    };
    if share && n > 0.0 {
        (low, high) = floor(wilson(x / n, n), low, high);
        if let Some(clumps) = clump_interval(pairs) {
            (low, high) = floor(clumps, low, high);
        }
    } else if slo.metric == SloMetric::Lag && n > 0.0 {
        // The served count is a count: at least its Poisson spread.
        let half = 1.96 * (n - x).max(1.0).sqrt() / n;
        (low, high) = floor((estimate - half, estimate + half), low, high);
    }
    let decision = if !estimate.is_finite() || n <= 0.0 {
        Decision::Undecided
    } else if high < bound {
        Decision::Meets
    } else if low > bound {
        Decision::Breaks
    } else {
        Decision::Undecided
    };
    Judgement {
        objective,
        decision,
        estimate,
        low,
        high,
        bound,
        unit: if share || slo.metric == SloMetric::Lag {
            "share"
        } else {
            "seconds"
        },
    }
}

/// The ratio Σx/Σn over batches and its 95% interval by batch means;
/// an unbounded interval with fewer than two batches that hold any.
fn batch_interval(pairs: &[(f64, f64)]) -> (f64, f64, f64) {
    let used: Vec<(f64, f64)> = pairs.iter().copied().filter(|p| p.1 > 0.0).collect();
    let (x, n) = used.iter().fold((0.0, 0.0), |(x, n), p| (x + p.0, n + p.1));
    if n <= 0.0 {
        return (f64::NAN, f64::NEG_INFINITY, f64::INFINITY);
    }
    let ratio = x / n;
    let k = used.len();
    if k < 2 {
        return (ratio, f64::NEG_INFINITY, f64::INFINITY);
    }
    let mean_n = n / k as f64;
    let scatter = used
        .iter()
        .map(|(xi, ni)| (xi - ratio * ni).powi(2))
        .sum::<f64>()
        / (k - 1) as f64;
    let half = crate::util::t_975(k - 1) * (scatter / k as f64).sqrt() / mean_n;
    (ratio, ratio - half, ratio + half)
}

/// A share's batch-means interval `low..high` about `ratio`, when every
/// interval holds hits, redrawn on the share's log scale: from
/// `ratio·e^(−q)` to `ratio·e^q`, where `q` is the relative half-width
/// of the count, `c = t/√hits`, and of the storms: what the batch means'
/// relative half-width `h` holds beyond the count's, widened by `w`
/// ([`CALM_WINDOW_WIDENING`]): `q² = c² + w²·(h² − c²)`.
///
/// A share over a latency limit near saturation is made by the queue's
/// storms, and a window is calm or stormy as a whole: a calm one holds a
/// low share *and* intervals that agree (over windows of an M/M/4 queue
/// at its p95 answer, the batch half-width grows as the share's 1.3th
/// power). Read at face value, the calm window's narrow interval claims
/// the objective met: in 14% of windows at that answer, where a 95%
/// interval may in 2.5%. A spread that grows with the share is a constant
/// spread on its log scale, and the calm window's is then widened by
/// what it understates. When some intervals hold no hit, the clumps are
/// read instead ([`clump_interval`]): there a few hits in one interval
/// are a hiccup whose size says little of the next.
fn spread_with_the_share(pairs: &[(f64, f64)], ratio: f64, low: f64, high: f64) -> (f64, f64) {
    let (k, hit, x, _) = hits(pairs);
    let half = (high - low) / 2.0;
    if ratio.is_nan() || ratio <= 0.0 || !half.is_finite() || k < 2.0 || hit < k {
        return (low, high);
    }
    let count = crate::util::t_975(k as usize - 1) / x.sqrt();
    let storms = ((half / ratio).powi(2) - count * count).max(0.0);
    let q = (count * count + CALM_WINDOW_WIDENING.powi(2) * storms).sqrt();
    (ratio * (-q).exp(), (ratio * q.exp()).min(1.0))
}

/// How much wider the storms' part of a share's log-scale interval is
/// drawn than its batch means say (the count's part is a count's): over
/// simulated 3 s windows of an M/M/4 queue at its p95 answer, their relative half-width understated the spread between
/// windows by a fifth on average, and by more in the calm windows that
/// would claim the objective met. With it, 23 of 400 of those windows
/// meet and none break, and at 0.85 of the answer 178 of 200 meet (at
/// face value, 56 of 400 met at the answer).
const CALM_WINDOW_WIDENING: f64 = 1.35;

/// Over the intervals that hold operations: how many, how many of them
/// hold hits, the hits and the operations.
fn hits(pairs: &[(f64, f64)]) -> (f64, f64, f64, f64) {
    pairs
        .iter()
        .filter(|p| p.1 > 0.0)
        .fold((0.0, 0.0, 0.0, 0.0), |(k, hit, x, n), &(xi, ni)| {
            let held = if xi > 0.0 { 1.0 } else { 0.0 };
            (k + 1.0, hit + held, x + xi, n + ni)
        })
}

/// The 95% interval of a share whose hits come in clumps, read from the
/// intervals that hold none: `None` when every interval holds some (the
/// batch means then see the clumps) or none does (the Wilson interval
/// covers that).
///
/// Hits that were independent would leave hardly an interval empty (nine
/// expected in each leave one empty in 8,100). Each empty one is evidence
/// that they arrive in clumps, like the excursions of a queue near
/// saturation, whose number, not the hits', sets how much one window can
/// say. Taking clumps to fall on the intervals at random (Poisson), the
/// share of empty intervals `e` gives `−k·ln e` clumps over `k` intervals;
/// the hits' total then has the spread of that many clumps' count, scaled
/// by the hits per clump. One clump of 21 in 12 intervals of 875 (0.2%
/// over) can come from a window whose expectation is 1.1%, and says so.
fn clump_interval(pairs: &[(f64, f64)]) -> Option<(f64, f64)> {
    let (k, hit, x, n) = hits(pairs);
    if hit == 0.0 || hit >= k || k < 2.0 {
        return None;
    }
    let clumps = -k * ((k - hit) / k).ln();
    let per_clump = x / clumps;
    let (lo, hi) = poisson_interval(clumps);
    Some((lo * per_clump / n, hi * per_clump / n))
}

/// The 95% interval of a Poisson mean from `count` events (Wilson and
/// Hilferty's cube-root approximation, within 1% of the exact bounds from
/// one event up; a count may be fractional).
fn poisson_interval(count: f64) -> (f64, f64) {
    // The bound `z` standard errors from `c` on the cube-root scale.
    let bound = |c: f64, z: f64| c * (1.0 - 1.0 / (9.0 * c) + z / (3.0 * c.sqrt())).powi(3);
    let lower = if count > 0.0 {
        bound(count, -1.96).max(0.0)
    } else {
        0.0
    };
    (lower, bound(count + 1.0, 1.96))
}

/// The Wilson score 95% interval of a share `p` of `n` trials.
fn wilson(p: f64, n: f64) -> (f64, f64) {
    let z2 = 1.96f64 * 1.96;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = 1.96 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    (centre - half, centre + half)
}

/// The measured value of `slo`'s metric over a step: seconds for times, a
/// fraction for shares (`offered`: the open loop's arrivals per second).
pub(crate) fn value(
    slo: &Slo,
    response: &LatencySummary,
    error_rate: f64,
    throughput: f64,
    offered: Option<f64>,
) -> f64 {
    let r = response;
    match slo.metric {
        SloMetric::Mean => r.mean.as_secs_f64(),
        SloMetric::P50 => r.p50.as_secs_f64(),
        SloMetric::P90 => r.p90.as_secs_f64(),
        SloMetric::P95 => r.p95.as_secs_f64(),
        SloMetric::P99 => r.p99.as_secs_f64(),
        SloMetric::P999 => r.p999.as_secs_f64(),
        SloMetric::Max => r.max.as_secs_f64(),
        SloMetric::Errors => error_rate,
        SloMetric::Lag => offered
            .filter(|o| *o > 0.0)
            .map_or(0.0, |o| 1.0 - throughput / o),
    }
}

/// The open loop's offered arrivals per second of a level; none for a
/// closed loop.
pub(crate) fn offered(level: Level) -> Option<f64> {
    match level {
        Level::Rate(r) => Some(r),
        Level::Users(_) => None,
    }
}

#[cfg(test)]
mod tests;
