//! The `null` workload: an in-process stand-in for a server that answers
//! after a service time, fixed or drawn (or at once), and can be told to
//! stall for a while. It exists to test the engine: with nothing else in
//! the way, the operational laws must hold to the percent. With
//! `--servers C` it is a first-come-first-served queue of C servers
//! ([`queue`]) whose answers are known ([`theory`]): a yardstick for a
//! search of the load a service level holds.

mod queue;
mod service;
pub mod theory;

pub use service::ServiceDist;

use super::{CheckReport, OpCounts, Seat, Session, Started, SweepDriver, Workload, WorkloadKind};
use crate::error::PlanError;
use crate::measure::{ErrorKind, Outcome};
use crate::plan::{Plan, StepDefaults};
use crate::sut::Target;
use crate::units::parse_duration;
use crate::util::serde_duration;
use crate::util::timer::Timer;
use queue::{Ledger, MAX_SERVERS};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// `perflab run null`: the engine's self-test, no server.
pub struct Null;

/// The null workload's flags.
#[derive(Debug, clap::Args)]
pub struct NullArgs {
    /// Service time of each operation: a time (1ms), exp:MEAN (exponential,
    /// e.g. exp:1ms) or uniform:MIN..MAX (e.g. uniform:0.5ms..1.5ms).
    #[arg(long, value_name = "TIME", default_value = "0", value_parser = parse_service)]
    pub(crate) service: ServiceDist,

    /// The target is a first-come-first-served queue of N servers: at most
    /// N operations in service at once, the others wait in arrival order.
    /// Without it every operation is served at once.
    #[arg(long, value_name = "N")]
    pub(crate) servers: Option<u32>,

    /// The target stalls from AT (after the run starts) for LENGTH, e.g. 3s:1s.
    #[arg(long, value_name = "AT:LENGTH")]
    pub(crate) stall: Option<String>,
}

/// `--service`, as clap reads it: one line naming the fix.
fn parse_service(text: &str) -> Result<ServiceDist, String> {
    ServiceDist::parse(text).map_err(|e| format!("{e}; {}", service::SERVICE_FIX))
}

/// The null workload's validated options.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NullSpec {
    /// The service time (stored as seconds when fixed, as runs before it
    /// could be drawn stored it).
    pub service: ServiceDist,
    pub stall: Option<NullStall>,
    /// Servers of the FCFS queue; none serves every operation at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servers: Option<u32>,
    /// What the queue sets for the steps: one worker thread (see
    /// [`queue::check_plan`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<StepDefaults>,
}

/// `perflab check null` takes no flags.
#[derive(Debug, clap::Args)]
pub struct NullCheckArgs {}

impl WorkloadKind for Null {
    const NAME: &'static str = "null";
    const ABOUT: &'static str =
        "The engine's self-test: operations that take a fixed service time, no server.";
    const CHECK_ABOUT: &'static str = "The null workload keeps no data (nothing to check).";
    type RunArgs = NullArgs;
    type CheckArgs = NullCheckArgs;
    type Spec = NullSpec;

    fn validate(args: &NullArgs) -> Result<NullSpec, PlanError> {
        if let Some(servers) = args.servers {
            if !(1..=MAX_SERVERS).contains(&servers) {
                return Err(PlanError::flag(
                    "--servers",
                    format!("{servers} servers is no queue perflab runs"),
                    &format!(
                        "give 1 to {MAX_SERVERS}, or leave it out to serve every operation at once"
                    ),
                ));
            }
        }
        Ok(NullSpec {
            service: args.service,
            servers: args.servers,
            steps: args.servers.map(|_| queue::step_defaults()),
            stall: args
                .stall
                .as_deref()
                .map(NullStall::parse)
                .transpose()
                .map_err(|e| PlanError::flag("--stall", e, "e.g. --stall 3s:1s"))?,
        })
    }

    fn target(_spec: &NullSpec) -> Target {
        Target::InProcess
    }

    fn start<D: SweepDriver>(spec: &NullSpec, plan: &Plan, driver: D) -> anyhow::Result<D::Output> {
        if let Some(servers) = spec.servers {
            queue::check_plan(servers, plan)?;
        }
        let workload = NullWorkload::queue(spec.service, spec.servers, spec.stall);
        let started = Started {
            addresses: Some(Vec::new()),
            ..Started::default()
        };
        driver.drive(Arc::new(workload), started)
    }

    const ON_GENERATORS: bool = true;

    fn check_form(form: &serde_json::Value) -> Result<(), PlanError> {
        NullForm::read(form.clone()).map(|_| ())
    }

    fn on_generator<D: SweepDriver>(
        form: serde_json::Value,
        driver: D,
    ) -> anyhow::Result<D::Output> {
        let form = NullForm::read(form)?;
        let workload = NullWorkload::queue(form.service, None, form.stall);
        driver.drive(Arc::new(workload), Started::default())
    }

    fn check(_args: &NullCheckArgs) -> anyhow::Result<(String, CheckReport)> {
        Err(PlanError::new(
            "the null workload keeps no data, so there is nothing to check; see perflab check --help for the workloads that do",
        )
        .into())
    }
}

/// A window during which the null target answers nothing: every operation
/// that would run inside it completes only when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NullStall {
    /// When the stall starts, counted from the start of the run.
    #[serde(with = "serde_duration")]
    pub at: Duration,
    /// How long it lasts.
    #[serde(with = "serde_duration")]
    pub length: Duration,
}

impl NullStall {
    /// Parses `AT:LENGTH`, e.g. `3s:1s`.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let (at, length) = text
            .split_once(':')
            .ok_or_else(|| format!("'{text}' needs the form AT:LENGTH, e.g. 3s:1s"))?;
        Ok(NullStall {
            at: parse_duration(at).map_err(|e| e.to_string())?,
            length: parse_duration(length).map_err(|e| e.to_string())?,
        })
    }
}

/// The null target.
pub struct NullWorkload {
    service: ServiceDist,
    stall: Option<(Instant, Instant)>,
    /// The FCFS queue every session books its operations in, with
    /// `--servers`; none serves every operation at once.
    ledger: Option<Arc<Ledger>>,
}

impl NullWorkload {
    /// A null target answering after `service`; the stall, if any, is counted
    /// from now (the start of the run).
    pub fn new(service: Duration, stall: Option<NullStall>) -> Self {
        Self::queue(ServiceDist::Fixed(service), None, stall)
    }

    /// A null target serving with `service`, through a first-come-first-
    /// served queue of `servers` when given; the stall, if any, is counted
    /// from now (the start of the run).
    pub fn queue(service: ServiceDist, servers: Option<u32>, stall: Option<NullStall>) -> Self {
        let now = Instant::now();
        NullWorkload {
            service,
            stall: queue::stall_window(stall, now),
            ledger: servers.map(|c| Arc::new(Ledger::new(c, now))),
        }
    }
}

/// What a generator builds a null target from: its service time, and
/// the stall counted from when the generator builds it. Forms from before
/// the service time could be drawn carry its seconds, and no servers.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct NullForm {
    service: ServiceDist,
    stall: Option<NullStall>,
    /// A queue's servers: refused, since a queue split over generators
    /// is one queue per generator, not the one asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    servers: Option<u32>,
}

impl NullForm {
    /// The form a generator was sent, checked: a service time of at most
    /// the longest wait a plan takes, a stall within a month.
    fn read(form: serde_json::Value) -> Result<Self, PlanError> {
        let form: NullForm = serde_json::from_value(form)
            .map_err(|e| PlanError::new(format!("the null workload's form is not one: {e}")))?;
        form.service
            .check()
            .map_err(|e| PlanError::new(format!("form.service is {}; {e}", form.service)))?;
        if let Some(servers) = form.servers {
            return Err(PlanError::new(format!(
                "form.servers is {servers}; a queue split across generators is not one queue, so the null queue runs without generators"
            )));
        }
        let month = Duration::from_secs(30 * 24 * 3600);
        if let Some(stall) = form.stall {
            if stall.at > month || stall.length > month {
                return Err(PlanError::new(format!(
                    "form.stall is {:?} after {:?}; each at most 30 days",
                    stall.length, stall.at
                )));
            }
        }
        Ok(form)
    }
}

/// One null user.
pub struct NullSession {
    service: ServiceDist,
    /// Draws this user's service times.
    rng: SmallRng,
    stall: Option<(Instant, Instant)>,
    ledger: Option<Arc<Ledger>>,
    /// When the operation about to run was meant to start: the queue
    /// books it from there ([`Session::intended`]).
    arrival: Option<Instant>,
    /// When this user's last operation was due to end: an arrival that
    /// waited for the user, not for the generator, arrives no earlier.
    free_from: Option<Instant>,
    /// Its own high-resolution timer (tokio's would round each service
    /// time up to the next millisecond); none when it never waits, so that
    /// a million users answering at once hold no descriptor each.
    timer: Option<Timer>,
    /// When the operation that just ran ended by the queue's clock: the
    /// generator learns of it later by its timer's and its scheduler's
    /// lateness, or by its own lateness to dispatch (shown as the lag),
    /// which are the generator's, not the queue's. None for a user that
    /// never waits (no service time is modelled: the generator's own
    /// timing is what is measured) and for an operation that did not end.
    replied: Option<Instant>,
}

impl Workload for NullWorkload {
    type Session = NullSession;

    fn op_names(&self) -> &[&'static str] {
        &["null"]
    }

    async fn open_session(
        &self,
        _user: u32,
        seed: u64,
        _seat: Seat,
    ) -> anyhow::Result<NullSession> {
        let waits = !self.service.is_zero() || self.stall.is_some();
        let timer =
            if waits {
                Some(Timer::new().map_err(|e| {
                    anyhow::anyhow!("cannot create a null user's timer (timerfd): {e}")
                })?)
            } else {
                None
            };
        Ok(NullSession {
            service: self.service,
            rng: SmallRng::seed_from_u64(seed),
            stall: self.stall,
            ledger: self.ledger.clone(),
            arrival: None,
            free_from: None,
            timer,
            replied: None,
        })
    }

    fn check(&self, _run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        Ok(None)
    }

    fn generator_form(&self) -> Option<serde_json::Value> {
        let now = Instant::now();
        let stall = self.stall.and_then(|(from, until)| {
            (until > now).then(|| NullStall {
                at: from.saturating_duration_since(now),
                length: until - from.max(now),
            })
        });
        serde_json::to_value(NullForm {
            service: self.service,
            stall,
            servers: self.ledger.as_ref().map(|l| l.servers()),
        })
        .ok()
    }
}

impl Session for NullSession {
    fn choose(&mut self) -> usize {
        0
    }

    fn intended(&mut self, at: Instant) {
        self.arrival = Some(at);
    }

    async fn execute(&mut self, _op: usize) -> Outcome {
        self.replied = None;
        let start = Instant::now();
        let service = self.service.sample(&mut self.rng);
        // The queue sees the arrival when it was meant to come, as the
        // model's arrival process has it: a generator late to dispatch
        // adds nothing to the queue's wait unless it is later than the
        // reply was due. In a queue of servers that holds whichever
        // session takes the arrival: the queue's waiting room is not the
        // sessions (there are at least as many as servers), and a session
        // whose own reply was noticed late may take an arrival that an
        // idle one would have taken at its time (counting from its own
        // end had put 1-2 ms on a p95 of 3.8 ms when the host woke the
        // worker 5 ms late). Served at once, an arrival that waited for
        // this user to be free (every session busy) arrives when it was.
        // An arrival the pacer sent ahead of its time (its batches) arrives
        // at its time all the same: the model's arrival process is exact.
        let arrived = match (self.arrival.take(), self.free_from) {
            (Some(at), _) if self.ledger.is_some() => at,
            (Some(at), Some(free)) => at.max(free).min(start.max(at)),
            (Some(at), None) => at,
            (None, _) => start,
        };
        // A stalled server answers nothing until the stall is over.
        let done = match &self.ledger {
            Some(ledger) => ledger.book(arrived, service, self.stall),
            None => queue::end_of(arrived, service, self.stall),
        };
        self.free_from = Some(done);
        let Some(timer) = &self.timer else {
            return Outcome::ok();
        };
        if done > start {
            if let Err(e) = timer.sleep_until_exact(done).await {
                // Setting a timerfd that was made fails only with its errno;
                // the operation says so rather than ending early.
                return Outcome::error(ErrorKind::Io(e.raw_os_error().unwrap_or(libc::EIO)));
            }
        }
        self.replied = Some(done);
        Outcome::ok()
    }

    fn replied(&self) -> Option<Instant> {
        self.replied
    }

    /// The model takes each arrival at its intended time, early or late.
    fn origin(&self, intended: Instant, _began: Instant) -> Instant {
        intended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_users_that_wait_hold_a_timer() {
        let rt = crate::util::test_runtime();
        let seat = Seat::alone(Duration::from_secs(1));
        let timers = |w: NullWorkload| {
            rt.block_on(async {
                let mut with_timer = 0;
                for user in 0..8 {
                    let session = w.open_session(user, 0, seat).await.unwrap();
                    with_timer += usize::from(session.timer.is_some());
                }
                with_timer
            })
        };
        // Each timer is a descriptor: users that answer at once hold none.
        assert_eq!(timers(NullWorkload::new(Duration::ZERO, None)), 0);
        assert_eq!(
            timers(NullWorkload::new(Duration::from_micros(100), None)),
            8
        );
        let stall = NullStall {
            at: Duration::ZERO,
            length: Duration::from_millis(1),
        };
        assert_eq!(timers(NullWorkload::new(Duration::ZERO, Some(stall))), 8);
    }

    /// A queued operation draws its service time, books its server and
    /// sleeps to its end without allocating.
    #[test]
    fn a_queued_operation_allocates_nothing() {
        use crate::util::counting_alloc::allocations;
        let rt = crate::util::test_runtime();
        let service = ServiceDist::Exponential {
            mean: Duration::from_micros(2),
        };
        let null = NullWorkload::queue(service, Some(2), None);
        let seat = Seat::alone(Duration::from_secs(1));
        let per_op = rt.block_on(async {
            let mut session = null.open_session(0, 7, seat).await.unwrap();
            for _ in 0..200 {
                session.execute(0).await;
            }
            let before = allocations();
            for _ in 0..2_000 {
                session.execute(0).await;
            }
            allocations() - before
        });
        assert_eq!(per_op, 0);
    }

    /// A queue of one server, 20 ms a service: an operation dispatched
    /// 15 ms after it was meant to arrive ends 20 ms after its arrival
    /// (the generator's lateness is not the queue's); the next, meant to
    /// arrive while the user was still busy, waits for the user as it
    /// would for the server.
    #[test]
    fn the_queue_books_an_operation_when_it_was_meant_to_arrive() {
        let rt = crate::util::test_runtime();
        let service = ServiceDist::Fixed(Duration::from_millis(20));
        let null = NullWorkload::queue(service, Some(1), None);
        let seat = Seat::alone(Duration::from_secs(1));
        let (late, queued) = rt.block_on(async {
            let mut session = null.open_session(0, 7, seat).await.unwrap();
            let meant = Instant::now();
            tokio::time::sleep(Duration::from_millis(15)).await;
            session.intended(meant);
            session.execute(0).await;
            let late = meant.elapsed();
            // Meant 5 ms after the first, which ended 20 ms after it.
            let second = meant + Duration::from_millis(5);
            session.intended(second);
            session.execute(0).await;
            (late, second.elapsed())
        });
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        assert!((20.0..30.0).contains(&ms(late)), "{late:?}");
        // 15 ms waiting for the first, then its own 20 ms.
        assert!((35.0..45.0).contains(&ms(queued)), "{queued:?}");
    }

    /// A queue of one server, 5 ms a service, whose thread is held for
    /// 30 ms while the operation sleeps: the timer wakes late, and the
    /// session says the reply came when the queue ended the service. So
    /// it does for an operation dispatched 10 ms after it was meant to
    /// arrive, whose service ended before the generator got to it.
    #[test]
    fn a_late_wake_up_or_dispatch_is_not_the_queues() {
        let rt = crate::util::test_runtime();
        let service = ServiceDist::Fixed(Duration::from_millis(5));
        let null = NullWorkload::queue(service, Some(1), None);
        let seat = Seat::alone(Duration::from_secs(1));
        let (meant, replied, woke) = rt.block_on(async {
            let mut session = null.open_session(0, 7, seat).await.unwrap();
            let meant = Instant::now();
            session.intended(meant);
            let held = async {
                tokio::task::yield_now().await;
                std::thread::sleep(Duration::from_millis(30));
            };
            tokio::join!(session.execute(0), held);
            let first = (meant, session.replied(), Instant::now());
            let meant = Instant::now();
            std::thread::sleep(Duration::from_millis(10));
            session.intended(meant);
            session.execute(0).await;
            let late = session.replied().map(|at| at - meant);
            assert_eq!(late, Some(Duration::from_millis(5)));
            first
        });
        let replied = replied.expect("the session slept to its end");
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        assert!(ms(woke - meant) >= 30.0, "{:?}", woke - meant);
        assert!(
            (5.0..7.0).contains(&ms(replied - meant)),
            "{:?}",
            replied - meant
        );
    }

    /// A session that takes an arrival meant for before its own last
    /// reply (the worker noticed that reply late, and the arrival waited
    /// in the worker's queue meanwhile) does not make the arrival wait for
    /// it: the queue's other server was free, and serves it from its time.
    #[test]
    fn an_arrival_taken_late_by_a_busy_session_starts_at_its_time() {
        let rt = crate::util::test_runtime();
        let service = ServiceDist::Fixed(Duration::from_millis(5));
        let null = NullWorkload::queue(service, Some(2), None);
        let seat = Seat::alone(Duration::from_secs(1));
        let (first, second) = rt.block_on(async {
            let mut session = null.open_session(0, 7, seat).await.unwrap();
            let meant = Instant::now();
            session.intended(meant);
            session.execute(0).await;
            let first = session.replied().map(|at| at - meant);
            // Meant 1 ms after the first, taken after its 5 ms reply.
            session.intended(meant + Duration::from_millis(1));
            session.execute(0).await;
            let second = session.replied().map(|at| at - meant);
            (first, second)
        });
        assert_eq!(first, Some(Duration::from_millis(5)));
        // On the second server from 1 ms to 6 ms, not from 5 ms to 10.
        assert_eq!(second, Some(Duration::from_millis(6)));
    }

    #[test]
    fn old_generator_forms_read_and_a_queue_or_an_undrawable_time_is_refused() {
        let form = NullForm::read(serde_json::json!({"service": 0.001, "stall": null})).unwrap();
        assert_eq!(form.service, ServiceDist::Fixed(Duration::from_millis(1)));
        assert_eq!(form.servers, None);
        let drawn =
            serde_json::json!({"service": {"kind": "exponential", "mean": 0.001}, "stall": null});
        assert!(NullForm::read(drawn).is_ok());
        for (form, says) in [
            (
                serde_json::json!({"service": 0.001, "stall": null, "servers": 4}),
                "form.servers is 4",
            ),
            (
                serde_json::json!({"service": {"kind": "exponential", "mean": 0}, "stall": null}),
                "form.service is exp:0",
            ),
            (
                serde_json::json!({"service": {"kind": "uniform", "min": 2, "max": 1}, "stall": null}),
                "form.service is",
            ),
        ] {
            let e = NullForm::read(form).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn stalls_parse() {
        let s = NullStall::parse("3s:1s").unwrap();
        assert_eq!(s.at, Duration::from_secs(3));
        assert_eq!(s.length, Duration::from_secs(1));
        assert!(NullStall::parse("3s").is_err());
    }
}
