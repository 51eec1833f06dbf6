//! The closed loop's what-ifs: exact MVA at the run's highest population
//! and at its peak's, the model first checked against the steps up to the
//! peak, its predictions scaled to the measurement when it missed it, or
//! taken from the demands measured cleanly when the throughput fell away
//! past a peak the model held (see the parent module's header).

use super::{
    cap, delay_for, floor, solve, tightest, with_intervals, AtLoad, Centre, Change, Scenario,
    WhatIf, CREDIBLE,
};
use crate::analyze::bottleneck::growth::relative_half_width;
use crate::analyze::demands::Demands;
use crate::analyze::points::StepPoint;
use crate::units::Percent;

/// A closed loop: exact MVA at the highest population (and at the
/// peak's), checked against the steps up to the peak.
pub(super) fn closed_loop(
    points: &[StepPoint],
    demands: &Demands,
    peak: usize,
    target: &Centre,
    centres: &[Centre],
    changed: Vec<Change>,
    highest: f64,
) -> Option<WhatIf> {
    let lowest = points.first()?;
    let model = ClosedModel {
        delay_s: delay_for(centres, demands.total_s),
        think_s: lowest.think_s,
        hidden_cap: cap(centres).filter(|&c| lowest.throughput >= HIDDEN * c),
    };
    let mut model_error: f64 = 0.0;
    for p in points.iter().take(peak + 1) {
        let (x, _) = model.solve(centres, p.load)?;
        if p.throughput > 0.0 {
            model_error = model_error.max((x - p.throughput).abs() / p.throughput);
        }
    }
    let fit = model.fit(points, &points[peak], centres, highest)?;
    let scenarios = changed
        .into_iter()
        .map(|change| model.scenario(change, &fit, target))
        .collect::<Option<Vec<_>>>()?;
    // The noise of what the predictions start from: the highest load's
    // measurement when they are scaled to it, the peak's otherwise.
    let start = if fit.scaled {
        points
            .iter()
            .filter(|p| p.load == highest)
            .max_by(|a, b| a.throughput.total_cmp(&b.throughput))
            .unwrap_or(fit.at_peak)
    } else {
        fit.at_peak
    };
    Some(with_intervals(WhatIf {
        model_error,
        baseline: fit.baseline,
        measured: fit.measured,
        scaled: fit.scaled,
        credible: model_error <= CREDIBLE,
        noise: relative_half_width(start),
        width: 0.0,
        basis: fit.basis(model_error <= CREDIBLE),
        scenarios,
    }))
}

/// A closed loop's model: the centres' delay and the users' think time.
#[derive(Clone, Copy)]
struct ClosedModel {
    delay_s: f64,
    think_s: f64,
    /// The limiters' cap, when it held the lowest load measured: the
    /// delay then holds time the operation spent waiting for it.
    hidden_cap: Option<f64>,
}

/// The share of a limiter's bound at the lowest load from which its
/// waiting is taken to be in the delay.
const HIDDEN: f64 = 0.8;

/// How the closed-loop model met the run at its highest load and at its
/// peak.
struct ClosedFit<'a> {
    /// The highest load, and the model's and the run's throughput there.
    highest: f64,
    baseline: f64,
    measured: f64,
    /// The peak step and the model's throughput there.
    at_peak: &'a StepPoint,
    peak_model: f64,
    /// The model missed the highest load's throughput and its predictions
    /// are scaled to what was measured.
    scaled: bool,
    /// The model held at the peak and the throughput fell away past it.
    thrashed: bool,
}

impl ClosedModel {
    /// The model's throughput and response time with `centres` at `load` users.
    fn solve(&self, centres: &[Centre], load: f64) -> Option<(f64, f64)> {
        solve(
            centres,
            self.delay_s,
            self.think_s,
            load.round().max(1.0) as u32,
        )
    }

    /// Whether the prediction `x` with the centres `after` is a floor: a
    /// change that relieves the limiter which held the lowest load,
    /// where it no longer caps `x`. The delay keeps that load's wait for
    /// the limiter, which the faster link no longer imposes.
    fn hidden_floor(&self, after: &[Centre], x: f64) -> bool {
        self.hidden_cap
            .is_some_and(|before| cap(after).is_none_or(|c| c > before && x < c * (1.0 - 1e-9)))
    }

    /// The model against the run at its highest load and its peak.
    fn fit<'a>(
        &self,
        points: &[StepPoint],
        at_peak: &'a StepPoint,
        centres: &[Centre],
        highest: f64,
    ) -> Option<ClosedFit<'a>> {
        let (baseline, _) = self.solve(centres, highest)?;
        let measured = points
            .iter()
            .filter(|p| p.load == highest)
            .map(|p| p.throughput)
            .fold(0.0, f64::max);
        let (peak_model, _) = self.solve(centres, at_peak.load)?;
        let missed = measured > 0.0 && (baseline - measured).abs() > CREDIBLE * measured;
        // The model held at the peak and the throughput fell away past it:
        // the work per operation grew with the queue (thrashing), which the
        // change relieves; predict from the clean demands, not the fall.
        let thrashed = missed
            && measured < baseline
            && highest > at_peak.load
            && measured < at_peak.throughput * (1.0 - CREDIBLE / 2.0)
            && (peak_model - at_peak.throughput).abs() <= CREDIBLE * at_peak.throughput;
        Some(ClosedFit {
            highest,
            baseline,
            measured,
            at_peak,
            peak_model,
            scaled: missed && !thrashed,
            thrashed,
        })
    }

    /// The prediction for one change: at the highest load, and at the
    /// peak's when that is lower.
    fn scenario(&self, change: Change, fit: &ClosedFit, target: &Centre) -> Option<Scenario> {
        // perflab's work the change puts on the server's CPUs leaves the
        // delay, where the lowest load's response time had put it: counted
        // in both, it was counted twice. An operation spared its reads
        // takes at least what the body of the lowest load's responses
        // took: where the reads' demand was most of that load's response
        // time, the delay left from it is a small difference of large
        // figures, and none when the demand the read limit gives counts
        // reads the kernel's page cache served.
        let model = ClosedModel {
            delay_s: (self.delay_s - change.moved_s)
                .max(0.0)
                .max(delay_for(&change.after, change.read_free_s)),
            ..*self
        };
        model.predicted(change, fit, target)
    }

    /// [`ClosedModel::scenario`] with this model's delay.
    fn predicted(&self, change: Change, fit: &ClosedFit, target: &Centre) -> Option<Scenario> {
        let after = &change.after;
        let (x, r) = self.solve(after, fit.highest)?;
        let t = tightest(after);
        let gain = x / fit.baseline;
        let scale = |x: f64| {
            if fit.scaled {
                fit.measured * x / fit.baseline
            } else {
                x
            }
        };
        let ends = match &change.ends {
            Some([a, b]) => Some([
                scale(self.solve(a, fit.highest)?.0),
                scale(self.solve(b, fit.highest)?.0),
            ]),
            None => None,
        };
        // Scaled by the model's gain, never past the bound the model
        // itself sets after the change.
        let scaled = (fit.measured * gain).min(t.map_or(f64::INFINITY, Centre::bound));
        let at_peak = fit.at_peak;
        let peak_prediction = if at_peak.load < fit.highest {
            let (xp, _) = self.solve(after, at_peak.load)?;
            let throughput = if fit.scaled {
                (at_peak.throughput * xp / fit.peak_model)
                    .min(t.map_or(f64::INFINITY, Centre::bound))
            } else {
                xp
            };
            Some(AtLoad {
                load: at_peak.load,
                throughput,
                at_least: floor(&change, t, at_peak.throughput) || self.hidden_floor(after, xp),
                interval: None,
            })
        } else {
            None
        };
        Some(Scenario {
            load: fit.highest,
            throughput: if fit.scaled { scaled } else { x },
            response_s: Some(r),
            gain: if fit.scaled {
                scaled / fit.measured
            } else {
                gain
            },
            limited_by: t.map(|c| c.name.clone()),
            still: t.is_some_and(|c| c.name == target.name),
            bound: t.map(Centre::bound),
            server_cpus: change.server_cpus,
            server_memory: change.server_memory,
            ends,
            sharing: change.sharing,
            at_least: floor(&change, t, at_peak.throughput) || self.hidden_floor(after, x),
            changed: change.changed,
            change: change.words,
            at_peak: peak_prediction,
            interval: None,
        })
    }
}

impl ClosedFit<'_> {
    /// What the predictions start from, in words; `credible` when the
    /// model reproduced the run up to its peak.
    fn basis(&self, credible: bool) -> String {
        let (measured, highest, at_peak) = (self.measured, self.highest, self.at_peak);
        if self.thrashed {
            format!(
                "the demands measured cleanly up to the peak ({}): past it the work per operation grew with the queue ({} at {}, {} below the peak), which the change relieves, so the predictions do not start from that fall",
                load_words(at_peak.load),
                at_peak.rate(measured),
                load_words(highest),
                Percent(1.0 - measured / at_peak.throughput)
            )
        } else if self.scaled {
            format!(
                "the {} measured at {} times the model's gain (the model missed it by over {})",
                at_peak.rate(measured),
                load_words(highest),
                Percent(CREDIBLE)
            )
        } else {
            let reproduce = if credible {
                "which reproduce the run"
            } else {
                "which reproduce the highest load's throughput but not every lower load's"
            };
            format!(
                "the demands measured up to the peak ({}), {reproduce}",
                load_words(at_peak.load)
            )
        }
    }
}

/// A closed loop's load in words (`16 users`).
fn load_words(load: f64) -> String {
    crate::plan::Level::Users(load.round().max(1.0) as u32).to_string()
}
