//! A step's worker threads: started, waited for until every session is
//! open, and their interval tallies merged as they arrive, each interval
//! handed on once every worker has completed it.

use super::schedule::{IntervalSpec, Schedule};
use super::step::{Answering, FinishedStep};
use super::worker::{self, WorkerEvent, WorkerPlan};
use crate::measure::{PackedTally, Phase, Tally};
use crate::plan::Level;
use crate::probe::SelfUsage;
use crate::record::{IntervalRecord, StepStatus};
use crate::workload::Workload;
use anyhow::Context;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// A step could not open its sessions (the target refused or went away):
/// why, and the server's setting that refused one when one did.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub(super) struct SessionsFailed {
    pub(super) reason: String,
    pub(super) refused_by: Option<&'static str>,
}

/// The worker threads of one step and the channels that drive them.
pub(super) struct Crew {
    pub(super) workers: usize,
    /// What the workers report, in the order they report it.
    events: mpsc::Receiver<WorkerEvent>,
    /// One per worker: the start instant, or none to give up before starting.
    starters: Vec<mpsc::Sender<Option<Instant>>>,
    handles: Vec<JoinHandle<()>>,
    /// Set by Ctrl-C or SIGTERM: the step ends within [`ABANDON_AFTER`].
    interrupted: Arc<AtomicBool>,
}

/// How long after an interrupt the coordinator waits for its workers:
/// one held in a blocking call (an operation stuck on a socket until its
/// timeout) is left behind, its operations abandoned, so that a signal
/// ends the run at once whatever the target does.
const ABANDON_AFTER: Duration = Duration::from_millis(1500);
/// How often the coordinator looks at the interrupt while it waits.
const POLL: Duration = Duration::from_millis(50);

impl Crew {
    /// Starts one worker thread per plan; each opens its sessions and waits.
    pub(super) fn spawn<W: Workload>(
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
            interrupted: interrupted.clone(),
        })
    }

    /// A crew of threads already started (the generators' followers).
    pub(super) fn assemble(
        events: mpsc::Receiver<WorkerEvent>,
        starters: Vec<mpsc::Sender<Option<Instant>>>,
        handles: Vec<JoinHandle<()>>,
        interrupted: &Arc<AtomicBool>,
    ) -> Crew {
        Crew {
            workers: starters.len(),
            events,
            starters,
            handles,
            interrupted: interrupted.clone(),
        }
    }

    /// Waits until every session is open, so that none opens after the
    /// clock starts; when one cannot open, stops every worker, waits for
    /// them, and says why.
    pub(super) fn wait_ready(self) -> Result<Crew, SessionsFailed> {
        let mut ready = 0;
        let mut failure = None;
        while ready < self.workers {
            match self.events.recv() {
                Ok(WorkerEvent::Ready) => ready += 1,
                Ok(WorkerEvent::Failed(e)) => {
                    failure = Some((e, None));
                    break;
                }
                Ok(WorkerEvent::Refused { reason, setting }) => {
                    failure = Some((reason, Some(setting)));
                    break;
                }
                Ok(_) => {}
                Err(_) => {
                    failure = Some((
                        "a worker thread ended before it was ready".to_string(),
                        None,
                    ));
                    break;
                }
            }
        }
        let Some((reason, refused_by)) = failure else {
            return Ok(self);
        };
        self.give_up();
        Err(SessionsFailed { reason, refused_by })
    }

    /// Starts every worker at `start`, merges their intervals (handing
    /// each to `on_interval` once all have completed it) until every worker
    /// has finished, and joins them; true beside the merge when a worker
    /// panicked.
    pub(super) fn run(
        self,
        start: Instant,
        schedule: &Schedule,
        op_count: usize,
        on_interval: &mut OnInterval<'_>,
    ) -> (Merging, bool) {
        for s in &self.starters {
            let _ = s.send(Some(start));
        }
        let merging = merge_intervals(&self, schedule, op_count, on_interval);
        let mut panicked = false;
        for h in self.handles {
            // A worker left behind after an interrupt is not waited for:
            // it ends with the process.
            if merging.left_behind == 0 || h.is_finished() {
                panicked |= h.join().is_err();
            }
        }
        (merging, panicked)
    }

    /// Stops every worker before its start and waits for them.
    pub(super) fn give_up(self) {
        for s in &self.starters {
            let _ = s.send(None);
        }
        drop(self.starters);
        for h in self.handles {
            let _ = h.join();
        }
    }
}

/// What receives each interval once all workers have completed it: its
/// spec, its merged tally, and the same packed for keeping.
pub(super) type OnInterval<'a> =
    dyn FnMut(&IntervalSpec, &Tally, IntervalRecord) -> anyhow::Result<()> + 'a;

/// The intervals of a running step as the workers hand them over.
pub(super) struct Merging {
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
    /// Whether the server answered in the measured intervals handed over.
    answering: Answering,
    /// Every interval handed over, merged.
    everything: Tally,
    /// perflab's resident memory when the last measured interval completed.
    pub(super) rss_at_end: Option<u64>,
    /// A worker's failure after the start.
    pub(super) failure: Option<String>,
    /// Workers (generators) lost during the step, each with why.
    pub(super) lost: Vec<(usize, String)>,
    /// Workers still reporting (a lost generator is not waited for).
    live: Vec<bool>,
    /// The observer's first failure to keep an interval.
    pub(super) observer_error: Option<anyhow::Error>,
    /// Ctrl-C or SIGTERM came before the step ended.
    interrupted: bool,
    /// Operations the workers abandoned in flight when interrupted.
    abandoned: u64,
    /// Workers that had not stopped [`ABANDON_AFTER`] an interrupt.
    left_behind: usize,
}

/// One interval's tallies as the workers hand them over: merged while some
/// are missing; then handed over to the observer, or packed when one
/// before it is still missing (it will join the drain).
enum Slot {
    Filling {
        tally: Tally,
        /// Which workers have reported it.
        reported: Vec<bool>,
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

/// Merges the workers' interval tallies until every worker has finished
/// (or was lost), handing each interval to the observer, in order, once
/// every live worker completed it.
fn merge_intervals(
    crew: &Crew,
    schedule: &Schedule,
    op_count: usize,
    on_interval: &mut OnInterval<'_>,
) -> Merging {
    let mut m = Merging::new(schedule.intervals.len() + 1, op_count, crew.workers);
    let mut finished = 0;
    let mut interrupted_at = None;
    while finished + m.lost.len() < crew.workers {
        if crew.interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            let at = *interrupted_at.get_or_insert_with(std::time::Instant::now);
            if at.elapsed() >= ABANDON_AFTER {
                m.left_behind = crew.workers - finished - m.lost.len();
                break;
            }
        }
        let event = match crew.events.recv_timeout(POLL) {
            Ok(event) => event,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        match event {
            WorkerEvent::Interval {
                worker,
                index: slot,
                tally,
                length,
            } => {
                if m.take_interval(worker, slot, *tally, length) {
                    m.settle(slot, schedule, on_interval);
                }
            }
            WorkerEvent::Lost { worker, why } => m.lose(worker, why, schedule, on_interval),
            WorkerEvent::Finished => finished += 1,
            WorkerEvent::Failed(reason) | WorkerEvent::Refused { reason, .. } => {
                m.failure = Some(reason)
            }
            WorkerEvent::Abandoned(n) => m.abandoned += n,
            WorkerEvent::Ready => {}
        }
    }
    m.interrupted = crew.interrupted.load(std::sync::atomic::Ordering::Relaxed);
    m
}

impl Merging {
    /// Nothing merged yet: `slots` intervals (the drain's included) of
    /// `op_count` operation kinds, from `workers` workers.
    fn new(slots: usize, op_count: usize, workers: usize) -> Self {
        Merging {
            merged: (0..slots).map(|_| None).collect(),
            handed_over: 0,
            measured: Tally::new(op_count),
            measured_length: Duration::ZERO,
            measured_intervals: 0,
            answering: Answering::default(),
            everything: Tally::new(op_count),
            rss_at_end: None,
            failure: None,
            lost: Vec::new(),
            live: vec![true; workers],
            observer_error: None,
            interrupted: false,
            abandoned: 0,
            left_behind: 0,
        }
    }

    /// Merges worker `worker`'s tally of interval `slot`; whether the
    /// slot took it (a slot out of range, already packed or handed over,
    /// or reported before by that worker does not).
    fn take_interval(
        &mut self,
        worker: usize,
        slot: usize,
        tally: Tally,
        length: Duration,
    ) -> bool {
        let workers = self.live.len();
        let Some(entry) = self.merged.get_mut(slot) else {
            return false;
        };
        match entry {
            None => {
                let mut reported = vec![false; workers];
                if let Some(r) = reported.get_mut(worker) {
                    *r = true;
                }
                *entry = Some(Slot::Filling {
                    tally,
                    reported,
                    length,
                });
                true
            }
            Some(Slot::Filling {
                tally: merged,
                reported,
                length: longest,
            }) => {
                // Each worker hands each interval over once.
                if reported.get(worker).copied().unwrap_or(true) {
                    return false;
                }
                reported[worker] = true;
                merged.merge(&tally);
                *longest = (*longest).max(length);
                true
            }
            Some(Slot::Packed { .. } | Slot::HandedOver) => false,
        }
    }

    /// Worker `worker` was lost: it reports no more, so every slot now
    /// waits only on the workers that still report.
    fn lose(
        &mut self,
        worker: usize,
        why: String,
        schedule: &Schedule,
        on_interval: &mut OnInterval<'_>,
    ) {
        self.lost.push((worker, why));
        if let Some(live) = self.live.get_mut(worker) {
            *live = false;
        }
        for slot in self.handed_over..self.merged.len() {
            self.settle(slot, schedule, on_interval);
        }
    }
    /// Hands slot `slot` to the observer once every live worker has
    /// reported it and every slot before it went (packs it when one before
    /// it is missing: it will join the drain).
    fn settle(&mut self, slot: usize, schedule: &Schedule, on_interval: &mut OnInterval<'_>) {
        let complete = match self.merged.get(slot) {
            Some(Some(Slot::Filling { reported, .. })) => reported
                .iter()
                .zip(&self.live)
                .all(|(reported, live)| *reported || !*live),
            _ => false,
        };
        if !complete {
            return;
        }
        let Some(Slot::Filling { tally, length, .. }) = self.merged[slot].take() else {
            return;
        };
        let Some(spec) = schedule
            .intervals
            .get(slot)
            .filter(|_| slot == self.handed_over)
        else {
            // The drain, or an interval after one still missing.
            self.merged[slot] = Some(Slot::Packed {
                tally: PackedTally::pack(&tally),
                length,
            });
            return;
        };
        self.everything.merge(&tally);
        if spec.phase == Phase::Measured {
            self.measured.merge(&tally);
            self.measured_length += spec.end - spec.start;
            self.measured_intervals += 1;
            let ops = tally.all_ops();
            self.answering
                .interval(ops.completed(), ops.errors.unreached());
        }
        let record = IntervalRecord {
            phase: spec.phase,
            start: spec.start,
            length: spec.end - spec.start,
            tally: PackedTally::pack(&tally),
            db: None,
            host: None,
            probes: Vec::new(),
        };
        if self.observer_error.is_none() {
            if let Err(e) = on_interval(spec, &tally, record) {
                self.observer_error = Some(e);
            }
        }
        if Some(slot) == schedule.intervals.len().checked_sub(1) {
            self.rss_at_end = crate::probe::self_rss();
        }
        self.merged[slot] = Some(Slot::HandedOver);
        self.handed_over += 1;
    }

    /// The step once every worker has finished: anything recorded after
    /// the last interval handed over (an interrupt seen at different
    /// boundaries, the drain) joins the drain so no operation is lost.
    pub(super) fn finish(
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
        self.measured.absorb_late(&drain);
        let stopped_at = schedule.intervals[..self.handed_over]
            .last()
            .map_or(Duration::ZERO, |s| s.end);
        let expected = schedule
            .intervals
            .iter()
            .filter(|i| i.phase == Phase::Measured)
            .count();
        let status = if self.measured_intervals < expected || self.interrupted {
            let mut why = format!(
                "interrupted after {} of {expected} measured intervals",
                self.measured_intervals
            );
            if self.abandoned > 0 {
                why.push_str(&format!(
                    "; {} operations in flight abandoned",
                    self.abandoned
                ));
            }
            if self.left_behind > 0 {
                why.push_str(&format!(
                    "; {} of {} workers still held in an operation, abandoned",
                    self.left_behind,
                    self.live.len()
                ));
            }
            StepStatus::Partial(why)
        } else if !self.lost.is_empty() {
            let said: Vec<&str> = self.lost.iter().map(|(_, why)| why.as_str()).collect();
            StepStatus::Degraded(format!("{}; the step went on without it", said.join("; ")))
        } else {
            StepStatus::Ok
        };
        FinishedStep {
            index,
            level,
            started_at,
            status,
            usage,
            handed_over: self.handed_over,
            measured_intervals: self.measured_intervals,
            answering: self.answering,
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
            generators: Vec::new(),
            lost: self.lost.iter().map(|(worker, _)| *worker).collect(),
            judgement: None,
        }
    }
}
