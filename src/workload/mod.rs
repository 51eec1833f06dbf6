//! Workloads: what one virtual user does. A [`Workload`] is shared by every
//! worker thread and opens [`Session`]s; a session belongs to one worker and
//! runs one operation at a time. Blocking backends keep their connection on a
//! thread of its own and answer the session over a channel, so the engine has
//! one asynchronous code path for every target.
//!
//! Each workload owns itself in its folder: its flags, their validation, how
//! it makes its target ready, its check, its help ([`WorkloadKind`]). The rest of
//! perflab reaches it only through [`registry`]: one line names each
//! workload, and `perflab run NAME` and `perflab check NAME` dispatch there.

pub(crate) mod bank;
mod batch;
pub(crate) mod blocking_conn;
pub(crate) mod disk;
pub(crate) mod figures;
pub(crate) mod files;
pub(crate) mod net;
pub mod null;
#[cfg(test)]
mod proof;
mod registry;
pub(crate) mod server_conn;
pub(crate) mod sql;
pub mod web;

pub use registry::{
    check_generator_form, generator_workloads, names_text as registry_names, on_generator,
    rate_unit, CheckChoice, RunChoice, Validated, NAMES,
};

/// The unit a run's throughput is counted in: its workload's, as its
/// first operation's name says ([`WorkloadKind::rate_unit_of`]);
/// operations per second for a workload this perflab does not know.
pub(crate) fn run_rate_unit(workload: &str, first_op: Option<&str>) -> crate::units::RateUnit {
    registry::rate_unit_of(workload, first_op)
}

/// The figures of its own that the workload named `workload` gives for a
/// run's stored steps and operation names ([`WorkloadKind::figures`]);
/// none for a workload without any, or a run that gave none.
pub(crate) fn figures_of(
    workload: &str,
    steps: &[crate::record::StepResult],
    op_names: &[String],
) -> Option<figures::Figures> {
    registry::figures(workload, steps, op_names).filter(|f| !f.steps.is_empty())
}

use crate::error::PlanError;
use crate::measure::Outcome;
use crate::plan::{Plan, WorkloadSpec};
use crate::probe::counters::process::ProcessSelector;
use crate::probe::DbProbe;
use crate::sut::{Endpoint, Target};
pub use batch::{Batch, Issued};
use serde::Serialize;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The first registered workload: the one examples in messages name.
pub(crate) fn first_name() -> &'static str {
    NAMES.first().copied().unwrap_or("WORKLOAD")
}

/// A workload as the command line and a run see it.
pub trait WorkloadKind {
    /// Its name after `perflab run` and `perflab check`.
    const NAME: &'static str;
    /// One line of help for `perflab run NAME`.
    const ABOUT: &'static str;
    /// One line of help for `perflab check NAME`.
    const CHECK_ABOUT: &'static str;
    /// The unit its throughput is counted in, wherever a number of its
    /// operations per second is printed.
    const RATE_UNIT: crate::units::RateUnit = crate::units::RateUnit::Operations;
    /// The flags of `perflab run NAME` beyond the common ones.
    type RunArgs: clap::Args + clap::FromArgMatches + std::fmt::Debug;
    /// The flags of `perflab check NAME`.
    type CheckArgs: clap::Args + clap::FromArgMatches + std::fmt::Debug;
    /// The validated options: what the run's plan stores of the workload.
    type Spec: Serialize;

    /// Validates the flags; every error names its flag and the fix.
    fn validate(args: &Self::RunArgs) -> Result<Self::Spec, PlanError>;

    /// The spec's target.
    fn target(spec: &Self::Spec) -> Target;

    /// Makes the target ready (starting a managed server, loading data)
    /// and hands the workload to `driver`, which runs the sweep; what the
    /// target needs is torn down when this returns.
    fn start<D: SweepDriver>(
        spec: &Self::Spec,
        plan: &Plan,
        driver: D,
    ) -> anyhow::Result<D::Output>;

    /// `perflab check NAME`: what was checked (for the heading) and the report.
    fn check(args: &Self::CheckArgs) -> anyhow::Result<(String, CheckReport)>;

    /// Builds the workload on a generator from what the coordinator's
    /// started workload sent ([`Workload::generator_form`]) and hands it to
    /// `driver`; nothing is prepared here (the coordinator did that once).
    /// A workload that cannot run on generators says so.
    fn on_generator<D: SweepDriver>(
        form: serde_json::Value,
        driver: D,
    ) -> anyhow::Result<D::Output> {
        let _ = (form, driver);
        Err(PlanError::new(format!(
            "the {} workload does not run on generators yet",
            Self::NAME
        ))
        .into())
    }

    /// Whether [`WorkloadKind::on_generator`] builds the workload.
    const ON_GENERATORS: bool = false;

    /// Checks a form a generator was sent before anything is built from
    /// it: it came from outside the process, so every field is checked
    /// (one line naming the field that is wrong).
    fn check_form(form: &serde_json::Value) -> Result<(), PlanError> {
        let _ = form;
        Ok(())
    }

    /// The unit a run's throughput is counted in, from its first
    /// operation's name (a workload whose operations differ in kind, e.g.
    /// a net stream's messages against its transactions, says so here).
    fn rate_unit_of(first_op: Option<&str>) -> crate::units::RateUnit {
        let _ = first_op;
        Self::RATE_UNIT
    }

    /// Its own figures per step, from a run's stored steps and its
    /// operations' names ([`figures`]): none for a workload whose steps
    /// say all it measured.
    fn figures(
        steps: &[crate::record::StepResult],
        op_names: &[String],
    ) -> Option<figures::Figures> {
        let _ = (steps, op_names);
        None
    }
}

/// Runs a started workload's sweep: what `perflab run` gives a workload's
/// [`WorkloadKind::start`].
pub trait SweepDriver {
    type Output;

    /// Runs the sweep on `workload`, with what its start made ready.
    fn drive<W: Workload>(self, workload: Arc<W>, started: Started)
        -> anyhow::Result<Self::Output>;

    /// How this run reaches perflab agents (`--token-file`, the trust
    /// in their certificates): the net workload's target is one. None
    /// where no run's flags are at hand (a generator's share).
    fn agent_access(&self) -> Option<crate::probe::agent_client::AgentAccess> {
        None
    }
}

/// What a workload's start made ready besides the workload itself.
#[derive(Default)]
pub struct Started {
    /// How the target was made ready (loaded, reused, a managed server's
    /// version and settings), for the run's record.
    pub(crate) setup: Option<serde_json::Value>,
    /// The server's statistics, sampled each interval.
    pub(crate) db_probe: Option<DbProbe>,
    /// The server's processes, when perflab started it.
    pub(crate) server: Option<ProcessSelector>,
    /// The origin's processes, when perflab runs the server's origin too.
    pub(crate) origin: Option<ProcessSelector>,
    /// Where the server is, for its settings in the run's inventory.
    pub(crate) endpoint: Option<Endpoint>,
    /// The addresses the run's traffic goes to (an empty list: a run
    /// that crosses no link); `None` where they are not known, and every
    /// link of the host is then read as the run's (`HostReader::on_path`).
    pub(crate) addresses: Option<Vec<std::net::IpAddr>>,
}

/// A target's setup record (`Opened::setup`) with a workload's own fields
/// added (how it loaded its data, its file set).
pub(crate) fn merged_setup(
    target: &serde_json::Value,
    more: serde_json::Value,
) -> serde_json::Value {
    let mut out = target.clone();
    if let (Some(obj), serde_json::Value::Object(more)) = (out.as_object_mut(), more) {
        obj.extend(more);
    }
    out
}

/// Operation names made at run time (by size class, by address), as the
/// `'static` names [`Workload::op_names`] gives: a handful per run, made
/// once and kept for the process's life.
pub(crate) fn leak_names(names: Vec<String>) -> Vec<&'static str> {
    names
        .into_iter()
        .map(|n| &*Box::leak(n.into_boxed_str()))
        .collect()
}

/// The bytes free on the file system of `dir`, where a workload is about
/// to write (root's reserve left to the host), or a `--target` error that
/// it cannot be told, with `fix`.
pub(crate) fn free_bytes_at(dir: &std::path::Path, fix: &str) -> Result<u64, PlanError> {
    crate::util::free_bytes(dir).map_err(|e| {
        PlanError::flag(
            "--target",
            format!("cannot tell the free space of {}: {e}", dir.display()),
            fix,
        )
    })
}

/// The plan's record of a workload's validated spec.
pub(crate) fn spec_of<K: WorkloadKind>(spec: &K::Spec) -> Result<WorkloadSpec, PlanError> {
    WorkloadSpec::new(K::NAME, spec).map_err(|e| {
        PlanError::new(format!(
            "the {} workload's options cannot be recorded: {e}",
            K::NAME
        ))
    })
}

/// Where a session runs, as its worker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seat {
    /// The session has its worker thread to itself in a closed loop:
    /// between its operations nothing but the worker's interval ticker
    /// needs the thread, so a blocking call inside an operation delays no
    /// other user (an open loop's arrivals share the thread: never alone).
    pub(crate) alone: bool,
    /// The session shares its thread with other closed-loop users whose
    /// sockets the worker's own loop polls ([`Workload::polls_sockets`]).
    pub(crate) polled: bool,
    /// How long one operation may run before it is a timeout (the engine
    /// bounds every operation by it; a session that blocks bounds its own).
    pub(crate) timeout: Duration,
}

impl Seat {
    /// A closed-loop session with its worker thread to itself.
    pub(crate) const fn alone(timeout: Duration) -> Seat {
        Seat {
            alone: true,
            polled: false,
            timeout,
        }
    }

    /// A session that shares its worker thread.
    pub(crate) const fn shared(timeout: Duration) -> Seat {
        Seat {
            alone: false,
            polled: false,
            timeout,
        }
    }

    /// A closed-loop session whose socket the worker's own loop polls with
    /// those of the thread's other users.
    pub(crate) const fn polled(timeout: Duration) -> Seat {
        Seat {
            alone: false,
            polled: true,
            timeout,
        }
    }

    /// How a session in this seat drives its own socket.
    pub(crate) const fn drive(&self) -> crate::sut::stream::Drive {
        use crate::sut::stream::Drive;
        if self.alone {
            Drive::Held(self.timeout)
        } else if self.polled {
            Drive::Polled(self.timeout)
        } else {
            Drive::Runtime
        }
    }
}

/// A kind of load a user can offer.
pub trait Workload: Send + Sync + 'static {
    /// The per-user state.
    type Session: Session + 'static;

    /// The operation kinds, in a fixed order; an operation is named by its index.
    fn op_names(&self) -> &[&'static str];

    /// Opens the session of virtual user `user`, seeded for reproducibility,
    /// to run where `seat` says. Runs on a worker thread before the step
    /// starts.
    fn open_session(
        &self,
        user: u32,
        seed: u64,
        seat: Seat,
    ) -> impl Future<Output = anyhow::Result<Self::Session>>;

    /// After the sweep: proves that nothing was lost, given how many
    /// operations of each kind the run saw end, in every phase.
    fn check(&self, run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>>;

    /// The sessions of one worker thread's closed-loop users with no
    /// think time, as one loop the engine drives ([`Batch`]) when this
    /// workload can run them so; otherwise the sessions back, each to run
    /// as a task of its own.
    fn batch(&self, sessions: Vec<Self::Session>) -> Result<Box<dyn Batch>, Vec<Self::Session>> {
        Err(sessions)
    }

    /// Whether this workload's sessions, sharing a thread in a closed loop
    /// with no think time, can each have their socket polled by the
    /// worker's own loop ([`Seat::polled`]): sessions that speak their
    /// server's protocol on a socket of their own (`sut::stream`).
    fn polls_sockets(&self) -> bool {
        false
    }

    /// What a generator needs to build this workload as it stands started
    /// (its target as the coordinator reached it, its secrets included:
    /// it crosses to the generator in TLS, and is never stored); none for
    /// a workload that runs only here.
    fn generator_form(&self) -> Option<serde_json::Value> {
        None
    }
}

/// One virtual user's state: its connection, its random stream.
pub trait Session {
    /// Chooses the kind of the next operation (an index into `op_names`).
    fn choose(&mut self) -> usize;

    /// Runs one operation of the chosen kind.
    fn execute(&mut self, op: usize) -> impl Future<Output = Outcome>;

    /// Told before [`Self::execute`]: the instant the operation was meant
    /// to start (its arrival in an open loop, the end of its user's think
    /// time in a closed one), from which its response time counts. A
    /// workload that models the server itself (the null queue) books the
    /// operation from there, so that a generator dispatching late does
    /// not change the queue the model is; a real server sees the request
    /// when it is sent, and its workloads ignore this.
    fn intended(&mut self, _at: tokio::time::Instant) {}

    /// The instant the response time of an operation intended at
    /// `intended` and begun at `began` counts from: the earlier of the
    /// two. An arrival the open loop's pacer sent ahead of its time (its
    /// batches, see `plan::slack`) reached a real server only when it was
    /// sent; one begun late waited for the generator or a free session
    /// from its time. A workload that models the server itself and takes
    /// each arrival at its intended time (the null queue) counts from there.
    fn origin(
        &self,
        intended: tokio::time::Instant,
        began: tokio::time::Instant,
    ) -> tokio::time::Instant {
        intended.min(began)
    }

    /// Asked after [`Self::execute`] returned: when the reply came by the
    /// target's own clock, for a workload that models the server itself
    /// (the null queue knows the instant its service ended, which the
    /// generator may learn of late: its timer's wake-up, or its own
    /// lateness to dispatch, shown as the lag). The response time ends
    /// there; none (a real server) ends it when `execute` returned.
    fn replied(&self) -> Option<tokio::time::Instant> {
        None
    }

    /// A closed-loop pause the workload itself owes before the next
    /// operation (an access spec's delay between bursts), added to the
    /// think time and counted as it is.
    fn pause(&mut self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

/// How many operations of one kind ended each way over a whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpCounts {
    pub(crate) ok: u64,
    pub(crate) refused: u64,
    /// Ended in an error that leaves the outcome on the server unknown (a
    /// timeout, a lost connection).
    pub(crate) indeterminate: u64,
}

/// The result of a workload's consistency check.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CheckReport {
    /// True when every rule held.
    pub(crate) passed: bool,
    /// One line per rule: what was compared and the values seen.
    pub(crate) lines: Vec<CheckLine>,
}

/// One rule of a check.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct CheckLine {
    pub(crate) rule: String,
    pub(crate) passed: bool,
    pub(crate) detail: String,
}

impl CheckReport {
    /// Builds a report from its lines; it passes when every line does.
    pub(crate) fn from_lines(lines: Vec<CheckLine>) -> Self {
        CheckReport {
            passed: lines.iter().all(|l| l.passed),
            lines,
        }
    }
}
