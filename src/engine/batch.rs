//! The loop of a worker thread whose closed-loop users a workload runs as
//! one ([`Batch`]): no task per user. Each round it starts every idle
//! user's operation, has the workload submit them together and wait in the
//! kernel for the first to end, and records each ended operation as a
//! user's task would: its service time from its start, its response time
//! from its intended start (the end of the user's last operation: no think
//! time is owed). Operations are bounded by the timeout, found late by at
//! most [`LONGEST_WAIT`]; the loop yields to the thread's ticker only once
//! its boundary has passed.

use super::state::WorkerState;
use crate::measure::{ErrorKind, Outcome};
use crate::workload::{Batch, Issued};
use std::rc::Rc;
use std::time::Duration;
use tokio::time::Instant;

/// The longest one wait in the kernel lasts, and how late a timeout or the
/// ticker's boundary may be seen when no operation ends (a stalled
/// device). Far above an operation's time: the kernel's timer for it is
/// not the next to expire, so arming it reprograms nothing (a bound near
/// the I/O's own time cost more CPU than the I/O in a virtual machine).
const LONGEST_WAIT: Duration = Duration::from_millis(50);
/// The wait once the ticker's boundary has passed and it has not run yet
/// (its timer fires on the next whole millisecond).
const TICKER_WAIT: Duration = Duration::from_millis(1);

/// Where one user stands.
#[derive(Clone, Copy)]
enum User {
    /// Ready to start an operation intended from `intended`.
    Idle { intended: Instant },
    /// Its operation of kind `op` runs since `began`.
    Running {
        op: usize,
        began: Instant,
        intended: Instant,
    },
    /// Its operation was given up at a timeout and has not ended yet.
    Abandoned,
}

/// Runs the thread's users from `start` until the ticker stops them, then
/// waits for their operations still running (the ticker bounds that wait).
pub(super) async fn run(mut batch: Box<dyn Batch>, state: Rc<WorkerState>, start: Instant) {
    tokio::time::sleep_until(start).await;
    let mut users = Users::new(batch.users(), start);
    let mut next_scan = start + LONGEST_WAIT;
    loop {
        if !state.stop.get() {
            users.start_idle(batch.as_mut(), &state);
        }
        state.in_flight.set(users.running as u32);
        if users.running == 0 && (users.abandoned == 0 || state.stop.get()) {
            if state.stop.get() {
                return;
            }
            // Nothing reached the kernel (no user found a free place): the
            // thread's other tasks, and the users of other threads who
            // hold the places, get a turn.
            tokio::task::yield_now().await;
            continue;
        }
        let now = Instant::now();
        let boundary = state.next_boundary.get();
        let bound = if boundary > now {
            (boundary - now).min(LONGEST_WAIT)
        } else {
            TICKER_WAIT
        };
        batch.wait(bound);
        let ended = Instant::now();
        users.collect_ended(batch.as_mut(), &state, ended);
        if ended >= next_scan {
            next_scan = ended + LONGEST_WAIT;
            users.abandon_late(batch.as_mut(), &state, ended);
        }
        state.in_flight.set(users.running as u32);
        if ended >= state.next_boundary.get() {
            tokio::task::yield_now().await;
        }
    }
}

/// The thread's users and the lists the loop keeps of them, made once
/// before the first operation (nothing here allocates per operation).
struct Users {
    /// Where each user stands.
    users: Vec<User>,
    /// Users to start this round.
    idle: Vec<usize>,
    /// Users whose operation ended before it reached the kernel: they try
    /// again next round, not in a spin.
    later: Vec<usize>,
    /// Operations in the kernel, counted in their step.
    running: usize,
    /// Operations given up at a timeout, still in the kernel.
    abandoned: usize,
}

impl Users {
    fn new(n: usize, start: Instant) -> Self {
        Users {
            users: vec![User::Idle { intended: start }; n],
            idle: (0..n).rev().collect(),
            later: Vec::with_capacity(n),
            running: 0,
            abandoned: 0,
        }
    }

    /// Starts every idle user's operation.
    #[inline]
    fn start_idle(&mut self, batch: &mut dyn Batch, state: &WorkerState) {
        while let Some(u) = self.idle.pop() {
            let User::Idle { intended } = self.users[u] else {
                continue;
            };
            let began = Instant::now();
            match batch.start(u) {
                Issued::Queued(op) => {
                    self.users[u] = User::Running {
                        op,
                        began,
                        intended,
                    };
                    state.flying(u, Some(intended));
                    self.running += 1;
                }
                Issued::Ended(op, outcome) => {
                    let ended = Instant::now();
                    record(state, op, &outcome, began, intended, ended);
                    self.users[u] = User::Idle { intended: ended };
                    self.later.push(u);
                }
            }
        }
        std::mem::swap(&mut self.idle, &mut self.later);
    }

    /// Records every operation the kernel has ended, at `ended`.
    #[inline]
    fn collect_ended(&mut self, batch: &mut dyn Batch, state: &WorkerState, ended: Instant) {
        while let Some((u, outcome)) = batch.next_done() {
            match (self.users[u], outcome) {
                (
                    User::Running {
                        op,
                        began,
                        intended,
                    },
                    Some(outcome),
                ) => {
                    record(state, op, &outcome, began, intended, ended);
                    state.flying(u, None);
                    self.running -= 1;
                }
                (User::Abandoned, None) => self.abandoned -= 1,
                _ => continue,
            }
            self.users[u] = User::Idle { intended: ended };
            self.idle.push(u);
        }
    }

    /// Gives up, as timed out, every operation running past the timeout.
    #[inline]
    fn abandon_late(&mut self, batch: &mut dyn Batch, state: &WorkerState, ended: Instant) {
        for (u, user) in self.users.iter_mut().enumerate() {
            if let User::Running {
                op,
                began,
                intended,
            } = *user
            {
                if ended >= began + state.timeout {
                    batch.abandon(u);
                    let timeout = Outcome::error(ErrorKind::Timeout);
                    record(state, op, &timeout, began, intended, ended);
                    state.flying(u, None);
                    *user = User::Abandoned;
                    self.running -= 1;
                    self.abandoned += 1;
                }
            }
        }
    }
}

/// Records one ended operation of a user with no think time.
fn record(
    state: &WorkerState,
    op: usize,
    outcome: &Outcome,
    began: Instant,
    intended: Instant,
    ended: Instant,
) {
    let mut recorder = state.recorder.borrow_mut();
    recorder.record(
        op,
        outcome,
        ended.saturating_duration_since(began),
        ended.saturating_duration_since(intended),
    );
    recorder.record_think(Duration::ZERO);
}

#[cfg(test)]
mod tests {
    use super::{run, WorkerState};
    use crate::measure::{ErrorKind, Outcome, Recorder};
    use crate::workload::{Batch, Issued, Seat, Workload};
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;
    use tokio::time::Instant;

    const MS: Duration = Duration::from_millis(1);

    /// Users whose operations take a set time each (the first of the last
    /// user far longer); waiting sleeps the thread, as a wait in the
    /// kernel does. Every start is logged: its user and when.
    struct Timed {
        takes: Vec<Duration>,
        first_of_last: Duration,
        /// Per user: when its operation ends, and whether it was abandoned.
        ends: Vec<Option<(Instant, bool)>>,
        starts: Rc<RefCell<Vec<(usize, Instant)>>>,
        done: Vec<(usize, bool)>,
    }

    impl Batch for Timed {
        fn users(&self) -> usize {
            self.takes.len()
        }

        fn start(&mut self, user: usize) -> Issued {
            assert!(self.ends[user].is_none(), "user {user} started twice");
            let now = Instant::now();
            let mut starts = self.starts.borrow_mut();
            let first = !starts.iter().any(|(u, _)| *u == user);
            starts.push((user, now));
            let take = if user == self.takes.len() - 1 && first {
                self.first_of_last
            } else {
                self.takes[user]
            };
            self.ends[user] = Some((now + take, false));
            Issued::Queued(0)
        }

        fn wait(&mut self, bound: Duration) {
            let now = Instant::now();
            let first = self.ends.iter().flatten().map(|(at, _)| *at).min();
            let until = first.map_or(now + bound, |f| f.min(now + bound));
            std::thread::sleep(until.saturating_duration_since(now));
            let now = Instant::now();
            for (user, end) in self.ends.iter_mut().enumerate() {
                if let Some((at, abandoned)) = *end {
                    if at <= now {
                        self.done.push((user, abandoned));
                        *end = None;
                    }
                }
            }
        }

        fn next_done(&mut self) -> Option<(usize, Option<Outcome>)> {
            let (user, abandoned) = self.done.pop()?;
            Some((user, (!abandoned).then(Outcome::ok)))
        }

        fn abandon(&mut self, user: usize) {
            if let Some((_, abandoned)) = self.ends[user].as_mut() {
                *abandoned = true;
            }
        }
    }

    /// Three users for 600 ms with a 100 ms timeout: operations of 2 and
    /// 5 ms, and a first one of 400 ms for the third user. That one is a
    /// timeout; its user starts again only once it has ended (the batch
    /// refuses a second start), the others run on meanwhile, and the loop
    /// ends with the ticker's stop.
    #[test]
    fn a_stalled_operation_is_a_timeout_and_its_user_waits_for_its_end() {
        let starts = Rc::new(RefCell::new(Vec::new()));
        let timed = Timed {
            takes: vec![2 * MS, 5 * MS, 2 * MS],
            first_of_last: 400 * MS,
            ends: vec![None; 3],
            starts: starts.clone(),
            done: Vec::new(),
        };
        let state = Rc::new(WorkerState::new(Recorder::new(1), 100 * MS, 3));
        let rt = crate::util::test_runtime();
        let local = tokio::task::LocalSet::new();
        let start = local.block_on(&rt, async {
            let start = Instant::now();
            state.next_boundary.set(start + 600 * MS);
            let users = tokio::task::spawn_local(run(Box::new(timed), state.clone(), start));
            // The ticker: the loop yields to it once its boundary passed.
            tokio::time::sleep_until(start + 600 * MS).await;
            state.stop.set(true);
            state.next_boundary.set(Instant::now());
            users.await.unwrap();
            start
        });
        let tally = state.recorder.borrow_mut().take();
        let op = &tally.ops[0];
        assert_eq!(op.error_count(), 1, "{op:?}");
        assert_eq!(op.errors.count(ErrorKind::Timeout), 1, "{op:?}");
        assert_eq!(tally.thinks, op.ok + 1);
        let starts = starts.borrow();
        let of = |user: usize| {
            starts
                .iter()
                .filter(move |(u, _)| *u == user)
                .map(|(_, at)| *at)
        };
        // The stalled user's second start came after its first operation
        // ended, 400 ms in; the first user started again and again while
        // it was stalled.
        let second = of(2).nth(1).expect("the stalled user started again");
        assert!(second >= start + 400 * MS, "{:?}", second - start);
        let meanwhile = of(0)
            .filter(|at| *at > start + 150 * MS && *at < start + 400 * MS)
            .count();
        assert!(meanwhile > 0, "no start of user 0 while user 2 was stalled");
    }

    /// The window ends 200 ms in while the third user's first operation
    /// (400 ms) runs: the census counts it, in flight for those 200 ms.
    #[test]
    fn an_operation_running_in_the_loop_is_counted_when_the_window_ends() {
        let timed = Timed {
            takes: vec![2 * MS, 5 * MS, 2 * MS],
            first_of_last: 400 * MS,
            ends: vec![None; 3],
            starts: Rc::new(RefCell::new(Vec::new())),
            done: Vec::new(),
        };
        let state = Rc::new(WorkerState::new(Recorder::new(1), 1_000 * MS, 3));
        let rt = crate::util::test_runtime();
        let local = tokio::task::LocalSet::new();
        let tally = local.block_on(&rt, async {
            let start = Instant::now();
            state.next_boundary.set(start + 200 * MS);
            let users = tokio::task::spawn_local(run(Box::new(timed), state.clone(), start));
            tokio::time::sleep_until(start + 200 * MS).await;
            let mut tally = state.recorder.borrow_mut().take();
            state.stop.set(true);
            state.census(&mut tally);
            state.next_boundary.set(Instant::now());
            users.await.unwrap();
            tally
        });
        let longest = Duration::from_micros(tally.unfinished.max());
        assert!(
            (1..=3).contains(&tally.unfinished.len()) && longest >= 190 * MS,
            "{} unfinished, the longest {longest:?}",
            tally.unfinished.len()
        );
    }

    /// A worker thread's disk users as one loop, on io_uring over a real
    /// file: reads verified, writes stamped and acknowledged, the check
    /// passes, and an I/O allocates nothing once warm.
    #[test]
    fn a_threads_disk_users_run_as_one_loop_that_allocates_nothing() {
        use crate::util::counting_alloc::allocations;
        use crate::workload::disk::{testing, Engine};
        let dir = tempfile::tempdir().unwrap();
        let w = testing::writable(
            dir.path(),
            "size=4k read=50 random=100",
            Engine::Uring,
            true,
        );
        let seat = Seat::shared(Duration::from_secs(10));
        let rt = crate::util::test_runtime();
        let local = tokio::task::LocalSet::new();
        let (warm, measured, ops) = local.block_on(&rt, async {
            let mut sessions = Vec::new();
            for user in 0..8 {
                sessions.push(w.open_session(user, u64::from(user), seat).await.unwrap());
            }
            testing::fill(&mut sessions[0]).await;
            let Ok(batch) = w.batch(sessions) else {
                panic!("the disk's users run as one loop");
            };
            let mut recorder = Recorder::new(w.op_names().len());
            for op in 0..w.op_names().len() {
                let slow = Duration::from_secs(60);
                recorder.record(op, &Outcome::ok(), slow, slow);
            }
            let state = Rc::new(WorkerState::new(recorder, Duration::from_secs(10), 8));
            // The boundary has passed: the loop yields after every round,
            // and this test runs between them.
            let start = Instant::now();
            state.next_boundary.set(start);
            let users = tokio::task::spawn_local(run(batch, state.clone(), start));
            let thinks = || state.recorder.borrow().peek().thinks;
            while thinks() < 2_000 {
                tokio::task::yield_now().await;
            }
            let (before, from) = (allocations(), thinks());
            while thinks() < from + 5_000 {
                tokio::task::yield_now().await;
            }
            let (after, to) = (allocations(), thinks());
            state.stop.set(true);
            users.await.unwrap();
            let tally = state.recorder.borrow_mut().take();
            for op in &tally.ops {
                assert_eq!(op.error_count(), 0, "{op:?}");
            }
            (before, after, to - from)
        });
        assert_eq!(
            measured - warm,
            0,
            "{} allocations in {ops} I/Os",
            measured - warm
        );
        let check = w.check(&[]).unwrap().unwrap();
        assert!(check.passed, "{check:?}");
        let verified = check
            .lines
            .iter()
            .any(|l| l.detail.contains("sectors checked, all intact"));
        assert!(verified, "{check:?}");
    }

    /// Users that run on psync, or owe a delay between bursts, run as
    /// tasks: the workload hands their sessions back.
    #[test]
    fn disk_users_on_psync_or_with_delays_run_as_tasks() {
        use crate::workload::disk::{testing, Engine};
        let seat = Seat::shared(Duration::from_secs(10));
        for (spec, engine) in [
            ("size=4k read=100", Engine::Psync),
            ("size=4k read=100 delay=1ms", Engine::Uring),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let w = testing::writable(dir.path(), spec, engine, false);
            let rt = crate::util::test_runtime();
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async {
                let sessions = vec![w.open_session(0, 1, seat).await.unwrap()];
                let Err(back) = w.batch(sessions) else {
                    panic!("{spec} on {engine:?}: the sessions are not handed back");
                };
                assert_eq!(back.len(), 1, "{spec} on {engine:?}");
            });
        }
    }
}
