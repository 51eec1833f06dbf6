//! The coordinator's side of a step run on generators (`perflab run …
//! --generators`): each generator is one worker of the step's crew. A
//! thread per generator prepares its share (the generator opens its
//! sessions), says ready, turns the crew's start instant into a time by
//! the generator's clock (corrected by the offset measured at connect),
//! and then hands over the generator's intervals as it reads them, so
//! the crew merges them exactly as it merges local workers' — histograms
//! added, never averaged — and the observer stores the same records a
//! local run stores.
//!
//! The clock offset is NTP's: over several round trips of `GET
//! /v1/clock`, the one with the least delay gives offset = remote −
//! (sent + received) / 2, with an error of at most half that delay.

use super::crew::Crew;
use super::schedule::Schedule;
use super::share::{Share, ShareEvent};
use super::worker::WorkerEvent;
use crate::error::PlanError;
use crate::measure::{PackedTally, Phase, StepSummary, Tally};
use crate::probe::agent_client::{AgentClient, Hello};
use crate::probe::counters::CpuSample;
use crate::probe::SelfUsage;
use crate::record::{GeneratorStep, IntervalUsage};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// Round trips asked to estimate a generator's clock offset.
const CLOCK_SAMPLES: usize = 8;

/// How long a prepare may take (the generator opens every session).
const PREPARE_TIMEOUT: Duration = Duration::from_secs(150);

/// A generator reached and checked.
pub(crate) struct GeneratorPeer {
    client: AgentClient,
    /// Its clock minus ours, ns.
    pub(crate) offset_ns: i128,
    /// The round trip the offset was read from, ns.
    pub(crate) delay_ns: u128,
}

impl GeneratorPeer {
    /// [`GeneratorPeer::connect`], asking again for up to `wait` while
    /// the generator does not answer (its name does not resolve yet, its
    /// port is closed): pods of a Job come up in their own time. A
    /// generator that answers wrong (token, certificate, version) is not
    /// waited for.
    pub(crate) fn connect_within(
        client: AgentClient,
        workload: &str,
        wait: Duration,
    ) -> Result<Self, PlanError> {
        let deadline = std::time::Instant::now() + wait;
        let hello = loop {
            match client.get_json::<Hello>("/v1/hello") {
                Err(e) if !e.is::<PlanError>() && std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_secs(1));
                }
                answer => break answer,
            }
        };
        let name = client.name().to_string();
        let failed = |e: anyhow::Error| {
            match e.downcast::<PlanError>() {
            Ok(plan) => plan,
            Err(e) => PlanError::new(format!(
                "the generator {name} does not answer: {}; start `perflab agent --generate` there, or drop it from --generators",
                crate::util::one_line(&format!("{e:#}"))
            )),
        }
        };
        let hello = hello.map_err(failed)?;
        let ours = env!("CARGO_PKG_VERSION");
        if hello.version != ours {
            return Err(PlanError::new(format!(
                "the generator {name} runs perflab {} and this is {ours}; run one version everywhere",
                hello.version
            )));
        }
        if !hello.roles.iter().any(|r| r == "generate") {
            return Err(PlanError::new(format!(
                "the agent at {name} is not a generator; start it with --generate"
            )));
        }
        if !hello.workloads.iter().any(|w| w == workload) {
            return Err(PlanError::new(format!(
                "the generator {name} does not run the {workload} workload (it runs {})",
                if hello.workloads.is_empty() {
                    "none".to_string()
                } else {
                    hello.workloads.join(", ")
                }
            )));
        }
        let mut best: Option<(u128, i128)> = None;
        for _ in 0..CLOCK_SAMPLES {
            #[derive(serde::Deserialize)]
            struct Clock {
                unix_ns: u128,
            }
            let sent = unix_ns();
            let clock: Clock = client.get_json("/v1/clock").map_err(failed)?;
            let received = unix_ns();
            let delay = received.saturating_sub(sent);
            let offset = clock.unix_ns as i128 - ((sent + received) / 2) as i128;
            if best.is_none_or(|(d, _)| delay < d) {
                best = Some((delay, offset));
            }
        }
        let (delay_ns, offset_ns) = best.unwrap_or((0, 0));
        Ok(GeneratorPeer {
            client,
            offset_ns,
            delay_ns,
        })
    }

    /// The generator as given: `agent://HOST:PORT`.
    pub(crate) fn name(&self) -> &str {
        self.client.name()
    }
}

/// The run's generators and what they build the workload from.
#[derive(Clone)]
pub struct Generators {
    pub(crate) peers: Vec<Arc<GeneratorPeer>>,
    /// The workload's name and its form (`Workload::generator_form`).
    pub(crate) workload: String,
    pub(crate) form: serde_json::Value,
}

impl Generators {
    /// How far ahead the step's start is set, so that the start reaches
    /// every generator before it comes, on a busy host too: 50 ms, and
    /// four times the slowest round trip measured at connect, at most
    /// 2 s. A start that arrives after its time begins at once, late by
    /// the difference (the generators' table shows each one's start).
    pub(crate) fn start_lead(&self) -> Duration {
        let slowest = self.peers.iter().map(|p| p.delay_ns).max().unwrap_or(0);
        let four =
            Duration::from_nanos(u64::try_from(slowest.saturating_mul(4)).unwrap_or(u64::MAX));
        (Duration::from_millis(50) + four).min(Duration::from_secs(2))
    }
}

fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The crew of a step on generators: one thread per generator, each a
/// worker to the crew. What each generator did is put in `reports`.
pub(super) fn spawn_crew(
    generators: &Generators,
    op_count: usize,
    shares: Vec<Share>,
    interrupted: &Arc<AtomicBool>,
    reports: &Arc<Mutex<Vec<GeneratorStep>>>,
) -> anyhow::Result<Crew> {
    let (events_tx, events) = mpsc::channel();
    let mut starters = Vec::new();
    let mut handles = Vec::new();
    for (worker, (peer, share)) in generators.peers.iter().zip(shares).enumerate() {
        let (start_tx, start_rx) = mpsc::channel();
        starters.push(start_tx);
        let prepare = serde_json::json!({
            "workload": generators.workload,
            "form": generators.form,
            "share": share,
        });
        let remote = Remote {
            worker,
            op_count,
            peer: peer.clone(),
            schedule: share.schedule(),
            events: events_tx.clone(),
            interrupted: interrupted.clone(),
            reports: reports.clone(),
        };
        handles.push(
            std::thread::Builder::new()
                .name("perflab-remote".to_string())
                .spawn(move || remote.run(&prepare, &start_rx))?,
        );
    }
    Ok(Crew::assemble(events, starters, handles, interrupted))
}

/// One generator as a worker of the crew.
struct Remote {
    /// Its number among the crew's workers.
    worker: usize,
    /// The workload's operation kinds: every tally must have as many.
    op_count: usize,
    peer: Arc<GeneratorPeer>,
    schedule: Schedule,
    events: Sender<WorkerEvent>,
    interrupted: Arc<AtomicBool>,
    reports: Arc<Mutex<Vec<GeneratorStep>>>,
}

impl Remote {
    fn failed(&self, why: impl std::fmt::Display) {
        let _ = self.events.send(WorkerEvent::Failed(format!(
            "generator {}: {why}",
            self.peer.name()
        )));
    }

    fn run(self, prepare: &serde_json::Value, start: &Receiver<Option<Instant>>) {
        let client = &self.peer.client;
        let prepared: anyhow::Result<serde_json::Value> =
            client.post_json("/v1/generate/prepare", prepare, PREPARE_TIMEOUT);
        if let Err(e) = prepared {
            return self.failed(crate::util::one_line(&format!("{e:#}")));
        }
        if self.events.send(WorkerEvent::Ready).is_err() {
            return;
        }
        let Ok(Some(at)) = start.recv() else {
            let _ = client.post_json::<serde_json::Value>(
                "/v1/generate/stop",
                &serde_json::json!({}),
                Duration::from_secs(5),
            );
            return;
        };
        // The start instant by our clock, then by the generator's.
        let ours = unix_ns() + at.saturating_duration_since(Instant::now()).as_nanos();
        let theirs = (ours as i128 + self.peer.offset_ns).max(0) as u128;
        let started: anyhow::Result<serde_json::Value> = client.post_json(
            "/v1/generate/start",
            &serde_json::json!({ "at_unix_ns": theirs }),
            Duration::from_secs(5),
        );
        let lost = match started {
            Ok(_) => self.follow(),
            Err(e) => {
                self.failed(crate::util::one_line(&format!("{e:#}")));
                false
            }
        };
        if !lost {
            let _ = self.events.send(WorkerEvent::Finished);
        }
    }

    /// Reads the generator's events until its share ends, handing each
    /// interval to the crew; true when the generator was lost on the way
    /// (said to the crew as [`WorkerEvent::Lost`]).
    fn follow(&self) -> bool {
        let mut state = Following::new(&self.schedule);
        loop {
            std::thread::sleep(state.poll);
            if self.interrupted.load(Ordering::Relaxed) && !state.stop_sent {
                state.stop_sent = self.ask_to_stop();
            }
            let read: anyhow::Result<EventPage> = self
                .peer
                .client
                .get_json(&format!("/v1/generate/events?since={}", state.since));
            let events = match read {
                Ok(e) => e.events,
                Err(e) => match self.unanswered(&state, &e) {
                    Followed::Going => continue,
                    followed => return followed == Followed::Lost,
                },
            };
            state.heard = std::time::Instant::now();
            for (n, event) in events {
                state.since = state.since.max(n);
                match self.on_event(&mut state, event) {
                    Followed::Going => {}
                    followed => return followed == Followed::Lost,
                }
            }
        }
    }

    /// Asks the generator to stop its share early (Ctrl-C); whether it heard.
    fn ask_to_stop(&self) -> bool {
        self.peer
            .client
            .post_json::<serde_json::Value>(
                "/v1/generate/stop",
                &serde_json::json!({}),
                Duration::from_secs(2),
            )
            .is_ok()
    }

    /// After a read of its events failed: the generator is lost once it
    /// has been silent too long (sooner when its host refuses the
    /// connection: its process is gone).
    fn unanswered(&self, state: &Following, error: &anyhow::Error) -> Followed {
        let said = crate::util::one_line(&format!("{error:#}"));
        let waited = if said.contains("refused") {
            state.refused_patience
        } else {
            state.patience
        };
        if state.heard.elapsed() <= waited {
            return Followed::Going;
        }
        let _ = self.events.send(WorkerEvent::Lost {
            worker: self.worker,
            why: format!(
                "generator {} lost: no answer for {}: {said}",
                self.peer.name(),
                crate::units::format_duration(state.heard.elapsed()),
            ),
        });
        Followed::Lost
    }

    /// Takes in one event of the generator's share.
    fn on_event(&self, state: &mut Following, event: ShareEvent) -> Followed {
        match event {
            ShareEvent::Interval {
                index,
                length,
                tally,
                usage,
            } => {
                if let Some(usage) = usage.filter(|_| index < self.schedule.intervals.len()) {
                    state.used.push(usage);
                }
                self.on_interval(state, index, length, tally)
            }
            ShareEvent::Finished {
                started_unix_ns,
                usage,
                host_cpu,
            } => {
                let report = self.report(state, started_unix_ns, usage, host_cpu);
                if let Ok(mut reports) = self.reports.lock() {
                    reports.push(report);
                }
                Followed::Ended
            }
            ShareEvent::Failed(why) => {
                self.failed(why);
                Followed::Ended
            }
            ShareEvent::Ready => Followed::Going,
        }
    }

    /// Checks an interval of the generator's, keeps it when measured, and
    /// hands it to the crew.
    fn on_interval(
        &self,
        state: &mut Following,
        index: usize,
        length: Duration,
        tally: PackedTally,
    ) -> Followed {
        let tally = match tally.unpack_checked() {
            Ok(t) if t.ops.len() != self.op_count => {
                self.failed(format!(
                    "sent an interval of {} operation kinds; this run has {}",
                    t.ops.len(),
                    self.op_count
                ));
                return Followed::Ended;
            }
            Ok(t) => t,
            Err(e) => {
                self.failed(format!("sent a damaged interval: {e}"));
                return Followed::Ended;
            }
        };
        if let Some(spec) = self
            .schedule
            .intervals
            .get(index)
            .filter(|i| i.phase == Phase::Measured)
        {
            match state.measured.as_mut() {
                Some(m) => m.merge(&tally),
                None => state.measured = Some(tally.clone()),
            }
            // The window it measured, as the crew counts it: a step cut
            // short by a signal or a loss divides by what ran, not by
            // the whole window planned.
            state.measured_length += spec.end - spec.start;
        }
        let sent = self.events.send(WorkerEvent::Interval {
            worker: self.worker,
            index,
            tally: Box::new(tally),
            length,
        });
        // A crew that stopped listening has ended the step.
        if sent.is_err() {
            Followed::Ended
        } else {
            Followed::Going
        }
    }

    /// What the generator did over the step, once its share finished.
    fn report(
        &self,
        state: &mut Following,
        started_unix_ns: u128,
        usage: SelfUsage,
        host_cpu: Option<CpuSample>,
    ) -> GeneratorStep {
        let summary = state
            .measured
            .as_ref()
            .map(|m| StepSummary::of(m, state.measured_length));
        GeneratorStep {
            generator: self.peer.name().to_string(),
            clock_offset: self.peer.offset_ns as f64 / 1e9,
            clock_delay: self.peer.delay_ns as f64 / 1e9,
            started: (started_unix_ns as i128 - self.peer.offset_ns) as f64 / 1e9,
            completed: summary.as_ref().map_or(0, |s| s.completed),
            errors: summary.as_ref().map_or(0, |s| s.errors),
            throughput: summary.as_ref().map_or(0.0, |s| s.throughput),
            p95: summary
                .as_ref()
                .map_or(0.0, |s| s.response.p95.as_secs_f64()),
            usage,
            host_busy: host_cpu.map(|c| c.busy()),
            host_steal: host_cpu.map(|c| c.steal),
            intervals: std::mem::take(&mut state.used),
        }
    }
}

/// A page of a generator's share events, each with its number.
#[derive(serde::Deserialize)]
struct EventPage {
    events: Vec<(u64, ShareEvent)>,
}

/// Where following a generator's share stands.
struct Following {
    /// How often its events are read.
    poll: Duration,
    /// A generator silent this long is lost.
    patience: Duration,
    /// … and one whose host refuses the connection, this long.
    refused_patience: Duration,
    /// The number of the last event read.
    since: u64,
    /// When it last answered.
    heard: std::time::Instant,
    /// Whether it heard the request to stop early.
    stop_sent: bool,
    /// Its measured intervals, merged.
    measured: Option<Tally>,
    /// The length of the measured intervals it sent.
    measured_length: Duration,
    /// Its own resource use per interval, as it reported it.
    used: Vec<IntervalUsage>,
}

impl Following {
    fn new(schedule: &Schedule) -> Self {
        let interval = schedule
            .intervals
            .first()
            .map_or(Duration::from_secs(1), |i| i.end - i.start);
        Following {
            poll: (interval / 4).clamp(Duration::from_millis(20), Duration::from_millis(250)),
            patience: (interval * 3).max(Duration::from_secs(5)),
            refused_patience: Duration::from_secs(1),
            since: 0,
            heard: std::time::Instant::now(),
            stop_sent: false,
            measured: None,
            measured_length: Duration::ZERO,
            used: Vec::new(),
        }
    }
}

/// What taking in a generator's answer came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Followed {
    /// Its share goes on: read again.
    Going,
    /// Its share ended: finished, failed, or the crew stopped listening.
    Ended,
    /// The generator was lost (said to the crew).
    Lost,
}
