//! Service level objectives (`--slo p95<50ms`, `--slo errors<1%`,
//! `--slo lag<5%`): what the
//! user asks of a step, as part of the plan. Judging a step by them is the
//! analysis' work (`analyze::capacity`); this module only reads and writes
//! them.

use crate::units::{parse_duration, Latency, Percent};
use serde::Serialize;
use std::fmt;

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
    /// Open loop: the share of the offered arrivals per second not served.
    Lag,
}

impl SloMetric {
    /// Whether the objective limits a share (errors, lag) rather than a time.
    pub(crate) fn is_share(self) -> bool {
        matches!(self, SloMetric::Errors | SloMetric::Lag)
    }
}

/// One service level objective: `metric < limit`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Slo {
    pub(crate) metric: SloMetric,
    /// Seconds for latencies, a fraction for errors.
    pub(crate) limit: f64,
}

impl Slo {
    /// Parses `p95<50ms`, `p99<1s`, `mean<5ms`, `errors<1%`, `lag<5%`.
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
            "lag" => SloMetric::Lag,
            other => {
                return Err(format!(
                    "'{other}' is not a metric (mean, p50, p90, p95, p99, p99.9, max, errors, lag)"
                ))
            }
        };
        let value = value.trim();
        let limit = if metric.is_share() {
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
            parse_duration(value)
                .map_err(|e| format!("'{value}': {e}"))?
                .as_secs_f64()
        };
        if limit <= 0.0 {
            return Err(format!("'{text}' can never be met"));
        }
        Ok(Slo { metric, limit })
    }

    /// A value of the metric (seconds, or a fraction for errors) in the
    /// objective's unit.
    pub(crate) fn value_text(&self, v: f64) -> String {
        if self.metric.is_share() {
            format!("{}", Percent(v))
        } else {
            Latency::secs(v).to_string()
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
            SloMetric::Lag => "lag",
        };
        write!(f, "{name}<{}", self.value_text(self.limit))
    }
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
        assert_eq!(Slo::parse("lag<5%").unwrap().to_string(), "lag<5.0%");
        for bad in [
            "p95>50ms",
            "p97<1s",
            "errors<1",
            "p95<fast",
            "errors<0%",
            "lag<5ms",
        ] {
            assert!(Slo::parse(bad).is_err(), "{bad}");
        }
    }
}
