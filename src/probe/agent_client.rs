//! Reading a perflab agent (`agent://HOST:PORT`) over its HTTP API, with
//! the token: its samples (`GET /v1/samples?since=N`), its counters now
//! (`GET /v1/snapshot`), its inventory and its doctor's report; and the
//! bodies the agent (`crate::agent`, which serves them) and this client
//! exchange. One request per connection, over a [`Wire`]: plain HTTP to
//! a loopback address when no trust is given, TLS otherwise, the whole
//! exchange (connect, handshake, answer) within one timeout. It lives
//! with the probes because a run reads remote hosts through it; the agent
//! imports these bodies from here, never the reverse.

use super::counters::untrusted;
use super::counters::{HostSample, HostSnapshot};
use crate::error::PlanError;
use crate::wire::answer::{self, Answer};
use crate::wire::tls::Trust;
use crate::wire::Wire;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a client reaches agents: the token every request carries and what
/// it accepts as an agent's certificate. Without a trust given, an agent
/// on a loopback address is spoken to in plain HTTP and any other in TLS
/// checked against the system's roots: a token never crosses a network
/// in clear.
#[derive(Debug, Clone, Default)]
pub struct AgentAccess {
    pub(crate) token: Option<String>,
    /// `--agent-fingerprint` or `--agent-cacert`.
    pub(crate) trust: Option<Trust>,
}

/// A connection to one agent.
pub(crate) struct AgentClient {
    /// `agent://HOST:PORT`, as given.
    name: String,
    /// `HOST:PORT`.
    address: String,
    host: String,
    token: Option<String>,
    /// The TLS set-up of the trust given; none for plain on loopback or
    /// the system's roots beyond it.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The system's roots, read once, the first time an agent beyond
    /// loopback is asked without a trust given.
    system: std::sync::OnceLock<Arc<rustls::ClientConfig>>,
    timeout: Duration,
    last: u64,
}

impl AgentClient {
    /// Parses `agent://HOST:PORT`.
    pub(crate) fn new(probe: &str, access: AgentAccess) -> Result<Self, PlanError> {
        let shown = crate::secret::redact(probe);
        let address = probe.strip_prefix("agent://").ok_or_else(|| {
            PlanError::flag(
                "--probe",
                format!("'{shown}' is not a probe"),
                "use local or agent://HOST:PORT",
            )
        })?;
        // An agent takes its token from --token-file, never from the
        // address, where it would be shown and stored.
        if address.contains('@') {
            return Err(PlanError::flag(
                "--probe",
                format!("'{shown}' holds a user or password"),
                "give agent://HOST:PORT; the agent's token comes from --token-file",
            ));
        }
        let host = match address.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                host.trim_start_matches('[').trim_end_matches(']')
            }
            _ => {
                return Err(PlanError::flag(
                    "--probe",
                    format!("'{shown}' needs HOST:PORT"),
                    "e.g. --probe agent://db1:7071",
                ))
            }
        };
        let tls = access
            .trust
            .as_ref()
            .map(crate::wire::tls::client_config)
            .transpose()?;
        Ok(AgentClient {
            // Named in every message about it: a name of thousands of
            // bytes would make each of them as long.
            name: crate::util::clipped(probe).into_owned(),
            address: address.to_string(),
            host: host.to_string(),
            token: access.token,
            tls,
            system: std::sync::OnceLock::new(),
            timeout: Duration::from_secs(5),
            last: 0,
        })
    }

    /// Sets how long a request may take, from connecting to the last byte
    /// of the answer (a run cannot wait 5 s per interval).
    pub(crate) fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `GET path` with the token: the answer's body. A refused token, a
    /// certificate that is not the one trusted, or a peer in the other
    /// protocol is a [`PlanError`] (the user's to fix); an agent that is
    /// not there or breaks off is an error of the moment.
    fn get(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        self.call("GET", path, None, self.timeout)
    }

    /// `GET path`, its answer as JSON.
    pub(crate) fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.get(path).and_then(|b| self.json(&b))
    }

    /// `POST path` with `body` as JSON, given `timeout` for the answer;
    /// the answer as JSON.
    pub(crate) fn post_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
        timeout: Duration,
    ) -> anyhow::Result<T> {
        let body = serde_json::to_vec(body)?;
        self.call("POST", path, Some(&body), timeout)
            .and_then(|b| self.json(&b))
    }

    /// One request and its answer's body (see [`AgentClient::get`]).
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Duration,
    ) -> anyhow::Result<Vec<u8>> {
        let mut wire = self.connect(timeout)?;
        let request = self.request(method, path, body);
        let answer = wire
            .write_all(&request)
            .and_then(|()| wire.flush())
            .and_then(|()| answer::read(&mut wire, MAX_BODY, "a perflab agent", timeout));
        let answer = answer.map_err(|e| self.failed(&wire, e))?;
        wire.close();
        let (status, body) = match answer::parse(&answer) {
            Answer::Whole(status, body) => (status, body),
            Answer::Cut => anyhow::bail!("the agent at {} broke off its answer", self.name),
            Answer::NotHttp if !wire.is_tls() && answer.first() == Some(&0x15) => {
                return Err(speaks_tls(&self.name))
            }
            Answer::NotHttp => anyhow::bail!(
                "the agent at {} answered with what is not HTTP; is it a perflab agent?",
                self.name
            ),
            Answer::HugeHead => anyhow::bail!(
                "the agent at {} answered with a head over 64 KiB; is it a perflab agent?",
                self.name
            ),
        };
        self.body_of(status, &body)
    }

    /// A connection to the agent, in TLS unless it is on this host and
    /// no certificate is given (a remote one is checked against the
    /// system's CAs); the whole exchange must end within `timeout`.
    fn connect(&self, timeout: Duration) -> anyhow::Result<Wire> {
        let deadline = Instant::now() + timeout;
        let peer = self.resolve()?;
        let socket = TcpStream::connect_timeout(&peer, timeout)
            .map_err(|e| anyhow::anyhow!("the agent at {} did not answer: {e}", self.name))?;
        let _ = socket.set_nodelay(true);
        Ok(match (&self.tls, peer.ip().is_loopback()) {
            (None, true) => Wire::plain(socket, deadline),
            (Some(config), _) => self.tls_wire(socket, config.clone(), deadline)?,
            (None, false) => {
                let system = match self.system.get() {
                    Some(config) => config.clone(),
                    None => {
                        let config = crate::wire::tls::client_config(&Trust::System)?;
                        let _ = self.system.set(config.clone());
                        config
                    }
                };
                self.tls_wire(socket, system, deadline)?
            }
        })
    }

    /// The request's bytes: its head with the token, then `body` as JSON.
    fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Vec<u8> {
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.address);
        if let Some(token) = &self.token {
            request.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if let Some(body) = body {
            request.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        request.push_str("Connection: close\r\n\r\n");
        let mut request = request.into_bytes();
        request.extend_from_slice(body.unwrap_or_default());
        request
    }

    /// The body of an answer with `status`; a refused token is the user's
    /// to fix, another status an error in the agent's own words.
    fn body_of(&self, status: u16, body: &[u8]) -> anyhow::Result<Vec<u8>> {
        match status {
            200 => Ok(body.to_vec()),
            401 => Err(PlanError::new(format!(
                "the agent at {} refused the token; give the token its --token-file holds",
                self.name
            ))
            .into()),
            status => {
                // Its own error's words when it gave them.
                #[derive(Deserialize)]
                struct Said {
                    error: String,
                }
                let said = serde_json::from_slice::<Said>(body).map_or_else(
                    |_| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
                    |s| s.error,
                );
                anyhow::bail!(
                    "the agent at {} answered {status}: {}",
                    self.name,
                    crate::util::one_line(&said)
                )
            }
        }
    }

    /// The agent's address, resolved now (a generator's name may appear
    /// only once its pod runs).
    fn resolve(&self) -> anyhow::Result<SocketAddr> {
        self.address
            .to_socket_addrs()
            .ok()
            .and_then(|mut found| found.next())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "the agent at {} cannot be found: its host does not resolve",
                    self.name
                )
            })
    }

    fn tls_wire(
        &self,
        socket: TcpStream,
        config: Arc<rustls::ClientConfig>,
        deadline: Instant,
    ) -> anyhow::Result<Wire> {
        let name = crate::wire::tls::server_name(&self.host, "--probe")?;
        Ok(Wire::client(socket, config, name, deadline)?)
    }

    /// What a failed exchange means to the user.
    fn failed(&self, wire: &Wire, e: std::io::Error) -> anyhow::Error {
        let name = &self.name;
        let Some(tls) = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) else {
            return if !wire.is_tls() && e.kind() == std::io::ErrorKind::ConnectionReset {
                // A TLS agent drops a request in plain text after its alert.
                speaks_tls(name)
            } else if e.kind() == std::io::ErrorKind::TimedOut {
                anyhow::anyhow!("the agent at {name} {e}")
            } else {
                anyhow::anyhow!("the agent at {name} did not answer: {e}")
            };
        };
        match tls {
            rustls::Error::General(pin) => PlanError::new(format!(
                "the agent at {name} is not the one --agent-fingerprint pins: {pin}; give the fingerprint this agent printed when it started"
            ))
            .into(),
            rustls::Error::InvalidCertificate(why) => untrusted(name, why).into(),
            rustls::Error::InvalidMessage(_) => {
                PlanError::new(format!(
                    "the agent at {name} does not speak TLS: beyond loopback its token would cross in clear; start it with --tls-self-signed or --tls-cert/--tls-key"
                ))
                .into()
            }
            other => anyhow::anyhow!("the agent at {name}: TLS failed: {other}"),
        }
    }

    /// The agent's address as given.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// An answer's body as JSON.
    fn json<T: serde::de::DeserializeOwned>(&self, body: &[u8]) -> anyhow::Result<T> {
        serde_json::from_slice(body).map_err(|e| {
            anyhow::anyhow!(
                "the agent at {} answered with what is not its JSON: {e}",
                self.name
            )
        })
    }

    /// An answer's body that is not what it should be, in words.
    fn not_its_json(&self, e: serde_json::Error) -> anyhow::Error {
        anyhow::anyhow!(
            "the agent at {} answered with what is not its JSON: {e}",
            self.name
        )
    }

    /// The samples the agent took since the last call, made safe to show
    /// (see [`decode_samples`]).
    pub(crate) fn fetch(&mut self) -> anyhow::Result<Vec<StampedSample>> {
        let body = self.get(&format!("/v1/samples?since={}", self.last))?;
        let samples = decode_samples(&body).map_err(|e| self.not_its_json(e))?;
        if let Some(last) = samples.last() {
            self.last = last.seq;
        }
        Ok(samples)
    }

    /// The agent host's inventory.
    pub(crate) fn inventory(&self) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
        self.get("/v1/inventory").and_then(|b| self.json(&b))
    }

    /// The agent host examined by the doctor over `sample` seconds. The
    /// report's type is the caller's (`doctor::Report`): the doctor reads
    /// probes, so probes do not name the doctor's types.
    pub(crate) fn doctor<Report: serde::de::DeserializeOwned>(
        &self,
        sample: f64,
    ) -> anyhow::Result<Report> {
        self.get(&format!("/v1/doctor?sample={sample}"))
            .and_then(|b| self.json(&b))
    }

    /// The agent host's counters now, and the agent's clock in seconds.
    pub(crate) fn snapshot(&self) -> anyhow::Result<(f64, HostSnapshot)> {
        let body = self.snapshot_body()?;
        Ok((body.seconds, body.snapshot))
    }

    /// `/v1/snapshot` whole: with the agent host's boot id; its names
    /// cleaned and what no host could show taken for absent
    /// ([`HostSnapshot::cleaned`]).
    pub(crate) fn snapshot_body(&self) -> anyhow::Result<SnapshotBody> {
        let body = self.get("/v1/snapshot")?;
        decode_snapshot(&body).map_err(|e| self.not_its_json(e))
    }
}

/// An agent's body of counters or samples as JSON, made safe before it is
/// typed: its names cleaned, and with `figures` (samples, where every
/// number is a rate, share, count or size) its numbers beyond belief made
/// 0 (see [`untrusted`]).
fn untrusted_json<T: serde::de::DeserializeOwned>(
    body: &[u8],
    figures: bool,
) -> serde_json::Result<T> {
    let mut value: serde_json::Value = serde_json::from_slice(body)?;
    untrusted::clean_names(&mut value);
    if figures {
        untrusted::clean_figures(&mut value);
    }
    serde_json::from_value(value)
}

/// `/v1/snapshot`'s body as the coordinator takes it: names cleaned, and
/// what no host could show taken for absent ([`HostSnapshot::cleaned`]).
pub(crate) fn decode_snapshot(body: &[u8]) -> serde_json::Result<SnapshotBody> {
    let body: SnapshotBody = untrusted_json(body, false)?;
    Ok(SnapshotBody {
        snapshot: body.snapshot.cleaned(),
        ..body
    })
}

/// `/v1/samples`'s body as the coordinator takes it: names cleaned,
/// figures below zero or beyond belief made 0, shares held to 0..=1.
pub(crate) fn decode_samples(body: &[u8]) -> serde_json::Result<Vec<StampedSample>> {
    #[derive(serde::Deserialize)]
    struct Body {
        samples: Vec<StampedSample>,
    }
    let body: Body = untrusted_json(body, true)?;
    Ok(body
        .samples
        .into_iter()
        .map(|mut s| {
            s.sample = s.sample.with_shares_bounded();
            s
        })
        .collect())
}

/// The error for an agent in TLS asked in plain text.
fn speaks_tls(name: &str) -> anyhow::Error {
    PlanError::new(format!(
        "the agent at {name} speaks TLS; give --agent-fingerprint with the fingerprint it printed when it started, or --agent-cacert with the CA that signed its certificate"
    ))
    .into()
}

/// The largest answer read from an agent, bytes: a minute of samples of a
/// host with hundreds of CPUs, disks and interfaces fits many times over.
pub(crate) const MAX_BODY: u64 = 32 << 20;

/// What `/v1/hello` answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Hello {
    /// perflab's version on the agent.
    pub(crate) version: String,
    /// `probe`, and `generate` when it generates load.
    pub(crate) roles: Vec<String>,
    /// The workloads its generator runs.
    pub(crate) workloads: Vec<String>,
}

/// What `/v1/snapshot` answers.
#[derive(Serialize, Deserialize)]
pub(crate) struct SnapshotBody {
    /// Seconds on the agent's monotonic clock since it started.
    pub(crate) seconds: f64,
    pub(crate) snapshot: HostSnapshot,
    /// The agent host's boot id ([`crate::util::boot_id`]): a client that
    /// reads its own there shares the agent's host. Absent from older
    /// agents.
    #[serde(default)]
    pub(crate) boot_id: Option<String>,
}

/// One sample with its number and time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StampedSample {
    pub(crate) seq: u64,
    /// RFC 3339 time the interval ended.
    pub(crate) at: String,
    pub(crate) sample: HostSample,
}

/// An agent's certificate that the client's trust refused, in words: a
/// CA's certificate shown as the agent's own is named as such (it may
/// sign a server's certificate, not be one), where rustls says only
/// `CaUsedAsEndEntity`.
fn untrusted(name: &str, why: &rustls::CertificateError) -> PlanError {
    use crate::wire::tls::Refusal;
    let refusal = Refusal::of(why);
    if refusal == Some(Refusal::CaAsServer) {
        return PlanError::new(format!(
            "the agent at {name} shows a CA's certificate as its own: a CA certificate signs servers' certificates and cannot be one; start the agent with --tls-cert and --tls-key of a certificate that CA signed for the agent's address, or with --tls-self-signed and give --agent-fingerprint what it prints"
        ));
    }
    let why = refusal.map_or_else(|| why.to_string(), |r| r.words().to_string());
    PlanError::new(format!(
        "the agent at {name} showed a certificate that is not trusted ({why}); give --agent-cacert the CA that signed it, or --agent-fingerprint the fingerprint the agent printed"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_addresses_need_a_host_and_a_port() {
        for good in [
            "agent://127.0.0.1:7071",
            "agent://db1:7071",
            "agent://[::1]:7071",
        ] {
            assert!(
                AgentClient::new(good, AgentAccess::default()).is_ok(),
                "{good}"
            );
        }
        for bad in [
            "agent://",
            "agent://db1",
            "agent://db1:x",
            "agent://:7071",
            "agent://h:1/x",
            "http://h:1",
        ] {
            assert!(
                AgentClient::new(bad, AgentAccess::default()).is_err(),
                "{bad}"
            );
        }
    }
}
