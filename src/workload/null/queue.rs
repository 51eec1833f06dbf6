//! The null target as a first-come-first-served queue with C servers
//! (`--servers C`): at most C operations in service at once, the others
//! waiting in the order they arrived — an M/G/c queue whose answers are
//! known ([`super::theory`]).
//!
//! The queue is a ledger in virtual time: the instants at which each
//! server is next free, in a min-heap behind one mutex. An operation that
//! arrives at `at` (its intended start: [`crate::workload::Session::intended`])
//! takes the server that frees first, starts at max(at, free), and books
//! it until its own end, which it then sleeps to on its session's timer. Booking in arrival order is FCFS; no
//! operation waits on another's wake-up, and there is no thread, channel
//! or allocation per operation (the heap is made once, C entries).

use super::NullStall;
use crate::error::PlanError;
use crate::plan::{LoadModel, Plan, StepDefaults};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The most servers a null queue takes: beyond it, the queue is no
/// queue at any rate a generator offers.
pub(crate) const MAX_SERVERS: u32 = 100_000;

/// When each of the queue's servers is next free.
pub(crate) struct Ledger {
    free_at: Mutex<BinaryHeap<Reverse<Instant>>>,
    servers: u32,
}

impl Ledger {
    /// `servers` servers, all free from `now`.
    pub(crate) fn new(servers: u32, now: Instant) -> Self {
        let servers = servers.clamp(1, MAX_SERVERS) as usize;
        Ledger {
            free_at: Mutex::new(std::iter::repeat_n(Reverse(now), servers).collect()),
            servers: servers as u32,
        }
    }

    /// How many servers the queue has.
    pub(crate) fn servers(&self) -> u32 {
        self.servers
    }

    /// Books an operation that arrives at `at` and needs `service` on the
    /// server that frees first, and returns when it ends. A stall that
    /// its service touches holds its end until the stall is over (a
    /// stalled server answers nothing, and frees nothing, before then).
    pub(crate) fn book(
        &self,
        at: Instant,
        service: Duration,
        stall: Option<(Instant, Instant)>,
    ) -> Instant {
        // A session that panicked holding the lock left the heap whole
        // (a panic cannot come between reading and writing one entry).
        let mut free_at = self
            .free_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(mut first) = free_at.peek_mut() else {
            return end_of(at, service, stall);
        };
        let start = first.0.max(at);
        let end = end_of(start, service, stall);
        first.0 = end;
        end
    }
}

/// What a queue sets for its steps: one worker thread, where no
/// `--threads` is given. Each worker paces its own arrivals on its own
/// timer, and the queue books an arrival when a session takes it: from
/// two workers, one whose timer woke late books its arrivals after later
/// ones from the other, which have taken the server that freed first and
/// left the time between idle. The queue then serves less than its
/// servers can, and by more the later the host wakes the workers (on a
/// busy 2-CPU host a search for `p95<5ms` landed 12% under the analytic
/// answer, its steps 5-9 ms late at p99). One worker releases its
/// arrivals in order, however late, and the queue stays first come,
/// first served. Its arrivals are paced each at its time (`--slack 0`)
/// where no `--slack` is given: the queue is the model of an exact
/// arrival process, and a search for its capacity is checked against
/// the analytic answer.
pub(crate) fn step_defaults() -> StepDefaults {
    StepDefaults {
        threads: Some(1),
        slack: Some(crate::plan::Slack::Fixed(std::time::Duration::ZERO)),
        ..StepDefaults::default()
    }
}

/// Whether a plan can run the queue of `servers` as one queue: not
/// split across generators (each would queue its share apart), fed by one
/// worker thread (see [`step_defaults`]; a closed loop's users book their
/// next operation from their last reply, and one on a thread that woke
/// late books it after later ones just as an open loop's arrivals would),
/// and, in an open loop, with at least `servers` sessions.
/// A worker whose sessions are all busy holds its next arrival back
/// until one is free; were that possible while a server idles, the
/// session pool would be a second queue in front of the servers. With
/// `servers` sessions per worker it never is: a waiting arrival means
/// every session is busy, and busy sessions that leave a server idle
/// are all in service, so fewer than `servers`.
pub(crate) fn check_plan(servers: u32, plan: &Plan) -> Result<(), PlanError> {
    if !plan.generators.is_empty() {
        return Err(PlanError::flag(
            "--servers",
            "a queue split across generators is not one queue",
            "run the null queue without --generators, or drop --servers",
        ));
    }
    if plan.threads > 1 {
        return Err(PlanError::flag(
            "--threads",
            format!(
                "{} worker threads would each book their own arrivals, and the queue would serve a late thread's after later ones, idling its servers between",
                plan.threads
            ),
            "leave --threads out (a queue's arrivals come from one thread) or give --threads 1",
        ));
    }
    if let LoadModel::Open { connections, .. } = plan.load {
        if connections < servers {
            return Err(PlanError::flag(
                "--connections",
                format!(
                    "{connections} sessions are fewer than the {servers} servers of --servers, so arrivals would wait for a session while a server idles"
                ),
                &format!("give --connections {servers} or more"),
            ));
        }
    }
    Ok(())
}

/// When an operation served from `start` for `service` ends, a stall
/// that it touches holding it until the stall is over.
pub(crate) fn end_of(
    start: Instant,
    service: Duration,
    stall: Option<(Instant, Instant)>,
) -> Instant {
    let end = start + service;
    match stall {
        Some((from, until)) if start < until && end > from => end.max(until),
        _ => end,
    }
}

/// The stall's window counted from `now`, the start of the run.
pub(crate) fn stall_window(stall: Option<NullStall>, now: Instant) -> Option<(Instant, Instant)> {
    stall.map(|s| (now + s.at, now + s.at + s.length))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn operations_queue_in_arrival_order_for_the_first_free_server() {
        let t0 = Instant::now();
        let ledger = Ledger::new(2, t0);
        // Two servers: the first two start at once, the third waits for
        // the one that frees first, the fourth for the other.
        assert_eq!(ledger.book(t0, ms(10), None), t0 + ms(10));
        assert_eq!(ledger.book(t0, ms(4), None), t0 + ms(4));
        assert_eq!(ledger.book(t0 + ms(1), ms(3), None), t0 + ms(7));
        assert_eq!(ledger.book(t0 + ms(2), ms(1), None), t0 + ms(8));
        // One that comes when a server is idle starts when it comes.
        assert_eq!(ledger.book(t0 + ms(20), ms(1), None), t0 + ms(21));
    }

    #[test]
    fn a_stalled_server_frees_nothing_until_the_stall_ends() {
        let t0 = Instant::now();
        let ledger = Ledger::new(1, t0);
        let stall = Some((t0 + ms(5), t0 + ms(50)));
        assert_eq!(ledger.book(t0, ms(2), stall), t0 + ms(2));
        // Served into the stall: ends with it; the next one queues behind.
        assert_eq!(ledger.book(t0 + ms(4), ms(2), stall), t0 + ms(50));
        assert_eq!(ledger.book(t0 + ms(10), ms(2), stall), t0 + ms(52));
        assert_eq!(ledger.book(t0 + ms(100), ms(2), stall), t0 + ms(102));
    }
}
