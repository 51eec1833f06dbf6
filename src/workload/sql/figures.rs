//! The sql workload's own figures: each statement's mean time per step
//! (pgbench's `-r`, per load level), from the counters the statement
//! clock stored with each interval ([`super::clock`]). The table's
//! columns are the statements that took the most time over the run (at
//! most [`MOST_SHOWN`]), headed `SCRIPT:LINE` with the statements' text
//! under it; the export keeps every statement; the verdict says at its
//! step which statement took the largest share of the statements' time.

use super::clock::{RUNS, SECONDS};
use crate::measure::Phase;
use crate::record::StepResult;
use crate::units::{Latency, Percent};
use crate::workload::figures::{Figures, StepFigures};
use std::collections::BTreeMap;

/// The most statements the table shows.
const MOST_SHOWN: usize = 10;

/// One statement over one step's measured window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Timed {
    runs: f64,
    seconds: f64,
}

/// A statement's label split: `buy.sql:7` and its text.
fn parts(label: &str) -> (&str, &str) {
    label.split_once('\t').unwrap_or((label, ""))
}

/// The short head of a statement: its script's file name and line.
fn head(label: &str) -> String {
    let place = parts(label).0;
    place.rsplit('/').next().unwrap_or(place).to_string()
}

/// Each statement's runs and seconds over a step's measured window.
fn timed(step: &StepResult) -> BTreeMap<&str, Timed> {
    let mut out: BTreeMap<&str, Timed> = BTreeMap::new();
    for interval in step.intervals.iter().filter(|i| i.phase == Phase::Measured) {
        let Some(db) = &interval.db else { continue };
        for (key, value) in &db.counters {
            let (label, seconds) = match (key.strip_prefix(RUNS), key.strip_prefix(SECONDS)) {
                (Some(label), _) => (label, false),
                (_, Some(label)) => (label, true),
                _ => continue,
            };
            let t = out.entry(label).or_default();
            if value.is_finite() && *value >= 0.0 {
                if seconds {
                    t.seconds += value;
                } else {
                    t.runs += value;
                }
            }
        }
    }
    out
}

/// The order statements are shown in: their script's place among the
/// run's operations, then their line.
fn order(op_names: &[String], label: &str) -> (usize, String, u64) {
    let place = parts(label).0;
    let (script, line) = place.rsplit_once(':').unwrap_or((place, "0"));
    let rank = op_names
        .iter()
        .position(|n| n == script)
        .unwrap_or(usize::MAX);
    (rank, script.to_string(), line.parse().unwrap_or(0))
}

/// The statements' figures; none when no step timed any (a run stored
/// before statements were timed).
pub(super) fn figures(steps: &[StepResult], op_names: &[String]) -> Option<Figures> {
    let each: Vec<BTreeMap<&str, Timed>> = steps.iter().map(timed).collect();
    let mut total: BTreeMap<&str, f64> = BTreeMap::new();
    for step in &each {
        for (label, t) in step {
            *total.entry(label).or_default() += t.seconds;
        }
    }
    if total.is_empty() {
        return None;
    }
    let mut shown: Vec<&str> = total.keys().copied().collect();
    shown.sort_by(|a, b| total[b].total_cmp(&total[a]));
    let hidden = shown.len().saturating_sub(MOST_SHOWN);
    shown.truncate(MOST_SHOWN);
    shown.sort_by_key(|l| order(op_names, l));
    let width = shown
        .iter()
        .map(|l| head(l).chars().count())
        .max()
        .unwrap_or(0);
    let mut legend: Vec<String> = shown
        .iter()
        .map(|l| format!("{:<width$}  {}", head(l), parts(l).1))
        .collect();
    if hidden > 0 {
        legend.push(format!(
            "and {hidden} statements more, which took less time, in the JSON export"
        ));
    }
    Some(Figures {
        title: "time per statement".to_string(),
        about: "each statement's mean time from sending it to the end of its reply, over the runs that succeeded in each step's measured window".to_string(),
        heads: shown.iter().map(|l| head(l)).collect(),
        key: "statements",
        cost: None,
        legend,
        steps: each
            .iter()
            .zip(steps)
            .map(|(timed, step)| step_figures(timed, &shown, step))
            .collect(),
    })
}

/// A statement's mean time, when it ran.
fn mean(t: &Timed) -> Option<f64> {
    (t.runs > 0.0).then(|| t.seconds / t.runs)
}

/// One step's cells (the shown statements' means), export (every
/// statement) and evidence (the statement with the largest share).
fn step_figures(timed: &BTreeMap<&str, Timed>, shown: &[&str], step: &StepResult) -> StepFigures {
    let cells = shown
        .iter()
        .map(|l| {
            timed
                .get(l)
                .and_then(mean)
                .map_or("-".to_string(), |m| Latency::secs(m).to_string())
        })
        .collect();
    let export = timed
        .iter()
        .map(|(label, t)| {
            let (place, text) = parts(label);
            (
                place.to_string(),
                serde_json::json!({ "text": text, "runs": t.runs, "seconds": t.seconds, "mean_s": mean(t) }),
            )
        })
        .collect::<serde_json::Map<_, _>>();
    StepFigures {
        cells,
        export: serde_json::Value::Object(export),
        evidence: evidence(timed, step).into_iter().collect(),
        server_cpus: None,
        cost: None,
    }
}

/// The statement that took the largest share of the statements' time at
/// `step`, when it took more than its even share and there is more than
/// one.
fn evidence(timed: &BTreeMap<&str, Timed>, step: &StepResult) -> Option<String> {
    let all: f64 = timed.values().map(|t| t.seconds).sum();
    let (label, top) = timed
        .iter()
        .max_by(|a, b| a.1.seconds.total_cmp(&b.1.seconds))?;
    let share = top.seconds / all;
    if timed.len() < 2 || !share.is_finite() || share <= 1.0 / timed.len() as f64 {
        return None;
    }
    let (place, text) = parts(label);
    Some(format!(
        "at {}, {} of the statements' time went to {place} ({text}), {} a run",
        step.level,
        Percent(share),
        Latency::secs(mean(top)?)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{PackedTally, Tally};
    use crate::probe::DbSample;
    use crate::record::{IntervalRecord, StepStatus};
    use std::time::{Duration, SystemTime};

    fn interval(phase: Phase, counters: &[(&str, f64)]) -> IntervalRecord {
        IntervalRecord {
            phase,
            start: Duration::ZERO,
            length: Duration::from_secs(1),
            tally: PackedTally::pack(&Tally::new(1)),
            db: Some(DbSample {
                counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                ..DbSample::default()
            }),
            host: None,
            probes: Vec::new(),
        }
    }

    fn step(intervals: Vec<IntervalRecord>) -> StepResult {
        StepResult {
            index: 0,
            level: crate::plan::Level::Users(4),
            started_at: SystemTime::now(),
            intervals,
            status: StepStatus::Ok,
            usage: Default::default(),
            generators: Vec::new(),
        }
    }

    const UPDATE: &str = "dir/buy.sql:12\tUPDATE accounts SET b = b + $1";
    const SELECT: &str = "dir/buy.sql:9\tSELECT b FROM accounts";

    fn measured(update: (f64, f64), select: (f64, f64)) -> IntervalRecord {
        interval(
            Phase::Measured,
            &[
                (&format!("{RUNS}{UPDATE}"), update.0),
                (&format!("{SECONDS}{UPDATE}"), update.1),
                (&format!("{RUNS}{SELECT}"), select.0),
                (&format!("{SECONDS}{SELECT}"), select.1),
                ("xact_commit", 100.0),
            ],
        )
    }

    #[test]
    fn each_statements_mean_is_its_measured_seconds_over_its_runs() {
        let steps = vec![step(vec![
            // The warm-up's runs are not the step's.
            interval(Phase::Warmup, &[(&format!("{RUNS}{UPDATE}"), 1000.0)]),
            measured((100.0, 0.3), (100.0, 0.05)),
            measured((100.0, 0.5), (100.0, 0.05)),
        ])];
        let names = vec!["dir/buy.sql".to_string()];
        let f = figures(&steps, &names).expect("figures");
        // In the script's order, by line: 9 before 12.
        assert_eq!(f.heads, ["buy.sql:9", "buy.sql:12"]);
        assert_eq!(f.steps[0].cells, ["500µs", "4.00ms"]);
        assert_eq!(f.legend[0], "buy.sql:9   SELECT b FROM accounts");
        assert_eq!(f.legend[1], "buy.sql:12  UPDATE accounts SET b = b + $1");
        let export = &f.steps[0].export["dir/buy.sql:12"];
        assert_eq!(export["runs"], 200.0);
        assert!((export["mean_s"].as_f64().unwrap() - 0.004).abs() < 1e-12);
        // 0.8 s of 0.9: the update's share is said, with its mean.
        assert_eq!(
            f.steps[0].evidence,
            ["at 4 users, 88.9% of the statements' time went to dir/buy.sql:12 (UPDATE accounts SET b = b + $1), 4.00ms a run"]
        );
    }

    #[test]
    fn an_even_split_says_nothing_and_a_run_without_a_clock_has_no_figures() {
        let steps = vec![step(vec![measured((10.0, 0.1), (10.0, 0.1))])];
        let f = figures(&steps, &[]).expect("figures");
        assert!(f.steps[0].evidence.is_empty());
        let none = vec![step(vec![interval(
            Phase::Measured,
            &[("xact_commit", 1.0)],
        )])];
        assert_eq!(figures(&none, &[]), None);
    }
}
