//! Open-loop load: a pacer thread draws arrival times (Poisson or evenly
//! spaced) and releases each at its time; the worker's dispatcher queues
//! them and idle sessions take them in order. Latency counts from each
//! arrival's intended time, so a slow server cannot slow the generator down
//! and hide its own queueing (no coordinated omission). Arrivals beyond
//! `max_outstanding` queued or running are dropped and counted, never
//! delayed.
//!
//! The pacer is an OS thread because tokio's timer ticks in whole
//! milliseconds: paced by it, every arrival would start up to 1 ms late and
//! a 60 µs transaction would read as a 1 ms one. The pacer sleeps with the
//! kernel's high-resolution timer (timer slack set to 1 µs), so the
//! generator's own lag stays in the tens of microseconds; the `lag` column
//! reports it.

use super::state::WorkerState;
use crate::plan::load::exponential;
use crate::plan::Arrivals;
use crate::workload::Session;
use rand::rngs::SmallRng;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
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

/// The longest the pacer sleeps before looking whether the step is over.
const PACER_POLL: Duration = Duration::from_millis(10);

/// Starts the pacer thread; arrivals come out of the returned receiver at
/// their intended times. The pacer ends by itself once the receiver is gone.
pub(super) fn start_pacer(
    process: &ArrivalProcess,
    rng: SmallRng,
) -> std::io::Result<UnboundedReceiver<Instant>> {
    let (tx, rx) = unbounded_channel();
    let mean_gap = crate::units::saturating_secs(1.0 / process.rate);
    let arrivals = process.arrivals;
    let first = process.first.into_std();
    std::thread::Builder::new()
        .name("perflab-pacer".to_string())
        .spawn(move || pace(tx, first, mean_gap, arrivals, rng))?;
    Ok(rx)
}

fn pace(
    tx: UnboundedSender<Instant>,
    first: std::time::Instant,
    mean_gap: Duration,
    arrivals: Arrivals,
    mut rng: SmallRng,
) {
    // SAFETY: prctl(PR_SET_TIMERSLACK) changes only this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let mut next = first;
    loop {
        let now = std::time::Instant::now();
        if next > now {
            if tx.is_closed() {
                return;
            }
            std::thread::sleep((next - now).min(PACER_POLL));
            continue;
        }
        if tx.send(Instant::from_std(next)).is_err() {
            return;
        }
        next += match arrivals {
            Arrivals::Poisson => exponential(mean_gap, &mut rng),
            Arrivals::Uniform => mean_gap,
        };
    }
}

/// Queues the pacer's arrivals for the sessions until the step stops.
pub(super) async fn dispatcher(
    state: Rc<WorkerState>,
    mut arrivals: UnboundedReceiver<Instant>,
    max_outstanding: u32,
) {
    while let Some(intended) = arrivals.recv().await {
        if state.stop.get() {
            return;
        }
        let outstanding = state.pending.borrow().len() as u64 + u64::from(state.in_flight.get());
        let mut recorder = state.recorder.borrow_mut();
        recorder.record_lag(Instant::now().saturating_duration_since(intended));
        if outstanding >= u64::from(max_outstanding) {
            recorder.record_drop();
        } else {
            state.pending.borrow_mut().push_back(intended);
            state.arrival.notify_one();
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
