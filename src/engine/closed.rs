//! Closed-loop users: each runs one operation, thinks, and runs the next.
//! The next operation's intended start is the end of the last plus the think
//! time, so a user that wakes late is charged for it in response time.

use super::state::WorkerState;
use crate::plan::ThinkTime;
use crate::workload::Session;
use rand::rngs::SmallRng;
use rand::Rng;
use std::rc::Rc;
use tokio::time::Instant;

/// How a user runs on its worker.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pace {
    pub(crate) think: ThinkTime,
    /// No other user shares the worker's thread.
    pub(crate) alone: bool,
}

/// One virtual user on its worker: its number there, and its session.
pub(super) struct Seated<S> {
    pub(crate) slot: usize,
    pub(crate) session: S,
}

/// The life of one virtual user during a step.
pub(super) async fn user<S: Session>(
    seated: Seated<S>,
    state: Rc<WorkerState>,
    pace: Pace,
    mut rng: SmallRng,
    start: Instant,
) {
    let Seated { slot, mut session } = seated;
    let think = pace.think;
    // Users with think time start spread over one mean think time, not in lockstep.
    let stagger = think.mean().mul_f64(rng.gen::<f64>());
    let mut intended = start + stagger;
    tokio::time::sleep_until(intended).await;
    let mut timer = std::pin::pin!(state.timer(intended));
    while !state.stop.get() {
        let ran = state
            .run_op(slot, &mut session, intended, timer.as_mut())
            .await;
        let wait = think.sample(&mut rng) + session.pause();
        state.recorder.borrow_mut().record_think(wait);
        // The think time runs from the reply: a modelled server's reply
        // noticed late (a timer's wake-up) shortens no cycle of the user's,
        // and X·(R + Z) = N holds by the server's clock.
        intended = ran.replied + wait;
        if wait.is_zero() {
            // An operation that never waited (an embedded database, a held
            // socket, a null target) gave the thread's other tasks no turn:
            // give them one, or, alone on the thread, give the ticker one
            // once its boundary has passed. An operation that waited gave
            // them their turn; a yield would cost a poll of the driver.
            let others_due = !pace.alone || ran.ended >= state.next_boundary.get();
            if !ran.waited && others_due {
                crate::util::poller::yield_now().await;
            }
        } else {
            tokio::time::sleep_until(intended).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::state::WorkerState;
    use super::{user, Pace, Seated};
    use crate::measure::{Outcome, Recorder};
    use crate::plan::ThinkTime;
    use crate::util::counting_alloc::allocations;
    use crate::workload::{Seat, Session, Workload};
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use std::cell::Cell;
    use std::future::Future;
    use std::rc::Rc;
    use std::time::Duration;
    use tokio::time::Instant;

    /// A user alone on its thread (its database socket held), and one
    /// that shares it (its socket driven by the runtime).
    const ALONE: Seat = Seat::alone(Duration::from_secs(10));
    const SHARED: Seat = Seat::shared(Duration::from_secs(10));

    /// No think time, other users beside.
    const SHARED_PACE: Pace = Pace {
        think: ThinkTime::Zero,
        alone: false,
    };

    /// A session that counts the operations it ran.
    struct Counted<S> {
        inner: S,
        done: Rc<Cell<u64>>,
    }

    impl<S: Session> Session for Counted<S> {
        fn choose(&mut self) -> usize {
            self.inner.choose()
        }

        fn intended(&mut self, at: tokio::time::Instant) {
            self.inner.intended(at);
        }

        fn replied(&self) -> Option<tokio::time::Instant> {
            self.inner.replied()
        }

        async fn execute(&mut self, op: usize) -> Outcome {
            let outcome = self.inner.execute(op).await;
            self.done.set(self.done.get() + 1);
            outcome
        }
    }

    /// Runs `future` on a LocalSet of a fresh current-thread runtime, as
    /// a worker runs its users.
    fn on_local<F: Future>(future: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, future)
    }

    /// Allocations per operation of one closed-loop user (seated as
    /// `seat` says, no think time) once warm, counted on this thread: the
    /// session, the task's timer around it and the recording of each
    /// operation.
    fn allocations_per_op<W: Workload>(workload: &W, seat: Seat) -> f64 {
        on_local(async {
            let done = Rc::new(Cell::new(0));
            let session = Counted {
                inner: workload.open_session(0, 1, seat).await.unwrap(),
                done: done.clone(),
            };
            // A fresh interval's histograms grow as its first slow values
            // arrive (a few times per interval, not per operation); grown
            // once here, what is left is the operation's own cost.
            let mut recorder = Recorder::new(workload.op_names().len());
            for op in 0..workload.op_names().len() {
                let slow = Duration::from_secs(60);
                recorder.record(op, &Outcome::ok(), slow, slow);
            }
            let state = Rc::new(WorkerState::new(recorder, Duration::from_secs(10), 1));
            let task = tokio::task::spawn_local(user(
                Seated { slot: 0, session },
                state.clone(),
                SHARED_PACE,
                SmallRng::seed_from_u64(1),
                Instant::now(),
            ));
            let until = async |n: u64| {
                while done.get() < n {
                    tokio::task::yield_now().await;
                }
            };
            until(500).await;
            let (before, from) = (allocations(), done.get());
            until(from + 3_000).await;
            let (after, to) = (allocations(), done.get());
            state.stop.set(true);
            task.await.unwrap();
            (after - before) as f64 / (to - from) as f64
        })
    }

    /// A session whose every operation waits once (returns to the
    /// runtime) or never does.
    struct Waits {
        waits: bool,
    }

    impl Session for Waits {
        fn choose(&mut self) -> usize {
            0
        }

        async fn execute(&mut self, _op: usize) -> Outcome {
            if self.waits {
                tokio::task::yield_now().await;
            }
            Outcome::ok()
        }
    }

    /// Spawns on this thread's LocalSet a closed-loop user of a session
    /// that waits once per operation or never: its operations done, the
    /// polls of its task, the task.
    fn spawn_counted(
        waits: bool,
        pace: Pace,
        state: &Rc<WorkerState>,
    ) -> (Rc<Cell<u64>>, Rc<Cell<u64>>, tokio::task::JoinHandle<()>) {
        let done = Rc::new(Cell::new(0));
        let session = Counted {
            inner: Waits { waits },
            done: done.clone(),
        };
        let mut task = Box::pin(user(
            Seated { slot: 0, session },
            state.clone(),
            pace,
            SmallRng::seed_from_u64(1),
            Instant::now(),
        ));
        let polls = Rc::new(Cell::new(0u64));
        let counted = polls.clone();
        let handle = tokio::task::spawn_local(async move {
            std::future::poll_fn(|cx| {
                counted.set(counted.get() + 1);
                task.as_mut().poll(cx)
            })
            .await
        });
        (done, polls, handle)
    }

    /// Polls of a closed-loop user's task per operation, and the turns
    /// another task of its thread had meanwhile.
    fn polls_per_op(waits: bool) -> (f64, u64) {
        on_local(async {
            let state = Rc::new(WorkerState::new(
                Recorder::new(1),
                Duration::from_secs(10),
                1,
            ));
            let (done, polls, user) = spawn_counted(waits, SHARED_PACE, &state);
            let turns = Rc::new(Cell::new(0u64));
            let other = turns.clone();
            let neighbour = tokio::task::spawn_local(async move {
                loop {
                    other.set(other.get() + 1);
                    tokio::task::yield_now().await;
                }
            });
            while done.get() < 1_000 {
                tokio::task::yield_now().await;
            }
            state.stop.set(true);
            let (ops, at_stop) = (done.get(), polls.get());
            user.await.unwrap();
            neighbour.abort();
            (at_stop as f64 / ops as f64, turns.get())
        })
    }

    #[test]
    fn a_user_yields_after_an_operation_only_if_the_operation_never_waited() {
        // Waiting on its socket gave the thread's other tasks their turn:
        // one poll per operation, no extra pass through the runtime.
        let (polls, turns) = polls_per_op(true);
        assert!((0.99..1.01).contains(&polls), "{polls} polls per operation");
        assert!(turns >= 900, "the neighbour ran {turns} times");
        // An operation that never waited yields after it, so the
        // neighbour (the ticker, in a worker) still runs between them.
        let (polls, turns) = polls_per_op(false);
        assert!((0.99..1.01).contains(&polls), "{polls} polls per operation");
        assert!(turns >= 900, "the neighbour ran {turns} times");
    }

    #[test]
    fn a_user_alone_on_its_thread_yields_only_once_the_ticker_is_due() {
        on_local(async {
            let state = Rc::new(WorkerState::new(
                Recorder::new(1),
                Duration::from_secs(10),
                1,
            ));
            let boundary = Instant::now() + Duration::from_millis(20);
            state.next_boundary.set(boundary);
            let pace = Pace {
                think: ThinkTime::Zero,
                alone: true,
            };
            let (done, polls, user) = spawn_counted(false, pace, &state);
            // The user's first turn runs operations, never yielding, until
            // the boundary has passed.
            while done.get() == 0 {
                tokio::task::yield_now().await;
            }
            assert!(
                Instant::now() >= boundary,
                "the user yielded before the boundary"
            );
            // Its first poll waited for the start instant; its second ran.
            assert_eq!(polls.get(), 2, "the user yielded before the boundary");
            let first_turn = done.get();
            assert!(first_turn > 1, "{first_turn} operations in the first turn");
            // Past it, the user yields after every operation until the
            // ticker (here this test) moves the boundary on.
            let (from, polled) = (done.get(), polls.get());
            while done.get() < from + 100 {
                tokio::task::yield_now().await;
            }
            let per = (polls.get() - polled) as f64 / (done.get() - from) as f64;
            assert!((0.99..1.01).contains(&per), "{per} polls per operation");
            state.stop.set(true);
            user.await.unwrap();
        })
    }

    #[test]
    fn a_null_users_operation_allocates_nothing() {
        let null = crate::workload::null::NullWorkload::new(Duration::ZERO, None);
        assert_eq!(allocations_per_op(&null, ALONE), 0.0);
    }

    #[test]
    fn a_postgres_users_transaction_allocates_nothing() {
        use crate::sut::managed::postgres::ManagedPostgres;
        use crate::workload::bank::{mix::BankMix, mix::Isolation, postgres::PgBank, BankWorkload};
        // Commits that wait on no flush: what perflab allocates does not
        // change with them, and 28,000 transactions take seconds, not half
        // a minute.
        let options = crate::sut::managed::ServerOptions {
            settings: vec![("synchronous_commit".into(), "off".into())],
            ..Default::default()
        };
        let pg = ManagedPostgres::start(&options).unwrap();
        let target = crate::sut::postgres::resolve(&pg.url(), &|_| None, None).unwrap();
        for (mix, pipeline) in [
            (BankMix::Tpcb, false),
            (BankMix::Tpcb, true),
            (BankMix::Atm(Default::default()), false),
            (BankMix::Atm(Default::default()), true),
        ] {
            let isolation = Isolation::ReadCommitted;
            let (bank, _) =
                PgBank::prepare(target.clone(), 1, mix, false, isolation, 10, pipeline).unwrap();
            let workload = BankWorkload::new(bank, mix, 1).unwrap();
            for seat in [ALONE, SHARED] {
                let per = allocations_per_op(&workload, seat);
                assert_eq!(
                    per, 0.0,
                    "{mix:?} pipeline {pipeline} {seat:?}: {per} allocations per transaction"
                );
            }
        }
    }

    #[test]
    fn a_mariadb_users_transaction_allocates_nothing() {
        use crate::sut::managed::mariadb::ManagedMariadb;
        use crate::workload::bank::{mix::BankMix, mix::Isolation, mysql::MyBank, BankWorkload};
        // Commits that wait on no flush, as for PostgreSQL above.
        let options = crate::sut::managed::ServerOptions {
            settings: vec![("innodb_flush_log_at_trx_commit".into(), "0".into())],
            ..Default::default()
        };
        let server = ManagedMariadb::start(&options).unwrap();
        for mix in [BankMix::Tpcb, BankMix::Atm(Default::default())] {
            let isolation = Isolation::ReadCommitted;
            let (bank, _) =
                MyBank::prepare(server.target().unwrap(), 1, mix, false, isolation, 10).unwrap();
            let workload = BankWorkload::new(bank, mix, 1).unwrap();
            for seat in [ALONE, SHARED] {
                let per = allocations_per_op(&workload, seat);
                assert_eq!(
                    per, 0.0,
                    "{mix:?} {seat:?}: {per} allocations per transaction"
                );
            }
        }
    }

    #[test]
    fn a_sqlite_users_transaction_allocates_nothing() {
        // perflab's side only: SQLite's own memory comes from its allocator
        // (malloc), which this count does not see; statements are prepared
        // once, so it does not parse SQL per transaction either.
        use crate::workload::bank::{mix::BankMix, sqlite::SqliteBank, BankWorkload};
        let dir = tempfile::tempdir().unwrap();
        let (bank, _) = SqliteBank::prepare(&dir.path().join("bank.db"), 1, false).unwrap();
        for mix in [BankMix::Tpcb, BankMix::Atm(Default::default())] {
            let workload = BankWorkload::new(bank.clone(), mix, 1).unwrap();
            let per = allocations_per_op(&workload, ALONE);
            assert_eq!(per, 0.0, "{mix:?}: {per} allocations per transaction");
        }
    }
}
