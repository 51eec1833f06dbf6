//! The state one worker's tasks share — its recorder, the stop flag, the
//! operations in flight and the open loop's queue of arrivals — and the one
//! way they run an operation. Single-threaded (`Cell`, `RefCell`): only the
//! tasks of one worker's runtime touch it, so the hot path takes no lock.

use crate::measure::{ErrorKind, Outcome, Recorder, Tally};
use crate::workload::Session;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

/// How much later than the operation's deadline the deadline of a socket
/// that the thread's loop waits on may be, for the loop to end the
/// operation in place of the timer: the socket's deadline runs from the
/// operation's start as the session saw it, microseconds later.
const SOCKET_SLACK: std::time::Duration = std::time::Duration::from_millis(1);

/// State shared by the tasks of one worker (and only them).
pub(super) struct WorkerState {
    pub(crate) recorder: RefCell<Recorder>,
    /// Set when the measured window is over: no new operation starts.
    pub(crate) stop: Cell<bool>,
    /// Operations started and not yet ended.
    pub(crate) in_flight: Cell<u32>,
    /// Per user (or session) of the worker, the intended start of its
    /// operation in flight: what the window's end counts as unfinished.
    flights: Box<[Cell<Option<Instant>>]>,
    /// Open loop: intended start times of arrivals waiting for a session.
    pub(crate) pending: RefCell<VecDeque<Instant>>,
    /// Open loop: wakes an idle session when an arrival is queued.
    pub(crate) arrival: Notify,
    pub(crate) timeout: Duration,
    /// The ticker's next hand-over: a user alone on the thread whose
    /// operations never wait yields only once it has passed.
    pub(crate) next_boundary: Cell<Instant>,
}

impl WorkerState {
    /// A worker's state before its first operation: nothing in flight or
    /// queued; `users` users (or sessions), numbered from 0, whose
    /// operations slower than `timeout` are errors of kind timeout.
    pub(crate) fn new(recorder: Recorder, timeout: Duration, users: usize) -> Self {
        WorkerState {
            recorder: RefCell::new(recorder),
            stop: Cell::new(false),
            in_flight: Cell::new(0),
            flights: (0..users).map(|_| Cell::new(None)).collect(),
            pending: RefCell::new(VecDeque::new()),
            arrival: Notify::new(),
            timeout,
            next_boundary: Cell::new(Instant::now()),
        }
    }

    /// Runs one operation, bounded by the timeout, and records it. Returns
    /// when it ended, and whether it waited (gave this thread's other tasks
    /// their turn) on the way.
    ///
    /// `timer` is the calling task's one timer (see [`Self::timer`]). It is
    /// set to some deadline no later than this operation's (an earlier
    /// operation's, or this one's) and moved only when it fires before
    /// this operation's deadline: a task's timer is re-armed about once
    /// per timeout, not once per operation as a fresh `tokio::time::timeout`
    /// would be (an insertion into and a removal from the runtime's timer
    /// wheel, and clock reads, around every operation).
    pub(crate) async fn run_op<S: Session>(
        &self,
        user: usize,
        session: &mut S,
        intended: Instant,
        mut timer: Pin<&mut Sleep>,
    ) -> Ran {
        let op = session.choose();
        session.intended(intended);
        self.in_flight.set(self.in_flight.get() + 1);
        let began = Instant::now();
        let origin = session.origin(intended, began);
        self.flying(user, Some(origin));
        let due = began + self.timeout;
        let mut waited = false;
        let outcome = {
            let mut execute = std::pin::pin!(session.execute(op));
            std::future::poll_fn(|cx| {
                if let Poll::Ready(outcome) = execute.as_mut().poll(cx) {
                    return Poll::Ready(outcome);
                }
                waited = true;
                // A socket the thread's loop waits on until this deadline
                // (its poll's timeout is whole milliseconds): the loop
                // ends the operation then, and the timer is left as it is.
                if crate::util::poller::socket_waits_by((due + SOCKET_SLACK).into_std()) {
                    return Poll::Pending;
                }
                while timer.as_mut().poll(cx).is_ready() {
                    if Instant::now() >= due {
                        return Poll::Ready(Outcome::error(ErrorKind::Timeout));
                    }
                    timer.as_mut().reset(due);
                }
                Poll::Pending
            })
            .await
        };
        let ended = Instant::now();
        self.in_flight.set(self.in_flight.get() - 1);
        self.flying(user, None);
        // A modelled server's own end, when it came no later than now.
        let replied = session.replied().filter(|at| *at <= ended).unwrap_or(ended);
        self.recorder.borrow_mut().record(
            op,
            &outcome,
            replied.saturating_duration_since(began),
            replied.saturating_duration_since(origin),
        );
        Ran {
            ended,
            replied,
            waited,
        }
    }

    /// Marks user `user`'s operation intended at `intended` as in flight,
    /// or (none) ended.
    pub(crate) fn flying(&self, user: usize, intended: Option<Instant>) {
        if let Some(flight) = self.flights.get(user) {
            flight.set(intended);
        }
    }

    /// Counts into `tally` — the last the worker hands over — every
    /// operation still in flight and every arrival still queued, each with
    /// its time so far: the window ends, and what it held is its own.
    pub(crate) fn census(&self, tally: &mut Tally) {
        let now = Instant::now();
        let flying = self.flights.iter().filter_map(Cell::get);
        for intended in flying.chain(self.pending.borrow().iter().copied()) {
            tally.record_unfinished(now.saturating_duration_since(intended));
        }
    }

    /// A task's timer for [`Self::run_op`], set to the deadline of an
    /// operation that starts at `start` (no operation starts earlier).
    pub(crate) fn timer(&self, start: Instant) -> Sleep {
        tokio::time::sleep_until(start + self.timeout)
    }
}

/// How one operation went, for its user's scheduling.
pub(super) struct Ran {
    /// When it ended.
    pub(crate) ended: Instant,
    /// When its reply came: when it ended, or earlier by a modelled
    /// server's own clock ([`Session::replied`]).
    pub(crate) replied: Instant,
    /// It returned to the runtime at least once (waited on its socket, a
    /// timer, a thread), so the worker's other tasks had their turn.
    pub(crate) waited: bool,
}

#[cfg(test)]
mod tests {
    use super::{Ran, WorkerState};
    use crate::measure::{Outcome, Recorder};
    use crate::workload::Session;
    use std::time::Duration;
    use tokio::time::Instant;

    /// A session whose operations take the given times, in turn.
    struct Timed(std::vec::IntoIter<Duration>);

    impl Session for Timed {
        fn choose(&mut self) -> usize {
            0
        }

        async fn execute(&mut self, _op: usize) -> Outcome {
            tokio::time::sleep(self.0.next().unwrap_or_default()).await;
            Outcome::ok()
        }
    }

    const MS: Duration = Duration::from_millis(1);

    /// One task's operations share one timer, set by the first: each still
    /// ends at its own deadline (the timeout from its own start), whether
    /// the timer was set for it or for an earlier one.
    #[tokio::test(start_paused = true)]
    async fn each_operation_is_bounded_by_its_own_deadline() {
        let state = WorkerState::new(Recorder::new(1), 100 * MS, 1);
        let start = Instant::now();
        let mut timer = std::pin::pin!(state.timer(start));
        let mut session = Timed(
            vec![
                60 * MS,
                3_600_000 * MS,
                99 * MS,
                101 * MS,
                250 * MS,
                10 * MS,
            ]
            .into_iter(),
        );
        let mut took = Vec::new();
        let mut began = start;
        for _ in 0..6 {
            let Ran { ended, waited, .. } =
                state.run_op(0, &mut session, began, timer.as_mut()).await;
            assert!(waited);
            took.push(ended - began);
            began = ended;
        }
        // The clock is paused and moves only to the next timer, at whole
        // milliseconds: the times are exact to a millisecond.
        let expected = [60, 100, 99, 100, 100, 10].map(|ms: u32| ms * MS);
        for (i, expected) in expected.into_iter().enumerate() {
            assert!(
                took[i].abs_diff(expected) <= MS,
                "operation {i} took {:?} where {expected:?} was due (all: {took:?})",
                took[i]
            );
        }
        let tally = state.recorder.borrow_mut().take();
        assert_eq!(tally.ops[0].ok, 3);
        assert_eq!(tally.ops[0].error_count(), 3);
    }

    /// A session that models its server: it sleeps `sleep` but says its
    /// reply came `said` after it began (none: says nothing).
    struct Modelled {
        sleep: Duration,
        said: Option<Duration>,
        began: Option<Instant>,
    }

    impl Session for Modelled {
        fn choose(&mut self) -> usize {
            0
        }

        async fn execute(&mut self, _op: usize) -> Outcome {
            self.began = Some(Instant::now());
            tokio::time::sleep(self.sleep).await;
            Outcome::ok()
        }

        fn replied(&self) -> Option<Instant> {
            Some(self.began? + self.said?)
        }
    }

    /// The response time ends where a modelled server says its reply came
    /// (the generator's wake-up after it is not the server's), and where
    /// `execute` returned when the server says nothing or names an instant
    /// still to come.
    #[tokio::test(start_paused = true)]
    async fn a_modelled_server_ends_the_response_at_its_own_reply() {
        let cases = [
            (Some(5 * MS), 5_000.0),
            (None, 20_000.0),
            (Some(30 * MS), 20_000.0),
        ];
        for (said, expected_us) in cases {
            let state = WorkerState::new(Recorder::new(1), 100 * MS, 1);
            let start = Instant::now();
            let mut timer = std::pin::pin!(state.timer(start));
            let mut session = Modelled {
                sleep: 20 * MS,
                said,
                began: None,
            };
            state.run_op(0, &mut session, start, timer.as_mut()).await;
            let tally = state.recorder.borrow_mut().take();
            let mean = tally.ops[0].response.mean();
            assert!(
                (mean - expected_us).abs() < 1_000.0,
                "said {said:?}: {mean} µs where {expected_us} was due"
            );
        }
    }

    /// The census counts each user's operation in flight and each arrival
    /// still queued, with its time so far, and nothing that ended.
    #[tokio::test(start_paused = true)]
    async fn the_census_counts_what_runs_and_what_waits() {
        let state = WorkerState::new(Recorder::new(1), 100 * MS, 3);
        let start = Instant::now();
        state.flying(0, Some(start));
        state.flying(2, Some(start));
        state.flying(2, None);
        state.flying(7, Some(start));
        state.pending.borrow_mut().push_back(start + 10 * MS);
        tokio::time::sleep(40 * MS).await;
        let mut tally = Recorder::new(1).take();
        state.census(&mut tally);
        assert_eq!(tally.unfinished.len(), 2);
        let (min, max) = (tally.unfinished.min(), tally.unfinished.max());
        assert!(
            min.abs_diff(30_000) <= 1_000 && max.abs_diff(40_000) <= 1_000,
            "{min} {max}"
        );
    }

    /// A session whose operations retry: each try takes 4 ms with a 2 ms
    /// back-off after a failed one; every third operation fails after
    /// five tries, the others succeed at their first, second or third.
    struct Retrying {
        n: u32,
    }

    impl Session for Retrying {
        fn choose(&mut self) -> usize {
            0
        }

        async fn execute(&mut self, _op: usize) -> Outcome {
            self.n += 1;
            let (tries, fails) = if self.n % 3 == 0 {
                (5, true)
            } else {
                (self.n % 3, false)
            };
            for t in 0..tries {
                if t > 0 {
                    tokio::time::sleep(2 * MS).await;
                }
                tokio::time::sleep(4 * MS).await;
            }
            let mut outcome = if fails {
                Outcome::error(crate::measure::ErrorKind::Busy)
            } else {
                Outcome::ok()
            };
            outcome.retries = tries - 1;
            outcome
        }
    }

    /// One user whose operations are retried, a third of them in vain,
    /// for 3 s: the users' time in served operations and in failed ones
    /// (every try and back-off) adds up to the one user — Little's law
    /// X·R + F/T = N holds by construction.
    #[tokio::test(start_paused = true)]
    async fn retried_and_failed_operations_keep_their_users_time() {
        let state = WorkerState::new(Recorder::new(1), 10_000 * MS, 1);
        let start = Instant::now();
        let mut timer = std::pin::pin!(state.timer(start));
        let mut session = Retrying { n: 0 };
        let mut began = start;
        while began - start < 3_000 * MS {
            let Ran { ended, .. } = state.run_op(0, &mut session, began, timer.as_mut()).await;
            began = ended;
        }
        let window = (began - start).as_secs_f64();
        let tally = state.recorder.borrow_mut().take();
        let op = &tally.ops[0];
        assert!(op.error_count() > 0 && op.retries > op.completed());
        let x = op.completed() as f64 / window;
        let r = op.response.mean() / 1e6;
        let implied = x * r + op.failed_time.as_secs_f64() / window;
        assert!(
            (implied - 1.0).abs() < 0.01,
            "X·R + F/T = {implied:.3} (X {x:.1}/s, R {r:.4}s, failed {:?})",
            op.failed_time
        );
    }
}
