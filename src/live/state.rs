//! The live state of a run and its hub: the run's observer hands it each
//! interval and each step's end (the same events the terminal's progress
//! gets, once per interval, never per operation); a publisher thread
//! renders the page's body from a copy of it and hands the result to each
//! connected client's bounded queue. A client whose queue is full (slow,
//! or stuck) is dropped, so no client can hold the run up or make memory
//! grow; a client that connects late first gets the state so far.

use super::metrics::{Counts, Gauges};
use crate::engine::{FinishedStep, IntervalRecord, IntervalSpec, Schedule};
use crate::measure::{LatencySummary, Phase, Tally};
use crate::plan::Level;
use std::collections::BTreeMap;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Intervals a page shows at most: beyond, every second one is kept
/// (then every fourth…), so that a run of hours stays a page of the same
/// size. The counts and histograms of `/metrics` keep every interval.
pub(crate) const MAX_POINTS: usize = 2000;

/// Events a client's queue holds before the client is dropped.
pub(crate) const CLIENT_QUEUE: usize = 32;

/// What happened, in the order of importance: when several happen before
/// the publisher renders, the event sent is named by the most important.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EventKind {
    Interval,
    Step,
    End,
}

impl EventKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventKind::Interval => "interval",
            EventKind::Step => "step",
            EventKind::End => "end",
        }
    }
}

/// One interval on the page's charts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Point {
    /// Its end, seconds since the first step started.
    pub(crate) at: f64,
    /// Served operations per second.
    pub(crate) throughput: f64,
    /// Response-time percentiles, seconds; none without a served operation.
    pub(crate) p50: Option<f64>,
    pub(crate) p95: Option<f64>,
    pub(crate) p99: Option<f64>,
    /// Failed operations per second.
    pub(crate) errors: f64,
    /// Resources sampled over the interval, each a share (0..1) of what
    /// its host has: `host cpu`, `perflab cpu`, `server cpu`, a remote
    /// probe's `… cpu`.
    pub(crate) resources: Vec<(String, f64)>,
}

/// The running step.
#[derive(Debug, Clone)]
pub(crate) struct Current {
    /// From 0.
    pub(crate) index: usize,
    pub(crate) level: Level,
    /// `warm-up 2/5 s`, `measuring 3/20 s`.
    pub(crate) phase: String,
    warmup: Duration,
    total: Duration,
    /// When it started, seconds since the first step did.
    started_at: f64,
}

/// A finished step's row.
#[derive(Debug, Clone)]
pub(crate) struct StepRow {
    pub(crate) index: usize,
    pub(crate) level: Level,
    pub(crate) throughput: f64,
    pub(crate) p95: Duration,
    pub(crate) errors: u64,
    pub(crate) status: &'static str,
    /// How it fared against `--slo`: `meets p95<5.00ms 1.2% over […]`.
    pub(crate) slo: Option<String>,
}

/// Everything the page shows: copied out of the lock to be rendered.
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    pub(crate) run: String,
    pub(crate) workload: String,
    pub(crate) target: String,
    pub(crate) steps_planned: usize,
    pub(crate) current: Option<Current>,
    pub(crate) points: Vec<Point>,
    /// Where each step started (seconds since the first), and its level.
    pub(crate) marks: Vec<(f64, String)>,
    pub(crate) steps: Vec<StepRow>,
    /// Failed operations by kind since the run began.
    pub(crate) errors: BTreeMap<String, u64>,
    /// Intervals so far.
    pub(crate) intervals: u64,
    /// How the run ended, and its verdict as the terminal prints it.
    pub(crate) end: Option<(String, String)>,
}

/// A rendered update, as sent to every client.
#[derive(Debug)]
pub(crate) struct Rendered {
    pub(crate) seq: u64,
    pub(crate) kind: EventKind,
    pub(crate) title: String,
    pub(crate) html: String,
}

impl Rendered {
    /// The server-sent event: named by its kind (`state` when replayed to
    /// a client that came late, unless it is the end), its data one line
    /// of JSON.
    pub(crate) fn event(&self, live: bool) -> String {
        let name = if live || self.kind == EventKind::End {
            self.kind.as_str()
        } else {
            "state"
        };
        let data = serde_json::json!({
            "seq": self.seq,
            "kind": self.kind.as_str(),
            "live": live,
            "title": self.title,
            "html": self.html,
        });
        format!("id: {}\nevent: {name}\ndata: {data}\n\n", self.seq)
    }
}

/// A client's queue of updates.
pub(crate) type Updates = std::sync::mpsc::Receiver<Arc<Rendered>>;

/// The state behind the lock.
struct State {
    view: View,
    op_names: Vec<String>,
    /// When the first step started.
    origin: Option<Instant>,
    /// Keep one interval in this many on the page.
    stride: u64,
    /// Counts of finished (or dropped) steps, and of the running one.
    finished: Counts,
    running: Counts,
    /// An update not yet rendered.
    pending: Option<EventKind>,
    /// Updates made, and of those the ones rendered and sent.
    version: u64,
    published: u64,
    seq: u64,
    last: Option<Arc<Rendered>>,
    clients: Vec<SyncSender<Arc<Rendered>>>,
    stopped: bool,
}

/// The live state of one run, shared by its observer, its publisher and
/// its HTTP server.
pub(crate) struct Live {
    state: Mutex<State>,
    changed: Condvar,
}

impl Live {
    /// The state of a run of `workload` on `target` (as shown: no
    /// password), before its first step.
    pub(crate) fn new(target: String, workload: String, steps_planned: usize) -> Arc<Live> {
        let live = Arc::new(Live {
            state: Mutex::new(State {
                view: View {
                    run: "(starting)".to_string(),
                    workload,
                    target,
                    steps_planned,
                    ..View::default()
                },
                op_names: Vec::new(),
                origin: None,
                stride: 1,
                finished: Counts::default(),
                running: Counts::default(),
                pending: None,
                version: 0,
                published: 0,
                seq: 0,
                last: None,
                clients: Vec::new(),
                stopped: false,
            }),
            changed: Condvar::new(),
        });
        // The page a client sees before the first interval.
        let state = live.state();
        live.changed(state, EventKind::Interval);
        live
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the state as
        // it was: still worth showing.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self, mut state: MutexGuard<'_, State>, kind: EventKind) {
        state.pending = Some(state.pending.map_or(kind, |p| p.max(kind)));
        state.version += 1;
        drop(state);
        self.changed.notify_all();
    }

    /// The run is in the store as `run`; its operations are `op_names`.
    pub(crate) fn run_created(&self, run: String, op_names: Vec<String>) {
        let mut s = self.state();
        s.view.run = run;
        s.op_names = op_names;
        self.changed(s, EventKind::Interval);
    }

    /// A step starts.
    pub(crate) fn step_started(&self, index: usize, level: Level, schedule: &Schedule) {
        let mut s = self.state();
        let origin = *s.origin.get_or_insert_with(Instant::now);
        let started_at = origin.elapsed().as_secs_f64();
        let warmup = schedule.warmup();
        s.view.marks.push((started_at, level.to_string()));
        s.view.current = Some(Current {
            index,
            level,
            phase: "starting".to_string(),
            warmup,
            total: schedule.end(),
            started_at,
        });
        self.changed(s, EventKind::Interval);
    }

    /// An interval of the running step ended: `tally` merged over the
    /// workers, `record` with what the probes saw.
    pub(crate) fn interval(&self, spec: &IntervalSpec, tally: &Tally, record: &IntervalRecord) {
        let mut s = self.state();
        s.running.add_tally(tally);
        s.view.intervals += 1;
        let Some(current) = s.view.current.as_mut() else {
            return;
        };
        current.phase = if spec.phase == Phase::Warmup {
            format!("warm-up {}/{} s", secs(spec.end), secs(current.warmup))
        } else {
            format!(
                "measuring {}/{} s",
                secs(spec.end.saturating_sub(current.warmup)),
                secs(current.total.saturating_sub(current.warmup))
            )
        };
        let at = current.started_at + spec.end.as_secs_f64();
        if s.view.intervals % s.stride == 0 {
            let point = point(at, spec, tally, record);
            s.view.points.push(point);
            if s.view.points.len() > MAX_POINTS {
                let mut keep = false;
                s.view.points.retain(|_| {
                    keep = !keep;
                    keep
                });
                s.stride *= 2;
            }
        }
        self.changed(s, EventKind::Interval);
    }

    /// A step ended: its counts move from running to finished (its
    /// `everything` holds the drain the intervals did not).
    pub(crate) fn step_finished(&self, step: &FinishedStep) {
        let mut s = self.state();
        s.running = Counts::default();
        s.finished.add_tally(&step.everything);
        let summary = step.summary();
        s.view.steps.push(StepRow {
            index: step.index,
            level: step.level,
            throughput: summary.throughput,
            p95: summary.response.p95,
            errors: summary.errors,
            status: step.status.as_str(),
            slo: step.judgement.as_ref().map(crate::report::judgement_words),
        });
        if let Some(current) = s.view.current.as_mut() {
            current.phase = "done".to_string();
        }
        self.changed(s, EventKind::Step);
    }

    /// The started step is not kept: what it counted stays counted.
    pub(crate) fn step_dropped(&self) {
        let mut s = self.state();
        let running = std::mem::take(&mut s.running);
        s.finished.add(&running);
        self.changed(s, EventKind::Step);
    }

    /// The run ended (`status` says how) with this verdict.
    pub(crate) fn ended(&self, status: String, verdict: String) {
        let mut s = self.state();
        s.view.end = Some((status, verdict));
        self.changed(s, EventKind::End);
    }

    /// The counts since the run began, the operations' names, the gauges.
    pub(crate) fn metrics(&self) -> (Vec<String>, Counts, Gauges) {
        let s = self.state();
        let mut counts = s.finished.clone();
        counts.add(&s.running);
        let level = s.view.current.as_ref().map(|c| c.level);
        let gauges = Gauges {
            users: match level {
                Some(Level::Users(n)) => Some(n),
                _ => None,
            },
            rate: match level {
                Some(Level::Rate(r)) => Some(r),
                _ => None,
            },
            step: s.view.current.as_ref().map_or(0, |c| c.index + 1),
            steps: s.view.steps_planned,
            cpu: super::metrics::own_cpu(),
        };
        (s.op_names.clone(), counts, gauges)
    }

    /// The last rendered update, and a queue of the next ones (none once
    /// the hub has stopped).
    pub(crate) fn subscribe(&self) -> Option<(Option<Arc<Rendered>>, Updates)> {
        let mut s = self.state();
        if s.stopped {
            return None;
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(CLIENT_QUEUE);
        s.clients.push(tx);
        Some((s.last.clone(), rx))
    }

    /// The last rendered update.
    pub(crate) fn last(&self) -> Option<Arc<Rendered>> {
        self.state().last.clone()
    }

    /// Renders each update and sends it to every client, until stopped.
    pub(crate) fn publish(&self, render: impl Fn(&View) -> (String, String)) {
        loop {
            let mut s = self.state();
            while s.pending.is_none() && !s.stopped {
                s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
            }
            let Some(kind) = s.pending.take() else {
                return;
            };
            let version = s.version;
            let mut view = s.view.clone();
            let mut errors = s.finished.clone();
            errors.add(&s.running);
            view.errors = errors.errors();
            drop(s);
            let (title, html) = render(&view);
            let mut s = self.state();
            s.seq += 1;
            let rendered = Arc::new(Rendered {
                seq: s.seq,
                kind,
                title,
                html,
            });
            s.last = Some(rendered.clone());
            s.published = version;
            // A full queue is a client that does not keep up: dropped
            // (its stream ends), never waited for.
            s.clients.retain(|c| c.try_send(rendered.clone()).is_ok());
            let stopped = s.stopped;
            drop(s);
            self.changed.notify_all();
            if stopped {
                return;
            }
        }
    }

    /// Waits until every update so far is rendered and sent (at most
    /// `bound`).
    pub(crate) fn flush(&self, bound: Duration) {
        let until = Instant::now() + bound;
        let mut s = self.state();
        while s.published < s.version && !s.stopped {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Stops the publisher and ends every client's stream (each sends
    /// what its queue holds first).
    pub(crate) fn stop(&self) {
        let mut s = self.state();
        s.stopped = true;
        s.clients.clear();
        drop(s);
        self.changed.notify_all();
    }

    /// Clients connected to the events.
    #[cfg(test)]
    pub(crate) fn clients(&self) -> usize {
        self.state().clients.len()
    }
}

/// The chart point of one interval.
fn point(at: f64, spec: &IntervalSpec, tally: &Tally, record: &IntervalRecord) -> Point {
    let all = tally.all_ops();
    let seconds = (spec.end - spec.start).as_secs_f64().max(f64::MIN_POSITIVE);
    let served = !all.response.is_empty();
    let latency = served.then(|| LatencySummary::of(&all.response));
    let mut resources = Vec::new();
    if let Some(host) = &record.host {
        let cpus = host.cpus.len().max(1) as f64;
        if let Some(cpu) = &host.cpu {
            resources.push(("host cpu".to_string(), cpu.busy()));
        }
        for p in &host.processes {
            resources.push((
                format!("{} cpu", p.label),
                (p.cpu_user + p.cpu_system) / cpus,
            ));
        }
    }
    for probe in &record.probes {
        if let Some(cpu) = probe.sample.as_ref().and_then(|s| s.cpu.as_ref()) {
            resources.push((format!("{} cpu", probe.source), cpu.busy()));
        }
    }
    Point {
        at,
        throughput: all.completed() as f64 / seconds,
        p50: latency.as_ref().map(|l| l.p50.as_secs_f64()),
        p95: latency.as_ref().map(|l| l.p95.as_secs_f64()),
        p99: latency.as_ref().map(|l| l.p99.as_secs_f64()),
        errors: all.error_count() as f64 / seconds,
        resources,
    }
}

fn secs(d: Duration) -> String {
    format!("{}", d.as_secs_f64().round())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{OpTally, PackedTally};

    fn one_second(ops: u64) -> (IntervalSpec, Tally, IntervalRecord) {
        let mut tally = Tally::new(1);
        let mut op = OpTally::default();
        for i in 0..ops {
            op.ok += 1;
            op.response.record(100 + i).unwrap();
            op.service.record(50 + i).unwrap();
        }
        tally.ops[0] = op;
        let spec = IntervalSpec {
            phase: Phase::Measured,
            start: Duration::ZERO,
            end: Duration::from_secs(1),
        };
        let record = IntervalRecord {
            phase: Phase::Measured,
            start: Duration::ZERO,
            length: Duration::from_secs(1),
            tally: PackedTally::pack(&tally),
            db: None,
            host: None,
            probes: Vec::new(),
        };
        (spec, tally, record)
    }

    /// Every interval counts in the metrics; the page keeps at most
    /// MAX_POINTS of them, evenly spread over the whole run.
    #[test]
    fn intervals_count_whole_and_the_page_stays_bounded() {
        let live = Live::new("null".into(), "null".into(), 1);
        live.run_created("1".into(), vec!["noop".into()]);
        let schedule = Schedule {
            intervals: vec![IntervalSpec {
                phase: Phase::Measured,
                start: Duration::ZERO,
                end: Duration::from_secs(1),
            }],
        };
        live.step_started(0, Level::Users(4), &schedule);
        let (spec, tally, record) = one_second(3);
        let intervals = MAX_POINTS * 3 + 17;
        for _ in 0..intervals {
            live.interval(&spec, &tally, &record);
        }
        let (names, counts, gauges) = live.metrics();
        assert_eq!(names, vec!["noop".to_string()]);
        assert_eq!(counts.0[0].ok, 3 * intervals as u64);
        assert_eq!(counts.0[0].response.count, 3 * intervals as u64);
        assert_eq!((gauges.users, gauges.step, gauges.steps), (Some(4), 1, 1));
        let s = live.state();
        assert!(s.view.points.len() <= MAX_POINTS, "{}", s.view.points.len());
        assert!(s.view.points.len() >= MAX_POINTS / 2);
        assert_eq!(s.view.intervals, intervals as u64);
    }
}
