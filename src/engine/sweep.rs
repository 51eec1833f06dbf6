//! The coordinator: runs the sweep's steps one after another, splits each
//! step's load across worker threads, merges their interval tallies, and
//! hands every finished step to the observer (which commits it) before the
//! next one starts.

use super::schedule::{IntervalSpec, Schedule};
use super::step::{FinishedStep, IntervalRecord, StepStatus};
use super::worker::{self, WorkerEvent, WorkerLoad, WorkerPlan};
use crate::measure::{ErrorKind, PackedTally, Phase, Tally};
use crate::plan::{Level, LoadModel, Plan};
use crate::probe::SelfUsage;
use crate::workload::{OpCounts, Workload};
use anyhow::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
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
    /// Ctrl-C.
    Interrupted,
}

/// A step could not open its sessions (the target refused or went away).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SessionsFailed(pub String);

/// Runs every step of the plan. Returns why the sweep ended and how many
/// operations of each kind ended each way over the whole run.
pub fn run_sweep<W: Workload>(
    workload: Arc<W>,
    plan: &Plan,
    interrupted: &Arc<AtomicBool>,
    observer: &mut dyn SweepObserver,
) -> anyhow::Result<(SweepEnd, Vec<OpCounts>)> {
    let mut counts = vec![OpCounts::default(); workload.op_names().len()];
    let mut index = 0;
    for &level in &plan.sweep.levels {
        // Each level runs --repeat times, and again (up to --max-repeat)
        // while its runs' throughputs vary more than --max-cv.
        let mut throughputs = Vec::new();
        loop {
            match one_step(
                &workload,
                plan,
                index,
                level,
                interrupted,
                observer,
                &mut counts,
            )? {
                Ok(throughput) => throughputs.push(throughput),
                Err(end) => return Ok((end, counts)),
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
    Ok((SweepEnd::Complete, counts))
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

/// Runs one step and hands it to the observer: its throughput, or how the
/// sweep ends here.
fn one_step<W: Workload>(
    workload: &Arc<W>,
    plan: &Plan,
    index: usize,
    level: Level,
    interrupted: &Arc<AtomicBool>,
    observer: &mut dyn SweepObserver,
    counts: &mut [OpCounts],
) -> anyhow::Result<Result<f64, SweepEnd>> {
    {
        if interrupted.load(Ordering::Relaxed) {
            return Ok(Err(SweepEnd::Interrupted));
        }
        let mut step = match run_step(workload.clone(), plan, index, level, interrupted, observer) {
            Ok(step) => step,
            Err(e) => match e.downcast::<SessionsFailed>() {
                Ok(SessionsFailed(reason)) => {
                    return Ok(Err(SweepEnd::TargetLost {
                        step: index,
                        reason,
                    }))
                }
                Err(other) => return Err(other),
            },
        };
        let step_ref = &mut step;
        for (total, op) in counts.iter_mut().zip(&step_ref.everything.ops) {
            total.ok += op.ok;
            total.refused += op.refused;
            // A timeout or a lost connection can strike after the server
            // committed: the outcome of those operations is unknown.
            total.indeterminate += op.errors.count(ErrorKind::Timeout)
                + op.errors.count(ErrorKind::Connect)
                + op.errors.count(ErrorKind::Reset);
        }
        if step_ref.measured_intervals == 0 {
            // Interrupted during warm-up: nothing measured, nothing to keep.
            observer.step_dropped()?;
            return Ok(Err(SweepEnd::Interrupted));
        }
        let summary = step_ref.summary();
        if step_ref.status == StepStatus::Ok && summary.error_rate > plan.max_error_rate {
            step_ref.status = StepStatus::Failed(format!(
                "{:.1}% of operations failed, above --max-error-rate {:.1}%",
                summary.error_rate * 100.0,
                plan.max_error_rate * 100.0
            ));
        }
        observer.step_finished(step_ref)?;
        match &step_ref.status {
            StepStatus::Ok => {}
            StepStatus::Failed(reason) => {
                let all = step_ref.measured.all_ops();
                let lost =
                    all.errors.count(ErrorKind::Connect) + all.errors.count(ErrorKind::Reset);
                let reason = reason.clone();
                let end = if lost * 2 > all.error_count() {
                    SweepEnd::TargetLost {
                        step: index,
                        reason: format!("{lost} operations could not reach the target"),
                    }
                } else {
                    SweepEnd::Failed {
                        step: index,
                        reason,
                    }
                };
                return Ok(Err(end));
            }
            StepStatus::Partial(_) => return Ok(Err(SweepEnd::Interrupted)),
        }
        Ok(Ok(summary.throughput))
    }
}

/// Splits a step's load over the worker threads.
fn worker_plans(
    plan: &Plan,
    index: usize,
    level: Level,
    schedule: &Arc<Schedule>,
) -> Vec<WorkerPlan> {
    let step_seed = worker::stream_seed(plan.seed, index as u64);
    let (sessions, workers) = match (level, plan.load) {
        (Level::Users(n), _) => (n, plan.threads.min(n as usize).max(1)),
        (Level::Rate(_), LoadModel::Open { connections, .. }) => {
            (connections, plan.threads.min(connections as usize).max(1))
        }
        (Level::Rate(_), LoadModel::Closed { .. }) => (1, 1),
    };
    (0..workers)
        .map(|w| {
            let users: Vec<u32> = (0..sessions)
                .filter(|u| *u as usize % workers == w)
                .collect();
            let load = match (level, plan.load) {
                (
                    Level::Rate(rate),
                    LoadModel::Open {
                        arrivals,
                        max_outstanding,
                        ..
                    },
                ) => WorkerLoad::Open {
                    rate: rate / workers as f64,
                    arrivals,
                    max_outstanding: max_outstanding.div_ceil(workers as u32).max(1),
                    first_arrival: crate::units::saturating_secs(w as f64 / rate),
                },
                (_, LoadModel::Closed { think }) => WorkerLoad::Closed { think },
                (Level::Users(_), LoadModel::Open { .. }) => WorkerLoad::Closed {
                    think: crate::plan::ThinkTime::Zero,
                },
            };
            WorkerPlan {
                index: w,
                users,
                load,
                seed: step_seed,
                schedule: schedule.clone(),
                timeout: plan.timeout,
            }
        })
        .collect()
}

/// Runs one step: starts its workers, waits until every session is open,
/// starts the clock, merges the intervals as they come in, and assembles
/// the step.
fn run_step<W: Workload>(
    workload: Arc<W>,
    plan: &Plan,
    index: usize,
    level: Level,
    interrupted: &Arc<AtomicBool>,
    observer: &mut dyn SweepObserver,
) -> anyhow::Result<FinishedStep> {
    let schedule = Arc::new(Schedule::new(plan.warmup, plan.duration, plan.interval));
    let op_count = workload.op_names().len();
    let crew = Crew::spawn(
        workload,
        worker_plans(plan, index, level, &schedule),
        interrupted,
    )?
    .wait_ready()?;

    if let Err(e) = observer.step_started(index, level, &schedule) {
        crew.give_up();
        return Err(e);
    }
    let usage_start = SelfUsage::start();
    let started_at = SystemTime::now();
    let start = Instant::now() + Duration::from_millis(2);
    for s in &crew.starters {
        let _ = s.send(Some(start));
    }
    let mut merging = merge_intervals(&crew, &schedule, op_count, observer);
    let mut panicked = false;
    for h in crew.handles {
        panicked |= h.join().is_err();
    }
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
        let _ = observer.step_dropped();
        return Err(error);
    }
    let usage = usage_start.finish(merging.rss_at_end);
    Ok(merging.finish(&schedule, index, level, started_at, usage))
}

/// The worker threads of one step and the channels that drive them.
struct Crew {
    workers: usize,
    /// What the workers report, in the order they report it.
    events: mpsc::Receiver<WorkerEvent>,
    /// One per worker: the start instant, or none to give up before starting.
    starters: Vec<mpsc::Sender<Option<Instant>>>,
    handles: Vec<JoinHandle<()>>,
}

impl Crew {
    /// Starts one worker thread per plan; each opens its sessions and waits.
    fn spawn<W: Workload>(
        workload: Arc<W>,
        plans: Vec<WorkerPlan>,
        interrupted: &Arc<AtomicBool>,
    ) -> anyhow::Result<Crew> {
        let workers = plans.len();
        let (events_tx, events) = mpsc::channel();
        let mut starters = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for worker_plan in plans {
            let (start_tx, start_rx) = mpsc::channel();
            starters.push(start_tx);
            let tx = events_tx.clone();
            let handle = worker::spawn(
                workload.clone(),
                worker_plan,
                tx,
                start_rx,
                interrupted.clone(),
            )
            .context("cannot start a worker thread")?;
            handles.push(handle);
        }
        Ok(Crew {
            workers,
            events,
            starters,
            handles,
        })
    }

    /// Waits until every session is open, so that none opens after the
    /// clock starts; when one cannot open, stops every worker, waits for
    /// them, and says why.
    fn wait_ready(self) -> Result<Crew, SessionsFailed> {
        let mut ready = 0;
        let mut failure = None;
        while ready < self.workers {
            match self.events.recv() {
                Ok(WorkerEvent::Ready) => ready += 1,
                Ok(WorkerEvent::Failed(e)) => {
                    failure = Some(e);
                    break;
                }
                Ok(_) => {}
                Err(_) => {
                    failure = Some("a worker thread ended before it was ready".to_string());
                    break;
                }
            }
        }
        let Some(error) = failure else {
            return Ok(self);
        };
        self.give_up();
        Err(SessionsFailed(error))
    }

    /// Stops every worker before its start and waits for them.
    fn give_up(self) {
        for s in &self.starters {
            let _ = s.send(None);
        }
        drop(self.starters);
        for h in self.handles {
            let _ = h.join();
        }
    }
}

/// The intervals of a running step as the workers hand them over.
struct Merging {
    /// Per interval of the schedule, then the drain. A slot is empty until
    /// its first worker reports (a tally holds histograms: made for every
    /// interval of a long step at its start, they took tens of megabytes
    /// before any was used), and handed over once every worker has.
    merged: Vec<Option<Slot>>,
    /// How many intervals went to the observer, in order.
    handed_over: usize,
    /// The measured ones among them, merged, and their length.
    measured: Tally,
    measured_length: Duration,
    measured_intervals: usize,
    /// Every interval handed over, merged.
    everything: Tally,
    /// perflab's resident memory when the last measured interval completed.
    rss_at_end: Option<u64>,
    /// A worker's failure after the start.
    failure: Option<String>,
    /// The observer's first failure to keep an interval.
    observer_error: Option<anyhow::Error>,
}

/// One interval's tallies as the workers hand them over: merged while some
/// are missing; then handed over to the observer, or packed when one
/// before it is still missing (it will join the drain).
enum Slot {
    Filling {
        tally: Tally,
        workers: usize,
        length: Duration,
    },
    Packed {
        tally: PackedTally,
        length: Duration,
    },
    HandedOver,
}

impl Slot {
    /// The slot's tally merged into `into`, and its length.
    fn merge_into(self, into: &mut Tally) -> Duration {
        match self {
            Slot::Filling { tally, length, .. } => {
                into.merge(&tally);
                length
            }
            Slot::Packed { tally, length } => {
                into.merge(&tally.unpack());
                length
            }
            Slot::HandedOver => Duration::ZERO,
        }
    }
}

/// Merges the workers' interval tallies until every worker has finished,
/// handing each interval to the observer, in order, once all workers
/// completed it.
fn merge_intervals(
    crew: &Crew,
    schedule: &Schedule,
    op_count: usize,
    observer: &mut dyn SweepObserver,
) -> Merging {
    let slots = schedule.intervals.len() + 1;
    let mut m = Merging {
        merged: (0..slots).map(|_| None).collect(),
        handed_over: 0,
        measured: Tally::new(op_count),
        measured_length: Duration::ZERO,
        measured_intervals: 0,
        everything: Tally::new(op_count),
        rss_at_end: None,
        failure: None,
        observer_error: None,
    };
    let last_measured = schedule.intervals.len().checked_sub(1);
    let mut finished = 0;
    while finished < crew.workers {
        match crew.events.recv() {
            Ok(WorkerEvent::Interval {
                index: slot,
                tally,
                length,
            }) => {
                let Some(entry) = m.merged.get_mut(slot) else {
                    continue;
                };
                match entry {
                    None => {
                        *entry = Some(Slot::Filling {
                            tally,
                            workers: 1,
                            length,
                        })
                    }
                    Some(Slot::Filling {
                        tally: merged,
                        workers,
                        length: longest,
                    }) => {
                        merged.merge(&tally);
                        *workers += 1;
                        *longest = (*longest).max(length);
                    }
                    // Each worker hands each interval over once.
                    Some(Slot::Packed { .. } | Slot::HandedOver) => continue,
                }
                let Some(Slot::Filling {
                    tally,
                    workers,
                    length,
                }) = entry
                else {
                    continue;
                };
                if *workers < crew.workers {
                    continue;
                }
                let Some(spec) = schedule
                    .intervals
                    .get(slot)
                    .filter(|_| slot == m.handed_over)
                else {
                    // The drain, or an interval after one still missing.
                    *entry = Some(Slot::Packed {
                        tally: PackedTally::pack(tally),
                        length: *length,
                    });
                    continue;
                };
                m.everything.merge(tally);
                if spec.phase == Phase::Measured {
                    m.measured.merge(tally);
                    m.measured_length += spec.end - spec.start;
                    m.measured_intervals += 1;
                }
                let record = IntervalRecord {
                    phase: spec.phase,
                    start: spec.start,
                    length: spec.end - spec.start,
                    tally: PackedTally::pack(tally),
                    db: None,
                    host: None,
                    probes: Vec::new(),
                };
                if m.observer_error.is_none() {
                    if let Err(e) = observer.interval(spec, tally, record) {
                        m.observer_error = Some(e);
                    }
                }
                if Some(slot) == last_measured {
                    m.rss_at_end = crate::probe::self_rss();
                }
                *entry = Some(Slot::HandedOver);
                m.handed_over += 1;
            }
            Ok(WorkerEvent::Finished) => finished += 1,
            Ok(WorkerEvent::Failed(e)) => m.failure = Some(e),
            Ok(WorkerEvent::Ready) => {}
            Err(_) => break,
        }
    }
    m
}

impl Merging {
    /// The step once every worker has finished: anything recorded after
    /// the last interval handed over (an interrupt seen at different
    /// boundaries, the drain) joins the drain so no operation is lost.
    fn finish(
        mut self,
        schedule: &Schedule,
        index: usize,
        level: Level,
        started_at: SystemTime,
        usage: SelfUsage,
    ) -> FinishedStep {
        let mut drain = Tally::new(self.everything.ops.len());
        let mut drain_length = Duration::ZERO;
        for slot in self.merged.into_iter().flatten() {
            drain_length = drain_length.max(slot.merge_into(&mut drain));
        }
        self.everything.merge(&drain);
        let stopped_at = schedule.intervals[..self.handed_over]
            .last()
            .map_or(Duration::ZERO, |s| s.end);
        let expected = schedule
            .intervals
            .iter()
            .filter(|i| i.phase == Phase::Measured)
            .count();
        let status = if self.measured_intervals == expected {
            StepStatus::Ok
        } else {
            StepStatus::Partial(format!(
                "interrupted after {} of {expected} measured intervals",
                self.measured_intervals
            ))
        };
        FinishedStep {
            index,
            level,
            started_at,
            status,
            usage,
            handed_over: self.handed_over,
            measured_intervals: self.measured_intervals,
            drain: IntervalRecord {
                phase: Phase::Drain,
                start: stopped_at,
                length: drain_length,
                tally: PackedTally::pack(&drain),
                db: None,
                host: None,
                probes: Vec::new(),
            },
            measured: self.measured,
            measured_length: self.measured_length,
            everything: self.everything,
        }
    }
}
