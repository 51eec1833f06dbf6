//! The run judged by its service level objectives (`--slo`): each step,
//! and each level with its runs' intervals pooled, **meets**, **breaks** or
//! is **undecided** (the statistics are the engine's, `engine::judge`, so
//! that a search decides as the report later does); the highest load that
//! met them below every load that did not; and the answer a planner quotes,
//! a line that begins `holds`.

use super::capacity::load_text;
use super::points::StepPoint;
use crate::engine::{judge, Batch, Decision, LevelJudgement, StepResult, StepStatus};
use crate::measure::Phase;
use crate::plan::{Find, Slo};
use crate::units::OpsPerSec;
use serde::Serialize;

/// The measured intervals of a stored step as the objectives judge them;
/// the failures of operations in flight at the window's end, which ended
/// in the drain, are the last interval's.
pub(crate) fn step_batches(step: &StepResult, slos: &[Slo]) -> Vec<Batch> {
    let offered = crate::engine::offered(step.level);
    let mut batches: Vec<Batch> = step
        .intervals
        .iter()
        .filter(|i| i.phase == Phase::Measured)
        .map(|i| Batch::of(slos, &i.tally.unpack(), i.length, offered))
        .collect();
    let late: u64 = step
        .intervals
        .iter()
        .filter(|i| i.phase == Phase::Drain)
        .map(|i| i.tally.unpack().counts().errors)
        .sum();
    if let Some(last) = batches.last_mut() {
        last.add_late_errors(slos, late);
    }
    batches
}

/// One stored step judged by `slos`: a step that broke --max-error-rate
/// breaks them.
pub(crate) fn judge_step(step: &StepResult, slos: &[Slo]) -> LevelJudgement {
    let mut j = judge(slos, &step_batches(step, slos));
    if matches!(step.status, StepStatus::Failed(_)) {
        j.decision = Decision::Breaks;
    }
    j
}

/// One level of the run judged, its runs pooled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LevelOutcome {
    pub(crate) load: f64,
    /// Its runs, by step position.
    pub(crate) steps: Vec<usize>,
    #[serde(flatten)]
    pub(crate) judgement: LevelJudgement,
}

/// How the run fared against its objectives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SloOutcome {
    pub(crate) objectives: Vec<String>,
    /// Every level run, by load.
    pub(crate) levels: Vec<LevelOutcome>,
    /// The highest load that met every objective below every load that
    /// did not, and its throughput with the 95% interval of its
    /// intervals' throughputs.
    pub(crate) max_load: Option<f64>,
    pub(crate) throughput: Option<f64>,
    pub(crate) throughput_interval: Option<(f64, f64)>,
    /// The lowest load that did not meet them (broke, or too close to
    /// call), and how.
    pub(crate) limit_load: Option<f64>,
    /// The lowest load above `max_load` shown to break them (not merely
    /// too close to call): with `max_load`, the 95% interval of the
    /// capacity (each end is decided at 97.5%).
    pub(crate) broke_load: Option<f64>,
    /// The load at which they are expected to be just met, between
    /// `max_load` and `limit_load`: the latency objectives' ratio
    /// interpolated as the search places its probes (the geometric
    /// midpoint without one). None when no load run missed them.
    pub(crate) capacity: Option<f64>,
    pub(crate) first_miss: Option<String>,
    /// The answer, one line that begins `holds`.
    pub(crate) answer: String,
    /// What stops the server at the highest load that met, and at the
    /// first that did not: the verdict over the levels up to each.
    pub(crate) at_max: Option<String>,
    pub(crate) at_limit: Option<String>,
}

/// The run's steps judged by `slos`; `points` are its complete steps.
pub(crate) fn outcome(
    steps: &[StepResult],
    points: &[StepPoint],
    slos: &[Slo],
) -> Option<SloOutcome> {
    if slos.is_empty() {
        return None;
    }
    let levels = levels(steps, slos);
    let limit = levels
        .iter()
        .find(|l| l.judgement.decision != Decision::Meets);
    let met = levels
        .iter()
        .filter(|l| l.judgement.decision == Decision::Meets)
        .rfind(|l| limit.is_none_or(|x| l.load < x.load));
    let at = |load: f64| points.iter().filter(move |p| p.load == load);
    let throughput = met.and_then(|m| {
        let xs: Vec<f64> = at(m.load).map(|p| p.throughput).collect();
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    });
    let throughput_interval = met.and_then(|m| {
        let xs: Vec<f64> = at(m.load)
            .flat_map(|p| p.interval_throughputs.iter().copied())
            .collect();
        super::stats::mean_interval(&xs).map(|(_, lo, hi)| (lo, hi))
    });
    let first_miss = limit.map(|l| miss_words(l, points, slos));
    let broke_load = levels
        .iter()
        .filter(|l| l.judgement.decision == Decision::Breaks)
        .map(|l| l.load)
        .find(|&l| met.is_some_and(|m| l > m.load));
    let ceiling = met
        .zip(limit)
        .and_then(|(m, l)| ceiling(&levels, m.load, l.load, broke_load));
    let capacity = match (met, limit) {
        (Some(m), Some(l)) => Some(capacity(
            m.load,
            l.load,
            ceiling.or(broke_load).unwrap_or(l.load),
            points,
            slos,
        )),
        _ => None,
    };
    let mut out = SloOutcome {
        objectives: slos.iter().map(|s| s.to_string()).collect(),
        max_load: met.map(|m| m.load),
        throughput,
        throughput_interval,
        limit_load: limit.map(|l| l.load),
        broke_load,
        capacity,
        first_miss,
        answer: String::new(),
        at_max: None,
        at_limit: None,
        levels: Vec::new(),
    };
    out.answer = answer(&out, points);
    out.levels = levels;
    Some(out)
}

/// The outcome with what stops the server at the highest load that met the
/// objectives and at the first that did not: `verdict` of the complete
/// `points` up to each.
pub(crate) fn with_verdicts(
    mut o: SloOutcome,
    points: &[StepPoint],
    verdict: impl Fn(Vec<StepPoint>) -> super::Verdict,
) -> SloOutcome {
    let at = |load: Option<f64>| {
        let load = load?;
        let upto: Vec<StepPoint> = points.iter().filter(|p| p.load <= load).cloned().collect();
        let here = upto.iter().find(|p| p.load == load).map(load_text)?;
        let b = verdict(upto).bottleneck?;
        let evidence = b
            .evidence
            .first()
            .map_or(String::new(), |e| format!(": {e}"));
        Some(format!("at {here}: {}{evidence}", b.name))
    };
    o.at_max = at(o.max_load);
    o.at_limit = at(o.limit_load);
    o
}

/// How far the capacity may be read above `met`: the level run just
/// above `missed` (the lowest that did not meet), when that is below
/// `broke` (the lowest shown to break), else the highest level run above
/// `met` and below `broke`; none without one. The capacity stays within
/// what was measured under the break, and where several levels above
/// `missed` were too close to call, near the first: their latencies
/// scatter about the limit (a managed nginx read p95s of 15–38 ms for a
/// 20 ms limit at eight levels from 18,200/s to 26,300/s), and a line
/// through them reached 1 at 25,705/s.
fn ceiling(levels: &[LevelOutcome], met: f64, missed: f64, broke: Option<f64>) -> Option<f64> {
    let under_break = |l: &f64| broke.is_none_or(|b| *l < b);
    let loads = || levels.iter().map(|l| l.load).filter(under_break);
    loads()
        .filter(|&l| l > missed)
        .reduce(f64::min)
        .or_else(|| loads().filter(|&l| l > met).reduce(f64::max))
}

/// The load at which the objectives are expected to be just met: where
/// the line through the latency ratios of the levels near them reaches 1
/// (or, with fewer than two near, the line through the highest load that
/// met them and the lowest that did not, `missed`), kept from `met` to
/// `ceiling` ([`ceiling`]), or else the lowest that broke. A line
/// reaching 1 beyond a level too close to call would be read past what
/// was measured (from 3,510/s too close to call to a break at 4,000/s,
/// the first probe's doubling), where one window's calm tail can carry
/// it.
fn capacity(met: f64, missed: f64, ceiling: f64, points: &[StepPoint], slos: &[Slo]) -> f64 {
    let probe = |load: f64, decision| crate::engine::Probe {
        load,
        decision,
        ratio: latency_ratio(load, points, slos),
    };
    let mut loads: Vec<f64> = points.iter().map(|p| p.load).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    let levels: Vec<crate::engine::Probe> = loads
        .into_iter()
        .map(|load| probe(load, Decision::Meets))
        .collect();
    crate::engine::fitted_estimate(&levels)
        .or_else(|| {
            crate::engine::capacity_estimate(
                probe(met, Decision::Meets),
                probe(missed, Decision::Breaks),
            )
        })
        .map_or((met * missed).sqrt(), |at| at.clamp(met, ceiling.max(met)))
}

/// The latency objectives' value over their limit at `load` (the largest
/// of them; its runs' mean): none without a latency objective or a
/// complete step there.
fn latency_ratio(load: f64, points: &[StepPoint], slos: &[Slo]) -> Option<f64> {
    let runs: Vec<&StepPoint> = points.iter().filter(|p| p.load == load).collect();
    if runs.is_empty() {
        return None;
    }
    slos.iter()
        .filter(|s| !s.metric.is_share())
        .map(|s| {
            let mean = runs
                .iter()
                .map(|p| super::capacity::slo_value(s, p))
                .sum::<f64>()
                / runs.len() as f64;
            mean / s.limit
        })
        .reduce(f64::max)
}

/// Each level run, by load, its runs' intervals pooled.
fn levels(steps: &[StepResult], slos: &[Slo]) -> Vec<LevelOutcome> {
    let mut levels: Vec<(f64, Vec<&StepResult>)> = Vec::new();
    for step in steps.iter().filter(|s| judged(s)) {
        let load = step.level.value();
        match levels.iter_mut().find(|(l, _)| *l == load) {
            Some((_, runs)) => runs.push(step),
            None => levels.push((load, vec![step])),
        }
    }
    levels.sort_by(|a, b| a.0.total_cmp(&b.0));
    levels
        .into_iter()
        .map(|(load, runs)| {
            let batches: Vec<Batch> = runs.iter().flat_map(|s| step_batches(s, slos)).collect();
            let mut judgement = judge(slos, &batches);
            if runs
                .iter()
                .any(|s| matches!(s.status, StepStatus::Failed(_)))
            {
                judgement.decision = Decision::Breaks;
            }
            LevelOutcome {
                load,
                steps: runs.iter().map(|s| s.index).collect(),
                judgement,
            }
        })
        .collect()
}

/// Whether a step's figures can be judged: it ran its whole window, or
/// broke the error limit doing so (cut-short and degraded steps cannot).
fn judged(step: &StepResult) -> bool {
    step.status.ran_whole() || matches!(step.status, StepStatus::Failed(_))
}

/// How a level missed: `breaks at 16 users (p95 260ms over 200ms)`.
fn miss_words(level: &LevelOutcome, points: &[StepPoint], slos: &[Slo]) -> String {
    let point = points.iter().find(|p| p.load == level.load);
    let at = point.map_or_else(|| format!("{}", level.load), load_text);
    let word = match level.judgement.decision {
        Decision::Undecided => "too close to call at",
        _ => "breaks at",
    };
    let why: Vec<String> = slos
        .iter()
        .zip(&level.judgement.objectives)
        .filter(|(_, j)| j.decision == level.judgement.decision)
        .map(|(s, _)| match point {
            Some(p) => format!(
                "{} {}",
                s.to_string().split('<').next().unwrap_or(""),
                s.value_text(super::capacity::slo_value(s, p))
            ),
            None => s.to_string(),
        })
        .collect();
    let why = if why.is_empty() {
        "it failed".to_string()
    } else {
        why.join(", ")
    };
    format!("{word} {at} ({why})")
}

/// Says in the answer when a search (`--find`) ended at its budget of
/// steps (`steps_run` of `find.max_steps`) before its bracket was as
/// narrow as asked: the bracket it gives is the one it reached. `users`
/// when the load is users (a bracket one user wide is as narrow as they
/// go).
pub(crate) fn note_budget(o: &mut SloOutcome, steps_run: usize, find: Find, users: bool) {
    if steps_run < find.max_steps as usize {
        return;
    }
    let narrow = match (o.max_load, o.limit_load) {
        (Some(lo), Some(hi)) => crate::engine::within(lo, hi, find.precision, users),
        _ => false,
    };
    if !narrow {
        o.answer.push_str(&format!(
            "; the search stopped at its budget of {} steps (--max-steps) before its bracket was within {:.0}%",
            find.max_steps,
            find.precision * 100.0
        ));
    }
}

/// What to do next when no load run met the objectives and the server
/// was not saturated (the verdict would say to sweep further up, where
/// they break all the more): a list run goes lower; a search that went
/// as low as it could leaves the objectives, or what sets one
/// operation's time, to look at. `searched` for a run with `--find`,
/// `closed` when the load is users.
pub(crate) fn next_when_none_met(o: &SloOutcome, searched: bool, closed: bool) -> Option<String> {
    if o.max_load.is_some() {
        return None;
    }
    let lowest = o.levels.first()?.load;
    let objectives = o.objectives.join(", ");
    let lower = if closed {
        (lowest >= 2.0).then(|| format!("--users {:.0}", (lowest / 4.0).floor().max(1.0)))
    } else {
        Some(format!("--rate {:.0}", (lowest / 4.0).floor().max(1.0)))
    };
    Some(match lower {
        Some(lower) if !searched => {
            format!("no load run met {objectives}: sweep lower loads, down to {lower}")
        }
        _ => {
            let at = if closed {
                format!("{lowest:.0} user{}", if lowest == 1.0 { "" } else { "s" })
            } else {
                crate::units::OpsPerSec(lowest).to_string()
            };
            format!(
                "no load met {objectives}, down to {at}, with the server short of saturation: what sets one operation's response time at low load is the limit; relax the objectives or shorten that time"
            )
        }
    })
}

/// The line a planner quotes.
fn answer(o: &SloOutcome, points: &[StepPoint]) -> String {
    let objectives = o.objectives.join(", ");
    let point = |load: f64| points.iter().find(|p| p.load == load);
    let mut out = match (o.max_load.and_then(point), o.throughput) {
        (Some(p), Some(x)) => format!("holds {objectives} up to {}", held(o, p, x)),
        _ => format!("holds {objectives} at no load run"),
    };
    match &o.first_miss {
        Some(miss) => out.push_str(&format!("; {miss}")),
        None => out.push_str("; no load run broke them: the limit lies beyond the highest"),
    }
    let undecided = |l: &LevelOutcome| l.judgement.decision == Decision::Undecided;
    if o.max_load.is_none() && o.levels.len() >= 2 && o.levels[..2].iter().all(undecided) {
        out.push_str(LOWEST_UNDECIDED);
    }
    out
}

/// Said in the answer when nothing met and the two lowest loads were too
/// close to call (where a search going down stops).
const LOWEST_UNDECIDED: &str = "; the two lowest loads were too close to call (a low load counts few operations): longer steps (--duration) may decide them";

/// How far the objectives held, from `p`, the highest load that met them
/// (throughput `x`). In an open loop, the rate at which they are expected
/// to be just met between the loads that met and broke them; in a closed
/// loop, the throughput of the most users that met them.
fn held(o: &SloOutcome, p: &StepPoint, x: f64) -> String {
    let interval = |lo: f64, hi: Option<f64>, unit: &dyn Fn(f64) -> String| match hi {
        Some(hi) => format!(" (between {} and {}, 95 %)", unit(lo), unit(hi)),
        None => format!(" (at least {}, 95 %)", unit(lo)),
    };
    match (p.level, o.capacity) {
        (crate::plan::Level::Rate(lo), Some(rate)) => format!(
            "{} offered{}",
            p.rate(rate),
            interval(lo, o.broke_load, &|r| OpsPerSec(r).to_string())
        ),
        (crate::plan::Level::Rate(_), None) => format!("{} offered", load_text(p)),
        (crate::plan::Level::Users(_), _) => {
            let through = o.throughput_interval.map_or(String::new(), |(lo, hi)| {
                interval(lo, Some(hi), &|r| OpsPerSec(r).to_string())
            });
            format!("{}{through} at {}", p.rate(x), load_text(p))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_judged_without_objectives() {
        assert_eq!(outcome(&[], &[], &[]), None);
    }

    fn bracket(max_load: Option<f64>, limit_load: Option<f64>) -> SloOutcome {
        SloOutcome {
            objectives: vec!["p95<5.00ms".into()],
            levels: Vec::new(),
            max_load,
            throughput: None,
            throughput_interval: None,
            limit_load,
            broke_load: None,
            capacity: None,
            first_miss: None,
            answer: "holds p95<5.00ms up to 3000 ops/s offered".into(),
            at_max: None,
            at_limit: None,
        }
    }

    #[test]
    fn a_search_cut_by_its_budget_says_so_and_one_that_narrowed_does_not() {
        let find = Find {
            precision: 0.05,
            max_steps: 4,
        };
        let said = |o: SloOutcome, steps: usize, users: bool| {
            let mut o = o;
            note_budget(&mut o, steps, find, users);
            o.answer.contains(
                "stopped at its budget of 4 steps (--max-steps) before its bracket was within 5%",
            )
        };
        // Wide, at the budget: said.
        assert!(said(bracket(Some(2000.0), Some(4000.0)), 4, false));
        // Nothing broke yet, at the budget: said.
        assert!(said(bracket(Some(2000.0), None), 4, false));
        // Wide, under the budget (the search ended another way): not said.
        assert!(!said(bracket(Some(2000.0), Some(4000.0)), 3, false));
        // Narrow at the budget: the search was done anyway.
        assert!(!said(bracket(Some(3000.0), Some(3100.0)), 4, false));
        // One user apart is as narrow as users go.
        assert!(!said(bracket(Some(7.0), Some(8.0)), 4, true));
        assert!(said(bracket(Some(7.0), Some(8.0)), 4, false));
        // Within 5% to the levels' three figures, as the search ends.
        assert!(!said(bracket(Some(3170.0), Some(3330.0)), 4, false));
        assert!(said(bracket(Some(3170.0), Some(3340.0)), 4, false));
    }

    /// Nothing met and the two lowest loads undecided: the answer says
    /// what may decide them; one that broke lower is no such case.
    /// A level run once and judged `decision`.
    fn level(load: f64, decision: Decision) -> LevelOutcome {
        LevelOutcome {
            load,
            steps: vec![0],
            judgement: LevelJudgement {
                decision,
                objectives: Vec::new(),
            },
        }
    }

    #[test]
    fn the_capacity_is_not_read_past_the_highest_level_too_close_to_call() {
        // Met at 3200/s, too close to call at 3350/s and 3510/s (a calm
        // window's p99 at 9.0 ms), broke at 4000/s: the line through the
        // ratios reaches 1 near 3670/s, in the gap to the break.
        let mut points = crate::analyze::fixture::mva_points(0.001, 0.0005, 0.0, &[1, 2, 3, 4]);
        for (p, (load, p99_ms)) in
            points
                .iter_mut()
                .zip([(3200.0, 8.0), (3350.0, 9.5), (3510.0, 9.0), (4000.0, 30.0)])
        {
            p.level = crate::plan::Level::Rate(load);
            p.load = load;
            p.response.p99 = std::time::Duration::from_secs_f64(p99_ms / 1000.0);
        }
        let slos = [Slo::parse("p99<10ms").unwrap()];
        let levels = [
            level(3200.0, Decision::Meets),
            level(3350.0, Decision::Undecided),
            level(3510.0, Decision::Undecided),
            level(4000.0, Decision::Breaks),
        ];
        assert_eq!(ceiling(&levels, 3200.0, 3350.0, Some(4000.0)), Some(3510.0));
        assert_eq!(ceiling(&levels, 3510.0, 4000.0, Some(4000.0)), None);
        // With more levels too close to call above, the first of them.
        let more = [
            level(3200.0, Decision::Meets),
            level(3350.0, Decision::Undecided),
            level(3510.0, Decision::Undecided),
            level(3640.0, Decision::Undecided),
            level(4000.0, Decision::Breaks),
        ];
        assert_eq!(ceiling(&more, 3200.0, 3350.0, Some(4000.0)), Some(3510.0));
        // Nothing between the lowest miss and the break: the lowest miss.
        assert_eq!(ceiling(&more, 3510.0, 3640.0, Some(4000.0)), Some(3640.0));
        let read_past = capacity(3200.0, 3350.0, 4000.0, &points, &slos);
        assert!(read_past > 3600.0 && read_past < 3750.0, "{read_past}");
        assert_eq!(capacity(3200.0, 3350.0, 3510.0, &points, &slos), 3510.0);
    }

    #[test]
    fn with_nothing_met_the_next_step_is_lower_or_the_objectives() {
        let mut o = bracket(None, Some(125.0));
        o.levels = vec![LevelOutcome {
            load: 125.0,
            steps: vec![0],
            judgement: LevelJudgement::broken(),
        }];
        let listed = next_when_none_met(&o, false, false).unwrap();
        assert!(listed.ends_with("down to --rate 31"), "{listed}");
        let searched = next_when_none_met(&o, true, false).unwrap();
        assert!(
            searched.starts_with("no load met p95<5.00ms, down to 125"),
            "{searched}"
        );
        assert!(!searched.contains("sweep"), "{searched}");
        // One user is as low as a closed loop goes.
        o.levels[0].load = 1.0;
        let one = next_when_none_met(&o, false, true).unwrap();
        assert!(one.contains("down to 1 user,"), "{one}");
        // A load that met: the verdict's own next step stands.
        assert_eq!(
            next_when_none_met(&bracket(Some(100.0), Some(125.0)), true, false),
            None
        );
    }

    #[test]
    fn an_answer_from_undecided_low_loads_says_what_may_decide_them() {
        let mut o = bracket(None, Some(500.0));
        o.levels = vec![
            level(500.0, Decision::Undecided),
            level(1000.0, Decision::Undecided),
        ];
        assert!(
            answer(&o, &[]).ends_with(LOWEST_UNDECIDED),
            "{}",
            answer(&o, &[])
        );
        o.levels[0].judgement.decision = Decision::Breaks;
        assert!(!answer(&o, &[]).contains(LOWEST_UNDECIDED));
    }
}
