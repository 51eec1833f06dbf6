//! Reading an agent's samples: `GET /v1/samples?since=N` with the token.

use super::StampedSample;
use crate::cli::PlanError;
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

    /// The samples the agent took since the last call.
    pub fn fetch(&mut self) -> anyhow::Result<Vec<StampedSample>> {
        let url = format!("{}/v1/samples?since={}", self.base, self.last);
        let mut request = self.agent.get(&url);
        if let Some(token) = &self.token {
            request = request.set("Authorization", &format!("Bearer {token}"));
        }
        let response = match request.call() {
            Ok(r) => r,
            Err(ureq::Error::Status(401, _)) => {
                return Err(PlanError::new(format!(
                    "the agent at {} refused the token; give the token its --token-file holds",
                    self.base
                ))
                .into())
            }
            Err(e) => anyhow::bail!("the agent at {} did not answer: {e}", self.base),
        };
        #[derive(serde::Deserialize)]
        struct Body {
            samples: Vec<StampedSample>,
        }
        let body: Body = response.into_json()?;
        if let Some(last) = body.samples.last() {
            self.last = last.seq;
        }
        Ok(body.samples)
    }
}
