//! The agent's requests (served by [`super::http`]) and its sampling
//! thread.

use super::http::{Limits, Request, Response};
use super::{constant_time_eq, Ring};
use crate::error::PlanError;
use crate::probe::agent_client::SnapshotBody;
use crate::probe::counters::process::{ProcessGroup, ProcessSelector, AGENT_LABEL, SERVER_LABEL};
use crate::probe::counters::{HostReader, HostRoot, HostSample, HostSnapshot};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How an agent runs.
#[derive(Debug, Clone)]
pub(crate) struct AgentConfig {
    pub(crate) listen: SocketAddr,
    /// Required on every request when set; required to listen beyond loopback.
    pub(crate) token: Option<String>,
    pub(crate) interval: Duration,
    /// Served in HTTPS with this certificate; plain HTTP only on loopback.
    pub(crate) tls: Option<crate::wire::tls::Identity>,
    /// Also a generator (`--generate`): offers the load a coordinator sends.
    pub(crate) generate: bool,
    /// Exit after this long without a request.
    pub(crate) idle_exit: Option<Duration>,
    /// Also an echo (`--echo`): the far end of `perflab run net`, on this
    /// port of the listening address (0: any free one).
    pub(crate) echo: Option<u16>,
    /// The echo's deadline for a message (`--echo-deadline`).
    pub(crate) echo_deadline: Duration,
}

/// Serves samples until `stop` is set. Prints the address it listens on.
pub(crate) fn serve(config: AgentConfig, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    config.check()?;
    let tls = config
        .tls
        .as_ref()
        .map(|identity| {
            identity
                .server_config()
                .map_err(|e| PlanError::new(format!("TLS cannot be set up: {e}")))
        })
        .transpose()?;
    let listener = std::net::TcpListener::bind(config.listen).map_err(|e| {
        PlanError::new(format!(
            "cannot listen on {}: {e}; pick a free address with --listen",
            config.listen
        ))
    })?;
    config.announce(&listener, tls.is_some());
    let started = Instant::now();
    let ring = Arc::new(Mutex::new(Ring::default()));
    let sampler = {
        let ring = ring.clone();
        let stop = stop.clone();
        let interval = config.interval;
        let echo = config.echo.is_some();
        std::thread::Builder::new()
            .name("perflab-agent-sampler".to_string())
            .spawn(move || sample_loop(&ring, interval, &stop, echo))?
    };
    let echo = config.start_echo(&stop)?.map(Arc::new);
    let examining = Arc::new(AtomicBool::new(false));
    let token = config.token.clone();
    let generator = config
        .generate
        .then(|| Arc::new(super::generate::Generator::default()));
    if generator.is_some() {
        crate::util::out(format_args!(
            "generator role on: workloads {}\n",
            crate::workload::generator_workloads().join(", ")
        ));
    }
    // When the last request came, ms after the start (for --idle-exit).
    let last_request = Arc::new(AtomicU64::new(0));
    if let Some(idle) = config.idle_exit {
        exit_when_idle(idle, started, last_request.clone(), stop.clone())?;
    }
    let handle = Arc::new(move |request: &Request| {
        last_request.store(
            u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        answer(
            request,
            token.as_deref(),
            &ring,
            started,
            &examining,
            generator.as_deref(),
            echo.as_deref(),
        )
    });
    let served = super::http::serve(listener, Limits::default(), tls, &stop, handle);
    let _ = sampler.join();
    Ok(served?)
}

impl AgentConfig {
    /// Starts the echo role when asked (`--echo`) and says its port.
    fn start_echo(&self, stop: &Arc<AtomicBool>) -> Result<Option<super::echo::Echo>, PlanError> {
        let echo = self
            .echo
            .map(|port| {
                let bounds = super::echo::Bounds {
                    message: self.echo_deadline,
                    ..super::echo::Bounds::AGENT
                };
                super::echo::start_bounded(
                    SocketAddr::new(self.listen.ip(), port),
                    stop.clone(),
                    bounds,
                )
                .map_err(|e| {
                    PlanError::flag(
                        "--echo-port",
                        format!("cannot listen on port {port}: {e}"),
                        "pick a free port, or 0 for any",
                    )
                })
            })
            .transpose()?;
        if let Some(echo) = &echo {
            crate::util::out(format_args!(
                "echo role on: port {} (its ticket: GET /v1/echo with the token)\n",
                echo.port
            ));
        }
        Ok(echo)
    }

    /// Refuses a generator without a token, and listening beyond loopback
    /// without a token or in plain HTTP.
    fn check(&self) -> Result<(), PlanError> {
        if self.generate && self.token.is_none() {
            return Err(PlanError::flag(
                "--generate",
                "a generator runs what it is sent, so it needs a token",
                "give --token-file",
            ));
        }
        if self.echo.is_some() && self.token.is_none() {
            return Err(PlanError::flag(
                "--echo",
                "an echo hands its ticket only to a peer with the token, so it needs one",
                "give --token-file",
            ));
        }
        if self.token.is_none() && !self.listen.ip().is_loopback() {
            return Err(PlanError::new(format!(
                "refusing to listen on {} without a token: anyone who can reach it could read this host's counters; give --token-file, or listen on 127.0.0.1",
                self.listen
            )));
        }
        if self.tls.is_none() && !self.listen.ip().is_loopback() {
            return Err(PlanError::new(format!(
                "refusing to listen on {} in plain HTTP: the token and this host's counters would cross the network in clear; give --tls-self-signed (clients pin the fingerprint it prints) or --tls-cert and --tls-key",
                self.listen
            )));
        }
        Ok(())
    }

    /// Prints where the agent listens, and its certificate's fingerprint.
    fn announce(&self, listener: &std::net::TcpListener, tls: bool) {
        let bound = listener
            .local_addr()
            .map_or(self.listen.to_string(), |a| a.to_string());
        let scheme = if tls { "https" } else { "http" };
        crate::util::out(format_args!(
            "perflab agent listening on {scheme}://{bound}/v1/samples and /v1/snapshot\n"
        ));
        if let Some(identity) = &self.tls {
            crate::util::out(format_args!(
                "certificate SHA-256 fingerprint: {}\n",
                identity.fingerprint()
            ));
        }
    }
}

/// Sets `stop` once no request came for `idle` (`last_request` is when
/// the last one came, ms after `started`), on a thread of its own.
fn exit_when_idle(
    idle: Duration,
    started: Instant,
    last_request: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("perflab-agent-idle".to_string())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let last = Duration::from_millis(last_request.load(Ordering::Relaxed));
                if started.elapsed().saturating_sub(last) >= idle {
                    crate::util::out(format_args!(
                        "perflab agent: no request for {}: exiting\n",
                        crate::units::format_duration(idle)
                    ));
                    stop.store(true, Ordering::Relaxed);
                }
            }
        })?;
    Ok(())
}

/// The agent's own process, followed in every sample and snapshot: a
/// coordinator takes the echo's CPU per transaction from it. With the
/// echo on, the agent is the server under test of a net run, so it is
/// followed as the server too: its cgroup's CPU quota and throttling, its
/// threads' states and its CPU reach the verdict of a run that probes it.
fn own_process(echo: bool) -> Vec<ProcessGroup> {
    let me = ProcessSelector::Pid(std::process::id());
    let mut groups = vec![ProcessGroup {
        label: AGENT_LABEL.to_string(),
        selector: me.clone(),
    }];
    if echo {
        groups.push(ProcessGroup {
            label: SERVER_LABEL.to_string(),
            selector: me,
        });
    }
    groups
}

fn sample_loop(ring: &Mutex<Ring>, interval: Duration, stop: &AtomicBool, echo: bool) {
    let mut reader = HostReader::new(HostRoot::live());
    let own = own_process(echo);
    let mut last = reader.read(&own);
    let mut next = Instant::now() + interval;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
            continue;
        }
        let snapshot = reader.read(&own);
        let sample = HostSample::between(&last, &snapshot);
        last = snapshot;
        let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        if let Ok(mut ring) = ring.lock() {
            ring.push(at, sample);
        }
        next += interval;
    }
}

fn json_response(status: u16, body: String) -> Response {
    Response::json(status, body)
}

fn answer(
    request: &Request,
    token: Option<&str>,
    ring: &Mutex<Ring>,
    started: Instant,
    examining: &AtomicBool,
    generator: Option<&super::generate::Generator>,
    echo: Option<&super::echo::Echo>,
) -> Response {
    if let Some(token) = token {
        if let Some(refused) = refuse_token(request, token) {
            return refused;
        }
    }
    let (path, query) = request
        .target
        .split_once('?')
        .unwrap_or((request.target.as_str(), ""));
    if let Some(answer) = generator.and_then(|g| g.answer(request, path, query)) {
        return answer;
    }
    if request.method != "GET" {
        return json_response(405, r#"{"error":"only GET is served"}"#.to_string());
    }
    match path {
        "/v1/hello" => hello(generator.is_some(), echo.is_some()),
        "/v1/echo" => match echo {
            Some(echo) => json_response(
                200,
                serde_json::json!({
                    "port": echo.port,
                    "ticket": echo.ticket,
                    "connections": echo.connections,
                })
                .to_string(),
            ),
            None => json_response(
                404,
                r#"{"error":"this agent has no echo role; start it with --echo"}"#.to_string(),
            ),
        },
        "/v1/clock" => json_response(
            200,
            format!(r#"{{"unix_ns":{}}}"#, super::generate::unix_ns()),
        ),
        "/v1/snapshot" => snapshot(started, echo.is_some()),
        "/v1/inventory" => inventory(),
        // The doctor sleeps through its sample on this connection's own
        // thread, one examination at a time: samples are served meanwhile.
        "/v1/doctor" => {
            if examining.swap(true, Ordering::AcqRel) {
                return json_response(
                    503,
                    r#"{"error":"an examination is under way; ask again when it is done"}"#
                        .to_string(),
                );
            }
            // Cleared however the examination ends.
            struct Done<'a>(&'a AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::Release);
                }
            }
            let _done = Done(examining);
            doctor(doctor_sample(query))
        }
        "/v1/samples" => samples(ring, query),
        _ => json_response(
            404,
            r#"{"error":"the agent serves /v1/samples, /v1/snapshot, /v1/inventory and /v1/doctor"}"#.to_string(),
        ),
    }
}

/// `/v1/hello`: what this agent is: its version, its roles, and the
/// workloads its generator runs.
fn hello(generate: bool, echo: bool) -> Response {
    let mut roles = vec!["probe"];
    if generate {
        roles.push("generate");
    }
    if echo {
        roles.push("echo");
    }
    let body = crate::probe::agent_client::Hello {
        version: env!("CARGO_PKG_VERSION").to_string(),
        roles: roles.iter().map(ToString::to_string).collect(),
        workloads: if generate {
            crate::workload::generator_workloads()
                .iter()
                .map(ToString::to_string)
                .collect()
        } else {
            Vec::new()
        },
    };
    match serde_json::to_string(&body) {
        Ok(body) => json_response(200, body),
        Err(_) => json_response(500, r#"{"error":"cannot encode the answer"}"#.to_string()),
    }
}

/// The doctor's sample, seconds: `sample=S` of the query, 5 without one,
/// at most 30.
fn doctor_sample(query: &str) -> f64 {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("sample="))
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(5.0)
        .min(30.0)
}

/// The 401 for a request without the token (logged without what it
/// carried); none when it carries the token.
fn refuse_token(request: &Request, token: &str) -> Option<Response> {
    let from = request.peer.to_string();
    let given = request.header("authorization").map_or("", super::bearer);
    if constant_time_eq(given.as_bytes(), token.as_bytes()) {
        return None;
    }
    crate::util::err(format_args!(
        "perflab agent: refused a request from {from}: {} token\n",
        if given.is_empty() { "no" } else { "a wrong" }
    ));
    Some(json_response(
        401,
        r#"{"error":"a valid token is required"}"#.to_string(),
    ))
}

/// `/v1/snapshot`: this host's counters now, with the agent's clock.
fn snapshot(started: Instant, echo: bool) -> Response {
    let body = SnapshotBody {
        seconds: started.elapsed().as_secs_f64(),
        snapshot: HostSnapshot::read(&HostRoot::live(), &own_process(echo)),
        boot_id: crate::util::boot_id(),
    };
    match serde_json::to_string(&body) {
        Ok(body) => json_response(200, body),
        Err(_) => json_response(500, r#"{"error":"cannot encode the counters"}"#.to_string()),
    }
}

/// `/v1/inventory`: this host's inventory.
fn inventory() -> Response {
    let inventory = crate::doctor::inventory::host_inventory(&crate::doctor::Root::live());
    match serde_json::to_string(&inventory) {
        Ok(body) => json_response(200, body),
        Err(_) => json_response(
            500,
            r#"{"error":"cannot encode the inventory"}"#.to_string(),
        ),
    }
}

/// `/v1/doctor?sample=S`: this host examined by the doctor, from two
/// readings `sample` seconds apart, as `perflab doctor` takes them.
fn doctor(sample: f64) -> Response {
    let live = crate::doctor::Root::live();
    let report = tempfile::tempdir().and_then(|dir| {
        let before = crate::doctor::snapshot(&live, dir.path())?;
        std::thread::sleep(crate::units::saturating_secs(sample));
        Ok(crate::doctor::examine(
            &before,
            &live,
            &crate::doctor::Scope::default(),
        ))
    });
    match report.ok().and_then(|r| serde_json::to_string(&r).ok()) {
        Some(body) => json_response(200, body),
        None => json_response(500, r#"{"error":"cannot examine this host"}"#.to_string()),
    }
}

/// `/v1/samples?since=N`: the samples numbered above N.
fn samples(ring: &Mutex<Ring>, query: &str) -> Response {
    let since = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("since="))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let samples = ring.lock().map(|r| r.since(since)).unwrap_or_default();
    match serde_json::to_string(&serde_json::json!({ "samples": samples })) {
        Ok(body) => json_response(200, body),
        Err(_) => json_response(500, r#"{"error":"cannot encode the samples"}"#.to_string()),
    }
}
