//! The history of one plan (`perflab history`): its runs, oldest first,
//! as one series per load level and metric (throughput, p50, p95, p99;
//! each run's value is the mean of its measured intervals' samples, as
//! the gate takes them), and the change points of each series
//! ([`detect`]). Each change is told with its size (the ratio of the
//! segment after it to the one before, less one, with a 95% bootstrap
//! interval over the runs), the first run after it with its labels, and
//! the verdict's bottleneck on each side when it differs.

pub(crate) mod detect;

use super::gate::{self, GateMetric};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The metrics a history follows.
pub(crate) const METRICS: [GateMetric; 4] = [
    GateMetric::Throughput,
    GateMetric::Latency("p50"),
    GateMetric::Latency("p95"),
    GateMetric::Latency("p99"),
];

/// What a history keeps of one run: its id, labels, bottleneck, and its
/// value of each metric at each level it measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HistoryRun {
    pub(crate) id: i64,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) bottleneck: Option<String>,
    /// (level, metric) → value: throughput per second, or seconds.
    #[serde(skip)]
    pub(crate) values: BTreeMap<(LevelKey, &'static str), f64>,
}

/// A load level, ordered by kind then value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) struct LevelKey {
    pub(crate) kind: String,
    /// The level's value × 1000, so that levels order and compare.
    pub(crate) milli: i64,
    pub(crate) words: String,
}

impl HistoryRun {
    /// The run of `export` (as `perflab show N --json` writes it).
    pub(crate) fn of(id: i64, labels: BTreeMap<String, String>, export: &Value) -> HistoryRun {
        let mut values = BTreeMap::new();
        for level in gate::levels(export) {
            let key = LevelKey {
                kind: level
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                milli: (level.get("value").and_then(Value::as_f64).unwrap_or(0.0) * 1000.0).round()
                    as i64,
                words: gate::level_words(&level),
            };
            for metric in METRICS {
                let samples = gate::samples(export, &level, metric);
                if !samples.is_empty() {
                    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
                    values.insert((key.clone(), metric.name()), mean);
                }
            }
        }
        HistoryRun {
            id,
            labels,
            bottleneck: gate::bottleneck(export).map(str::to_string),
            values,
        }
    }
}

/// One change point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Change {
    pub(crate) metric: &'static str,
    pub(crate) level: String,
    /// The segment after over the one before, less one, and its 95%
    /// bootstrap interval.
    pub(crate) change: f64,
    pub(crate) interval: Option<(f64, f64)>,
    /// The first run after the change, and its labels.
    pub(crate) run: i64,
    pub(crate) labels: BTreeMap<String, String>,
    /// The commonest bottleneck of the runs before and after, when they
    /// differ.
    pub(crate) bottleneck_before: Option<String>,
    pub(crate) bottleneck_after: Option<String>,
    /// The line to print.
    pub(crate) said: String,
}

/// One series: a metric at one level, a value a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Series {
    pub(crate) metric: &'static str,
    pub(crate) level: String,
    /// (run, value), oldest first.
    pub(crate) points: Vec<(i64, f64)>,
    /// The series' relative noise, run to run (a fraction).
    pub(crate) noise: f64,
    pub(crate) changes: Vec<Change>,
}

/// The whole history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct History {
    pub(crate) runs: Vec<HistoryRun>,
    pub(crate) series: Vec<Series>,
    /// The penalty's factor used (× ln n, in units of σ²).
    pub(crate) penalty: f64,
}

impl History {
    /// Every change point, by run then metric.
    pub(crate) fn changes(&self) -> Vec<&Change> {
        let mut all: Vec<&Change> = self.series.iter().flat_map(|s| &s.changes).collect();
        all.sort_by_key(|c| c.run);
        all
    }
}

/// The history of `runs` (oldest first) with each series' change points
/// at `penalty` × ln n.
pub(crate) fn history(runs: Vec<HistoryRun>, penalty: f64, seed: u64) -> History {
    let mut keys: Vec<(LevelKey, &'static str)> =
        runs.iter().flat_map(|r| r.values.keys().cloned()).collect();
    keys.sort();
    keys.dedup();
    // Metric by metric, each over its levels.
    keys.sort_by_key(|(level, metric)| {
        let rank = METRICS.iter().position(|m| m.name() == *metric);
        (rank, level.clone())
    });
    let series = keys
        .into_iter()
        .map(|(level, metric)| one_series(&runs, &level, metric, penalty, seed))
        .collect();
    History {
        runs,
        series,
        penalty,
    }
}

fn one_series(
    runs: &[HistoryRun],
    level: &LevelKey,
    metric: &'static str,
    penalty: f64,
    seed: u64,
) -> Series {
    let at: Vec<usize> = (0..runs.len())
        .filter(|&i| runs[i].values.contains_key(&(level.clone(), metric)))
        .collect();
    let values: Vec<f64> = at
        .iter()
        .map(|&i| runs[i].values[&(level.clone(), metric)])
        .collect();
    let logs: Vec<f64> = values
        .iter()
        .map(|v| v.max(f64::MIN_POSITIVE).ln())
        .collect();
    let cuts = detect::change_points(&values, penalty);
    let mut bounds = vec![0];
    bounds.extend(&cuts);
    bounds.push(values.len());
    let changes = cuts
        .iter()
        .enumerate()
        .filter_map(|(k, &cut)| {
            let (before, after) = (bounds[k]..cut, cut..bounds[k + 2]);
            let (b, a) = (&values[before.clone()], &values[after.clone()]);
            let (ratio, lo, hi) = super::stats::ratio_interval_at(b, a, seed, 0.95)?;
            let first = &runs[at[cut]];
            let mode = |range: std::ops::Range<usize>| {
                commonest(range.map(|i| runs[at[i]].bottleneck.as_deref()))
            };
            let (was, is) = (mode(before), mode(after));
            let moved = was != is;
            let mut c = Change {
                metric,
                level: level.words.clone(),
                change: ratio - 1.0,
                interval: Some((lo - 1.0, hi - 1.0)),
                run: first.id,
                labels: first.labels.clone(),
                bottleneck_before: if moved { was } else { None },
                bottleneck_after: if moved { is } else { None },
                said: String::new(),
            };
            c.said = said(&c);
            Some(c)
        })
        .collect();
    Series {
        metric,
        level: level.words.clone(),
        points: at.iter().map(|&i| runs[i].id).zip(values).collect(),
        noise: if logs.len() >= 2 {
            detect::noise(&logs)
        } else {
            0.0
        },
        changes,
    }
}

/// The commonest of some runs' bottlenecks (the first of equals).
fn commonest<'a>(names: impl Iterator<Item = Option<&'a str>>) -> Option<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for name in names.flatten() {
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, k)) => *k += 1,
            None => counts.push((name, 1)),
        }
    }
    let top = counts.iter().map(|(_, k)| *k).max()?;
    counts
        .into_iter()
        .find(|(_, k)| *k == top)
        .map(|(n, _)| n.to_string())
}

/// `throughput at 8 users: -6.1% [-8.0%, -4.2%] from run 24 (commit=abc):
/// the bottleneck moved from cpu to row locks`.
fn said(c: &Change) -> String {
    let pct = |x: f64| format!("{:+.1}%", x * 100.0);
    let interval = c.interval.map_or(String::new(), |(lo, hi)| {
        format!(" [{}, {}]", pct(lo), pct(hi))
    });
    let labels = if c.labels.is_empty() {
        String::new()
    } else {
        let text: Vec<String> = c.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!(" ({})", text.join(" "))
    };
    let moved = match (&c.bottleneck_before, &c.bottleneck_after) {
        (Some(a), Some(b)) => format!(": the bottleneck moved from {a} to {b}"),
        (None, Some(b)) => format!(": the bottleneck became {b}"),
        (Some(a), None) => format!(": the bottleneck {a} is no longer named"),
        (None, None) => String::new(),
    };
    format!(
        "{} at {}: {}{interval} from run {}{labels}{moved}",
        c.metric,
        c.level,
        pct(c.change),
        c.run
    )
}

#[cfg(test)]
mod tests;
