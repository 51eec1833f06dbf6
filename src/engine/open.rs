//! Open-loop load: each worker's dispatcher draws arrival times (Poisson
//! or evenly spaced) and releases each at its time into the worker's
//! queue; idle sessions take them in order. Latency counts from each
//! arrival's intended time, so a slow server cannot slow the generator down
//! and hide its own queueing (no coordinated omission). Arrivals beyond
//! `max_outstanding` queued or running are dropped and counted, never
//! delayed.
//!
//! The dispatcher waits on a timerfd(2) of its own, registered with the
//! worker's event loop, rather than on tokio's timer: tokio's ticks are
//! whole milliseconds, and paced by them every arrival would start up to
//! 1 ms late (a 60 µs operation would read as a 1 ms one). A timerfd fires
//! on the kernel's high-resolution timer without timer slack, on the
//! worker's own thread: no pacer thread, no channel and no cross-thread
//! wake-up per arrival. Every arrival already due when it wakes is released
//! at once; the `lag` column reports how late each was. At thousands of
//! arrivals a second per worker, a wake-up per arrival costs more CPU than
//! the requests: the slack (`plan::slack`) then sends, with the first
//! waiting arrival at its time, the arrivals due within a window after it,
//! each up to the window early and counted from when its session began it.

use super::state::WorkerState;
use crate::plan::load::exponential;
use crate::plan::Arrivals;
use crate::util::timer::Timer;
use crate::workload::Session;
use rand::rngs::SmallRng;
use std::rc::Rc;
use std::time::Duration;
use tokio::time::Instant;

/// The arrival process of one worker.
pub(super) struct ArrivalProcess {
    /// Arrivals per second.
    pub(crate) rate: f64,
    pub(crate) arrivals: Arrivals,
    /// Arrivals due within this of the first waiting one go out with it,
    /// early.
    pub(crate) slack: Duration,
    pub(crate) max_outstanding: u32,
    /// Intended time of the first arrival.
    pub(crate) first: Instant,
}

/// The longest the dispatcher sleeps before looking whether the step is over.
const POLL: Duration = Duration::from_millis(10);

/// Releases the worker's arrivals at their intended times until the step
/// stops.
pub(super) async fn dispatcher(
    state: Rc<WorkerState>,
    process: ArrivalProcess,
    timer: Timer,
    mut rng: SmallRng,
) {
    let mean_gap = crate::units::saturating_secs(1.0 / process.rate);
    // The first waiting arrival goes out at its time, and with it every
    // arrival due within the window after it: each up to the window early,
    // none late but by the timer's own latency.
    let window = process.slack;
    let mut next = process.first;
    loop {
        if state.stop.get() {
            return;
        }
        let now = Instant::now();
        if next > now {
            if timer.sleep_until(next.min(now + POLL)).await.is_err() {
                // A timer that fails ends the arrivals; the step's counts show it.
                return;
            }
            continue;
        }
        // Everything due goes to the queue at once; the sessions it wakes
        // run before the pacer sleeps again (a yield per arrival would cost
        // the event loop a poll of its own).
        let mut recorder = state.recorder.borrow_mut();
        let mut pending = state.pending.borrow_mut();
        while next <= now + window {
            recorder.record_lag(now.saturating_duration_since(next));
            let outstanding = pending.len() as u64 + u64::from(state.in_flight.get());
            if outstanding >= u64::from(process.max_outstanding) {
                recorder.record_drop();
            } else {
                // One sent ahead of its time counts from when its session
                // begins it (`Session::origin`), or from its time if it
                // waited for a session past that.
                pending.push_back(next);
                state.arrival.notify_one();
            }
            next += match process.arrivals {
                Arrivals::Poisson => exponential(mean_gap, &mut rng),
                Arrivals::Uniform => mean_gap,
            };
        }
    }
}

/// One session serving queued arrivals, one at a time
/// (session `slot` of the worker).
pub(super) async fn server<S: Session>(slot: usize, mut session: S, state: Rc<WorkerState>) {
    let mut timer = std::pin::pin!(state.timer(Instant::now()));
    loop {
        let intended = loop {
            if state.stop.get() {
                return;
            }
            let next = state.pending.borrow_mut().pop_front();
            if let Some(t) = next {
                break t;
            }
            state.arrival.notified().await;
        };
        state
            .run_op(slot, &mut session, intended, timer.as_mut())
            .await;
    }
}
