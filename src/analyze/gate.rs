//! The gate of a continuous-integration job (`perflab compare BASE NEW
//! --fail-on 'throughput<-5%,p95>+10%'`): a change fails the build when
//! it is both beyond its threshold and significant. At every load level
//! both runs measured whole, each measured interval is one sample (its
//! throughput, or its percentile of the response time); the change is the
//! ratio of the two runs' means less one, with its 95% bootstrap interval,
//! and it is significant when that interval leaves out no change at all.
//! Each threshold is judged at the level where the change went furthest
//! its way; since that is the most extreme of several levels, each
//! level's interval is widened to 1 − 5%/k for k levels (Bonferroni), so
//! that a gate over many levels fails on noise no more often than one
//! over a single level (at most 5% of the time). Both runs are read as the JSON export holds them, so a
//! baseline can be a run in a store or an export a CI job kept.

use super::stats::ratio_interval_at;
use serde::Serialize;
use serde_json::Value;

/// What a threshold watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum GateMetric {
    Throughput,
    /// A percentile of the response time: its key in the export
    /// (`p50`, `p90`, `p95`, `p99`, `p999`).
    Latency(&'static str),
}

impl GateMetric {
    fn parse(name: &str) -> Option<GateMetric> {
        Some(match name {
            "throughput" => GateMetric::Throughput,
            "p50" => GateMetric::Latency("p50"),
            "p90" => GateMetric::Latency("p90"),
            "p95" => GateMetric::Latency("p95"),
            "p99" => GateMetric::Latency("p99"),
            "p99.9" | "p999" => GateMetric::Latency("p999"),
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            GateMetric::Throughput => "throughput",
            GateMetric::Latency("p999") => "p99.9",
            GateMetric::Latency(key) => key,
        }
    }

    /// An interval's sample, none when it has none (no operation ended).
    fn sample(self, interval: &Value) -> Option<f64> {
        let value = match self {
            GateMetric::Throughput => interval.get("throughput")?.as_f64()?,
            GateMetric::Latency(key) => {
                let response = interval.get("response")?;
                if response.get("count")?.as_u64()? == 0 {
                    return None;
                }
                response.get(key)?.as_f64()?
            }
        };
        value.is_finite().then_some(value)
    }
}

/// One threshold: a change of `metric` past `change` (a fraction, below
/// zero for a drop) fails.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Threshold {
    pub(crate) metric: GateMetric,
    pub(crate) change: f64,
}

impl Threshold {
    /// Whether a change goes past the threshold.
    fn beyond(&self, change: f64) -> bool {
        if self.change < 0.0 {
            change < self.change
        } else {
            change > self.change
        }
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (op, sign) = if self.change < 0.0 {
            ('<', "")
        } else {
            ('>', "+")
        };
        write!(
            f,
            "{}{op}{sign}{}%",
            self.metric.name(),
            self.change * 100.0
        )
    }
}

/// Parses `throughput<-5%,p95>+10%`: a metric, `<` with a drop or `>`
/// with a rise, in percent.
pub(crate) fn parse_thresholds(text: &str) -> Result<Vec<Threshold>, String> {
    let mut out: Vec<Threshold> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let at = part
            .find(['<', '>'])
            .ok_or_else(|| format!("'{part}' has no < or >"))?;
        let (name, rest) = part.split_at(at);
        let metric = GateMetric::parse(name.trim()).ok_or_else(|| {
            format!(
                "'{}' is not a metric (throughput, p50, p90, p95, p99, p99.9)",
                name.trim()
            )
        })?;
        let below = rest.starts_with('<');
        let number = rest[1..].trim();
        let change = number
            .strip_suffix('%')
            .and_then(|n| n.parse::<f64>().ok())
            .filter(|c| c.is_finite() && *c != 0.0 && c.abs() <= 1000.0)
            .ok_or_else(|| format!("'{number}' is not a change in percent (e.g. -5% or +10%)"))?
            / 100.0;
        if below != (change < 0.0) {
            return Err(format!(
                "'{part}' would fail on no change at all: a drop is given with < (throughput<-5%), a rise with > (p95>+10%)"
            ));
        }
        if out.iter().any(|t| t.metric == metric) {
            return Err(format!("{} is given two thresholds", metric.name()));
        }
        out.push(Threshold { metric, change });
    }
    if out.is_empty() {
        return Err("no threshold".to_string());
    }
    Ok(out)
}

/// One threshold judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct GateLine {
    pub(crate) threshold: String,
    pub(crate) failed: bool,
    /// The level where the change went furthest its way, as the export
    /// states it, and the change there with its 95% interval; none when
    /// no level both runs measured had samples.
    pub(crate) at: Option<String>,
    pub(crate) change: Option<f64>,
    pub(crate) interval: Option<(f64, f64)>,
    pub(crate) significant: bool,
    /// The line to print.
    pub(crate) said: String,
}

/// The whole gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Gate {
    pub(crate) base: String,
    pub(crate) new: String,
    pub(crate) lines: Vec<GateLine>,
    pub(crate) failed: bool,
    /// The two verdicts' bottlenecks, when they differ.
    pub(crate) moved: Option<String>,
    /// The two verdicts side by side (the baseline's, the new run's),
    /// when their bottlenecks differ.
    pub(crate) verdicts: Option<(VerdictSide, VerdictSide)>,
}

/// One run's verdict as the gate shows it beside the other's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct VerdictSide {
    pub(crate) bottleneck: String,
    /// `17432 tps at 4 users`.
    pub(crate) peak: Option<String>,
    /// The 95th percentile at the peak, as said (`414µs`).
    pub(crate) p95: Option<String>,
    /// The verdict's first line of evidence.
    pub(crate) evidence: Option<String>,
}

impl VerdictSide {
    /// Each field as a table shows it: its name and its value.
    pub(crate) fn rows(&self) -> [(&'static str, Option<&str>); 4] {
        [
            ("bottleneck", Some(&self.bottleneck)),
            ("peak", self.peak.as_deref()),
            ("p95 at the peak", self.p95.as_deref()),
            ("evidence", self.evidence.as_deref()),
        ]
    }

    /// The verdict of the exported `run`, if it has one.
    fn of(run: &Value) -> Option<VerdictSide> {
        let verdict = run.get("verdict")?;
        let point = verdict
            .get("peak")
            .and_then(Value::as_u64)
            .and_then(|i| verdict.pointer(&format!("/points/{i}")));
        let unit = verdict
            .get("rate_unit")
            .and_then(Value::as_str)
            .unwrap_or("/s");
        let peak = point.and_then(|p| {
            let throughput = p.get("throughput").and_then(Value::as_f64)?;
            Some(format!(
                "{throughput:.0} {unit} at {}",
                level_words(p.get("level")?)
            ))
        });
        let p95 = point
            .and_then(|p| p.pointer("/response/p95"))
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| crate::units::Latency(std::time::Duration::from_secs_f64(s)).to_string());
        Some(VerdictSide {
            bottleneck: bottleneck(run)?.to_string(),
            peak,
            p95,
            evidence: verdict
                .pointer("/bottleneck/evidence/0")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

/// The plan fields two runs must share to be gated against each other.
const SAME_PLAN: &[(&str, &str)] = &[
    ("/run/workload", "workload"),
    ("/run/plan/workload/mix", "mix"),
    ("/run/plan/workload/scale", "scale"),
    ("/run/plan/workload/test", "test"),
    ("/run/plan/target/kind", "target kind"),
    ("/run/plan/load/kind", "load model"),
    ("/run/plan/load/think", "think time"),
];

/// Why two exported runs cannot be gated against each other: the first
/// plan field they differ in, or no level both measured.
pub(crate) fn plan_difference(base: &Value, new: &Value) -> Option<String> {
    for (pointer, what) in SAME_PLAN {
        let (a, b) = (base.pointer(pointer), new.pointer(pointer));
        if a != b {
            let show = |v: Option<&Value>| v.map_or("none".to_string(), Value::to_string);
            return Some(format!(
                "the runs differ in their {what} ({} against {})",
                show(a),
                show(b)
            ));
        }
    }
    let common = levels(base).into_iter().any(|l| levels(new).contains(&l));
    (!common).then(|| "the runs have no load level in common".to_string())
}

/// The load levels of an exported run, as the export states them.
pub(crate) fn levels(run: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = steps(run).filter_map(|s| s.get("load").cloned()).collect();
    out.dedup();
    out
}

fn steps(run: &Value) -> impl Iterator<Item = &Value> {
    run.get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// `metric`'s samples at `level`: every measured interval of the steps
/// there that ran their whole window.
pub(crate) fn samples(run: &Value, level: &Value, metric: GateMetric) -> Vec<f64> {
    steps(run)
        .filter(|s| s.get("load") == Some(level))
        .filter(|s| {
            matches!(
                s.get("status").and_then(Value::as_str),
                Some("ok" | "stalled")
            )
        })
        .flat_map(|s| {
            s.get("intervals")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter(|i| i.get("phase").and_then(Value::as_str) == Some("measured"))
        .filter(|i| {
            i.get("length")
                .and_then(Value::as_f64)
                .is_some_and(|l| l > 0.0)
        })
        .filter_map(|i| metric.sample(i))
        .collect()
}

/// A level as said: `8 users`, `2000/s`.
pub(crate) fn level_words(level: &Value) -> String {
    let value = level.get("value").and_then(Value::as_f64).unwrap_or(0.0);
    match level.get("kind").and_then(Value::as_str) {
        Some("users") if value == 1.0 => "1 user".to_string(),
        Some("users") => format!("{value} users"),
        _ => format!("{value}/s"),
    }
}

/// The bottleneck the run's verdict named.
pub(crate) fn bottleneck(run: &Value) -> Option<&str> {
    run.pointer("/verdict/bottleneck/name")
        .and_then(Value::as_str)
}

/// Judges `new` against `base` by `thresholds`; `names` say each run.
pub(crate) fn judge(
    base: &Value,
    new: &Value,
    names: (&str, &str),
    thresholds: &[Threshold],
    seed: u64,
) -> Gate {
    let common: Vec<Value> = levels(base)
        .into_iter()
        .filter(|l| levels(new).contains(l))
        .collect();
    let lines: Vec<GateLine> = thresholds
        .iter()
        .map(|t| judge_one(base, new, &common, *t, seed))
        .collect();
    let moved = match (bottleneck(base), bottleneck(new)) {
        (Some(a), Some(b)) if a != b => Some(format!("the bottleneck moved from {a} to {b}")),
        _ => None,
    };
    let verdicts = moved
        .as_ref()
        .and_then(|_| Some((VerdictSide::of(base)?, VerdictSide::of(new)?)));
    Gate {
        base: names.0.to_string(),
        new: names.1.to_string(),
        failed: lines.iter().any(|l| l.failed),
        lines,
        moved,
        verdicts,
    }
}

/// One threshold over the common levels: judged where the change went
/// furthest its way among the levels where it failed, else among all.
fn judge_one(base: &Value, new: &Value, common: &[Value], t: Threshold, seed: u64) -> GateLine {
    let pairs: Vec<(&Value, Vec<f64>, Vec<f64>)> = common
        .iter()
        .map(|level| {
            (
                level,
                samples(base, level, t.metric),
                samples(new, level, t.metric),
            )
        })
        .filter(|(_, a, b)| a.len() >= 2 && b.len() >= 2)
        .collect();
    let confidence = 1.0 - 0.05 / pairs.len().max(1) as f64;
    let judged: Vec<(&Value, f64, f64, f64)> = pairs
        .iter()
        .filter_map(|(level, a, b)| {
            let (ratio, lo, hi) = ratio_interval_at(a, b, seed, confidence)?;
            Some((*level, ratio - 1.0, lo - 1.0, hi - 1.0))
        })
        .collect();
    let significant = |lo: f64, hi: f64| lo > 0.0 || hi < 0.0;
    let fails =
        |&&(_, change, lo, hi): &&(&Value, f64, f64, f64)| t.beyond(change) && significant(lo, hi);
    let furthest = |a: &&(&Value, f64, f64, f64), b: &&(&Value, f64, f64, f64)| {
        let key = |c: f64| if t.change < 0.0 { -c } else { c };
        key(a.1).total_cmp(&key(b.1))
    };
    let worst = judged
        .iter()
        .filter(fails)
        .max_by(furthest)
        .or_else(|| judged.iter().max_by(furthest));
    let Some(&(level, change, lo, hi)) = worst else {
        return GateLine {
            threshold: t.to_string(),
            failed: false,
            at: None,
            change: None,
            interval: None,
            significant: false,
            said: format!(
                "pass {t}: no level both runs measured has two intervals of it to compare"
            ),
        };
    };
    let failed = t.beyond(change) && significant(lo, hi);
    let pct = |x: f64| format!("{:+.1}%", x * 100.0);
    let why = if failed {
        "significant, beyond the threshold".to_string()
    } else if t.beyond(change) {
        "beyond the threshold, but its interval holds no change: noise".to_string()
    } else {
        format!("within {}", pct(t.change))
    };
    let at = level_words(level);
    GateLine {
        threshold: t.to_string(),
        failed,
        said: format!(
            "{} {t}: {} at {at} [{}, {}] ({:.1}%, over {} level{}): {why}",
            if failed { "FAIL" } else { "pass" },
            pct(change),
            pct(lo),
            pct(hi),
            confidence * 100.0,
            judged.len(),
            if judged.len() == 1 { "" } else { "s" }
        ),
        at: Some(at),
        change: Some(change),
        interval: Some((lo, hi)),
        significant: significant(lo, hi),
    }
}

#[cfg(test)]
mod tests;
