//! Sample sources on another host, for `perflab run --probe`: a perflab
//! agent (`agent://HOST:PORT`, its `/v1/snapshot`) or a Prometheus
//! node_exporter (`node-exporter://HOST:PORT`, its `/metrics`). Each gives
//! the host's cumulative counters when asked, so a run asks at its own
//! interval boundaries and the samples line up with the engine's intervals;
//! rates are timed by the source's clock, so network delay does not skew
//! them.

use super::agent_client::{AgentAccess, AgentClient};
use super::counters::{HostSample, HostSnapshot};
use super::node_exporter::Scrape;
use crate::error::PlanError;
use std::time::{Duration, Instant};

/// One remote probe's sample of an interval; none when it did not answer
/// (a gap, kept so it shows).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbeSample {
    /// The probe as given, any password masked: `agent://db1:7071`,
    /// `node-exporter://db1:9100`.
    pub source: String,
    pub sample: Option<HostSample>,
}

/// One remote source.
pub(crate) struct RemoteProbe {
    /// As given, any password masked: `agent://db1:7071`.
    pub(crate) name: String,
    kind: Source,
}

enum Source {
    Agent(AgentClient),
    NodeExporter { url: String, http: ureq::Agent },
}

/// A source's counters at one moment.
pub(crate) enum RemoteSnapshot {
    Agent {
        seconds: f64,
        snapshot: Box<HostSnapshot>,
    },
    NodeExporter {
        at: Instant,
        scrape: Box<Scrape>,
    },
}

impl RemoteProbe {
    /// Parses `agent://HOST:PORT` or `node-exporter://HOST:PORT`; a request
    /// gives up after `timeout`.
    pub(crate) fn parse(
        spec: &str,
        access: &AgentAccess,
        timeout: Duration,
    ) -> Result<Self, PlanError> {
        // What is shown and stored of the probe: never its password.
        let shown = crate::secret::redact(spec);
        let kind = if spec.starts_with("agent://") {
            Source::Agent(AgentClient::new(spec, access.clone())?.with_timeout(timeout))
        } else if let Some(address) = spec.strip_prefix("node-exporter://") {
            if address.is_empty() || address.contains('/') {
                return Err(PlanError::flag(
                    "--probe",
                    format!("'{shown}' needs HOST:PORT"),
                    "e.g. --probe node-exporter://db1:9100",
                ));
            }
            Source::NodeExporter {
                url: format!("http://{address}/metrics"),
                http: ureq::AgentBuilder::new().timeout(timeout).build(),
            }
        } else {
            return Err(PlanError::flag(
                "--probe",
                format!("'{shown}' is not a probe"),
                "use local, agent://HOST:PORT or node-exporter://HOST:PORT",
            ));
        };
        Ok(RemoteProbe { name: shown, kind })
    }

    /// The source host's inventory: an agent's; none from a node_exporter.
    pub(crate) fn inventory(
        &self,
    ) -> Option<anyhow::Result<std::collections::BTreeMap<String, String>>> {
        match &self.kind {
            Source::Agent(client) => Some(client.inventory()),
            Source::NodeExporter { .. } => None,
        }
    }

    /// The source's counters now.
    pub(crate) fn snapshot(&self) -> anyhow::Result<RemoteSnapshot> {
        match &self.kind {
            Source::Agent(client) => {
                let (seconds, snapshot) = client.snapshot()?;
                Ok(RemoteSnapshot::Agent {
                    seconds,
                    snapshot: Box::new(snapshot),
                })
            }
            Source::NodeExporter { url, http } => {
                // The URL may carry a user and password (basic
                // authentication): what is said of it is redacted.
                let shown = || crate::secret::redact(url);
                let text = http
                    .get(url)
                    .call()
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "node_exporter at {} did not answer: {}",
                            shown(),
                            crate::secret::redact(&e.to_string())
                        )
                    })?
                    .into_string()?;
                let scrape =
                    Scrape::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", shown()))?;
                Ok(RemoteSnapshot::NodeExporter {
                    at: Instant::now(),
                    scrape: Box::new(scrape),
                })
            }
        }
    }
}

impl RemoteSnapshot {
    /// What the host did between two snapshots of one source.
    pub(crate) fn between(a: &RemoteSnapshot, b: &RemoteSnapshot) -> Option<HostSample> {
        match (a, b) {
            (
                RemoteSnapshot::Agent {
                    seconds: s0,
                    snapshot: x,
                },
                RemoteSnapshot::Agent {
                    seconds: s1,
                    snapshot: y,
                },
            ) => Some(HostSample::between_over(x, y, (s1 - s0).max(0.0))),
            (
                RemoteSnapshot::NodeExporter { at: t0, scrape: x },
                RemoteSnapshot::NodeExporter { at: t1, scrape: y },
            ) => Some(Scrape::between(
                x,
                y,
                t1.saturating_duration_since(*t0).as_secs_f64(),
            )),
            _ => None,
        }
    }
}

/// A remote probe followed through a run: the last snapshot, and whether
/// it answered last time (a change is said once, on standard error).
pub(crate) struct RemoteWatch {
    probe: RemoteProbe,
    last: Option<RemoteSnapshot>,
    answering: bool,
}

impl RemoteWatch {
    /// Starts following a probe; it must answer now, or the run should not
    /// start (a wrong port or token is better found before loading).
    pub(crate) fn start(probe: RemoteProbe) -> Result<Self, PlanError> {
        let first = probe
            .snapshot()
            .map_err(|e| not_answering(&probe.name, e))?;
        Ok(RemoteWatch {
            probe,
            last: Some(first),
            answering: true,
        })
    }

    /// The probe's host inventory (see [`RemoteProbe::inventory`]).
    pub(crate) fn inventory(
        &self,
    ) -> Option<anyhow::Result<std::collections::BTreeMap<String, String>>> {
        self.probe.inventory()
    }

    /// The probe as given.
    pub(crate) fn name(&self) -> &str {
        &self.probe.name
    }

    /// Takes a new base snapshot (a step starts).
    pub(crate) fn rebase(&mut self) {
        self.last = self.take();
    }

    /// The sample since the last call; none, a recorded gap, when the probe
    /// did not answer now or last time.
    pub(crate) fn sample(&mut self) -> ProbeSample {
        let now = self.take();
        let sample = match (&self.last, &now) {
            (Some(a), Some(b)) => RemoteSnapshot::between(a, b),
            _ => None,
        };
        self.last = now;
        ProbeSample {
            source: self.probe.name.clone(),
            sample,
        }
    }

    fn take(&mut self) -> Option<RemoteSnapshot> {
        match self.probe.snapshot() {
            Ok(snapshot) => {
                if !self.answering {
                    crate::util::err(format_args!("probe {} answers again\n", self.probe.name));
                    self.answering = true;
                }
                Some(snapshot)
            }
            Err(e) => {
                if self.answering {
                    crate::util::err(format_args!(
                        "warning: probe {} stopped answering ({}); the run goes on and the gap is recorded\n",
                        self.probe.name,
                        crate::util::one_line(&format!("{e:#}"))
                    ));
                    self.answering = false;
                }
                None
            }
        }
    }
}

/// A probe that did not answer before anything was measured: bad input
/// (exit 2) naming it; a refused token stays the error it is.
pub(crate) fn not_answering(probe: &str, e: anyhow::Error) -> PlanError {
    match e.downcast::<PlanError>() {
        Ok(plan) => plan,
        Err(e) => PlanError::new(format!(
            "the probe {probe} does not answer: {}; start it, or drop that --probe",
            crate::util::one_line(&format!("{e:#}"))
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_specs_are_checked() {
        let t = Duration::from_millis(100);
        assert!(RemoteProbe::parse("agent://127.0.0.1:7071", &AgentAccess::default(), t).is_ok());
        assert!(
            RemoteProbe::parse("node-exporter://127.0.0.1:9100", &AgentAccess::default(), t)
                .is_ok()
        );
        for bad in [
            "node-exporter://",
            "node-exporter://h:1/metrics",
            "http://h:1",
            "agent://",
        ] {
            let e = RemoteProbe::parse(bad, &AgentAccess::default(), t)
                .err()
                .unwrap();
            assert!(e.to_string().contains("--probe"), "{bad}: {e}");
        }
    }
}
