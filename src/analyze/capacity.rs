//! Capacity: the peak throughput and its load, the knee of the
//! throughput–load curve, a step's value of an objective's metric (the
//! objectives themselves are judged in [`super::objectives`]), and how
//! the evidence says a step's load and a managed nginx's settings.
//!
//! The knee rule, stated: walking up the load steps, the knee is the last
//! step before either (a) throughput grew less than 80% as fast as load did
//! (relative growth of X over relative growth of load, step to step), or
//! (b) p95 response time first exceeded twice its value at the lowest load.

use super::points::StepPoint;
use crate::plan::Slo;
use serde::Serialize;

/// Which rule placed the knee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum KneeRule {
    /// Throughput grew < 80% as fast as load to the next step.
    ThroughputGrowth,
    /// p95 at the next step exceeded 2× its lowest-load value.
    LatencyDoubled,
}

/// The knee of the curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Knee {
    /// Position in the points.
    pub(crate) at: usize,
    pub(crate) load: f64,
    pub(crate) throughput: f64,
    pub(crate) rule: KneeRule,
    /// The figures that fired the rule, in words.
    pub(crate) because: String,
}

/// The growth efficiency under which a step bends the curve: a knee.
pub(crate) const KNEE_EFFICIENCY: f64 = 0.8;

/// Relative throughput growth over relative load growth from `a` to `b`.
pub(crate) fn growth_efficiency(a: &StepPoint, b: &StepPoint) -> Option<f64> {
    let load = (b.load - a.load) / a.load;
    (a.load > 0.0 && a.throughput > 0.0 && load > 0.0)
        .then(|| ((b.throughput - a.throughput) / a.throughput) / load)
}

/// The knee of complete points ordered by load; none when neither rule
/// fired (throughput kept pace with load to the last step).
pub(crate) fn knee(points: &[StepPoint]) -> Option<Knee> {
    let first_p95 = points.first()?.response.p95.as_secs_f64();
    for (i, pair) in points.windows(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        let growth = growth_efficiency(a, b);
        let fired = if let Some(e) = growth.filter(|e| *e < KNEE_EFFICIENCY) {
            Some((
                KneeRule::ThroughputGrowth,
                format!(
                    "load ×{:.2} to {} gave throughput ×{:.2} (growth efficiency {:.0}%, under 80%)",
                    b.load / a.load,
                    load_text(b),
                    b.throughput / a.throughput,
                    e * 100.0
                ),
            ))
        } else {
            let p95 = b.response.p95.as_secs_f64();
            (first_p95 > 0.0 && p95 > 2.0 * first_p95).then(|| {
                (
                    KneeRule::LatencyDoubled,
                    format!(
                        "p95 at {} was {} — over twice the {} at the lowest load",
                        load_text(b),
                        crate::units::Latency(b.response.p95),
                        crate::units::Latency(points[0].response.p95)
                    ),
                )
            })
        };
        if let Some((rule, because)) = fired {
            return Some(Knee {
                at: i,
                load: a.load,
                throughput: a.throughput,
                rule,
                because,
            });
        }
    }
    None
}

/// A step's load in words: `8 users` or `2000 req/s` (arrivals offered,
/// in the workload's unit).
pub(crate) fn load_text(p: &StepPoint) -> String {
    match p.level {
        crate::plan::Level::Users(n) => format!("{n} user{}", if n == 1 { "" } else { "s" }),
        crate::plan::Level::Rate(r) => p.rate(r).to_string(),
    }
}

/// A step's load as the evidence says it: a rate in the run's unit, or
/// users.
pub(crate) fn load_said(step: &crate::engine::StepResult, unit: crate::units::RateUnit) -> String {
    match step.level {
        crate::plan::Level::Rate(r) => crate::units::Rate(r, unit).to_string(),
        users => users.to_string(),
    }
}

/// The settings of `keys` a managed nginx ran with, as the run stored
/// them; empty for any other server.
pub(crate) fn nginx_settings(
    run: &crate::store::StoredRun,
    keys: &[&str],
) -> Vec<(String, String)> {
    let settings = run
        .setup
        .as_ref()
        .and_then(|s| s.pointer("/managed_server/settings"))
        .and_then(|s| s.as_array());
    let is_nginx = run
        .setup
        .as_ref()
        .and_then(|s| s.pointer("/managed_server/version"))
        .and_then(|v| v.as_str())
        .is_some_and(|v| v.starts_with("nginx"));
    if !is_nginx {
        return Vec::new();
    }
    settings
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str()?.split_once('='))
        .filter(|(k, _)| keys.contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The step's value of the objective's metric: seconds for latencies, a
/// fraction for errors.
pub(crate) fn slo_value(slo: &Slo, p: &StepPoint) -> f64 {
    let offered = crate::engine::offered(p.level);
    crate::engine::slo_value(slo, &p.response, p.error_rate, p.throughput, offered)
}
