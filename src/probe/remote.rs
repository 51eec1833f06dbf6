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
use crate::wire::answer::{self, Answer};
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
    NodeExporter(NodeExporter),
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
            Source::NodeExporter(NodeExporter::new(address, shown.clone(), timeout))
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
            Source::NodeExporter(_) => None,
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
            Source::NodeExporter(exporter) => {
                let text = exporter.metrics()?;
                let scrape =
                    Scrape::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", exporter.shown))?;
                Ok(RemoteSnapshot::NodeExporter {
                    at: Instant::now(),
                    scrape: Box::new(scrape),
                })
            }
        }
    }
}

/// A node_exporter's `/metrics`, asked in plain HTTP/1.1, one request per
/// connection, the whole exchange within one timeout. A user and password
/// before the host (`bob:pw@db1:9100`) go as basic authentication.
struct NodeExporter {
    /// `HOST:PORT`.
    address: String,
    /// `Basic …`, when the address carried a user.
    authorization: Option<String>,
    /// The probe as shown: its password masked.
    shown: String,
    timeout: Duration,
}

/// The largest `/metrics` page read: a host with hundreds of CPUs, disks
/// and interfaces writes a few MiB.
const MAX_PAGE: u64 = 32 << 20;

impl NodeExporter {
    fn new(address: &str, shown: String, timeout: Duration) -> Self {
        let (user, address) = match address.rsplit_once('@') {
            Some((user, host)) => (Some(user), host),
            None => (None, address),
        };
        let authorization = user.map(|user| {
            use base64::Engine;
            let (name, password) = user.split_once(':').unwrap_or((user, ""));
            let decoded =
                |part: &str| crate::util::percent_decoded(part).unwrap_or_else(|| part.to_string());
            let pair = format!("{}:{}", decoded(name), decoded(password));
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        NodeExporter {
            address: address.to_string(),
            authorization,
            shown,
            timeout,
        }
    }

    /// The page's text.
    fn metrics(&self) -> anyhow::Result<String> {
        use std::io::Write;
        let shown = &self.shown;
        let failed = |e: &std::io::Error| match e.kind() {
            std::io::ErrorKind::TimedOut => anyhow::anyhow!("{shown} {e}"),
            _ => anyhow::anyhow!("node_exporter at {shown} did not answer: {e}"),
        };
        let deadline = Instant::now() + self.timeout;
        let peer = std::net::ToSocketAddrs::to_socket_addrs(&self.address)
            .ok()
            .and_then(|mut found| found.next())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "node_exporter at {shown} cannot be found: its host does not resolve"
                )
            })?;
        let socket = std::net::TcpStream::connect_timeout(&peer, self.timeout)
            .map_err(|e| anyhow::anyhow!("node_exporter at {shown} did not answer: {e}"))?;
        let mut wire = crate::wire::Wire::plain(socket, deadline);
        let mut request = format!(
            "GET /metrics HTTP/1.1\r\nHost: {}\r\nAccept: text/plain; version=0.0.4\r\nAccept-Encoding: identity\r\n",
            self.address
        );
        if let Some(authorization) = &self.authorization {
            request.push_str(&format!("Authorization: {authorization}\r\n"));
        }
        request.push_str("Connection: close\r\n\r\n");
        let answer = wire
            .write_all(request.as_bytes())
            .and_then(|()| wire.flush())
            .and_then(|()| answer::read(&mut wire, MAX_PAGE, "a node_exporter", self.timeout))
            .map_err(|e| failed(&e))?;
        let (status, body) = match answer::parse(&answer) {
            Answer::Whole(status, body) => (status, body),
            Answer::Cut => anyhow::bail!("node_exporter at {shown} broke off its answer"),
            Answer::NotHttp => anyhow::bail!(
                "node_exporter at {shown} answered with what is not HTTP; is it a node_exporter?"
            ),
            Answer::HugeHead => anyhow::bail!(
                "node_exporter at {shown} answered with a head over 64 KiB; is it a node_exporter?"
            ),
        };
        if status != 200 {
            // Its words, on one line and short: never a page of HTML.
            let said = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            anyhow::bail!(
                "node_exporter at {shown} answered {status}: {}",
                crate::secret::redact(&crate::util::one_line(&said))
            );
        }
        String::from_utf8(body.into_owned())
            .map_err(|_| anyhow::anyhow!("node_exporter at {shown} answered with what is not text"))
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
            "the probe {} does not answer: {}; start it, or drop that --probe",
            crate::util::clipped(probe),
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

    /// A loopback peer that accepts, reads the request, then answers with
    /// `answer` (or says nothing, and holds the connection, for none).
    fn exporter(answer: Option<&'static [u8]>) -> std::net::SocketAddr {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            match answer {
                Some(answer) => drop(stream.write_all(answer)),
                None => std::thread::sleep(Duration::from_secs(5)),
            }
        });
        at
    }

    fn scrape(at: std::net::SocketAddr) -> String {
        let spec = format!("node-exporter://{at}");
        let probe =
            RemoteProbe::parse(&spec, &AgentAccess::default(), Duration::from_millis(300)).unwrap();
        format!("{:#}", probe.snapshot().err().unwrap())
    }

    #[test]
    fn a_silent_or_absurd_node_exporter_is_named_in_one_line() {
        let at = exporter(None);
        assert_eq!(
            scrape(at),
            format!("node-exporter://{at} sent nothing within 300ms")
        );
        let interim =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy";
        let at = exporter(Some(interim));
        assert_eq!(
            scrape(at),
            format!("node_exporter at node-exporter://{at} answered 503: busy")
        );
        let chunk = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nup 1\r\n0\r\n\r\n";
        let at = exporter(Some(chunk));
        assert_eq!(
            scrape(at),
            format!("node_exporter at node-exporter://{at} broke off its answer")
        );
    }
}
