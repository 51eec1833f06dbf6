//! Comparing runs against a baseline, level by level, with statistics that
//! will not colour noise as a win: at each load level both runs ran, the
//! throughput samples (one value per run of the level with `--repeat` of
//! at least [`MIN_RUNS`], else the per-interval throughputs of every run of
//! the level) are compared with a
//! two-sided Mann–Whitney U test at α = 0.05, and the ratio of their means
//! gets a 95% bootstrap interval. A difference that is not significant is
//! `~`. The summary compares the peaks, the knees and the bottlenecks
//! ("clearing one bottleneck exposes the next"), an optional weighted
//! scorecard and throughput per unit of cost.

use super::capacity::load_text;
use super::stats::{mann_whitney_p, ratio_interval};
use super::{StepPoint, Verdict};
use crate::measure::Phase;
use crate::store::StoredRun;
use crate::workload::figures::CostWords;
use serde::Serialize;

/// Significance level of every test.
pub(crate) const ALPHA: f64 = 0.05;

/// A contender's difference from the baseline at one level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Difference {
    /// Contender's mean throughput over the baseline's.
    pub(crate) ratio: f64,
    pub(crate) ci: (f64, f64),
    pub(crate) p_value: f64,
    pub(crate) significant: bool,
}

/// One run at one level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Cell {
    /// Mean of the samples, operations per second.
    pub(crate) throughput: f64,
    pub(crate) p95_s: f64,
    /// Samples the test used, and what they are.
    pub(crate) samples: usize,
    pub(crate) across: &'static str,
    /// Against the baseline (none for the baseline itself).
    pub(crate) vs_base: Option<Difference>,
}

/// One load level across the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LevelRow {
    pub(crate) load: f64,
    pub(crate) label: String,
    /// One per run, in the order given; none where a run lacks the level.
    pub(crate) cells: Vec<Option<Cell>>,
}

/// One run's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunSummary {
    pub(crate) run: i64,
    pub(crate) peak_throughput: Option<f64>,
    /// What the run's throughputs count: its workload's unit.
    pub(crate) rate_unit: crate::units::RateUnit,
    pub(crate) peak_load: Option<String>,
    pub(crate) knee_load: Option<String>,
    pub(crate) bottleneck: Option<String>,
    /// The peak against the baseline's peak.
    pub(crate) peak_vs_base: Option<Difference>,
    /// Weighted score (baseline = the sum of the weights), with `--weights`.
    pub(crate) score: Option<f64>,
    /// `--cost`: the amount, and peak throughput per unit of it.
    pub(crate) cost: Option<(f64, f64)>,
    /// What a unit of work cost at its peak, when its workload counts it
    /// (a net run: both ends' processes' CPU per transaction or
    /// gigabyte), against the baseline's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) unit_cost: Option<UnitCost>,
}

/// What a unit of work cost at a run's peak level, from its workload's
/// own figures ([`crate::workload::figures::Cost`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct UnitCost {
    /// The cost per unit, over the level's measured windows, in the
    /// figures' base unit.
    pub(crate) per_unit: f64,
    pub(crate) words: CostWords,
    /// Against the baseline's per-interval figures: the ratio is this
    /// run's over the baseline's, below 1 when this run costs less.
    pub(crate) vs_base: Option<Difference>,
}

/// A run's per-interval cost per unit at `load`, its cost per unit over
/// every measured window there, and how it is said; none for a workload
/// that counts no cost.
fn cost_samples(run: &StoredRun, load: f64) -> Option<(Vec<f64>, f64, CostWords)> {
    let figures = run.figures()?;
    let words = figures.cost?;
    let at: Vec<_> = run
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.level.value() == load && s.status.ran_whole())
        .filter_map(|(i, _)| figures.at(i)?.cost.as_ref())
        .collect();
    let values: Vec<f64> = at
        .iter()
        .flat_map(|c| c.per_interval.iter().copied())
        .collect();
    (!at.is_empty()).then(|| {
        let whole = at.iter().map(|c| c.whole).sum::<f64>() / at.len() as f64;
        (values, whole, words)
    })
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Comparison {
    pub(crate) levels: Vec<LevelRow>,
    pub(crate) runs: Vec<RunSummary>,
    pub(crate) weights: Vec<(String, f64)>,
}

/// Runs of a level from which each run is one sample. With fewer, the
/// two-sided Mann–Whitney test cannot reach [`ALPHA`] however far apart
/// the runs are (2 against 2 gives p ≥ 1/3, 3 against 3 p ≥ 0.1; 4
/// against 4 can give 0.029): their intervals are the samples instead.
pub(crate) const MIN_RUNS: usize = 4;

/// The throughput samples of a run at a load level: one per run of the
/// level when it ran [`MIN_RUNS`] times or more, else one per measured
/// interval of every run of the level.
fn samples(run: &StoredRun, load: f64) -> (Vec<f64>, &'static str) {
    let steps: Vec<_> = run
        .steps
        .iter()
        .filter(|s| s.level.value() == load && s.status.ran_whole())
        .collect();
    if steps.len() >= MIN_RUNS {
        return (
            steps.iter().map(|s| s.summary().throughput).collect(),
            "runs",
        );
    }
    let values = steps
        .iter()
        .flat_map(|s| s.intervals.iter())
        .filter(|i| i.phase == Phase::Measured && i.length.as_secs_f64() > 0.0)
        .map(|i| i.tally.completed() as f64 / i.length.as_secs_f64())
        .collect();
    (values, "intervals")
}

fn difference(base: &[f64], other: &[f64], seed: u64) -> Option<Difference> {
    let (ratio, lo, hi) = ratio_interval(base, other, seed)?;
    let p_value = mann_whitney_p(base, other)?;
    Some(Difference {
        ratio,
        ci: (lo, hi),
        p_value,
        significant: p_value < ALPHA,
    })
}

/// Parses `--weights throughput=0.4,p95=0.4,cpu_per_op=0.2`.
pub(crate) fn parse_weights(text: &str) -> Result<Vec<(String, f64)>, String> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (name, w) = part
            .split_once('=')
            .ok_or_else(|| format!("'{part}' is not NAME=WEIGHT"))?;
        if !["throughput", "p95", "cpu_per_op"].contains(&name) {
            return Err(format!(
                "'{name}' is not a metric (throughput, p95, cpu_per_op)"
            ));
        }
        let w: f64 = w
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w >= 0.0)
            .ok_or_else(|| format!("'{w}' is not a weight"))?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("'{name}' is weighted twice"));
        }
        out.push((name.to_string(), w));
    }
    if out.is_empty() {
        return Err("no weights".to_string());
    }
    // Scores are weighted means: at least one weight must count.
    if out.iter().all(|(_, w)| *w == 0.0) {
        return Err("every weight is 0".to_string());
    }
    Ok(out)
}

/// The metric a weight applies to, at a run's peak: higher is better for
/// throughput; p95 and CPU per operation are inverted so higher is better.
fn metric(point: &StepPoint, name: &str) -> Option<f64> {
    match name {
        "throughput" => Some(point.throughput),
        "p95" => Some(point.response.p95.as_secs_f64()),
        "cpu_per_op" => {
            let cpus = point.extras.busy_cpus.unwrap_or(point.generator.cpus);
            (point.throughput > 0.0).then(|| cpus / point.throughput)
        }
        _ => None,
    }
}

/// Compares `runs[1..]` with `runs[0]`; `verdicts` in the same order;
/// `costs` per run (none where not given).
pub(crate) fn compare(
    runs: &[StoredRun],
    verdicts: &[Verdict],
    weights: &[(String, f64)],
    costs: &[Option<f64>],
    seed: u64,
) -> Comparison {
    let levels = level_rows(runs, verdicts, seed);
    let base_peak = peak_point(&verdicts[0]).map(|p| samples(&runs[0], p.load).0);
    let base_cost = peak_point(&verdicts[0]).and_then(|p| cost_samples(&runs[0], p.load));
    let runs_out = runs
        .iter()
        .zip(verdicts)
        .enumerate()
        .map(|(i, (run, verdict))| {
            let peak = peak_point(verdict);
            let peak_vs_base = match (i, &base_peak, peak) {
                (1.., Some(base), Some(p)) => difference(base, &samples(run, p.load).0, seed),
                _ => None,
            };
            let score = weighted_score(&verdicts[0], peak, weights);
            let unit_cost =
                peak.and_then(|p| cost_samples(run, p.load))
                    .map(|(values, per_unit, words)| UnitCost {
                        per_unit,
                        words,
                        vs_base: match (i, &base_cost) {
                            (1.., Some((base, _, base_words))) if *base_words == words => {
                                difference(base, &values, seed)
                            }
                            _ => None,
                        },
                    });
            RunSummary {
                run: run.id,
                peak_throughput: peak.map(|p| p.throughput),
                rate_unit: run.rate_unit(),
                peak_load: peak.map(load_text),
                knee_load: verdict
                    .knee
                    .as_ref()
                    .map(|k| load_text(&verdict.points[k.at])),
                bottleneck: verdict.bottleneck.as_ref().map(|b| b.name.clone()),
                peak_vs_base,
                score,
                cost: costs.get(i).copied().flatten().and_then(|c| {
                    let x = peak?.throughput;
                    (c > 0.0).then_some((c, x / c))
                }),
                unit_cost,
            }
        })
        .collect();
    Comparison {
        levels,
        runs: runs_out,
        weights: weights.to_vec(),
    }
}

/// The throughput samples of each run at its own peak level, pooled: how
/// a configuration run several times compares with another.
pub(crate) fn peak_samples(runs: &[(&StoredRun, &Verdict)]) -> Vec<f64> {
    runs.iter()
        .filter_map(|(run, verdict)| peak_point(verdict).map(|p| samples(run, p.load).0))
        .flatten()
        .collect()
}

/// How `other`'s samples differ from `base`'s (ratio of the means, its
/// interval, the Mann–Whitney p-value); none when either is empty.
pub(crate) fn differ(base: &[f64], other: &[f64], seed: u64) -> Option<Difference> {
    difference(base, other, seed)
}

/// The peak step of a verdict.
fn peak_point(v: &Verdict) -> Option<&StepPoint> {
    v.peak.map(|i| &v.points[i])
}

/// One row per load level any run has: each run's throughput and p95
/// there, and how it differs from the first run's.
fn level_rows(runs: &[StoredRun], verdicts: &[Verdict], seed: u64) -> Vec<LevelRow> {
    let mut loads: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.steps.iter().map(|s| s.level.value()))
        .collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    loads
        .iter()
        .map(|&load| {
            let base = samples(&runs[0], load).0;
            let cells = runs
                .iter()
                .zip(verdicts)
                .enumerate()
                .map(|(i, (run, verdict))| {
                    let (values, across) = samples(run, load);
                    if values.is_empty() {
                        return None;
                    }
                    let p95_s = verdict
                        .points
                        .iter()
                        .find(|p| p.load == load)
                        .map_or(0.0, |p| p.response.p95.as_secs_f64());
                    Some(Cell {
                        throughput: values.iter().sum::<f64>() / values.len() as f64,
                        p95_s,
                        samples: values.len(),
                        across,
                        vs_base: (i > 0).then(|| difference(&base, &values, seed)).flatten(),
                    })
                })
                .collect();
            let label = runs
                .iter()
                .flat_map(|r| r.steps.iter())
                .find(|s| s.level.value() == load)
                .map_or(load.to_string(), |s| s.level.to_string());
            LevelRow { load, label, cells }
        })
        .collect()
}

/// A run's weighted score at its peak `peak` against the first run's peak
/// (`base` is the first run's verdict); none without weights or a metric.
fn weighted_score(
    base: &Verdict,
    peak: Option<&StepPoint>,
    weights: &[(String, f64)],
) -> Option<f64> {
    (!weights.is_empty())
        .then(|| {
            let base = peak_point(base)?;
            let p = peak?;
            weights
                .iter()
                .map(|(name, w)| {
                    let (b, m) = (metric(base, name)?, metric(p, name)?);
                    let relative = if name == "throughput" { m / b } else { b / m };
                    Some(w * relative)
                })
                .sum::<Option<f64>>()
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why a level needs [`MIN_RUNS`] runs to be compared run by run: with
    /// fewer, runs wholly apart are still "no significant difference".
    #[test]
    fn fewer_runs_than_the_minimum_can_never_differ_significantly() {
        let apart = |n: usize| {
            let low: Vec<f64> = (0..n).map(|i| 100.0 + i as f64).collect();
            let high: Vec<f64> = (0..n).map(|i| 1000.0 + i as f64).collect();
            mann_whitney_p(&low, &high).unwrap()
        };
        assert!(apart(MIN_RUNS - 1) >= ALPHA, "{}", apart(MIN_RUNS - 1));
        assert!(apart(MIN_RUNS) < ALPHA, "{}", apart(MIN_RUNS));
    }

    #[test]
    fn weights_parse() {
        let w = parse_weights("throughput=0.4,p95=0.4,cpu_per_op=0.2").unwrap();
        assert_eq!(w.len(), 3);
        assert!(parse_weights("speed=1").is_err());
        assert!(parse_weights("p95=-1").is_err());
        assert!(parse_weights("").is_err());
        assert!(parse_weights("p95=inf").is_err());
        assert!(parse_weights("p95=NaN").is_err());
        assert!(parse_weights("p95=0,throughput=0").is_err());
        assert!(parse_weights("p95=1,p95=2").is_err());
        assert!(parse_weights("p95=0,throughput=1").is_ok());
    }
}
