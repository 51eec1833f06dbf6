//! Open-loop load: a dispatcher draws arrival times (Poisson or evenly
//! spaced) and queues them; idle sessions take them in order. Latency counts
//! from each arrival's intended time, so a slow server cannot slow the
//! generator down and hide its own queueing (no coordinated omission).
//! Arrivals beyond `max_outstanding` queued or running are dropped and
//! counted, never delayed.

use super::worker::WorkerState;
use crate::plan::load::exponential;
use crate::plan::Arrivals;
use crate::workload::Session;
use rand::rngs::SmallRng;
use std::rc::Rc;
use std::time::Duration;
use tokio::time::Instant;

/// The arrival process of one worker.
pub(super) struct ArrivalProcess {
    /// Arrivals per second.
    pub rate: f64,
    pub arrivals: Arrivals,
    pub max_outstanding: u32,
    /// Intended time of the first arrival.
    pub first: Instant,
}

/// Queues arrivals at their intended times until the step stops.
pub(super) async fn dispatcher(state: Rc<WorkerState>, process: ArrivalProcess, mut rng: SmallRng) {
    let mean_gap = Duration::from_secs_f64(1.0 / process.rate);
    let mut next = process.first;
    loop {
        let now = Instant::now();
        if next > now {
            tokio::time::sleep_until(next).await;
        }
        if state.stop.get() {
            return;
        }
        let now = Instant::now();
        let outstanding = state.pending.borrow().len() as u64 + u64::from(state.in_flight.get());
        {
            let mut recorder = state.recorder.borrow_mut();
            recorder.record_lag(now.saturating_duration_since(next));
            if outstanding >= u64::from(process.max_outstanding) {
                recorder.record_drop();
            } else {
                state.pending.borrow_mut().push_back(next);
                state.arrival.notify_one();
            }
        }
        next += match process.arrivals {
            Arrivals::Poisson => exponential(mean_gap, &mut rng),
            Arrivals::Uniform => mean_gap,
        };
        if next <= now {
            // Behind schedule: let the sessions run between catch-up arrivals.
            tokio::task::yield_now().await;
        }
    }
}

/// One session serving queued arrivals, one at a time.
pub(super) async fn server<S: Session>(mut session: S, state: Rc<WorkerState>) {
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
        state.run_op(&mut session, intended).await;
    }
}
