//! Capacity: the peak throughput and its load, the knee of the
//! throughput–load curve, and the highest load that met the user's service
//! level objectives (`--slo p95<50ms`, `--slo errors<1%`).
//!
//! The knee rule, stated: walking up the load steps, the knee is the last
//! step before either (a) throughput grew less than 80% as fast as load did
//! (relative growth of X over relative growth of load, step to step), or
//! (b) p95 response time first exceeded twice its value at the lowest load.

use super::points::StepPoint;
use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Which rule placed the knee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KneeRule {
    /// Throughput grew < 80% as fast as load to the next step.
    ThroughputGrowth,
    /// p95 at the next step exceeded 2× its lowest-load value.
    LatencyDoubled,
}

/// The knee of the curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knee {
    /// Position in the points.
    pub at: usize,
    pub load: f64,
    pub throughput: f64,
    pub rule: KneeRule,
    /// The figures that fired the rule, in words.
    pub because: String,
}

/// Relative throughput growth over relative load growth from `a` to `b`.
pub fn growth_efficiency(a: &StepPoint, b: &StepPoint) -> Option<f64> {
    let load = (b.load - a.load) / a.load;
    (a.load > 0.0 && a.throughput > 0.0 && load > 0.0)
        .then(|| ((b.throughput - a.throughput) / a.throughput) / load)
}

/// The knee of complete points ordered by load; none when neither rule
/// fired (throughput kept pace with load to the last step).
pub fn knee(points: &[StepPoint]) -> Option<Knee> {
    let first_p95 = points.first()?.response.p95.as_secs_f64();
    for (i, pair) in points.windows(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        let growth = growth_efficiency(a, b);
        let fired = if let Some(e) = growth.filter(|e| *e < 0.8) {
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

/// A step's load in words: `8 users` or `2000/s`.
pub fn load_text(p: &StepPoint) -> String {
    match p.level {
        crate::plan::Level::Users(n) => format!("{n} user{}", if n == 1 { "" } else { "s" }),
        crate::plan::Level::Rate(r) => format!("{}/s", crate::units::OpsPerSec(r)),
    }
}

/// What an objective limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloMetric {
    Mean,
    P50,
    P90,
    P95,
    P99,
    P999,
    Max,
    /// Failed share of attempted operations.
    Errors,
}

/// One service level objective: `metric < limit`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Slo {
    pub metric: SloMetric,
    /// Seconds for latencies, a fraction for errors.
    pub limit: f64,
}

impl Slo {
    /// Parses `p95<50ms`, `p99<1s`, `mean<5ms`, `errors<1%`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (name, value) = text
            .split_once('<')
            .ok_or_else(|| format!("'{text}' has no '<'"))?;
        let metric = match name.trim() {
            "mean" => SloMetric::Mean,
            "p50" => SloMetric::P50,
            "p90" => SloMetric::P90,
            "p95" => SloMetric::P95,
            "p99" => SloMetric::P99,
            "p99.9" | "p999" => SloMetric::P999,
            "max" => SloMetric::Max,
            "errors" => SloMetric::Errors,
            other => {
                return Err(format!(
                    "'{other}' is not a metric (mean, p50, p90, p95, p99, p99.9, max, errors)"
                ))
            }
        };
        let value = value.trim();
        let limit = if metric == SloMetric::Errors {
            let pct = value
                .strip_suffix('%')
                .ok_or_else(|| format!("'{value}' needs a % sign"))?;
            pct.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=100.0).contains(p))
                .ok_or_else(|| format!("'{value}' is not a percentage"))?
                / 100.0
        } else {
            crate::units::parse_duration(value)
                .map_err(|e| format!("'{value}': {e}"))?
                .as_secs_f64()
        };
        if limit <= 0.0 {
            return Err(format!("'{text}' can never be met"));
        }
        Ok(Slo { metric, limit })
    }

    /// The step's value of the metric.
    pub fn value(&self, p: &StepPoint) -> f64 {
        let r = &p.response;
        match self.metric {
            SloMetric::Mean => r.mean.as_secs_f64(),
            SloMetric::P50 => r.p50.as_secs_f64(),
            SloMetric::P90 => r.p90.as_secs_f64(),
            SloMetric::P95 => r.p95.as_secs_f64(),
            SloMetric::P99 => r.p99.as_secs_f64(),
            SloMetric::P999 => r.p999.as_secs_f64(),
            SloMetric::Max => r.max.as_secs_f64(),
            SloMetric::Errors => p.error_rate,
        }
    }

    /// The value in the objective's unit.
    pub fn value_text(&self, v: f64) -> String {
        if self.metric == SloMetric::Errors {
            format!("{}", crate::units::Percent(v))
        } else {
            crate::units::Latency(Duration::from_secs_f64(v.max(0.0))).to_string()
        }
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.metric {
            SloMetric::Mean => "mean",
            SloMetric::P50 => "p50",
            SloMetric::P90 => "p90",
            SloMetric::P95 => "p95",
            SloMetric::P99 => "p99",
            SloMetric::P999 => "p99.9",
            SloMetric::Max => "max",
            SloMetric::Errors => "errors",
        };
        write!(f, "{name}<{}", self.value_text(self.limit))
    }
}

/// How the run fared against its objectives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloOutcome {
    pub objectives: Vec<String>,
    /// The highest load whose step met every objective, and its throughput.
    pub max_load: Option<f64>,
    pub throughput: Option<f64>,
    /// The first step that missed one, and what it missed, in words.
    pub first_miss: Option<String>,
}

/// The highest load that met every objective.
pub fn slo_outcome(points: &[StepPoint], slos: &[Slo]) -> Option<SloOutcome> {
    if slos.is_empty() {
        return None;
    }
    let misses = |p: &StepPoint| -> Vec<String> {
        slos.iter()
            .filter(|s| s.value(p) >= s.limit)
            .map(|s| format!("{s} missed: {}", s.value_text(s.value(p))))
            .collect()
    };
    let met = points.iter().rev().find(|p| misses(p).is_empty());
    let first_miss = points.iter().find_map(|p| {
        let m = misses(p);
        (!m.is_empty()).then(|| format!("at {}: {}", load_text(p), m.join(", ")))
    });
    Some(SloOutcome {
        objectives: slos.iter().map(|s| s.to_string()).collect(),
        max_load: met.map(|p| p.load),
        throughput: met.map(|p| p.throughput),
        first_miss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_parse_and_print() {
        let s = Slo::parse("p95<50ms").unwrap();
        assert_eq!(s.metric, SloMetric::P95);
        assert!((s.limit - 0.05).abs() < 1e-12);
        let e = Slo::parse("errors<1%").unwrap();
        assert!((e.limit - 0.01).abs() < 1e-12);
        assert_eq!(e.to_string(), "errors<1.0%");
        for bad in ["p95>50ms", "p97<1s", "errors<1", "p95<fast", "errors<0%"] {
            assert!(Slo::parse(bad).is_err(), "{bad}");
        }
    }
}
