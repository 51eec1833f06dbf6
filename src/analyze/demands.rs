//! Service demands and the bounds they imply — the operational laws of
//! Lazowska, Zahorjan, Graham and Sevcik, *Quantitative System
//! Performance* (1984), chapters 3 and 5.
//!
//! - Utilisation law: `U_k = X·D_k`; for a centre of m servers (CPUs) the
//!   busy servers are `m·U`, so `D = m·U/X`. Each demand is the slope of
//!   busy servers against throughput (least squares with an intercept for
//!   background work from three steps on whose throughputs span 10% of
//!   the largest, through the origin otherwise),
//!   over the steps up to the peak where no resource was above 80% busy
//!   (no contention has yet inflated the work per operation); with none
//!   such (a shaped link or a throttled disk full from the first user),
//!   each resource's least demand of one step up to the peak. Work from
//!   outside the run (a neighbour's burst, a hypervisor's steal) only ever
//!   adds busy time, so one step alone can be inflated many times over
//!   while the least of several is the one such work touched least.
//! - Asymptotic bounds: `X ≤ m_k/D_k` for every resource, the tightest
//!   being the bottleneck's; for a closed loop with N users and think time
//!   Z, `X(N) ≤ min(N/(D+Z), m/D_max)` and the knee is near
//!   `N* = (D+Z)/D_max` (per server). D, the demand with no queueing, is
//!   the mean response time at the lowest load (at one user R = D; it also
//!   holds what no probe sees: network round trips, locks taken without
//!   waiting); the resources' summed demands when there is none.
//! - Little's law `N = X·(R+Z)` holds in every closed loop, counted on
//!   every operation attempted: the time spent in failed operations (all
//!   their tries) is the users' too. A step that breaks it by more than
//!   5% and more than its window's edges explain spent time outside the
//!   measured cycle (a caveat; the generator is named only on its own
//!   signs).

use super::points::{ResourceKind, StepPoint};
use serde::Serialize;

/// Unqueued steps are those with every resource under this share busy.
pub(crate) const UNSATURATED: f64 = 0.8;

/// One resource's demand per operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Demand {
    pub(crate) resource: String,
    pub(crate) kind: ResourceKind,
    pub(crate) servers: f64,
    /// Seconds of the resource per operation (all its servers together).
    pub(crate) seconds: f64,
    /// The throughput it allows at most: servers / demand.
    pub(crate) bound: f64,
    /// Taken from the step where the resource did the least work per
    /// operation, because the fit disagreed with the steps or no step was
    /// below saturation.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) from_steps: bool,
    /// Demand at the peak step over the fitted demand: far above 1 means
    /// the resource worked harder per operation as load rose (spinning,
    /// retrying), not that it ran out.
    pub(crate) growth_at_peak: Option<f64>,
}

/// Little's law at one closed-loop step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct LittleCheck {
    pub(crate) users: f64,
    /// X·(R+Z).
    pub(crate) implied: f64,
    /// |X·(R+Z) − N| / N.
    pub(crate) deviation: f64,
}

/// Measured throughput against the bound at one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StepBound {
    pub(crate) load: f64,
    pub(crate) throughput: f64,
    /// The asymptotic bound at this load, when demands are known.
    pub(crate) bound: Option<f64>,
    /// Closed loop, enough operations: Little's law.
    pub(crate) little: Option<LittleCheck>,
}

/// Demands, bounds and Little's law over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Demands {
    /// Positions of the points the demands were fitted on.
    pub(crate) fitted_on: Vec<usize>,
    /// Those points were below saturation; false: none was, and each
    /// demand is its least of one step up to the peak.
    pub(crate) unqueued: bool,
    /// Every resource, tightest bound first.
    pub(crate) resources: Vec<Demand>,
    /// Demand with no queueing, seconds (see the module header).
    pub(crate) total_s: f64,
    pub(crate) think_s: f64,
    /// `N* = (D+Z)/D_max`, closed loops.
    pub(crate) n_star: Option<f64>,
    pub(crate) steps: Vec<StepBound>,
}

impl Demands {
    /// The tightest bound: the bottleneck's, if hardware is the limit.
    pub(crate) fn tightest(&self) -> Option<&Demand> {
        self.resources.first()
    }
}

/// The share of the largest throughput the fitting steps' throughputs must
/// span for a line with an intercept.
const SPAN: f64 = 0.1;

/// The demand from (throughput, busy servers) pairs: the slope of a line
/// with an intercept (what the resource does at no load: other processes,
/// the generator's own idle work) from three points on whose throughputs
/// span [`SPAN`] of the largest, else through the origin. Over a
/// throughput that barely moved (a log or a lock holding it from the
/// first user) the intercept's slope is the noise of the busy time over
/// nothing: 44.8 to 45.0 tps at 0.7% to 1.1% of two CPUs fitted 21.3 ms of
/// CPU a transaction, where each step had spent 0.44 ms.
fn slope(pairs: &[(f64, f64)]) -> Option<f64> {
    let n = pairs.len() as f64;
    let (lo, hi) = pairs.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), p| {
        (lo.min(p.0), hi.max(p.0))
    });
    if pairs.len() >= 3 && hi - lo >= SPAN * hi {
        let mx = pairs.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pairs.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = pairs.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = pairs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        if sxx > 0.0 && sxy > 0.0 {
            return Some(sxy / sxx);
        }
    }
    let xx: f64 = pairs.iter().map(|p| p.0 * p.0).sum();
    let ux: f64 = pairs.iter().map(|p| p.0 * p.1).sum();
    (xx > 0.0).then(|| ux / xx)
}

/// Fits the demands of complete points ordered by load; `closed` says
/// whether load is users (closed loop) or a rate.
pub(crate) fn demands(points: &[StepPoint], closed: bool, peak: Option<usize>) -> Demands {
    let (fitted_on, unqueued) = fitting_steps(points, peak);
    let x_max = points.iter().map(|p| p.throughput).fold(0.0, f64::max);
    let mut resources: Vec<Demand> = resource_names(points)
        .into_iter()
        .filter_map(|(name, kind, servers)| {
            let fit = Fit {
                points,
                on: &fitted_on,
                unqueued,
                peak,
                x_max,
            };
            fit.demand(name, kind, servers)
        })
        .collect();
    resources.sort_by(|a, b| a.bound.total_cmp(&b.bound));
    // The whole-host CPU, its single CPUs and a quota are the same time
    // counted twice; disks and links add up.
    let summed: f64 = resources
        .iter()
        .filter(|d| !d.kind.is_cpu() || d.kind == ResourceKind::Cpu)
        .map(|d| d.seconds)
        .sum();
    let lowest = points.first();
    let total_s = lowest
        .map(StepPoint::response_s)
        .filter(|r| *r > 0.0)
        .unwrap_or(summed);
    let think_s = lowest.map_or(0.0, |p| p.think_s);
    // The bottleneck per server: for m CPUs the centre serves m at once.
    let d_max = resources.first().map(|d| d.seconds / d.servers);
    let n_star = d_max
        .filter(|d| closed && *d > 0.0)
        .map(|d| (total_s + think_s) / d);
    let steps = step_bounds(points, &resources, total_s, closed);
    Demands {
        fitted_on,
        unqueued,
        resources,
        total_s,
        think_s,
        n_star,
        steps,
    }
}

/// The steps the demands are fitted on: up to the peak, every resource
/// (but a single CPU) below saturation, and true; else the first step
/// that served, and false.
fn fitting_steps(points: &[StepPoint], peak: Option<usize>) -> (Vec<usize>, bool) {
    let mut fitted_on: Vec<usize> = points
        .iter()
        .enumerate()
        // Past the peak, contention inflates the work per operation.
        .filter(|(i, _)| peak.is_none_or(|k| *i <= k))
        .filter(|(_, p)| {
            p.throughput > 0.0
                && !p.resources.is_empty()
                && p.resources
                    .iter()
                    .filter(|r| r.kind != ResourceKind::OneCpu)
                    .all(|r| r.utilisation < UNSATURATED)
        })
        .map(|(i, _)| i)
        .collect();
    let unqueued = !fitted_on.is_empty();
    if !unqueued {
        if let Some(i) = points.iter().position(|p| p.throughput > 0.0) {
            fitted_on.push(i);
        }
    }
    (fitted_on, unqueued)
}

/// Every resource any step measured, in the order first seen: its name,
/// kind and servers.
fn resource_names(points: &[StepPoint]) -> Vec<(&str, ResourceKind, f64)> {
    let mut names: Vec<(&str, ResourceKind, f64)> = Vec::new();
    for p in points {
        for r in &p.resources {
            if !names.iter().any(|(n, _, _)| *n == r.name) {
                names.push((&r.name, r.kind, r.servers));
            }
        }
    }
    names
}

/// What one resource's demand is fitted from.
struct Fit<'a> {
    points: &'a [StepPoint],
    /// The fitting steps ([`fitting_steps`]).
    on: &'a [usize],
    /// They are below saturation (else the lowest load alone).
    unqueued: bool,
    peak: Option<usize>,
    x_max: f64,
}

impl Fit<'_> {
    /// The least of the served steps' own demands of `name` (busy servers
    /// over throughput), over the steps up to `upto` (all with none).
    fn least(&self, name: &str, upto: Option<usize>) -> Option<f64> {
        self.points
            .iter()
            .enumerate()
            .filter(|(i, p)| p.throughput > 0.0 && upto.is_none_or(|k| *i <= k))
            .filter_map(|(_, p)| {
                let r = p.resource(name)?;
                Some(r.servers * r.utilisation / p.throughput)
            })
            .filter(|d| *d > 0.0)
            .min_by(f64::total_cmp)
    }

    /// The slope of busy servers over throughput on the fitting steps.
    fn slope(&self, name: &str) -> Option<f64> {
        let pairs: Vec<(f64, f64)> = self
            .on
            .iter()
            .filter_map(|&i| {
                let p = &self.points[i];
                let r = p.resource(name)?;
                Some((p.throughput, r.servers * r.utilisation))
            })
            .collect();
        slope(&pairs).filter(|s| *s > 0.0)
    }

    /// One resource's demand: the slope of its busy time over throughput
    /// on the fitting steps, or the smallest demand of one step when the
    /// slope is implausible or no step was below saturation.
    fn demand(&self, name: &str, kind: ResourceKind, servers: f64) -> Option<Demand> {
        // Each step's own demand; the smallest is an upper limit.
        let own = self.least(name, None);
        let fitted = if self.unqueued {
            self.slope(name)
        } else {
            self.least(name, self.peak)
        };
        let (seconds, from_steps) = match (fitted, own) {
            (Some(f), Some(o)) if f * self.x_max > servers * 1.000_001 || f < 0.8 * o => (o, true),
            (Some(f), _) => (f, !self.unqueued),
            (None, Some(o)) => (o, true),
            (None, None) => return None,
        };
        let growth_at_peak = self.peak.and_then(|i| {
            let p = &self.points[i];
            let r = p.resource(name)?;
            (p.throughput > 0.0).then(|| r.servers * r.utilisation / p.throughput / seconds)
        });
        Some(Demand {
            resource: name.to_string(),
            kind,
            servers,
            seconds,
            bound: servers / seconds,
            from_steps,
            growth_at_peak,
        })
    }
}

/// Each step's throughput bound (hardware and, closed, population) and its
/// Little's law check.
fn step_bounds(
    points: &[StepPoint],
    resources: &[Demand],
    total_s: f64,
    closed: bool,
) -> Vec<StepBound> {
    points
        .iter()
        .map(|p| {
            let hardware = resources.first().map(|d| d.bound);
            let bound = if closed {
                let population = p.load / (total_s + p.think_s).max(f64::MIN_POSITIVE);
                Some(hardware.map_or(population, |h| h.min(population)))
            } else {
                hardware
            };
            let little =
                (closed && p.completed as f64 >= 20.0 * p.load && p.load > 0.0).then(|| {
                    // Users' time: in served operations, in failed ones
                    // (every try of a retried one), and thinking after
                    // each attempt.
                    let window = p.completed as f64 / p.throughput.max(f64::MIN_POSITIVE);
                    let implied = p.throughput * p.response_s()
                        + p.failed_s / window
                        + p.attempts_per_s() * p.think_s;
                    LittleCheck {
                        users: p.load,
                        implied,
                        deviation: (implied - p.load).abs() / p.load,
                    }
                });
            StepBound {
                load: p.load,
                throughput: p.throughput,
                bound,
                little,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::fixture::mva_points;

    /// A link full from the first user (a shaper), the throughput flat:
    /// no step is below saturation. A neighbour's burst during the first
    /// step put the CPU at 70% busy there, against 14% on every other:
    /// the CPU's demand is the least of one step, not the burst's, and
    /// its bound is five times what the burst would have made it.
    #[test]
    fn a_burst_in_the_one_step_does_not_make_the_demand() {
        let mut points = mva_points(0.0001, 0.0004, 0.0, &[1, 2, 4, 8]);
        for (i, p) in points.iter_mut().enumerate() {
            p.throughput = 2_000.0;
            p.resources[1].utilisation = 0.99;
            p.resources[0].utilisation = if i == 0 { 0.70 } else { 0.14 };
        }
        let d = demands(&points, true, Some(3));
        assert!(!d.unqueued);
        let cpu = d.resources.iter().find(|r| r.resource == "cpu").unwrap();
        assert!((cpu.seconds - 0.14 / 2_000.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.bound - 2_000.0 / 0.14).abs() < 1.0, "{cpu:?}");
        assert!(cpu.from_steps);
        let disk = d.tightest().unwrap();
        assert_eq!(disk.resource, "disk vda");
        assert!((disk.bound - 2_000.0 / 0.99).abs() < 1.0, "{disk:?}");
    }

    /// Below saturation the demand is still the slope over the steps:
    /// the background's share is its intercept, not part of the demand.
    #[test]
    fn below_saturation_the_demand_is_the_slope() {
        let mut points = mva_points(0.0001, 0.0002, 0.01, &[1, 2, 4, 8]);
        for (i, p) in points.iter_mut().enumerate() {
            p.throughput = 100.0 * (i + 1) as f64;
            p.resources[0].utilisation = 0.005 + 0.0001 * p.throughput;
            p.resources[1].utilisation = 0.0002 * p.throughput;
        }
        let d = demands(&points, true, Some(3));
        assert!(d.unqueued);
        assert_eq!(d.fitted_on, vec![0, 1, 2, 3]);
        let cpu = d.resources.iter().find(|r| r.resource == "cpu").unwrap();
        assert!((cpu.seconds - 0.0001).abs() < 1e-9, "{cpu:?}");
        assert!(!cpu.from_steps);
    }

    /// A throughput a log held flat from the first user (44.8 to 45.0
    /// tps) while two CPUs went from 0.7% to 1.1% busy: no line with an
    /// intercept is found over a throughput that did not move (it said
    /// 21.3 ms of CPU a transaction, a bound of 94 tps), and the demand is
    /// what the steps spent, some 0.4 ms.
    #[test]
    fn over_a_throughput_that_barely_moved_the_demand_is_what_the_steps_spent() {
        let mut points = mva_points(0.0001, 0.0002, 0.01, &[1, 2, 4]);
        for (p, (x, busy)) in points
            .iter_mut()
            .zip([(44.8, 0.007), (45.0, 0.007), (45.0, 0.011)])
        {
            p.throughput = x;
            p.resources[0].utilisation = busy;
            p.resources[1].utilisation = 0.001;
        }
        let d = demands(&points, true, Some(2));
        assert!(d.unqueued);
        let cpu = d.resources.iter().find(|r| r.resource == "cpu").unwrap();
        let servers = cpu.servers;
        assert!(
            cpu.seconds > servers * 0.007 / 45.0 && cpu.seconds < servers * 0.011 / 45.0,
            "{cpu:?}"
        );
    }
}
