//! One worker thread: a current-thread tokio runtime running its share of
//! the sessions, and a ticker that hands the worker's tally to the
//! coordinator at every interval boundary.

use super::schedule::Schedule;
use super::state::WorkerState;
use super::{batch, closed, open, polled};
use crate::measure::{Recorder, Tally};
use crate::plan::{Arrivals, ThinkTime};
use crate::workload::{Seat, Workload};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::time::Instant;

/// The load one worker offers.
#[derive(Debug, Clone, Copy)]
pub(super) enum WorkerLoad {
    Closed {
        think: ThinkTime,
    },
    Open {
        /// This worker's share of the arrival rate, per second.
        rate: f64,
        arrivals: Arrivals,
        /// Arrivals within a window this wide go out from one wake-up.
        slack: Duration,
        max_outstanding: u32,
        /// Offset of the first arrival (spreads uniform arrivals across workers).
        first_arrival: Duration,
    },
}

/// What one worker runs during a step.
pub(super) struct WorkerPlan {
    pub(crate) index: usize,
    /// This worker's number among every worker of the step, in every
    /// process offering part of it: its arrival process's stream.
    pub(crate) stream: u64,
    /// Virtual users (closed) or connections (open) of this worker.
    pub(crate) users: Vec<u32>,
    pub(crate) load: WorkerLoad,
    /// Seed of this step; each session and the arrival process derive theirs from it.
    pub(crate) seed: u64,
    pub(crate) schedule: Arc<Schedule>,
    pub(crate) timeout: Duration,
}

/// What a worker tells the coordinator.
pub(super) enum WorkerEvent {
    /// Every session is open; waiting for the start instant.
    Ready,
    /// A session could not be opened; the step cannot run.
    Failed(String),
    /// The server answered and refused a session because of its setting
    /// `setting` (an admission limit); the step cannot run.
    Refused {
        reason: String,
        setting: &'static str,
    },
    /// Worker `worker`'s tally of interval `index` (the index after the
    /// schedule's last is the drain).
    Interval {
        worker: usize,
        index: usize,
        /// Boxed: an event in the channel is as large as its largest kind.
        tally: Box<Tally>,
        length: Duration,
    },
    /// A generator stopped answering in the middle of the step: the step
    /// goes on without it (it reports nothing more, not even `Finished`).
    Lost { worker: usize, why: String },
    /// Operations still in flight when an interrupted worker stopped
    /// waiting for them: abandoned, their outcome unknown.
    Abandoned(u64),
    /// The worker has stopped and dropped its sessions.
    Finished,
}

/// Derives a seed for one stream (a session, an arrival process) of a step.
pub(super) fn stream_seed(step_seed: u64, stream: u64) -> u64 {
    // SplitMix64 finaliser: distinct streams get unrelated seeds.
    let mut z = step_seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Starts a worker thread.
pub(super) fn spawn<W: Workload>(
    workload: Arc<W>,
    plan: WorkerPlan,
    events: Sender<WorkerEvent>,
    start: Receiver<Option<Instant>>,
    interrupted: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("perflab-worker-{}", plan.index))
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = events.send(WorkerEvent::Failed(format!(
                        "cannot start a worker runtime: {e}"
                    )));
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(
                &runtime,
                run_worker(workload, plan, &events, start, interrupted),
            );
            // Dropping the runtime drops every session before we report.
            drop(local);
            drop(runtime);
            let _ = events.send(WorkerEvent::Finished);
        })
}

/// Returns once `flag` is set, looking every [`SIGNAL_LOOK`].
async fn until_set(flag: &AtomicBool) {
    while !flag.load(Ordering::Relaxed) {
        tokio::time::sleep(SIGNAL_LOOK).await;
    }
}

/// How often a worker opening its sessions looks for a signal.
const SIGNAL_LOOK: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs one worker's part of a step: opens its sessions, says ready,
/// waits for the start, sets its users (or its arrival process) going and
/// hands over its tally at every boundary.
async fn run_worker<W: Workload>(
    workload: Arc<W>,
    plan: WorkerPlan,
    events: &Sender<WorkerEvent>,
    start: Receiver<Option<Instant>>,
    interrupted: Arc<AtomicBool>,
) {
    let seat = seat(workload.as_ref(), &plan);
    // A session the server keeps waiting (a pool's queue) holds its
    // opening up to the look's deadline; the first signal ends it sooner.
    let opened = tokio::select! {
        opened = open_sessions(workload.as_ref(), &plan, seat) => opened,
        () = until_set(&interrupted) => {
            let _ = events.send(WorkerEvent::Failed("interrupted while the sessions opened".to_string()));
            return;
        }
    };
    let sessions = match opened {
        Ok(sessions) => sessions,
        Err((reason, Some(setting))) => {
            let _ = events.send(WorkerEvent::Refused { reason, setting });
            return;
        }
        Err((why, None)) => {
            let _ = events.send(WorkerEvent::Failed(why));
            return;
        }
    };
    if events.send(WorkerEvent::Ready).is_err() {
        return;
    }
    // Nothing else runs on this thread yet, so blocking here is harmless.
    let Ok(Some(start)) = start.recv() else {
        return;
    };
    let state = Rc::new(WorkerState::new(
        Recorder::new(workload.op_names().len()),
        plan.timeout,
        plan.users.len(),
    ));
    if let Err(why) = set_going(workload.as_ref(), sessions, &plan, &state, seat, start) {
        let _ = events.send(WorkerEvent::Failed(why));
        return;
    }
    ticker(
        &state,
        plan.index,
        &plan.schedule,
        start,
        events,
        &interrupted,
    )
    .await;
}

/// Where the worker's sessions run: a closed-loop user alone on the
/// thread holds its socket; closed-loop users with no think time sharing
/// it have their sockets polled by the worker's own loop when the
/// workload's sessions can ([`Workload::polls_sockets`]); others share
/// the runtime.
fn seat<W: Workload>(workload: &W, plan: &WorkerPlan) -> Seat {
    match plan.load {
        WorkerLoad::Closed { .. } if plan.users.len() == 1 => Seat::alone(plan.timeout),
        WorkerLoad::Closed { think } if think.mean().is_zero() && workload.polls_sockets() => {
            Seat::polled(plan.timeout)
        }
        _ => Seat::shared(plan.timeout),
    }
}

/// Opens the session of each of the worker's users, in order; why not
/// when one cannot be, and the server's setting that refused it when one
/// did.
async fn open_sessions<W: Workload>(
    workload: &W,
    plan: &WorkerPlan,
    seat: Seat,
) -> Result<Vec<(u32, W::Session)>, (String, Option<&'static str>)> {
    let mut sessions = Vec::with_capacity(plan.users.len());
    for &user in &plan.users {
        match workload
            .open_session(user, stream_seed(plan.seed, u64::from(user)), seat)
            .await
        {
            Ok(s) => sessions.push((user, s)),
            Err(e) => {
                let refused = crate::error::PlanError::refusal_in(&e);
                return Err((
                    format!("cannot open the session of user {user}: {e:#}"),
                    refused,
                ));
            }
        }
    }
    Ok(sessions)
}

/// Spawns the worker's load on its thread's task set, from `start`: one
/// loop for all users when the workload runs them so (closed, no think
/// time), else a task per user (closed), or a server per session and the
/// arrival dispatcher (open); why not when the arrival timer cannot be made.
fn set_going<W: Workload>(
    workload: &W,
    sessions: Vec<(u32, W::Session)>,
    plan: &WorkerPlan,
    state: &Rc<WorkerState>,
    seat: Seat,
    start: Instant,
) -> Result<(), String> {
    match plan.load {
        WorkerLoad::Closed { think } => {
            let sessions = if think.mean().is_zero() {
                let users: Vec<u32> = sessions.iter().map(|(user, _)| *user).collect();
                match workload.batch(sessions.into_iter().map(|(_, s)| s).collect()) {
                    Ok(users) => {
                        tokio::task::spawn_local(batch::run(users, state.clone(), start));
                        return Ok(());
                    }
                    Err(back) => users.into_iter().zip(back).collect(),
                }
            } else {
                sessions
            };
            let pace = closed::Pace {
                think,
                alone: seat.alone,
            };
            let users = sessions
                .into_iter()
                .enumerate()
                .map(|(slot, (user, session))| {
                    let rng =
                        SmallRng::seed_from_u64(stream_seed(plan.seed, u64::from(user) | 1 << 40));
                    let seated = closed::Seated { slot, session };
                    closed::user(seated, state.clone(), pace, rng, start)
                });
            if seat.polled {
                tokio::task::spawn_local(polled::run(users.collect(), state.clone()));
            } else {
                for user in users {
                    tokio::task::spawn_local(user);
                }
            }
        }
        WorkerLoad::Open {
            rate,
            arrivals,
            slack,
            max_outstanding,
            first_arrival,
        } => {
            for (slot, (_, session)) in sessions.into_iter().enumerate() {
                tokio::task::spawn_local(open::server(slot, session, state.clone()));
            }
            let rng = SmallRng::seed_from_u64(stream_seed(plan.seed, plan.stream | 1 << 41));
            let process = open::ArrivalProcess {
                rate,
                arrivals,
                slack,
                max_outstanding,
                first: start + first_arrival,
            };
            let timer = crate::util::timer::Timer::new()
                .map_err(|e| format!("cannot create the arrival timer (timerfd): {e}"))?;
            tokio::task::spawn_local(open::dispatcher(state.clone(), process, timer, rng));
        }
    }
    Ok(())
}

/// Hands over the tally at every boundary, then stops the sessions and
/// waits (at most the timeout) for operations still running. The last
/// interval handed over — the window's last, or the one an interrupt ends
/// — counts every operation still in flight or queued as unfinished: it
/// belongs to the step, and what becomes of it in the drain (a timeout
/// above all) is the step's too.
async fn ticker(
    state: &WorkerState,
    worker: usize,
    schedule: &Schedule,
    start: Instant,
    events: &Sender<WorkerEvent>,
    interrupted: &AtomicBool,
) {
    let last = schedule.intervals.len().saturating_sub(1);
    for (index, spec) in schedule.intervals.iter().enumerate() {
        state.next_boundary.set(start + spec.end);
        tokio::time::sleep_until(start + spec.end).await;
        let mut tally = state.recorder.borrow_mut().take();
        let ends = index == last || interrupted.load(Ordering::Relaxed);
        if ends {
            // Nothing starts from here; what runs or waits is counted now.
            state.stop.set(true);
            state.census(&mut tally);
        }
        let length = spec.end - spec.start;
        if events
            .send(WorkerEvent::Interval {
                worker,
                index,
                tally: Box::new(tally),
                length,
            })
            .is_err()
            || ends
        {
            break;
        }
    }
    state.stop.set(true);
    state.next_boundary.set(Instant::now());
    state.arrival.notify_waiters();
    // Operations still running may finish within their timeout; once the
    // user has asked to stop, within a short grace only, and the rest are
    // abandoned (the signal must end the run at once, not in --timeout).
    let drain_start = Instant::now();
    let mut deadline = drain_start + state.timeout + Duration::from_millis(100);
    let mut stopping = false;
    while state.in_flight.get() > 0 && Instant::now() < deadline {
        if !stopping && interrupted.load(Ordering::Relaxed) {
            stopping = true;
            deadline = deadline.min(Instant::now() + INTERRUPTED_DRAIN);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let tally = state.recorder.borrow_mut().take();
    let _ = events.send(WorkerEvent::Interval {
        worker,
        index: schedule.intervals.len(),
        tally: Box::new(tally),
        length: drain_start.elapsed(),
    });
    let left = state.in_flight.get();
    if left > 0 && interrupted.load(Ordering::Relaxed) {
        let _ = events.send(WorkerEvent::Abandoned(u64::from(left)));
    }
}

/// How long an interrupted worker waits for the operations in flight.
const INTERRUPTED_DRAIN: Duration = Duration::from_millis(300);
