//! A web run's users: what every user shares (the file set, the
//! addresses, each request's bytes built once, the TLS set-up), the
//! pre-flight request per address, and one user's session with its
//! connection, plain or pipelined.

use super::client::{self, Client, Expect};
use super::fileset::{FileSet, CLASS_NAMES};
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

/// What every user of a run reads: the files, the addresses, the requests.
pub(super) struct Shared {
    pub(super) files: FileSet,
    addrs: Vec<SocketAddr>,
    /// How each address is reached over TLS (none for plain HTTP).
    tls: Vec<Option<client::TlsTarget>>,
    /// The request of file `f` to address `a`, at `a · files + f`.
    requests: Vec<Box<[u8]>>,
    op_names: Vec<&'static str>,
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

impl Shared {
    pub(super) fn new(
        spec: &WebSpec,
        files: FileSet,
        bases: &[(crate::target::http::HttpBase, SocketAddr)],
    ) -> anyhow::Result<Self> {
        let sized = files.files.iter().all(|f| f.size.is_some());
        let class_names: Vec<&str> = if sized {
            CLASS_NAMES.to_vec()
        } else {
            vec!["request"]
        };
        let mut op_names = Vec::new();
        for (base, _) in bases {
            for class in &class_names {
                let name = if bases.len() > 1 {
                    format!("{class}@{}", base.authority())
                } else {
                    class.to_string()
                };
                op_names.push(name);
            }
        }
        let op_names = crate::workload::leak_names(op_names);
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
        let config = crate::target::tls::client_config(&spec.tls)?;
        let tls = bases
            .iter()
            .map(|(b, _)| {
                b.tls
                    .then(|| {
                        Ok::<_, PlanError>(client::TlsTarget {
                            connector: tokio_rustls::TlsConnector::from(config.clone()),
                            name: crate::target::tls::server_name(&b.host)?,
                        })
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let longest_request = requests.iter().map(|r| r.len()).max().unwrap_or(0);
        Ok(Shared {
            longest_request,
            tls,
            classes: class_names.len(),
            files,
            addrs: bases.iter().map(|(_, a)| *a).collect(),
            requests,
            op_names,
            verify_below: (spec.verify_share * 4_294_967_296.0) as u64,
            head: spec.method == Method::Head,
            close: spec.connection == Connection::Close,
            pipeline: spec.pipeline as usize,
            files_generated: spec.fileset.generated(),
        })
    }
}

impl Shared {
    /// Requests the set's most requested file once at every address
    /// before the run, so that a server that is not there, does not speak
    /// HTTP or does not serve the set ends in one line, not a sweep of
    /// errors. Each exchange has [`crate::target::HANDSHAKE`] to finish.
    pub(super) fn preflight(
        &self,
        bases: &[(crate::target::http::HttpBase, SocketAddr)],
    ) -> Result<(), PlanError> {
        let file = self.files.most_requested();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PlanError::new(format!("cannot start a runtime: {e}")))?;
        for (a, (base, addr)) in bases.iter().enumerate() {
            self.preflight_at(&runtime, a, base, *addr, file)?;
        }
        Ok(())
    }

    /// The preflight request of file `file` at address `a` (`base`, `addr`).
    fn preflight_at(
        &self,
        runtime: &tokio::runtime::Runtime,
        a: usize,
        base: &crate::target::http::HttpBase,
        addr: SocketAddr,
        file: usize,
    ) -> Result<(), PlanError> {
        let mut client = Client::new(addr, self.tls[a].clone());
        let f = &self.files.files[file];
        // Only that it speaks HTTP and serves the path: a file served
        // wrong is the run's to count (as corrupt), not a reason to refuse it.
        let expect = Expect {
            size: None,
            checksum: None,
            head: self.head,
            close: self.close,
        };
        let request = &self.requests[a * self.files.files.len() + file];
        let outcome = runtime.block_on(async {
            tokio::time::timeout(crate::target::HANDSHAKE, client.exchange(request, expect))
                .await
                .unwrap_or(Outcome::error(ErrorKind::Timeout))
        });
        let url = format!("{}{}", base.url(), f.path);
        let why = match outcome.result {
            OpResult::Ok | OpResult::Refused => return Ok(()),
            OpResult::Error(ErrorKind::Connect) => format!(
                "nothing accepts connections at {addr}; is the server running and listening there?"
            ),
            OpResult::Error(ErrorKind::Timeout) => format!(
                "{addr} accepted the connection but sent {} in answer to GET {url} within {} s; is it a web server, and not overloaded?",
                client.received(),
                crate::target::HANDSHAKE.as_secs()
            ),
            OpResult::Error(ErrorKind::Http(404)) if self.files_generated => format!(
                "{url} answered 404: the server does not serve perflab's file set; run with --target nginx:managed, or copy the files it writes (--keep) to your server"
            ),
            OpResult::Error(ErrorKind::Tls) => return Err(self.tls_failure(runtime, a, addr)),
            OpResult::Error(ErrorKind::Http(400)) if !base.tls => format!(
                "GET {url} answered HTTP 400; if that port speaks TLS, give https://"
            ),
            OpResult::Error(ErrorKind::Http(status)) => {
                format!("GET {url} answered HTTP {status}; give a file set the server serves")
            }
            OpResult::Error(ErrorKind::Corrupt) => format!(
                "{addr} did not answer GET {url} with an HTTP reply (is it a TLS port, or another protocol's server?)"
            ),
            OpResult::Error(kind) => format!(
                "GET {url} failed ({kind}): the server closed the connection; is it a web server (not a TLS port)?"
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
        let detail = match &self.tls[a] {
            Some(t) => runtime
                .block_on(async {
                    tokio::time::timeout(crate::target::HANDSHAKE, client::handshake_error(addr, t))
                        .await
                })
                .ok()
                .flatten()
                .unwrap_or_else(|| "the handshake failed".to_string()),
            None => "the handshake failed".to_string(),
        };
        PlanError::flag(
            "--target",
            format!("TLS with {addr} failed: {detail}"),
            "give --cacert FILE with the CA that signed the server's certificate, or --insecure to skip the check",
        )
    }
}

/// One web user: its connection and its random stream.
pub(crate) struct WebSession {
    workload: Arc<Shared>,
    /// The address this user's requests go to.
    base: usize,
    client: Client,
    rng: SmallRng,
    /// The file chosen for the next request.
    next: usize,
    /// Pipelining: the files whose requests were sent and replies are due, in order.
    in_flight: std::collections::VecDeque<usize>,
    /// Pipelining: the requests written at once.
    batch: Vec<u8>,
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
        Ok(WebSession {
            workload: Arc::clone(&self.shared),
            base,
            client: Client::new(self.shared.addrs[base], self.shared.tls[base].clone()),
            rng: SmallRng::seed_from_u64(seed),
            next: 0,
            in_flight: std::collections::VecDeque::with_capacity(self.shared.pipeline),
            batch: Vec::with_capacity(self.shared.pipeline * self.shared.longest_request),
        })
    }

    fn check(&self, _run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        Ok(None)
    }
}

impl Session for WebSession {
    fn choose(&mut self) -> usize {
        let w = &*self.workload;
        self.next = match self.in_flight.front() {
            // The reply due next is that of a request already sent.
            Some(&f) if self.client.connected() => f,
            _ => w.files.draw(&mut self.rng),
        };
        let class = if w.classes == 1 {
            0
        } else {
            w.files.files[self.next].class
        };
        self.base * w.classes + class
    }

    async fn execute(&mut self, _op: usize) -> Outcome {
        if self.workload.pipeline > 1 {
            return self.pipelined().await;
        }
        let w = &*self.workload;
        let file = &w.files.files[self.next];
        let verify = u64::from(self.rng.gen::<u32>()) < w.verify_below;
        let expect = Expect {
            size: file.size,
            checksum: file.checksum.filter(|_| verify),
            head: w.head,
            close: w.close,
        };
        let request = &w.requests[self.base * w.files.files.len() + self.next];
        self.client.exchange(request, expect).await
    }
}

impl WebSession {
    /// One reply with up to `pipeline` requests in flight: the requests
    /// missing are drawn and written at once, then the oldest reply is
    /// read. Its latency counts from this call (its request may have gone
    /// out earlier, behind the replies before it), as wrk counts.
    async fn pipelined(&mut self) -> Outcome {
        let w = &*self.workload;
        if !self.client.connected() {
            self.in_flight.clear();
        }
        let files = w.files.files.len();
        self.batch.clear();
        if self.in_flight.is_empty() {
            self.in_flight.push_back(self.next);
            self.batch
                .extend_from_slice(&w.requests[self.base * files + self.next]);
        }
        while self.in_flight.len() < w.pipeline {
            let f = w.files.draw(&mut self.rng);
            self.in_flight.push_back(f);
            self.batch
                .extend_from_slice(&w.requests[self.base * files + f]);
        }
        if let Err(kind) = self.client.send(&self.batch).await {
            self.in_flight.clear();
            return Outcome::error(kind);
        }
        let Some(f) = self.in_flight.pop_front() else {
            return Outcome::error(ErrorKind::Reset);
        };
        let file = &w.files.files[f];
        let verify = u64::from(self.rng.gen::<u32>()) < w.verify_below;
        let outcome = self
            .client
            .receive(Expect {
                size: file.size,
                checksum: file.checksum.filter(|_| verify),
                head: w.head,
                close: false,
            })
            .await;
        if !self.client.connected() {
            self.in_flight.clear();
        }
        outcome
    }
}
