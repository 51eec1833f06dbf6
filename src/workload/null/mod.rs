//! The `null` workload: an in-process stand-in for a server that answers
//! after a fixed service time (or at once), and can be told to stall for a
//! while. It exists to test the engine: with nothing else in the way, the
//! operational laws must hold to the percent.

use super::{CheckReport, OpCounts, Seat, Session, Started, SweepDriver, Workload, WorkloadKind};
use crate::error::PlanError;
use crate::measure::{ErrorKind, Outcome};
use crate::plan::Plan;
use crate::target::Target;
use crate::units::parse_duration;
use crate::util::serde_duration;
use crate::util::timer::Timer;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// `perflab run null`: the engine's self-test, no server.
pub struct Null;

/// The null workload's flags.
#[derive(Debug, clap::Args)]
pub struct NullArgs {
    /// Service time of each operation.
    #[arg(long, value_name = "TIME", default_value = "0", value_parser = parse_duration)]
    pub(crate) service: Duration,

    /// The target stalls from AT (after the run starts) for LENGTH, e.g. 3s:1s.
    #[arg(long, value_name = "AT:LENGTH")]
    pub(crate) stall: Option<String>,
}

/// The null workload's validated options.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NullSpec {
    #[serde(with = "serde_duration")]
    pub service: Duration,
    pub stall: Option<NullStall>,
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
        Ok(NullSpec {
            service: args.service,
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

    fn start<D: SweepDriver>(
        spec: &NullSpec,
        _plan: &Plan,
        driver: D,
    ) -> anyhow::Result<D::Output> {
        let workload = Arc::new(NullWorkload::new(spec.service, spec.stall));
        driver.drive(workload, Started::default())
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
        let now = Instant::now();
        let workload = NullWorkload {
            service: form.service,
            stall: form.stall.map(|s| (now + s.at, now + s.at + s.length)),
        };
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
    service: Duration,
    stall: Option<(Instant, Instant)>,
}

impl NullWorkload {
    /// A null target answering after `service`; the stall, if any, is counted
    /// from now (the start of the run).
    pub fn new(service: Duration, stall: Option<NullStall>) -> Self {
        let now = Instant::now();
        NullWorkload {
            service,
            stall: stall.map(|s| (now + s.at, now + s.at + s.length)),
        }
    }
}

/// What a generator builds a null target from: its service time, and
/// the stall counted from when the generator builds it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct NullForm {
    #[serde(with = "serde_duration")]
    service: Duration,
    stall: Option<NullStall>,
}

impl NullForm {
    /// The form a generator was sent, checked: a service time of at most
    /// the longest wait a plan takes, a stall within a month.
    fn read(form: serde_json::Value) -> Result<Self, PlanError> {
        let form: NullForm = serde_json::from_value(form)
            .map_err(|e| PlanError::new(format!("the null workload's form is not one: {e}")))?;
        let max_wait = crate::plan::MAX_WAIT;
        if form.service > max_wait {
            return Err(PlanError::new(format!(
                "form.service is {:?}; at most {max_wait:?}",
                form.service
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
    service: Duration,
    stall: Option<(Instant, Instant)>,
    /// Its own high-resolution timer (tokio's would round each service
    /// time up to the next millisecond); none when it never waits, so that
    /// a million users answering at once hold no descriptor each.
    timer: Option<Timer>,
}

impl Workload for NullWorkload {
    type Session = NullSession;

    fn op_names(&self) -> &[&'static str] {
        &["null"]
    }

    async fn open_session(
        &self,
        _user: u32,
        _seed: u64,
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
            stall: self.stall,
            timer,
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
        })
        .ok()
    }
}

impl Session for NullSession {
    fn choose(&mut self) -> usize {
        0
    }

    async fn execute(&mut self, _op: usize) -> Outcome {
        let start = Instant::now();
        let mut done = start + self.service;
        if let Some((from, until)) = self.stall {
            // A stalled server answers nothing until the stall is over.
            if start < until && done > from {
                done = done.max(until);
            }
        }
        if let (true, Some(timer)) = (done > start, &self.timer) {
            if let Err(e) = timer.sleep_until_exact(done).await {
                // Setting a timerfd that was made fails only with its errno;
                // the operation says so rather than ending early.
                return Outcome::error(ErrorKind::Io(e.raw_os_error().unwrap_or(libc::EIO)));
            }
        }
        Outcome::ok()
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

    #[test]
    fn stalls_parse() {
        let s = NullStall::parse("3s:1s").unwrap();
        assert_eq!(s.at, Duration::from_secs(3));
        assert_eq!(s.length, Duration::from_secs(1));
        assert!(NullStall::parse("3s").is_err());
    }
}
