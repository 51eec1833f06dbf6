//! The state one worker's tasks share — its recorder, the stop flag, the
//! operations in flight and the open loop's queue of arrivals — and the one
//! way they run an operation. Single-threaded (`Cell`, `RefCell`): only the
//! tasks of one worker's runtime touch it, so the hot path takes no lock.

use crate::measure::{ErrorKind, Outcome, Recorder};
use crate::workload::Session;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// State shared by the tasks of one worker (and only them).
pub(super) struct WorkerState {
    pub recorder: RefCell<Recorder>,
    /// Set when the measured window is over: no new operation starts.
    pub stop: Cell<bool>,
    /// Operations started and not yet ended.
    pub in_flight: Cell<u32>,
    /// Open loop: intended start times of arrivals waiting for a session.
    pub pending: RefCell<VecDeque<Instant>>,
    /// Open loop: wakes an idle session when an arrival is queued.
    pub arrival: Notify,
    pub timeout: Duration,
    /// The ticker's next hand-over: a user alone on the thread whose
    /// operations never wait yields only once it has passed.
    pub next_boundary: Cell<Instant>,
}

impl WorkerState {
    /// A worker's state before its first operation: nothing in flight or
    /// queued; an operation slower than `timeout` is an error of kind timeout.
    pub fn new(recorder: Recorder, timeout: Duration) -> Self {
        WorkerState {
            recorder: RefCell::new(recorder),
            stop: Cell::new(false),
            in_flight: Cell::new(0),
            pending: RefCell::new(VecDeque::new()),
            arrival: Notify::new(),
            timeout,
            next_boundary: Cell::new(Instant::now()),
        }
    }

    /// Runs one operation, bounded by the timeout, and records it. Returns
    /// when it ended, and whether it waited (gave this thread's other tasks
    /// their turn) on the way.
    pub async fn run_op<S: Session>(&self, session: &mut S, intended: Instant) -> Ran {
        let op = session.choose();
        self.in_flight.set(self.in_flight.get() + 1);
        let began = Instant::now();
        let mut waited = false;
        let mut bounded = std::pin::pin!(tokio::time::timeout(self.timeout, session.execute(op)));
        let outcome = std::future::poll_fn(|cx| {
            let polled = bounded.as_mut().poll(cx);
            waited |= polled.is_pending();
            polled
        })
        .await
        .unwrap_or_else(|_| Outcome::error(ErrorKind::Timeout));
        let ended = Instant::now();
        self.in_flight.set(self.in_flight.get() - 1);
        self.recorder.borrow_mut().record(
            op,
            &outcome,
            ended - began,
            ended.saturating_duration_since(intended),
        );
        Ran { ended, waited }
    }
}

/// How one operation went, for its user's scheduling.
pub(super) struct Ran {
    /// When it ended.
    pub ended: Instant,
    /// It returned to the runtime at least once (waited on its socket, a
    /// timer, a thread), so the worker's other tasks had their turn.
    pub waited: bool,
}
