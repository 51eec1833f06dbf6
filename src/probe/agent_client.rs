//! Reading a perflab agent (`agent://HOST:PORT`) over its HTTP API, with
//! the token: its samples (`GET /v1/samples?since=N`), its counters now
//! (`GET /v1/snapshot`), its inventory and its doctor's report; and the
//! bodies the agent (`crate::agent`, which serves them) and this client
//! exchange. It lives with the probes because a run reads remote hosts
//! through it; the agent imports these bodies from here, never the reverse.

use super::counters::{HostSample, HostSnapshot};
use crate::error::PlanError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A connection to one agent.
pub struct AgentClient {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    last: u64,
}

impl AgentClient {
    /// Parses `agent://HOST:PORT`.
    pub fn new(probe: &str, token: Option<String>) -> Result<Self, PlanError> {
        let address = probe.strip_prefix("agent://").ok_or_else(|| {
            PlanError::flag(
                "--probe",
                format!("'{probe}' is not a probe"),
                "use local or agent://HOST:PORT",
            )
        })?;
        if address.is_empty() || address.contains('/') {
            return Err(PlanError::flag(
                "--probe",
                format!("'{probe}' needs HOST:PORT"),
                "e.g. --probe agent://db1:7071",
            ));
        }
        Ok(AgentClient {
            base: format!("http://{address}"),
            token,
            agent: ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(5))
                .build(),
            last: 0,
        })
    }

    /// Sets how long a request may take (a run cannot wait 5 s per interval).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.agent = ureq::AgentBuilder::new().timeout(timeout).build();
        self
    }

    /// `GET path` with the token; a refused token is a [`PlanError`].
    fn get(&self, path: &str) -> anyhow::Result<ureq::Response> {
        let mut request = self.agent.get(&format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.set("Authorization", &format!("Bearer {token}"));
        }
        match request.call() {
            Ok(r) => Ok(r),
            Err(ureq::Error::Status(401, _)) => Err(PlanError::new(format!(
                "the agent at {} refused the token; give the token its --token-file holds",
                self.base
            ))
            .into()),
            Err(e) => anyhow::bail!("the agent at {} did not answer: {e}", self.base),
        }
    }

    /// An answer's body as JSON, read up to [`MAX_BODY`]: an agent (or
    /// whatever answers in its place) that sends more is refused, not
    /// buffered.
    fn json<T: serde::de::DeserializeOwned>(&self, response: ureq::Response) -> anyhow::Result<T> {
        use std::io::Read;
        let mut body = Vec::new();
        response
            .into_reader()
            .take(MAX_BODY + 1)
            .read_to_end(&mut body)
            .map_err(|e| anyhow::anyhow!("the agent at {} broke off its answer: {e}", self.base))?;
        if body.len() as u64 > MAX_BODY {
            anyhow::bail!(
                "the agent at {} sent an answer over {} MiB; is it a perflab agent?",
                self.base,
                MAX_BODY >> 20
            );
        }
        serde_json::from_slice(&body).map_err(|e| {
            anyhow::anyhow!(
                "the agent at {} answered with what is not its JSON: {e}",
                self.base
            )
        })
    }

    /// The samples the agent took since the last call.
    pub fn fetch(&mut self) -> anyhow::Result<Vec<StampedSample>> {
        #[derive(serde::Deserialize)]
        struct Body {
            samples: Vec<StampedSample>,
        }
        let body: Body = self
            .get(&format!("/v1/samples?since={}", self.last))
            .and_then(|r| self.json(r))?;
        if let Some(last) = body.samples.last() {
            self.last = last.seq;
        }
        Ok(body.samples)
    }

    /// The agent host's inventory.
    pub fn inventory(&self) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
        self.get("/v1/inventory").and_then(|r| self.json(r))
    }

    /// The agent host examined by the doctor over `sample` seconds. The
    /// report's type is the caller's (`doctor::Report`): the doctor reads
    /// probes, so probes do not name the doctor's types.
    pub fn doctor<Report: serde::de::DeserializeOwned>(
        &self,
        sample: f64,
    ) -> anyhow::Result<Report> {
        self.get(&format!("/v1/doctor?sample={sample}"))
            .and_then(|r| self.json(r))
    }

    /// The agent host's counters now, and the agent's clock in seconds.
    pub fn snapshot(&self) -> anyhow::Result<(f64, HostSnapshot)> {
        let body: SnapshotBody = self.get("/v1/snapshot").and_then(|r| self.json(r))?;
        Ok((body.seconds, body.snapshot))
    }
}

/// The largest answer read from an agent, bytes: a minute of samples of a
/// host with hundreds of CPUs, disks and interfaces fits many times over.
pub const MAX_BODY: u64 = 32 << 20;

/// What `/v1/snapshot` answers.
#[derive(Serialize, Deserialize)]
pub struct SnapshotBody {
    /// Seconds on the agent's monotonic clock since it started.
    pub seconds: f64,
    pub snapshot: HostSnapshot,
}

/// One sample with its number and time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StampedSample {
    pub seq: u64,
    /// RFC 3339 time the interval ended.
    pub at: String,
    pub sample: HostSample,
}
