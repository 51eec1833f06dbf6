//! A web run's users: what every user shares (the file set, the
//! addresses, each request's bytes built once, the TLS set-up), the
//! pre-flight request per address, and one user's session with its
//! connection, plain or pipelined.

use super::client::{self, Client, Expect};
use super::fileset::{FileSet, CLASS_NAMES};
use super::flow::{Flow, FlowShared, FlowUser};
use super::targets::{self, Targets};
use super::{Connection, Method, WebSpec};
use crate::error::PlanError;
use crate::measure::{ErrorKind, OpResult, Outcome};
use crate::workload::{CheckReport, OpCounts, Seat, Session, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::net::SocketAddr;
use std::sync::Arc;

/// The web workload, shared by every worker.
pub(crate) struct WebWorkload {
    pub(super) shared: Arc<Shared>,
    /// What a generator builds this workload from (`generator::Form`).
    pub(super) form: Option<serde_json::Value>,
}

/// What every user of a run reads: the files (or the targets file's
/// requests), the addresses, the requests' bytes.
pub(super) struct Shared {
    pub(super) files: FileSet,
    /// `--targets`: the requests sent in turn instead of files drawn
    /// (and `--flow`'s, as its first user writes them).
    pub(super) targets: Option<TargetSet>,
    /// `--flow`: each user's journey through those requests.
    pub(super) flow: Option<FlowShared>,
    addrs: Vec<SocketAddr>,
    /// How each address is reached over TLS (none for plain HTTP).
    tls: Vec<Option<client::TlsTarget>>,
    /// The request of item `i` (a file, or a target) to address `a`, at
    /// `a · items + i`.
    requests: Vec<Box<[u8]>>,
    op_names: Vec<&'static str>,
    /// Operation kinds per address: size classes, or request names.
    classes: usize,
    /// A reply is verified when a uniform u32 draw is below this.
    verify_below: u64,
    head: bool,
    close: bool,
    /// Requests in flight per connection.
    pipeline: usize,
    /// The longest request, bytes.
    longest_request: usize,
    /// perflab generated the set (a server not managed must have been given its files).
    files_generated: bool,
}

/// A targets file's requests as a run sends them.
pub(super) struct TargetSet {
    /// Each request's kind (an index into the file's names).
    kinds: Vec<usize>,
    /// Which requests are HEADs (no body in the reply).
    heads: Vec<bool>,
    /// The file's distinct request names.
    pub(super) names: Vec<String>,
    /// Bytes of the bodies read.
    pub(super) body_bytes: u64,
}

impl TargetSet {
    /// The requests of the file.
    pub(super) fn requests(&self) -> usize {
        self.kinds.len()
    }
}

/// The most bytes a pipelined batch of requests may hold.
const MAX_BATCH: usize = 64 << 20;

impl Shared {
    pub(super) fn new(
        spec: &WebSpec,
        files: FileSet,
        bases: &[(crate::sut::http::HttpBase, SocketAddr)],
        targets: Option<Targets>,
        flow: Option<Flow>,
    ) -> anyhow::Result<Self> {
        let sized = files.files.iter().all(|f| f.size.is_some());
        let class_names: Vec<&str> = match &targets {
            Some(t) => t.names.iter().map(String::as_str).collect(),
            None if sized => CLASS_NAMES.to_vec(),
            None => vec!["request"],
        };
        let op_names = crate::workload::leak_names(op_names_of(&class_names, bases));
        let flow = flow.map(|f| {
            FlowShared::new(
                f,
                bases.iter().map(|(b, _)| b.clone()).collect(),
                spec.headers.clone(),
            )
        });
        let close = spec.connection == Connection::Close;
        let requests = match (&flow, &targets) {
            (Some(f), _) => f.first_requests(close),
            (None, Some(t)) => target_requests(spec, t, bases),
            (None, None) => file_requests(spec, &files, bases),
        };
        let longest_request = requests.iter().map(|r| r.len()).max().unwrap_or(0);
        if longest_request.saturating_mul(spec.pipeline as usize) > MAX_BATCH {
            return Err(PlanError::flag(
                "--pipeline",
                format!(
                    "{} requests of up to {} in flight",
                    spec.pipeline,
                    crate::units::Bytes(longest_request as u64)
                ),
                &format!(
                    "keep --pipeline times the largest request under {}",
                    crate::units::Bytes(MAX_BATCH as u64)
                ),
            )
            .into());
        }
        Ok(Shared {
            longest_request,
            tls: tls_targets(spec, bases)?,
            classes: class_names.len(),
            files,
            targets: targets.map(|t| TargetSet {
                heads: t.requests.iter().map(targets::is_head).collect(),
                kinds: t.kinds,
                names: t.names,
                body_bytes: t.body_bytes,
            }),
            addrs: bases.iter().map(|(_, a)| *a).collect(),
            flow,
            requests,
            op_names,
            verify_below: (spec.verify_share * 4_294_967_296.0) as u64,
            head: spec.method == Method::Head,
            close,
            pipeline: spec.pipeline as usize,
            files_generated: spec.fileset.generated(),
        })
    }

    /// Requests per address: the files, or the targets.
    fn items(&self) -> usize {
        self.targets
            .as_ref()
            .map_or(self.files.files.len(), |t| t.kinds.len())
    }

    /// The kind of item `i` at address `a`.
    fn kind(&self, a: usize, i: usize) -> usize {
        let class = match &self.targets {
            Some(t) => t.kinds[i],
            None if self.classes == 1 => 0,
            None => self.files.files[i].class,
        };
        a * self.classes + class
    }

    /// The bytes of item `i`'s request to address `a`.
    fn request(&self, a: usize, i: usize) -> &[u8] {
        &self.requests[a * self.items() + i]
    }

    /// What the reply to item `i` must be.
    fn expect(&self, i: usize, verify: bool, close: bool) -> Expect {
        match &self.targets {
            Some(t) => Expect {
                size: None,
                checksum: None,
                head: t.heads[i],
                close,
            },
            None => {
                let file = &self.files.files[i];
                Expect {
                    size: file.size,
                    checksum: file.checksum.filter(|_| verify),
                    head: self.head,
                    close,
                }
            }
        }
    }
}

/// The operation kinds: each class (or request name) per address, the
/// address added when there are several.
fn op_names_of(
    class_names: &[&str],
    bases: &[(crate::sut::http::HttpBase, SocketAddr)],
) -> Vec<String> {
    let mut op_names = Vec::new();
    for (base, _) in bases {
        for class in class_names {
            op_names.push(if bases.len() > 1 {
                format!("{class}@{}", base.authority())
            } else {
                class.to_string()
            });
        }
    }
    op_names
}

/// Each file's request to each address, built once.
fn file_requests(
    spec: &WebSpec,
    files: &FileSet,
    bases: &[(crate::sut::http::HttpBase, SocketAddr)],
) -> Vec<Box<[u8]>> {
    let method = match spec.method {
        Method::Get => "GET",
        Method::Head => "HEAD",
    };
    let mut extra = String::new();
    for (k, v) in &spec.headers {
        extra.push_str(&format!("{k}: {v}\r\n"));
    }
    if spec.connection == Connection::Close {
        extra.push_str("Connection: close\r\n");
    }
    let mut requests = Vec::with_capacity(bases.len() * files.files.len());
    for (base, _) in bases {
        for f in &files.files {
            requests.push(
                format!(
                    "{method} {}{} HTTP/1.1\r\nHost: {}\r\nUser-Agent: perflab/{}\r\nAccept: */*\r\n{extra}\r\n",
                    base.path,
                    f.path,
                    base.authority(),
                    env!("CARGO_PKG_VERSION")
                )
                .into_bytes()
                .into_boxed_slice(),
            );
        }
    }
    requests
}

/// Each target's request (its body included) to each address, built once.
fn target_requests(
    spec: &WebSpec,
    targets: &Targets,
    bases: &[(crate::sut::http::HttpBase, SocketAddr)],
) -> Vec<Box<[u8]>> {
    let close = spec.connection == Connection::Close;
    bases
        .iter()
        .flat_map(|(base, _)| {
            targets
                .requests
                .iter()
                .map(move |r| targets::render(r, base, &spec.headers, close).into_boxed_slice())
        })
        .collect()
}

/// How each address is reached over TLS (none for plain HTTP).
fn tls_targets(
    spec: &WebSpec,
    bases: &[(crate::sut::http::HttpBase, SocketAddr)],
) -> anyhow::Result<Vec<Option<client::TlsTarget>>> {
    let config = crate::sut::tls::client_config(&spec.tls)?;
    Ok(bases
        .iter()
        .map(|(b, _)| {
            b.tls
                .then(|| {
                    Ok::<_, PlanError>(client::TlsTarget {
                        connector: tokio_rustls::TlsConnector::from(config.clone()),
                        name: crate::sut::tls::server_name(&b.host)?,
                    })
                })
                .transpose()
        })
        .collect::<Result<Vec<_>, _>>()?)
}

impl Shared {
    /// Requests the set's most requested file once at every address
    /// before the run, so that a server that is not there, does not speak
    /// HTTP or does not serve the set ends in one line, not a sweep of
    /// errors. Each exchange has [`crate::sut::HANDSHAKE`] to finish.
    pub(super) fn preflight(
        &self,
        bases: &[(crate::sut::http::HttpBase, SocketAddr)],
    ) -> Result<(), PlanError> {
        // The file set's most requested file, or the targets file's first request.
        let item = if self.targets.is_some() {
            0
        } else {
            self.files.most_requested()
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PlanError::new(format!("cannot start a runtime: {e}")))?;
        for (a, (base, addr)) in bases.iter().enumerate() {
            self.preflight_at(&runtime, a, base, *addr, item)?;
        }
        Ok(())
    }

    /// The preflight request of item `item` at address `a` (`base`, `addr`).
    fn preflight_at(
        &self,
        runtime: &tokio::runtime::Runtime,
        a: usize,
        base: &crate::sut::http::HttpBase,
        addr: SocketAddr,
        item: usize,
    ) -> Result<(), PlanError> {
        let mut client = Client::new(addr, self.tls[a].clone());
        // Only that it speaks HTTP and serves the path: a file served
        // wrong is the run's to count (as corrupt), not a reason to refuse it.
        let expect = Expect {
            size: None,
            checksum: None,
            ..self.expect(item, false, self.close)
        };
        let request = self.request(a, item);
        let outcome = runtime.block_on(async {
            tokio::time::timeout(crate::sut::HANDSHAKE, client.exchange(request, expect))
                .await
                .unwrap_or(Outcome::error(ErrorKind::Timeout))
        });
        let (asked, url) = asked_of(base, request);
        let fix = if self.flow.is_some() {
            "fix the flow's first request, or the server"
        } else if self.targets.is_some() {
            "fix the targets file's first request, or the server"
        } else {
            "give a file set the server serves"
        };
        let why = match outcome.result {
            OpResult::Ok | OpResult::Refused => return Ok(()),
            // A flow's login may answer with a redirect.
            OpResult::Error(ErrorKind::Http(300..=399)) if self.flow.is_some() => return Ok(()),
            OpResult::Error(ErrorKind::Connect) => format!(
                "nothing accepts connections at {addr}; is the server running and listening there?"
            ),
            OpResult::Error(ErrorKind::Timeout) => format!(
                "{addr} accepted the connection but sent {} in answer to {asked} within {} s; is it a web server, and not overloaded?",
                client.received(),
                crate::sut::HANDSHAKE.as_secs()
            ),
            OpResult::Error(ErrorKind::Http(404)) if self.files_generated && self.targets.is_none() => format!(
                "{url} answered 404: the server does not serve perflab's file set; run with --target {}, or copy the files it writes (--keep) to your server",
                super::DEFAULT_TARGET
            ),
            OpResult::Error(ErrorKind::Tls) => return Err(self.tls_failure(runtime, a, addr)),
            OpResult::Error(ErrorKind::Http(400)) if !base.tls => format!(
                "{asked} answered HTTP 400; if that port speaks TLS, give https://"
            ),
            OpResult::Error(ErrorKind::Http(status)) => {
                format!("{asked} answered HTTP {status}; {fix}")
            }
            OpResult::Error(ErrorKind::Corrupt) => format!(
                "{addr} did not answer {asked} with an HTTP reply (is it a TLS port, or another protocol's server?)"
            ),
            OpResult::Error(kind) => format!(
                "{asked} failed ({kind}): the server closed the connection; is it a web server (not a TLS port)?"
            ),
        };
        Err(PlanError::flag(
            "--target",
            why,
            "see perflab run web --help",
        ))
    }

    /// A failed TLS handshake with address `a`, with what a second
    /// handshake says of it.
    fn tls_failure(
        &self,
        runtime: &tokio::runtime::Runtime,
        a: usize,
        addr: SocketAddr,
    ) -> PlanError {
        let failure = self.tls[a].as_ref().and_then(|t| {
            runtime
                .block_on(async {
                    tokio::time::timeout(crate::sut::HANDSHAKE, client::handshake_error(addr, t))
                        .await
                })
                .ok()
                .flatten()
        });
        tls_refusal(addr, failure.as_ref())
    }
}

/// A failed TLS handshake with the server at `addr` in one line: a
/// certificate refused is said in words, with the fix that fits it.
fn tls_refusal(addr: SocketAddr, failure: Option<&std::io::Error>) -> PlanError {
    use crate::wire::tls::Refusal;
    let refusal = failure
        .and_then(|e| e.get_ref())
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|e| match e {
            rustls::Error::InvalidCertificate(why) => Refusal::of(why),
            _ => None,
        });
    let fix = match refusal {
        Some(Refusal::CaAsServer) => {
            "give the server a certificate that its CA signed for the name in --target (and that CA to --cacert), or --insecure to skip the check"
        }
        Some(Refusal::WrongName) => {
            "reach the server by a name its certificate is for, or --insecure to skip the check"
        }
        _ => "give --cacert FILE with the CA that signed the server's certificate, or --insecure to skip the check",
    };
    let detail = match (refusal, failure) {
        (Some(refusal), _) => refusal.words().to_string(),
        (None, Some(e)) => e.to_string(),
        (None, None) => "the handshake failed".to_string(),
    };
    PlanError::flag("--target", format!("TLS with {addr} failed: {detail}"), fix)
}

/// A request as an error line shows it, `POST http://host:port/path`,
/// and its URL: from the request's own first line.
fn asked_of(base: &crate::sut::http::HttpBase, request: &[u8]) -> (String, String) {
    let line = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split(' ');
    let method = words.next().unwrap_or_default();
    let path = words.next().unwrap_or_default();
    let scheme = if base.tls { "https" } else { "http" };
    let url = format!("{scheme}://{}{path}", base.authority());
    (format!("{method} {url}"), url)
}

/// One web user: its connection and its random stream.
pub(crate) struct WebSession {
    workload: Arc<Shared>,
    /// The address this user's requests go to.
    base: usize,
    client: Client,
    rng: SmallRng,
    /// The item (file or target) chosen for the next request.
    next: usize,
    /// `--targets`: the target this user sends next (users start spread).
    cursor: usize,
    /// Pipelining: the items whose requests were sent and replies are due, in order.
    in_flight: std::collections::VecDeque<usize>,
    /// Pipelining: the requests written at once.
    batch: Vec<u8>,
    /// `--flow`: where this user is in its journey, and what it holds.
    flow: Option<FlowUser>,
}

impl Workload for WebWorkload {
    type Session = WebSession;

    fn op_names(&self) -> &[&'static str] {
        &self.shared.op_names
    }

    fn generator_form(&self) -> Option<serde_json::Value> {
        self.form.clone()
    }

    async fn open_session(&self, user: u32, seed: u64, _seat: Seat) -> anyhow::Result<WebSession> {
        let base = user as usize % self.shared.addrs.len();
        let flow = self
            .shared
            .flow
            .as_ref()
            .map(|f| FlowUser::new(&f.flow, user));
        Ok(WebSession {
            workload: Arc::clone(&self.shared),
            base,
            flow,
            client: Client::new(self.shared.addrs[base], self.shared.tls[base].clone()),
            rng: SmallRng::seed_from_u64(seed),
            next: 0,
            cursor: (user as usize / self.shared.addrs.len()) % self.shared.items(),
            in_flight: std::collections::VecDeque::with_capacity(self.shared.pipeline),
            batch: if self.shared.pipeline > 1 {
                Vec::with_capacity(self.shared.pipeline * self.shared.longest_request)
            } else {
                Vec::new()
            },
        })
    }

    fn check(&self, _run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        Ok(None)
    }
}

impl Session for WebSession {
    fn choose(&mut self) -> usize {
        self.next = match self.in_flight.front() {
            // The reply due next is that of a request already sent.
            Some(&f) if self.client.connected() => f,
            _ => self.pick(),
        };
        self.workload.kind(self.base, self.next)
    }

    async fn execute(&mut self, _op: usize) -> Outcome {
        if let (Some(f), Some(user)) = (&self.workload.flow, self.flow.as_mut()) {
            return f
                .exchange(user, &mut self.client, self.base, self.workload.close)
                .await;
        }
        if self.workload.pipeline > 1 {
            return self.pipelined().await;
        }
        let w = &*self.workload;
        let verify = u64::from(self.rng.gen::<u32>()) < w.verify_below;
        let expect = w.expect(self.next, verify, w.close);
        self.client
            .exchange(w.request(self.base, self.next), expect)
            .await
    }

    fn pause(&mut self) -> std::time::Duration {
        match &mut self.flow {
            Some(user) => user.pause(&mut self.rng),
            None => std::time::Duration::ZERO,
        }
    }
}

impl WebSession {
    /// The next item: a file drawn by its weight, or the user's next
    /// target in turn.
    fn pick(&mut self) -> usize {
        if let Some(user) = &self.flow {
            return user.step;
        }
        let w = &*self.workload;
        if w.targets.is_none() {
            return w.files.draw(&mut self.rng);
        }
        let item = self.cursor;
        self.cursor = (item + 1) % w.items();
        item
    }

    /// One reply with up to `pipeline` requests in flight: the requests
    /// missing are chosen and written at once, then the oldest reply is
    /// read. Its latency counts from this call (its request may have gone
    /// out earlier, behind the replies before it), as wrk counts.
    async fn pipelined(&mut self) -> Outcome {
        if !self.client.connected() {
            self.in_flight.clear();
        }
        self.batch.clear();
        if self.in_flight.is_empty() {
            self.in_flight.push_back(self.next);
            self.batch
                .extend_from_slice(self.workload.request(self.base, self.next));
        }
        while self.in_flight.len() < self.workload.pipeline {
            let item = self.pick();
            self.in_flight.push_back(item);
            self.batch
                .extend_from_slice(self.workload.request(self.base, item));
        }
        if let Err(kind) = self.client.send(&self.batch).await {
            self.in_flight.clear();
            return Outcome::error(kind);
        }
        let Some(item) = self.in_flight.pop_front() else {
            return Outcome::error(ErrorKind::Reset);
        };
        let w = &*self.workload;
        let verify = u64::from(self.rng.gen::<u32>()) < w.verify_below;
        let outcome = self.client.receive(w.expect(item, verify, false)).await;
        if !self.client.connected() {
            self.in_flight.clear();
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::counting_alloc::allocations;
    use std::io::{Read, Write};

    /// A loopback peer answering `requests` requests on one connection:
    /// `ok`, or a head alone to a HEAD; it records each request line.
    fn peer(requests: usize) -> (SocketAddr, std::thread::JoinHandle<Vec<String>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let (mut pending, mut buf, mut lines) = (Vec::new(), [0u8; 4096], Vec::new());
            while lines.len() < requests {
                let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") else {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                    }
                    continue;
                };
                let head = String::from_utf8_lossy(&pending[..end]).to_ascii_lowercase();
                let length: usize = head
                    .split("content-length: ")
                    .nth(1)
                    .and_then(|v| v.split('\r').next())
                    .map_or(0, |v| v.parse().unwrap());
                while pending.len() < end + 4 + length {
                    let n = stream.read(&mut buf).unwrap();
                    pending.extend_from_slice(&buf[..n]);
                }
                let line = head.lines().next().unwrap_or_default().to_string();
                let reply: &[u8] = if line.starts_with("head ") {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
                } else {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                };
                stream.write_all(reply).unwrap();
                pending.drain(..end + 4 + length);
                lines.push(line);
            }
            lines
        });
        (addr, handle)
    }

    #[test]
    fn a_targets_files_requests_go_in_turn_and_allocate_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.json"), "{\"a\":1}").unwrap();
        let file = dir.path().join("t.txt");
        std::fs::write(&file, "GET /a\n\nPOST /b\n@b.json\n\nHEAD /c\n").unwrap();
        let (addr, server) = peer(1_103);
        let base = crate::sut::http::HttpBase::parse(&format!("http://{addr}/")).unwrap();
        let targets =
            targets::read(&file, targets::Allowed::Bases(std::slice::from_ref(&base))).unwrap();
        let spec = WebSpec {
            target: crate::sut::Target::Http {
                bases: vec![base.clone()],
            },
            fileset: super::super::fileset::FileSetSpec::Webbench,
            targets: Some(file),
            flow: None,
            connection: Connection::KeepAlive,
            pipeline: 1,
            method: Method::Get,
            headers: Vec::new(),
            verify_share: 0.0,
            tls: crate::sut::tls::TlsOptions {
                cacert: None,
                insecure: false,
            },
            server_status: None,
            server: Box::default(),
        };
        let shared = Shared::new(
            &spec,
            FileSet::of(Vec::new()),
            &[(base, addr)],
            Some(targets),
            None,
        );
        let workload = WebWorkload {
            shared: Arc::new(shared.unwrap()),
            form: None,
        };
        crate::util::test_runtime().block_on(async {
            let seat = Seat::alone(std::time::Duration::from_secs(5));
            // User 1 starts one request along.
            let mut session = workload.open_session(1, 7, seat).await.unwrap();
            let mut kinds = Vec::new();
            for _ in 0..103 {
                let kind = session.choose();
                kinds.push(kind);
                assert_eq!(session.execute(kind).await.result, OpResult::Ok);
            }
            assert_eq!(kinds[..4], [1, 2, 0, 1]);
            let before = allocations();
            for _ in 0..1_000 {
                let kind = session.choose();
                assert_eq!(session.execute(kind).await.result, OpResult::Ok);
            }
            assert_eq!(allocations() - before, 0, "allocations in 1,000 requests");
        });
        let lines = server.join().unwrap();
        assert_eq!(
            lines[..3],
            ["post /b http/1.1", "head /c http/1.1", "get /a http/1.1"]
        );
        assert_eq!(lines.len(), 1_103);
    }
}
