//! The `net` workload: the network path itself, measured as netperf does,
//! against a perflab agent's echo role (`perflab agent --echo`, see
//! `agent::echo`). Four tests:
//!
//! - `rr`: one connection per user, one transaction (a request of
//!   `--request-size` bytes, a reply of `--response-size`) per operation,
//!   netperf's TCP_RR;
//! - `crr`: connect, hello and request, reply, close per operation,
//!   netperf's TCP_CRR;
//! - `stream`: bulk to the agent, one message of `--message-size` bytes
//!   per operation (TCP_STREAM);
//! - `maerts`: bulk from the agent, one message read per operation
//!   (TCP_MAERTS).
//!
//! The target is the agent's HTTP port: `GET /v1/echo` with the token
//! tells the echo's port and ticket, and `/v1/snapshot` is read at each
//! interval's end ([`costs`]) for the agent's own CPU, its host's and its
//! retransmits, stored as the interval's server statistics. perflab's own
//! side is the host probe's as for every run; `figures` divides both
//! by the transactions (or bytes) to give netperf's service demand.

pub(crate) mod costs;
mod figures;
mod session;

use super::{CheckReport, Started, SweepDriver, WorkloadKind};
use crate::error::PlanError;
use crate::plan::{Level, LoadModel, Plan};
use crate::sut::Target;
use crate::units::Bytes;
use crate::wire::echo::{Hello, Mode, MAX_MESSAGE};
use serde::{Deserialize, Serialize};
use session::NetWorkload;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// `perflab run net`.
pub struct Net;

/// Which test a net run makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NetTest {
    /// Request/response on one connection per user.
    Rr,
    /// Connect, request, response, close per transaction.
    Crr,
    /// Bulk from perflab to the agent.
    Stream,
    /// Bulk from the agent to perflab.
    Maerts,
}

impl NetTest {
    /// Its name, as flags and operations are named.
    pub(crate) fn name(self) -> &'static str {
        match self {
            NetTest::Rr => "rr",
            NetTest::Crr => "crr",
            NetTest::Stream => "stream",
            NetTest::Maerts => "maerts",
        }
    }

    /// Whether the test of this operation's name moves bulk one way
    /// (`stream`, `maerts`): its operations are messages, its cost is per
    /// gigabyte.
    pub(crate) fn is_bulk_name(op: &str) -> bool {
        op == NetTest::Stream.name() || op == NetTest::Maerts.name()
    }
}

/// The net workload's flags.
#[derive(Debug, clap::Args)]
pub struct NetArgs {
    /// The far end: a perflab agent started with --echo, agent://HOST:PORT (its HTTP port; the token is --token-file).
    #[arg(long, value_name = "AGENT")]
    pub(crate) target: String,

    /// rr (request/response, one connection per user), crr (a connection per transaction), stream (bulk out) or maerts (bulk in).
    #[arg(long, value_enum, default_value_t = NetTest::Rr)]
    pub(crate) test: NetTest,

    /// rr and crr: bytes of each request, e.g. 1, 200, 4KiB.
    #[arg(long, value_name = "SIZE", default_value = "1")]
    pub(crate) request_size: String,

    /// rr and crr: bytes of each response.
    #[arg(long, value_name = "SIZE", default_value = "1")]
    pub(crate) response_size: String,

    /// stream and maerts: bytes of each message written or read (one operation).
    #[arg(long, value_name = "SIZE", default_value = "128KiB")]
    pub(crate) message_size: String,
}

/// The net workload's validated options, as the run's plan stores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetSpec {
    pub(crate) target: Target,
    pub(crate) test: NetTest,
    /// Bytes of each request (rr, crr).
    pub(crate) request_size: u32,
    /// Bytes of each response (rr, crr).
    pub(crate) response_size: u32,
    /// Bytes of each stream message (stream, maerts).
    pub(crate) message_size: u32,
}

impl NetSpec {
    /// The hello each connection opens with.
    fn hello(&self) -> Hello {
        match self.test {
            NetTest::Rr | NetTest::Crr => Hello {
                mode: Mode::RequestResponse,
                request: self.request_size,
                response: self.response_size,
            },
            NetTest::Stream => Hello {
                mode: Mode::Sink,
                request: self.message_size,
                response: 1,
            },
            NetTest::Maerts => Hello {
                mode: Mode::Source,
                request: 1,
                response: self.message_size,
            },
        }
    }
}

/// `perflab check net` takes no flags.
#[derive(Debug, clap::Args)]
pub struct NetCheckArgs {}

/// A size flag: 1 byte to [`MAX_MESSAGE`].
fn size_flag(flag: &'static str, text: &str) -> Result<u32, PlanError> {
    let fix = format!("give 1 byte to {} MiB, e.g. {flag} 1", MAX_MESSAGE >> 20);
    let bytes = Bytes::parse(text).map_err(|e| PlanError::flag(flag, e, &fix))?;
    u32::try_from(bytes.0)
        .ok()
        .filter(|b| (1..=MAX_MESSAGE).contains(b))
        .ok_or_else(|| PlanError::flag(flag, format!("{} bytes is out of range", bytes.0), &fix))
}

impl WorkloadKind for Net {
    const NAME: &'static str = "net";
    const ABOUT: &'static str = "The network path: request/response (rr, crr) and bulk (stream, maerts) against a perflab agent's echo, with the CPU each transaction costs on both ends.";
    const CHECK_ABOUT: &'static str =
        "The net workload checks every reply as it runs (nothing to check after).";
    const RATE_UNIT: crate::units::RateUnit = crate::units::RateUnit::Transactions;
    type RunArgs = NetArgs;
    type CheckArgs = NetCheckArgs;
    type Spec = NetSpec;

    fn validate(args: &NetArgs) -> Result<NetSpec, PlanError> {
        let target = Target::parse(&args.target)
            .map_err(|e| PlanError::flag("--target", e, "give the agent as agent://HOST:PORT"))?;
        if !matches!(target, Target::Agent { .. }) {
            return Err(PlanError::flag(
                "--target",
                format!("'{}' is not a perflab agent", target.redacted()),
                "give agent://HOST:PORT of an agent started with --echo",
            ));
        }
        Ok(NetSpec {
            target,
            test: args.test,
            request_size: size_flag("--request-size", &args.request_size)?,
            response_size: size_flag("--response-size", &args.response_size)?,
            message_size: size_flag("--message-size", &args.message_size)?,
        })
    }

    fn rate_unit_of(first_op: Option<&str>) -> crate::units::RateUnit {
        match first_op {
            Some(op) if NetTest::is_bulk_name(op) => crate::units::RateUnit::Messages,
            _ => Self::RATE_UNIT,
        }
    }

    fn figures(
        steps: &[crate::record::StepResult],
        op_names: &[String],
    ) -> Option<crate::workload::figures::Figures> {
        Some(figures::figures(steps, op_names))
    }

    fn target(spec: &NetSpec) -> Target {
        spec.target.clone()
    }

    fn start<D: SweepDriver>(spec: &NetSpec, plan: &Plan, driver: D) -> anyhow::Result<D::Output> {
        let access = driver.agent_access().unwrap_or_default();
        let shown = spec.target.redacted();
        let client = crate::probe::agent_client::AgentClient::new(&shown, access)?
            .with_timeout(Duration::from_secs(5));
        let echo: EchoInfo = client.get_json("/v1/echo").map_err(|e| {
            anyhow::anyhow!(
                "{}",
                crate::util::one_line(&format!(
                    "cannot reach the echo of {shown}: {e:#}; start the agent with --echo (and give its --token-file)"
                ))
            )
        })?;
        let address = echo_address(&spec.target, echo.port)?;
        if let Some(cap) = echo.connections {
            within_seats(plan, cap, &format!("the echo at {address} of {shown}"))?;
        }
        let hello = spec.hello().encode(&echo.ticket);
        // A peer that is no echo, never answers or breaks off fails the
        // run here, in one line (exit 1), before anything is measured.
        session::probe(address, &echo.ticket).map_err(|why| {
            anyhow::anyhow!(
                "the echo at {address} of {shown} {why}; check that it is a perflab agent started with --echo"
            )
        })?;
        let costs = crate::probe::DbProbe::start(costs::AgentCosts::new(client))?;
        let started = Started {
            setup: Some(serde_json::json!({
                "echo": address.to_string(),
                "test": spec.test.name(),
            })),
            db_probe: Some(costs),
            addresses: Some(vec![address.ip()]),
            ..Started::default()
        };
        driver.drive(Arc::new(NetWorkload::new(address, hello, spec)), started)
    }

    fn check(_args: &NetCheckArgs) -> anyhow::Result<(String, CheckReport)> {
        Err(PlanError::new(
            "the net workload checks every reply as it runs, so there is nothing to check after; see perflab check --help",
        )
        .into())
    }
}

/// What `GET /v1/echo` answers.
#[derive(Deserialize)]
struct EchoInfo {
    port: u16,
    ticket: String,
    /// The most connections it serves at once (agents before it said so
    /// say nothing).
    #[serde(default)]
    connections: Option<u64>,
}

/// Refuses a plan whose users (or open load's connections) are more than
/// the `cap` connections the echo serves at once: the rest would be
/// refused, each user's operations failing.
fn within_seats(plan: &Plan, cap: u64, echo: &str) -> Result<(), PlanError> {
    let most = plan
        .sweep
        .levels
        .iter()
        .map(|level| match (level, &plan.load) {
            (Level::Users(users), _) => u64::from(*users),
            (Level::Rate(_), LoadModel::Open { connections, .. }) => u64::from(*connections),
            (Level::Rate(_), LoadModel::Closed { .. }) => 0,
        })
        .max()
        .unwrap_or(0);
    if most <= cap {
        return Ok(());
    }
    Err(PlanError::new(format!(
        "{echo} would refuse {} of {most} connections: it serves at most {cap} at once; run at most {cap} users, or more agents",
        most - cap
    )))
}

/// The echo's address: the agent's host at the echo's port.
fn echo_address(target: &Target, port: u16) -> Result<SocketAddr, PlanError> {
    let Target::Agent { address } = target else {
        return Err(PlanError::new("the net workload's target is an agent"));
    };
    let host = address
        .rsplit_once(':')
        .map_or(address.as_str(), |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            PlanError::flag(
                "--target",
                format!("cannot resolve '{host}'"),
                "give the agent's address",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(test: NetTest) -> NetArgs {
        NetArgs {
            target: "agent://127.0.0.1:7071".to_string(),
            test,
            request_size: "1".to_string(),
            response_size: "1".to_string(),
            message_size: "128KiB".to_string(),
        }
    }

    #[test]
    fn sizes_and_targets_are_checked() {
        let spec = Net::validate(&args(NetTest::Rr)).unwrap();
        assert_eq!((spec.request_size, spec.response_size), (1, 1));
        assert_eq!(spec.message_size, 128 << 10);
        let mut big = args(NetTest::Rr);
        big.response_size = "17MiB".to_string();
        let e = Net::validate(&big).unwrap_err().to_string();
        assert!(e.contains("--response-size") && e.contains("16 MiB"), "{e}");
        let mut zero = args(NetTest::Crr);
        zero.request_size = "0".to_string();
        assert!(Net::validate(&zero).is_err());
        let mut web = args(NetTest::Rr);
        web.target = "http://127.0.0.1:80/".to_string();
        let e = Net::validate(&web).unwrap_err().to_string();
        assert!(e.contains("not a perflab agent"), "{e}");
    }
}
