//! Reading an agent: its samples (`GET /v1/samples?since=N`) or its
//! counters now (`GET /v1/snapshot`), with the token.

use super::StampedSample;
use crate::error::PlanError;
use crate::probe::counters::HostSnapshot;
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

    /// The samples the agent took since the last call.
    pub fn fetch(&mut self) -> anyhow::Result<Vec<StampedSample>> {
        #[derive(serde::Deserialize)]
        struct Body {
            samples: Vec<StampedSample>,
        }
        let body: Body = self
            .get(&format!("/v1/samples?since={}", self.last))?
            .into_json()?;
        if let Some(last) = body.samples.last() {
            self.last = last.seq;
        }
        Ok(body.samples)
    }

    /// The agent host's inventory.
    pub fn inventory(&self) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
        Ok(self.get("/v1/inventory")?.into_json()?)
    }

    /// The agent host examined by the doctor over `sample` seconds.
    pub fn doctor(&self, sample: f64) -> anyhow::Result<crate::doctor::Report> {
        Ok(self
            .get(&format!("/v1/doctor?sample={sample}"))?
            .into_json()?)
    }

    /// The agent host's counters now, and the agent's clock in seconds.
    pub fn snapshot(&self) -> anyhow::Result<(f64, HostSnapshot)> {
        let body: SnapshotBody = self.get("/v1/snapshot")?.into_json()?;
        Ok((body.seconds, body.snapshot))
    }
}

/// What `/v1/snapshot` answers.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct SnapshotBody {
    /// Seconds on the agent's monotonic clock since it started.
    pub seconds: f64,
    pub snapshot: HostSnapshot,
}
