//! The coordinator: runs the sweep's steps one after another, splits each
//! step's load across worker threads (their crew merges their interval
//! tallies), hands each interval to the observer as it completes and every
//! finished step before the next one starts.

use super::crew::{Crew, SessionsFailed};
use super::find::{Probe, Search};
use super::judge::{judge, Batch, Decision, LevelJudgement};
use super::remote::Generators;
use super::schedule::{IntervalSpec, Schedule};
use super::share::Share;
use super::split::{worker_plans, Part, Split};
use super::step::FinishedStep;
use crate::measure::{ErrorKind, Phase, Tally};
use crate::plan::{GeneratorLoss, Level, Plan};
use crate::probe::SelfUsage;
use crate::record::{GeneratorStep, IntervalRecord, StepStatus};
use crate::workload::{OpCounts, Workload};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// Receives what the sweep produces, as it happens.
pub trait SweepObserver {
    /// A step is about to start; an error here ends the sweep before it does.
    fn step_started(
        &mut self,
        index: usize,
        level: Level,
        schedule: &Schedule,
    ) -> anyhow::Result<()>;
    /// An interval of the running step is complete (merged over all
    /// workers): `tally` as merged, `record` the same packed, for the
    /// observer to keep (the step does not: a long step would hold hundreds).
    /// The observer may attach what its probes saw over the interval. An
    /// error here ends the sweep once the step has stopped.
    fn interval(
        &mut self,
        spec: &IntervalSpec,
        tally: &Tally,
        record: IntervalRecord,
    ) -> anyhow::Result<()>;
    /// A step has ended; its drain is the interval after the last one
    /// handed over. An error here ends the sweep.
    fn step_finished(&mut self, step: &mut FinishedStep) -> anyhow::Result<()>;
    /// The started step is not kept (interrupted in its warm-up, or it
    /// failed): whatever of it the observer kept goes.
    fn step_dropped(&mut self) -> anyhow::Result<()>;
}

/// Why a sweep stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SweepEnd {
    /// Every step ran.
    Complete,
    /// A step broke the error-rate limit; the steps after it did not run.
    Failed { step: usize, reason: String },
    /// A step failed because the target stopped answering (most of its
    /// errors are `connect`): the server went away, not the load's fault.
    TargetLost { step: usize, reason: String },
    /// The server answered and refused a session at this step's load
    /// because of its setting `setting` (an admission limit): the steps
    /// before it are kept.
    Refused {
        step: usize,
        /// The step's load, as said (`16 users`).
        at: String,
        setting: &'static str,
        reason: String,
    },
    /// Ctrl-C.
    Interrupted,
}

/// Runs every step of the plan. Returns why the sweep ended and how many
/// operations of each kind ended each way over the whole run.
pub fn run_sweep<W: Workload>(
    workload: Arc<W>,
    plan: &Plan,
    interrupted: &Arc<AtomicBool>,
    observer: &mut dyn SweepObserver,
) -> anyhow::Result<(SweepEnd, Vec<OpCounts>)> {
    run_sweep_on(workload, plan, None, interrupted, observer)
}

/// [`run_sweep`], the load offered by `generators` when given (this
/// process then offers none: it coordinates, merges and stores).
pub fn run_sweep_on<W: Workload>(
    workload: Arc<W>,
    plan: &Plan,
    generators: Option<&Generators>,
    interrupted: &Arc<AtomicBool>,
    observer: &mut dyn SweepObserver,
) -> anyhow::Result<(SweepEnd, Vec<OpCounts>)> {
    let mut sweep = Sweeper {
        counts: vec![OpCounts::default(); workload.op_names().len()],
        workload,
        plan,
        generators: generators.cloned(),
        interrupted,
        observer,
        batches: Vec::new(),
    };
    if let Some(find) = plan.find {
        let end = sweep.search(find)?;
        return Ok((end, sweep.counts));
    }
    let mut index = 0;
    for &level in &plan.sweep.levels {
        // Each level runs --repeat times, and again (up to --max-repeat)
        // while its runs' throughputs vary more than --max-cv.
        let mut throughputs = Vec::new();
        loop {
            match sweep.one_step(index, level)? {
                StepOutcome::Kept { throughput, .. } => throughputs.push(throughput),
                StepOutcome::Broke(end) | StepOutcome::Ends(end) => return Ok((end, sweep.counts)),
            }
            index += 1;
            let runs = throughputs.len() as u32;
            if runs < plan.repeat {
                continue;
            }
            if runs >= plan.max_repeat || coefficient_of_variation(&throughputs) <= plan.max_cv {
                break;
            }
        }
    }
    Ok((SweepEnd::Complete, sweep.counts))
}

/// The coefficient of variation of some values (0 for fewer than two).
pub fn coefficient_of_variation(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    if mean > 0.0 {
        var.sqrt() / mean
    } else {
        0.0
    }
}

/// A sweep under way: what each of its steps needs, and what they add up.
struct Sweeper<'a, W> {
    workload: Arc<W>,
    plan: &'a Plan,
    /// The generators still offering load (one lost is dropped with
    /// --on-generator-loss continue); none when this process offers it.
    generators: Option<Generators>,
    interrupted: &'a Arc<AtomicBool>,
    observer: &'a mut dyn SweepObserver,
    /// How many operations of each kind ended each way, so far.
    counts: Vec<OpCounts>,
    /// The running (or last) step's measured intervals, as the objectives
    /// judge them; empty without objectives.
    batches: Vec<Batch>,
}

/// How one step ended, for the sweep.
#[derive(Debug, Clone, PartialEq)]
enum StepOutcome {
    /// It was kept and the sweep goes on; its throughput in operations per
    /// second, for --max-cv, and its latency objectives' largest measured
    /// value over its limit, for the search.
    Kept { throughput: f64, ratio: Option<f64> },
    /// It was kept, but broke --max-error-rate: a list ends here, a search
    /// takes it as a level that broke.
    Broke(SweepEnd),
    /// The sweep ends with this step.
    Ends(SweepEnd),
}

impl<W: Workload> Sweeper<'_, W> {
    /// Runs one step and hands it to the observer.
    fn one_step(&mut self, index: usize, level: Level) -> anyhow::Result<StepOutcome> {
        if self.interrupted.load(Ordering::Relaxed) {
            return Ok(StepOutcome::Ends(SweepEnd::Interrupted));
        }
        let mut step = match self.run_step(index, level) {
            Ok(step) => step,
            // A signal while the sessions opened ends the sweep as one.
            Err(_) if self.interrupted.load(Ordering::Relaxed) => {
                return Ok(StepOutcome::Ends(SweepEnd::Interrupted));
            }
            Err(e) => {
                return match e.downcast::<SessionsFailed>() {
                    Ok(SessionsFailed {
                        reason,
                        refused_by: Some(setting),
                    }) => Ok(StepOutcome::Ends(SweepEnd::Refused {
                        step: index,
                        at: level.to_string(),
                        setting,
                        reason,
                    })),
                    Ok(SessionsFailed { reason, .. }) => {
                        Ok(StepOutcome::Ends(SweepEnd::TargetLost {
                            step: index,
                            reason,
                        }))
                    }
                    Err(other) => Err(other),
                }
            }
        };
        add_counts(&mut self.counts, &step);
        if step.measured_intervals == 0 {
            // Interrupted during warm-up: nothing measured, nothing to keep.
            self.observer.step_dropped()?;
            return Ok(StepOutcome::Ends(SweepEnd::Interrupted));
        }
        let throughput = judge_step(&mut step, self.plan.max_error_rate);
        if let Some(last) = self.batches.last_mut() {
            last.add_late_errors(&self.plan.slos, step.measured.late_errors);
        }
        let ratio = latency_ratio(&self.plan.slos, &step.summary());
        if !self.plan.slos.is_empty() {
            let mut j = judge(&self.plan.slos, &self.batches);
            if matches!(step.status, StepStatus::Failed(_)) {
                j.decision = Decision::Breaks;
            }
            step.judgement = Some(j);
        }
        self.observer.step_finished(&mut step)?;
        let kept = StepOutcome::Kept { throughput, ratio };
        Ok(match &step.status {
            StepStatus::Ok | StepStatus::Stalled(_) => kept,
            StepStatus::Failed(reason) => match failed_end(&step, reason) {
                lost @ SweepEnd::TargetLost { .. } => StepOutcome::Ends(lost),
                broke => StepOutcome::Broke(broke),
            },
            StepStatus::Partial(_) => StepOutcome::Ends(SweepEnd::Interrupted),
            StepStatus::Degraded(reason) => match self.drop_lost_generators(&step, reason) {
                Some(end) => StepOutcome::Ends(end),
                None => kept,
            },
        })
    }

    /// The search of `--find`: each level the search asks for runs, and
    /// runs again while it is undecided (up to --max-repeat runs, its
    /// intervals pooled) before the search hears how it fared; at its
    /// budget of steps it stops with the bracket it has.
    fn search(&mut self, find: crate::plan::Find) -> anyhow::Result<SweepEnd> {
        let plan = self.plan;
        let Some(&start) = plan.sweep.levels.first() else {
            return Ok(SweepEnd::Complete);
        };
        let mut search = Search::new(start, find.precision);
        let mut index = 0;
        let budget = find.max_steps as usize;
        while let Some(level) = search.next().filter(|_| index < budget) {
            let mut pooled = Vec::new();
            let mut runs = 0;
            let probe = loop {
                let outcome = self.one_step(index, level)?;
                index += 1;
                runs += 1;
                pooled.append(&mut self.batches);
                let (judged, ratio) = match outcome {
                    StepOutcome::Kept { ratio, .. } => (judge(&plan.slos, &pooled), ratio),
                    StepOutcome::Broke(_) => (LevelJudgement::broken(), None),
                    StepOutcome::Ends(end) => return Ok(end),
                };
                let decision = judged.decision;
                if runs >= plan.max_repeat
                    || !search.runs_again(level.value(), &judged)
                    || index >= budget
                {
                    break Probe {
                        load: level.value(),
                        decision,
                        ratio,
                    };
                }
            };
            search.record(probe);
        }
        Ok(SweepEnd::Complete)
    }

    /// After a step that lost generators: drops them, and gives how the
    /// sweep ends when it cannot go on without them.
    fn drop_lost_generators(&mut self, step: &FinishedStep, reason: &str) -> Option<SweepEnd> {
        let left = match &mut self.generators {
            Some(g) => {
                let mut worker = 0;
                g.peers.retain(|_| {
                    worker += 1;
                    !step.lost.contains(&(worker - 1))
                });
                g.peers.len()
            }
            None => 0,
        };
        let why = if self.plan.on_generator_loss == GeneratorLoss::Stop {
            "the sweep stops there (--on-generator-loss stop)"
        } else if left == 0 {
            "no generator is left"
        } else {
            return None;
        };
        Some(SweepEnd::Failed {
            step: step.index,
            reason: format!("{reason}; {why}"),
        })
    }

    /// Runs one step: starts its workers, waits until every session is open,
    /// starts the clock, merges the intervals as they come in, and assembles
    /// the step.
    fn run_step(&mut self, index: usize, level: Level) -> anyhow::Result<FinishedStep> {
        let plan = self.plan;
        let schedule = Arc::new(Schedule::new(plan.warmup, plan.duration, plan.interval));
        let op_count = self.workload.op_names().len();
        let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
        let crew = self
            .spawn_crew(index, level, &schedule, &reports)?
            .wait_ready()?;
        if let Err(e) = self.observer.step_started(index, level, &schedule) {
            crew.give_up();
            return Err(e);
        }
        let usage_start = SelfUsage::start();
        let started_at = SystemTime::now();
        let lead = self
            .generators
            .as_ref()
            .map_or(LOCAL_START_LEAD, Generators::start_lead);
        let start = Instant::now() + lead;
        let observer = &mut *self.observer;
        let batches = &mut self.batches;
        batches.clear();
        let offered = super::judge::offered(level);
        let mut on_interval = |spec: &IntervalSpec, tally: &Tally, record: IntervalRecord| {
            if spec.phase == Phase::Measured && !plan.slos.is_empty() {
                batches.push(Batch::of(&plan.slos, tally, record.length, offered));
            }
            observer.interval(spec, tally, record)
        };
        let (mut merging, panicked) = crew.run(start, &schedule, op_count, &mut on_interval);
        let failure = if panicked {
            Some(anyhow::anyhow!(
                "step {} ({level}): a worker thread panicked",
                index + 1
            ))
        } else {
            merging
                .failure
                .as_ref()
                .map(|error| anyhow::anyhow!("step {} ({level}): {error}", index + 1))
        };
        if let Some(error) = failure.or(merging.observer_error.take()) {
            // What was handed over of a step that failed is not kept.
            let _ = self.observer.step_dropped();
            return Err(error);
        }
        let usage = usage_start.finish(merging.rss_at_end);
        let mut step = merging.finish(&schedule, index, level, started_at, usage);
        let reports = reports.lock().map(|r| r.clone()).unwrap_or_default();
        attach_reports(&mut step, reports, self.generators.as_ref());
        Ok(step)
    }

    /// The step's crew: worker threads here, or the generators' shares.
    fn spawn_crew(
        &self,
        index: usize,
        level: Level,
        schedule: &Arc<Schedule>,
        reports: &Arc<std::sync::Mutex<Vec<GeneratorStep>>>,
    ) -> anyhow::Result<Crew> {
        let plan = self.plan;
        let Some(generators) = &self.generators else {
            return Crew::spawn(
                self.workload.clone(),
                worker_plans(&Split::of(plan, Part::WHOLE), index, level, schedule),
                self.interrupted,
            );
        };
        let n = generators.peers.len();
        let shares = (0..n)
            .map(|k| Share {
                index,
                level,
                split: Split::of(plan, Part { k, n }),
                warmup: plan.warmup,
                duration: plan.duration,
                interval: plan.interval,
            })
            .collect();
        let op_count = self.workload.op_names().len();
        super::remote::spawn_crew(generators, op_count, shares, self.interrupted, reports)
    }
}

/// How far ahead local workers are given the step's start: enough for
/// every thread to be handed it and asleep before it comes.
const LOCAL_START_LEAD: Duration = Duration::from_millis(2);

/// Adds a step's operations to the run's counts.
fn add_counts(counts: &mut [OpCounts], step: &FinishedStep) {
    for (total, op) in counts.iter_mut().zip(&step.everything.ops) {
        total.ok += op.ok;
        total.refused += op.refused;
        // A timeout or a lost connection can strike after the server
        // committed: the outcome of those operations is unknown.
        total.indeterminate += op.errors.count(ErrorKind::Timeout)
            + op.errors.count(ErrorKind::Connect)
            + op.errors.count(ErrorKind::Reset);
    }
}

/// Fails a step that ran whole but served nothing, or whose failed share
/// broke `max_error_rate`; marks one whose target held an operation for
/// much of the window as stalled; gives its throughput (operations per
/// second).
fn judge_step(step: &mut FinishedStep, max_error_rate: f64) -> f64 {
    let summary = step.summary();
    if step.status != StepStatus::Ok {
        return summary.throughput;
    }
    if summary.completed == 0 && summary.errors == summary.late_errors {
        // Nothing ended in the window: a server that stalls is not a
        // server that served 0/s without error.
        let mut why = format!(
            "no operation ended in the {} measured: the target answered nothing",
            crate::units::format_duration(summary.measured)
        );
        if summary.unfinished > 0 {
            why = format!("{why} ({})", summary.stall_words());
        }
        step.status = StepStatus::Failed(why);
    } else if summary.error_rate > max_error_rate {
        let mut why = format!(
            "{:.1}% of operations failed, above --max-error-rate {:.1}%",
            summary.error_rate * 100.0,
            max_error_rate * 100.0
        );
        if summary.stalled {
            why = format!("{why}; {}", summary.stall_words());
        }
        step.status = StepStatus::Failed(why);
    } else if summary.stalled {
        step.status = StepStatus::Stalled(summary.stall_words());
    }
    summary.throughput
}

/// The largest of the latency objectives' measured value over its limit
/// (under 1 where they hold); none without a latency objective.
fn latency_ratio(slos: &[crate::plan::Slo], summary: &crate::measure::StepSummary) -> Option<f64> {
    slos.iter()
        .filter(|s| !s.metric.is_share())
        .map(|s| {
            let value = super::judge::value(s, &summary.response, summary.error_rate, 0.0, None);
            value / s.limit
        })
        .reduce(f64::max)
}

/// How the sweep ends on a failed step: the target lost when most of its
/// errors could not reach it and it answered in no measured interval
/// after the one with its first lost connection (killed in the step: a
/// window of one interval, or a kill in its last, cannot show an answer
/// after the loss, whatever the interval answered before it); the error
/// limit broken otherwise (a server that answered on after it closed the
/// connections of some, even of most, was there: it limits).
fn failed_end(step: &FinishedStep, reason: &str) -> SweepEnd {
    let all = step.measured.all_ops();
    let lost = all.errors.unreached();
    let answering = step.answering.after_lost > 0;
    if lost * 2 > all.error_count() && answering {
        SweepEnd::Failed {
            step: step.index,
            reason: format!(
                "{reason}: the server reset or refused the connections of {lost} operations while it answered {}",
                all.completed()
            ),
        }
    } else if lost * 2 > all.error_count() {
        SweepEnd::TargetLost {
            step: step.index,
            reason: format!("{lost} operations could not reach the target"),
        }
    } else {
        SweepEnd::Failed {
            step: step.index,
            reason: reason.to_string(),
        }
    }
}

/// Gives the step the generators' own reports, in the order of
/// --generators, and the busiest one's usage.
fn attach_reports(
    step: &mut FinishedStep,
    mut reports: Vec<GeneratorStep>,
    generators: Option<&Generators>,
) {
    if reports.is_empty() {
        return;
    }
    let position = |name: &str| {
        generators.map_or(0, |g| {
            g.peers
                .iter()
                .position(|p| p.name() == name)
                .unwrap_or(usize::MAX)
        })
    };
    reports.sort_by_key(|r| position(&r.generator));
    // The generator check of the verdict reads the step's usage: on
    // generators, the busiest generator's is the one that can limit.
    if let Some(busiest) = reports
        .iter()
        .max_by(|a, b| busiest_share(&a.usage).total_cmp(&busiest_share(&b.usage)))
    {
        step.usage = busiest.usage;
    }
    step.generators = reports;
}

/// A process's CPU use as a share of the CPUs it may use.
fn busiest_share(usage: &SelfUsage) -> f64 {
    usage.cpu_share() / usage.cpu_capacity.unwrap_or(1.0).max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Answering;
    use crate::measure::PackedTally;

    /// A one-user step whose measured intervals completed and lost (to
    /// refused connections) the operations given, in order.
    fn step(intervals: &[(u64, u64)]) -> FinishedStep {
        let mut tally = Tally::new(1);
        let mut answering = Answering::default();
        for &(ok, lost) in intervals {
            tally.ops[0].ok += ok;
            for _ in 0..lost {
                tally.ops[0].errors.record(ErrorKind::Connect);
            }
            answering.interval(ok, lost);
        }
        let drain = IntervalRecord {
            phase: Phase::Drain,
            start: Duration::from_secs(2),
            length: Duration::ZERO,
            tally: PackedTally::pack(&Tally::new(1)),
            db: None,
            host: None,
            probes: Vec::new(),
        };
        FinishedStep::of_two_seconds(4, Level::Users(5), tally, answering, drain)
    }

    /// A server that refused some connections and answered in an interval
    /// after the first refusal limits, whether it refused fewer or more
    /// than it answered; one that answered nothing after the interval of
    /// its first lost connection was killed in the step: lost, even when
    /// that interval (the window's only one, or its last) answered more
    /// operations than it lost before the kill.
    #[test]
    fn a_server_that_stopped_answering_before_the_windows_end_is_lost() {
        for intervals in [[(700, 100), (200, 0)], [(200, 600), (200, 0)]] {
            let (ok, lost) = (intervals[0].0 + 200, intervals[0].1);
            let limited = failed_end(&step(&intervals), "too many errors");
            let said = format!(
                "reset or refused the connections of {lost} operations while it answered {ok}"
            );
            assert!(
                matches!(&limited, SweepEnd::Failed { reason, .. } if reason.contains(&said)),
                "{limited:?}"
            );
        }
        let killed: [&[(u64, u64)]; 3] =
            [&[(900, 100), (0, 0)], &[(100, 900), (0, 50)], &[(900, 100)]];
        for intervals in killed {
            let lost: u64 = intervals.iter().map(|i| i.1).sum();
            let end = failed_end(&step(intervals), "too many errors");
            assert!(
                matches!(&end, SweepEnd::TargetLost { step: 4, reason } if reason == &format!("{lost} operations could not reach the target")),
                "{intervals:?}: {end:?}"
            );
        }
    }
}
