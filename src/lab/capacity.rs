//! The lab's capacity answer (`--need 2000/s --slo p95<50ms`): which
//! variants met the need within the objectives, which is the smallest of
//! them, and — from each variant's what-ifs — which configurations not
//! measured are predicted to meet it. A capacity planner asks "how fast a server
//! does a branch of 20 ATMs need"; this is that question asked of a
//! matrix.
//!
//! A variant meets the need when every run of it has a step whose
//! throughput reached it with every objective met. "Smallest" is the
//! cheapest when the lab gives costs; otherwise the variants no other
//! meeting variant undercuts on every sized knob it varies (CPUs, memory,
//! link rate, disk limits) with its other knobs equal.
//!
//! A prediction is a what-if of a variant that did not meet it: the MVA
//! throughput at the sweep's highest load and its mean response time.
//! A percentile objective is estimated as the measured percentile at that
//! load scaled by predicted over measured mean response time (the shape of
//! the distribution is assumed to stay); an error objective as the error
//! rate measured there. "Out of the way" is no configuration one can
//! have, so only the doubled (or added-CPU) changes are offered.

use super::Variant;
use crate::analyze::capacity::slo_value;
use crate::analyze::points::StepPoint;
use crate::analyze::Verdict;
use crate::plan::{Slo, SloMetric};
use std::cmp::Ordering;

/// What the user asks of the lab.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Ask {
    /// Operations per second needed.
    pub(crate) need: Option<f64>,
    pub(crate) slos: Vec<Slo>,
}

impl Ask {
    pub(crate) fn is_empty(&self) -> bool {
        self.need.is_none() && self.slos.is_empty()
    }

    /// `2000 tps within p95<50ms`, the need in `unit`.
    pub(crate) fn describe(&self, unit: crate::units::RateUnit) -> String {
        let need = self.need.map(|n| crate::units::Rate(n, unit).to_string());
        let slos: Vec<String> = self.slos.iter().map(|s| s.to_string()).collect();
        match (need, slos.is_empty()) {
            (Some(n), true) => n,
            (Some(n), false) => format!("{n} within {}", slos.join(", ")),
            (None, _) => format!("the highest throughput within {}", slos.join(", ")),
        }
    }

    /// Whether step `p` of a run whose verdict is `verdict` meets the need
    /// and every objective. The objectives are judged as the run's verdict
    /// judged them (its level's intervals, its runs pooled, and only below
    /// every level that did not meet them, as a search claims); a verdict
    /// judged by no objectives is read point by point.
    fn met_by(&self, verdict: &Verdict, p: &StepPoint) -> bool {
        let within = match verdict.slo.as_ref().filter(|_| !self.slos.is_empty()) {
            Some(slo) => {
                slo.max_load.is_some_and(|top| p.load <= top)
                    && slo.levels.iter().any(|l| {
                        l.load == p.load && l.judgement.decision == crate::engine::Decision::Meets
                    })
            }
            None => self.slos.iter().all(|s| slo_value(s, p) < s.limit),
        };
        within && self.need.is_none_or(|n| p.throughput >= n)
    }

    /// The step of a run that answers `self`: of the steps that meet it,
    /// the highest load when its verdict judged the objectives (the load
    /// the run's own answer names, whatever noise made a lower step's
    /// throughput higher), the highest throughput otherwise.
    fn best_step<'v>(&self, verdict: &'v Verdict) -> Option<&'v StepPoint> {
        let judged = verdict.slo.is_some() && !self.slos.is_empty();
        verdict
            .points
            .iter()
            .filter(|p| self.met_by(verdict, p))
            .max_by(|a, b| {
                let by_load = if judged {
                    a.load.total_cmp(&b.load)
                } else {
                    std::cmp::Ordering::Equal
                };
                by_load.then(a.throughput.total_cmp(&b.throughput))
            })
    }
}

/// A variant that met the need.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Met {
    pub(crate) variant: String,
    /// Over its runs: the mean of each run's best step that met it.
    pub(crate) load: f64,
    pub(crate) throughput: f64,
    pub(crate) runs: usize,
}

/// A configuration predicted to meet the need.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Predicted {
    pub(crate) variant: String,
    pub(crate) change: String,
    pub(crate) load: f64,
    /// Mean over the variant's runs, operations per second.
    pub(crate) throughput: f64,
    /// Each objective's estimate, in words (`p95 ≈ 31.2ms`).
    pub(crate) estimates: Vec<String>,
    /// The variant that has this configuration, when the lab measured
    /// it, and its throughput at the same load (the report's predictions
    /// checked).
    pub(crate) measured_on: Option<(String, f64)>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct CapacityAnswer {
    pub(crate) asked: String,
    pub(crate) met: Vec<Met>,
    /// The smallest of those met, by name.
    pub(crate) smallest: Vec<String>,
    /// Variants where some runs met it and some did not.
    pub(crate) unsteady: Vec<String>,
    pub(crate) predicted: Vec<Predicted>,
    /// The smallest of those predicted.
    pub(crate) smallest_predicted: Vec<String>,
    /// Changes whose objectives could not be estimated (an open loop's
    /// what-if predicts no response time).
    pub(crate) not_estimated: Vec<String>,
}

/// The sized value of a knob: CPUs, bytes, bits or operations per second
/// (unlimited is infinite); none for a knob that is not a size.
pub(super) fn size(knob: &str, value: &str) -> Option<f64> {
    let value = value.trim();
    if value == "unlimited" {
        return knob
            .starts_with("link.rate")
            .then_some(f64::INFINITY)
            .or(knob.starts_with("disk.").then_some(f64::INFINITY));
    }
    match knob {
        "cpus" => crate::sut::parse_kernel_cpu_list(value).map(|mut c| {
            c.sort_unstable();
            c.dedup();
            c.len() as f64
        }),
        k if ["memory", "disk.read_bps", "disk.write_bps"].contains(&k)
            || crate::sut::knobs::sizes_a_cache(k) =>
        {
            crate::units::Bytes::parse(value).ok().map(|b| b.0 as f64)
        }
        "link.rate" => crate::units::BitsPerSec::parse(value)
            .ok()
            .map(|b| b.0 as f64),
        "disk.read_iops" | "disk.write_iops" => value.parse::<u64>().ok().map(|n| n as f64),
        _ => None,
    }
}

/// `a` against `b`: Less when `a` is no larger in every sized knob and
/// smaller in one, every other knob equal; none when they cannot be
/// ordered.
fn compare(a: &Variant, b: &Variant) -> Option<Ordering> {
    let mut order = Ordering::Equal;
    let knobs = a
        .knobs
        .iter()
        .map(|(k, _)| k)
        .chain(b.knobs.iter().map(|(k, _)| k));
    for knob in knobs {
        let get = |v: &Variant| {
            v.knobs
                .iter()
                .find(|(k, _)| k == knob)
                .map(|(_, x)| x.clone())
        };
        let (x, y) = (get(a), get(b));
        if x == y {
            continue;
        }
        let here = match (
            x.as_deref().and_then(|x| size(knob, x)),
            y.as_deref().and_then(|y| size(knob, y)),
        ) {
            (Some(x), Some(y)) => x.partial_cmp(&y)?,
            _ => return None,
        };
        order = match (order, here) {
            (o, Ordering::Equal) | (Ordering::Equal, o) => o,
            (o, h) if o == h => o,
            _ => return None,
        };
    }
    Some(order)
}

/// The smallest of `names` among `variants`: the cheapest when all have a
/// cost, else those no other undercuts.
fn smallest(names: &[&str], variants: &[Variant]) -> Vec<String> {
    let of: Vec<&Variant> = names
        .iter()
        .filter_map(|n| variants.iter().find(|v| v.name == *n))
        .collect();
    if !of.is_empty() && of.iter().all(|v| v.cost.is_some()) {
        let low = of
            .iter()
            .filter_map(|v| v.cost)
            .fold(f64::INFINITY, f64::min);
        return of
            .iter()
            .filter(|v| v.cost == Some(low))
            .map(|v| v.name.clone())
            .collect();
    }
    let mut out: Vec<String> = Vec::new();
    for v in &of {
        let undercut = of
            .iter()
            .any(|o| o.name != v.name && compare(o, v) == Some(Ordering::Less));
        if !undercut && !out.contains(&v.name) {
            out.push(v.name.clone());
        }
    }
    out
}

/// The estimate of objective `slo` at step `p` for a predicted mean
/// response time `r_s`; none when it cannot be estimated.
fn estimate(slo: &Slo, p: &StepPoint, r_s: Option<f64>) -> Option<f64> {
    match slo.metric {
        SloMetric::Errors | SloMetric::Lag => Some(slo_value(slo, p)),
        SloMetric::Mean => r_s,
        _ => {
            let mean = p.response.mean.as_secs_f64();
            let r_s = r_s?;
            (mean > 0.0).then(|| slo_value(slo, p) * r_s / mean)
        }
    }
}

/// One change's predictions over a variant's runs.
struct Gathered {
    change: String,
    load: f64,
    /// Each run's predicted throughput, operations per second.
    throughputs: Vec<f64>,
    /// Each run's estimate of each objective.
    estimates: Vec<Vec<f64>>,
}

/// The answer for `ask` over each variant's runs' verdicts.
pub(crate) fn answer(
    ask: &Ask,
    variants: &[Variant],
    verdicts: &[Vec<&Verdict>],
) -> CapacityAnswer {
    let measured = measured(ask, variants, verdicts);
    let mut predicted = Vec::new();
    let mut not_estimated = Vec::new();
    for (v, runs) in measured.not_met {
        for gathered in gather(ask, v, runs, &mut not_estimated) {
            predicted.extend(gathered.prediction(ask, v));
        }
    }
    let met_names: Vec<&str> = measured.met.iter().map(|m| m.variant.as_str()).collect();
    let predicted_names: Vec<&str> = predicted.iter().map(|p| p.variant.as_str()).collect();
    CapacityAnswer {
        asked: ask.describe(
            verdicts
                .iter()
                .flatten()
                .next()
                .map_or(crate::units::RateUnit::default(), |v| v.rate_unit),
        ),
        smallest: smallest(&met_names, variants),
        smallest_predicted: smallest(&predicted_names, variants),
        met: measured.met,
        unsteady: measured.unsteady,
        predicted,
        not_estimated,
    }
}

/// What the variants' runs measured against the need.
struct Measured<'a, 'v> {
    /// The variants every run of which met it.
    met: Vec<Met>,
    /// Variants where some runs met it and some did not.
    unsteady: Vec<String>,
    /// The variants that ran and did not meet it in every run, with their
    /// runs' verdicts (their what-ifs may predict a change that would).
    not_met: Vec<(&'a Variant, &'a [&'v Verdict])>,
}

/// Sorts the variants that ran into those that met `ask` in every run
/// and the others.
fn measured<'a, 'v>(
    ask: &Ask,
    variants: &'a [Variant],
    verdicts: &'a [Vec<&'v Verdict>],
) -> Measured<'a, 'v> {
    let mut measured = Measured {
        met: Vec::new(),
        unsteady: Vec::new(),
        not_met: Vec::new(),
    };
    for (v, runs) in variants.iter().zip(verdicts) {
        if runs.is_empty() {
            continue;
        }
        let best: Vec<&StepPoint> = runs
            .iter()
            .filter_map(|verdict| ask.best_step(verdict))
            .collect();
        if best.len() == runs.len() {
            let n = best.len() as f64;
            measured.met.push(Met {
                variant: v.name.clone(),
                load: best.iter().map(|p| p.load).sum::<f64>() / n,
                throughput: best.iter().map(|p| p.throughput).sum::<f64>() / n,
                runs: runs.len(),
            });
        } else {
            if !best.is_empty() {
                measured.unsteady.push(v.name.clone());
            }
            measured.not_met.push((v, runs));
        }
    }
    measured
}

/// The what-if predictions of variant `v`'s runs, gathered by change;
/// a change whose objectives cannot be estimated is named in
/// `not_estimated` instead.
fn gather(
    ask: &Ask,
    v: &Variant,
    runs: &[&Verdict],
    not_estimated: &mut Vec<String>,
) -> Vec<Gathered> {
    let mut by_change: Vec<Gathered> = Vec::new();
    for verdict in runs {
        let Some(w) = &verdict.what_if else { continue };
        for s in w.scenarios.iter().filter(|s| s.changed.factor.is_some()) {
            let Some(p) = verdict.points.iter().find(|p| p.load == s.load) else {
                continue;
            };
            let estimates: Option<Vec<f64>> = ask
                .slos
                .iter()
                .map(|o| estimate(o, p, s.response_s))
                .collect();
            let Some(estimates) = estimates else {
                let what = format!("{}: {}", v.name, s.change);
                if !not_estimated.contains(&what) {
                    not_estimated.push(what);
                }
                continue;
            };
            match by_change.iter_mut().find(|c| c.change == s.change) {
                Some(c) => {
                    c.throughputs.push(s.throughput);
                    c.estimates.push(estimates);
                }
                None => by_change.push(Gathered {
                    change: s.change.clone(),
                    load: s.load,
                    throughputs: vec![s.throughput],
                    estimates: vec![estimates],
                }),
            }
        }
    }
    by_change
}

impl Gathered {
    /// The change as a prediction for variant `v`, when its mean over the
    /// runs meets the need and every objective.
    fn prediction(self, ask: &Ask, v: &Variant) -> Option<Predicted> {
        let n = self.throughputs.len() as f64;
        let throughput = self.throughputs.iter().sum::<f64>() / n;
        let mean_estimate = |i: usize| self.estimates.iter().map(|e| e[i]).sum::<f64>() / n;
        let fits = ask.need.is_none_or(|need| throughput >= need)
            && ask
                .slos
                .iter()
                .enumerate()
                .all(|(i, o)| mean_estimate(i) < o.limit);
        fits.then(|| Predicted {
            variant: v.name.clone(),
            load: self.load,
            throughput,
            estimates: ask
                .slos
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    let name = o.to_string();
                    let name = name.split('<').next().unwrap_or_default().to_string();
                    format!("{name} ≈ {}", o.value_text(mean_estimate(i)))
                })
                .collect(),
            measured_on: None,
            change: self.change.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(name: &str, knobs: &[(&str, &str)], cost: Option<f64>) -> Variant {
        Variant {
            name: name.into(),
            knobs: knobs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cost,
            ratings: Vec::new(),
        }
    }

    /// One CPU with 1 GiB undercuts two CPUs with 1 GiB; two CPUs with
    /// 96 MiB and one CPU with 1 GiB cannot be ordered, so both are the
    /// smallest; with costs, the cheapest is.
    #[test]
    fn the_smallest_is_undercut_by_none_or_the_cheapest() {
        let all = [
            variant("a", &[("cpus", "0"), ("memory", "1GiB")], None),
            variant("b", &[("cpus", "0-1"), ("memory", "1GiB")], None),
            variant("c", &[("cpus", "0-1"), ("memory", "96MiB")], None),
        ];
        assert_eq!(smallest(&["a", "b"], &all), ["a"]);
        assert_eq!(smallest(&["b", "c"], &all), ["c"]);
        assert_eq!(smallest(&["a", "c"], &all), ["a", "c"]);
        let priced = [
            variant("a", &[("cpus", "0")], Some(300.0)),
            variant("b", &[("cpus", "0-1")], Some(200.0)),
        ];
        assert_eq!(smallest(&["a", "b"], &priced), ["b"]);
        // A setting that is no size makes two variants incomparable.
        let set = [
            variant("x", &[("cpus", "0"), ("pg.fsync", "on")], None),
            variant("y", &[("cpus", "0-1"), ("pg.fsync", "off")], None),
        ];
        assert_eq!(compare(&set[0], &set[1]), None);
        assert_eq!(size("link.rate", "unlimited"), Some(f64::INFINITY));
        assert_eq!(size("link.rate", "1mbit"), Some(1e6));
    }
}
