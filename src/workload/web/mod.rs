//! The `web` workload: WebBench's static test, as seed 001 ran it, on any
//! HTTP server or on an nginx perflab manages. Each user keeps one
//! HTTP/1.1 connection (or opens one per request with `--connection
//! close`), requests files of a [`fileset`] drawn by their weights, and
//! checks every reply's status and length against the set, and a sampled
//! share of bodies against their checksums. Users are spread round-robin
//! over the target's addresses (one per network adapter of the server);
//! operations are named by size class, and by address when there are
//! several, so every figure of a run is also kept per class and per
//! address. The server's own statistics (`stub_status`) are sampled each
//! interval like a database's.

pub mod client;
pub mod fileset;

use super::{CheckReport, Driver, Kind, OpCounts, Session, Started, Workload};
use crate::error::PlanError;
use crate::measure::{ErrorKind, OpResult, Outcome};
use crate::plan::Plan;
use crate::target::{parse_cpu_list, Endpoint, Opened, ServerOptions, Target};
use client::{Client, Expect};
use fileset::{FileSet, FileSetSpec, CLASS_NAMES};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize, Serializer};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

/// The web workload's target when none is given.
pub const DEFAULT_TARGET: &str = "nginx:managed";

/// `perflab run web`.
pub struct Web;

/// The web workload's flags.
#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// The server: http://HOST:PORT/ (several, comma-separated, one per adapter) or nginx:managed.
    #[arg(long, value_name = "URL", default_value = DEFAULT_TARGET)]
    pub target: String,

    /// The files requested: webbench, specweb:DIRS or tree:DIR.
    #[arg(
        long,
        value_name = "SET",
        default_value = "webbench",
        conflicts_with = "urls"
    )]
    pub fileset: String,

    /// Request the paths listed in FILE instead (one "/PATH [WEIGHT]" per line, # comments).
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,

    /// keep-alive (one connection per user) or close (a connection per request).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = Connection::KeepAlive)]
    pub connection: Connection,

    /// Requests in flight on each keep-alive connection (HTTP/1.1 pipelining); 1 sends the next only after a reply.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub pipeline: u32,

    /// The request method.
    #[arg(long, value_name = "METHOD", value_enum, default_value_t = Method::Get)]
    pub method: Method,

    /// A header sent with every request, "Name: value" (repeatable).
    #[arg(long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,

    /// The share of bodies checksummed against the file set (0 to 1).
    #[arg(long, value_name = "SHARE", default_value_t = 0.01)]
    pub verify_share: f64,

    /// HTTPS: trust the CA certificates of this PEM file instead of the system's.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// HTTPS: accept any server certificate (the connection is encrypted, not authenticated).
    #[arg(long)]
    pub insecure: bool,

    /// The server's status page (nginx stub_status or Apache server-status?auto), sampled each interval.
    #[arg(long, value_name = "URL")]
    pub server_status: Option<String>,

    /// Managed nginx: a directive, NAME=VALUE (repeatable), e.g. worker_processes=2.
    #[arg(long = "nginx-set", value_name = "NAME=VALUE")]
    pub nginx_set: Vec<String>,

    /// Managed nginx: run it on these CPUs only, e.g. 0 or 0-1.
    #[arg(long = "nginx-cpus", value_name = "LIST")]
    pub nginx_cpus: Option<String>,

    /// Managed nginx: the loopback addresses it listens on, e.g. 127.0.0.1,127.0.0.2.
    #[arg(long = "nginx-listen", value_name = "ADDRS")]
    pub nginx_listen: Option<String>,

    /// Managed nginx: serve HTTPS with this certificate (PEM); needs --nginx-tls-key.
    #[arg(
        long = "nginx-tls-cert",
        value_name = "FILE",
        requires = "nginx_tls_key"
    )]
    pub nginx_tls_cert: Option<PathBuf>,

    /// Managed nginx: the certificate's private key (PEM).
    #[arg(
        long = "nginx-tls-key",
        value_name = "FILE",
        requires = "nginx_tls_cert"
    )]
    pub nginx_tls_key: Option<PathBuf>,

    /// Managed nginx: keep its directory (configuration, files, log) after the run.
    #[arg(long)]
    pub keep: bool,
}

/// Connection handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Connection {
    /// One HTTP/1.1 connection per user, reused.
    KeepAlive,
    /// A new connection per request (`Connection: close`).
    Close,
}

/// The request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    #[value(name = "GET")]
    Get,
    #[value(name = "HEAD")]
    Head,
}

/// The web workload's validated options, as the run's plan stores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebSpec {
    pub target: Target,
    pub fileset: FileSetSpec,
    pub connection: Connection,
    /// Requests in flight per connection (1: no pipelining).
    #[serde(default = "one")]
    pub pipeline: u32,
    pub method: Method,
    /// Extra request headers (name, value); secret ones are stored masked.
    #[serde(serialize_with = "masked_headers")]
    pub headers: Vec<(String, String)>,
    /// Share of bodies checksummed, 0 to 1.
    pub verify_share: f64,
    /// How HTTPS servers are checked.
    pub tls: crate::target::tls::TlsOptions,
    pub server_status: Option<String>,
    /// A managed server's settings, CPUs, addresses, and whether its files are kept.
    pub server: ServerOptions,
}

fn one() -> u32 {
    1
}

/// The most requests in flight on one connection.
pub const MAX_PIPELINE: u32 = 1024;

/// `perflab check web` takes no flags.
#[derive(Debug, clap::Args)]
pub struct WebCheckArgs {}

impl Kind for Web {
    const NAME: &'static str = "web";
    const ABOUT: &'static str = "WebBench's static test: users requesting a file set over HTTP/1.1 from any web server or a managed nginx.";
    const CHECK_ABOUT: &'static str =
        "The web workload checks every reply as it runs (nothing to check after).";
    type RunArgs = WebArgs;
    type CheckArgs = WebCheckArgs;
    type Spec = WebSpec;

    fn validate(args: &WebArgs) -> Result<WebSpec, PlanError> {
        let target = crate::target::validate_target(Some(&args.target), DEFAULT_TARGET)?;
        let traits = target.traits();
        if traits.kind != crate::target::Kind::Http {
            return Err(PlanError::flag(
                "--target",
                format!("{} is not a web server", target.redacted()),
                "give http://HOST:PORT/ or nginx:managed",
            ));
        }
        let fileset = match &args.urls {
            Some(file) => {
                // Parsed now so that a bad line is reported before anything starts.
                FileSet::build(&FileSetSpec::Urls { file: file.clone() })?;
                FileSetSpec::Urls { file: file.clone() }
            }
            None => FileSetSpec::parse(&args.fileset)
                .map_err(|e| PlanError::flag("--fileset", e, "e.g. --fileset specweb:2"))?,
        };
        if let FileSetSpec::Tree { dir } = &fileset {
            check_tree(dir)?;
        }
        if traits.managed && matches!(fileset, FileSetSpec::Urls { .. }) {
            return Err(PlanError::flag(
                "--urls",
                "a managed nginx serves a file set perflab writes, and a URL list has no files",
                "use --fileset webbench, specweb:DIRS or tree:DIR, or give --target http://…",
            ));
        }
        if !(0.0..=1.0).contains(&args.verify_share) {
            return Err(PlanError::flag(
                "--verify-share",
                format!("{} is not a share", args.verify_share),
                "give 0 to 1, e.g. 0.01 for 1% of bodies",
            ));
        }
        if !(1..=MAX_PIPELINE).contains(&args.pipeline) {
            return Err(PlanError::flag(
                "--pipeline",
                format!("{} requests in flight cannot run", args.pipeline),
                &format!("give 1 (no pipelining) to {MAX_PIPELINE}"),
            ));
        }
        if args.pipeline > 1 && args.connection == Connection::Close {
            return Err(PlanError::flag(
                "--pipeline",
                "a connection closed after each request carries one request",
                "drop --connection close, or --pipeline",
            ));
        }
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let managed_flag = [
            (!args.nginx_set.is_empty(), "--nginx-set"),
            (args.nginx_cpus.is_some(), "--nginx-cpus"),
            (args.nginx_listen.is_some(), "--nginx-listen"),
            (args.nginx_tls_cert.is_some(), "--nginx-tls-cert"),
            (args.keep, "--keep"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag));
        if let (false, Some(flag)) = (traits.managed, managed_flag) {
            return Err(PlanError::flag(
                flag,
                "only a managed nginx is configured by perflab",
                "use --target nginx:managed, or configure your server yourself",
            ));
        }
        if traits.managed && args.server_status.is_some() {
            return Err(PlanError::flag(
                "--server-status",
                "a managed nginx's stub_status is read already",
                "drop --server-status",
            ));
        }
        let settings = args
            .nginx_set
            .iter()
            .map(|kv| {
                let (k, v) = kv.split_once('=').ok_or_else(|| {
                    PlanError::flag(
                        "--nginx-set",
                        format!("'{kv}' is not NAME=VALUE"),
                        "e.g. --nginx-set worker_processes=2",
                    )
                })?;
                let (k, v) = (k.trim().to_string(), v.trim().to_string());
                crate::target::managed::nginx::check_setting(&k, &v).map_err(|e| {
                    PlanError::flag("--nginx-set", e, "e.g. --nginx-set sendfile=off")
                })?;
                Ok((k, v))
            })
            .collect::<Result<Vec<_>, PlanError>>()?;
        let cpus = args
            .nginx_cpus
            .as_deref()
            .map(|t| parse_cpu_list(t, "--nginx-cpus"))
            .transpose()?
            .unwrap_or_default();
        let addresses = args
            .nginx_listen
            .as_deref()
            .map(parse_listen)
            .transpose()?
            .unwrap_or_default();
        let tls = crate::target::tls::TlsOptions {
            cacert: args.cacert.clone(),
            insecure: args.insecure,
        };
        if tls.cacert.is_some() && tls.insecure {
            return Err(PlanError::flag(
                "--insecure",
                "--cacert checks the certificate and --insecure skips the check",
                "give one of them",
            ));
        }
        // A bad CA file is refused before anything starts.
        crate::target::tls::client_config(&tls)?;
        Ok(WebSpec {
            target,
            fileset,
            connection: args.connection,
            pipeline: args.pipeline,
            method: args.method,
            headers,
            verify_share: args.verify_share,
            tls,
            server_status: args.server_status.clone(),
            server: ServerOptions {
                settings,
                keep: args.keep,
                cpus,
                addresses,
                tls_files: args.nginx_tls_cert.clone().zip(args.nginx_tls_key.clone()),
            },
        })
    }

    fn target(spec: &WebSpec) -> Target {
        spec.target.clone()
    }

    fn start<D: Driver>(spec: &WebSpec, _plan: &Plan, driver: D) -> anyhow::Result<D::Output> {
        let files = FileSet::build(&spec.fileset)?;
        // A managed server lives until this function returns.
        let opened = Opened::open(&spec.target, &spec.server)?;
        if let Some(root) = opened.docroot() {
            files.write_into(&root)?;
            crate::util::out(format_args!(
                "wrote {} files ({}) into {}\n",
                files.files.len(),
                crate::units::Bytes(files.total_bytes()),
                root.display()
            ));
        }
        let Endpoint::Http { bases, status } = &opened.endpoint else {
            anyhow::bail!("the web workload needs a web server target");
        };
        if spec.tls.insecure && bases.iter().any(|(b, _)| b.tls) {
            crate::util::out(format_args!(
                "--insecure: the server's certificate is not checked (encrypted, not authenticated)\n"
            ));
        }
        let status = spec.server_status.clone().or_else(|| status.clone());
        let db_probe = match status {
            Some(url) => Some(
                crate::target::http::ServerStatus::connect(&url)
                    .and_then(|s| Ok(crate::probe::DbProbe::start(s)?))?,
            ),
            None => None,
        };
        let workload = Shared::new(spec, files, bases)?;
        workload.preflight(bases)?;
        let mut setup = opened.setup.clone();
        if bases.iter().any(|(b, _)| b.tls) {
            setup = merged(
                &setup,
                serde_json::json!({ "tls_certificate_checked": !spec.tls.insecure }),
            );
        }
        let started = Started {
            setup: Some(merged(
                &setup,
                serde_json::json!({
                    "fileset": {
                        "files": workload.files.files.len(),
                        "bytes": workload.files.total_bytes(),
                        "class_shares": workload.files.class_shares(),
                    },
                    "addresses": bases.iter().map(|(b, a)| format!("{} ({a})", b.url())).collect::<Vec<_>>(),
                }),
            )),
            db_probe,
            server: opened.server_processes(),
            endpoint: Some(opened.endpoint.clone()),
        };
        driver.drive(
            Arc::new(WebWorkload {
                shared: Arc::new(workload),
            }),
            started,
        )
    }

    fn check(_args: &WebCheckArgs) -> anyhow::Result<(String, CheckReport)> {
        Err(PlanError::new(
            "the web workload checks every reply while it runs (status, length, sampled checksums), so there is nothing to check after; see its errors of kind corrupt in the run",
        )
        .into())
    }
}

/// A tree must exist and hold a file before anything starts.
fn check_tree(dir: &std::path::Path) -> Result<(), PlanError> {
    let bad = |why: String| {
        PlanError::flag(
            "--fileset",
            why,
            "give tree:DIR with the files the server serves",
        )
    };
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at)
            .map_err(|e| bad(format!("{}: {e}", at.display())))?
            .flatten()
        {
            match entry.file_type() {
                Ok(t) if t.is_file() => return Ok(()),
                Ok(t) if t.is_dir() => pending.push(entry.path()),
                _ => {}
            }
        }
    }
    Err(bad(format!("{} holds no files", dir.display())))
}

/// `Name: value`, checked to be one header line.
fn parse_header(text: &str) -> Result<(String, String), PlanError> {
    let bad = |why: &str| {
        PlanError::flag(
            "--header",
            format!("'{}': {why}", crate::target::redact(text)),
            "e.g. --header 'Accept-Encoding: gzip'",
        )
    };
    let (name, value) = text.split_once(':').ok_or_else(|| bad("not Name: value"))?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    {
        return Err(bad("the name is not an HTTP token"));
    }
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(bad("the value holds a line break or control character"));
    }
    if ["host", "content-length", "transfer-encoding", "connection"]
        .contains(&name.to_ascii_lowercase().as_str())
    {
        return Err(bad(
            "perflab sets this header itself (use --connection for Connection)",
        ));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// Whether a header carries a secret (its value is never stored).
fn secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("authorization")
        || name.contains("cookie")
        || ["token", "secret", "key", "pass"]
            .iter()
            .any(|w| name.contains(w))
}

/// Headers as stored: a secret header's value masked.
fn masked_headers<S: Serializer>(headers: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    let shown: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str(),
                if secret_header(k) { "***" } else { v.as_str() },
            )
        })
        .collect();
    shown.serialize(s)
}

/// `--nginx-listen`: loopback addresses.
fn parse_listen(text: &str) -> Result<Vec<IpAddr>, PlanError> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let addr: IpAddr = part.trim().parse().map_err(|_| {
            PlanError::flag(
                "--nginx-listen",
                format!("'{part}' is not an IP address"),
                "e.g. --nginx-listen 127.0.0.1,127.0.0.2",
            )
        })?;
        if !addr.is_loopback() {
            return Err(PlanError::flag(
                "--nginx-listen",
                format!("{addr} is not a loopback address"),
                "a managed nginx listens on 127.0.0.0/8 or ::1 only",
            ));
        }
        if !out.contains(&addr) {
            out.push(addr);
        }
    }
    Ok(out)
}

/// The target's setup record with more fields added.
fn merged(target: &serde_json::Value, more: serde_json::Value) -> serde_json::Value {
    let mut out = target.clone();
    if let (Some(obj), serde_json::Value::Object(more)) = (out.as_object_mut(), more) {
        obj.extend(more);
    }
    out
}

/// The web workload, shared by every worker.
pub struct WebWorkload {
    shared: Arc<Shared>,
}

/// What every user of a run reads: the files, the addresses, the requests.
struct Shared {
    files: FileSet,
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
    fn new(
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
                // A handful of names, made once per run.
                op_names.push(&*Box::leak(name.into_boxed_str()));
            }
        }
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
    fn preflight(
        &self,
        bases: &[(crate::target::http::HttpBase, SocketAddr)],
    ) -> Result<(), PlanError> {
        let file = self.files.most_requested();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PlanError::new(format!("cannot start a runtime: {e}")))?;
        for (a, (base, addr)) in bases.iter().enumerate() {
            let mut client = Client::new(*addr, self.tls[a].clone());
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
                OpResult::Ok | OpResult::Refused => continue,
                OpResult::Error(ErrorKind::Connect) => format!(
                    "nothing accepts connections at {addr}; is the server running and listening there?"
                ),
                OpResult::Error(ErrorKind::Timeout) => format!(
                    "{addr} accepted the connection but sent no HTTP reply to GET {url} within {} s; is it a web server, and not overloaded?",
                    crate::target::HANDSHAKE.as_secs()
                ),
                OpResult::Error(ErrorKind::Http(404)) if self.files_generated => format!(
                    "{url} answered 404: the server does not serve perflab's file set; run with --target nginx:managed, or copy the files it writes (--keep) to your server"
                ),
                OpResult::Error(ErrorKind::Tls) => {
                    let detail = match &self.tls[a] {
                        Some(t) => runtime
                            .block_on(async {
                                tokio::time::timeout(
                                    crate::target::HANDSHAKE,
                                    client::handshake_error(*addr, t),
                                )
                                .await
                            })
                            .ok()
                            .flatten()
                            .unwrap_or_else(|| "the handshake failed".to_string()),
                        None => "the handshake failed".to_string(),
                    };
                    return Err(PlanError::flag(
                        "--target",
                        format!("TLS with {addr} failed: {detail}"),
                        "give --cacert FILE with the CA that signed the server's certificate, or --insecure to skip the check",
                    ));
                }
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
            return Err(PlanError::flag(
                "--target",
                why,
                "see perflab run web --help",
            ));
        }
        Ok(())
    }
}

/// One web user: its connection and its random stream.
pub struct WebSession {
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

    async fn open_session(&self, user: u32, seed: u64) -> anyhow::Result<WebSession> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_one_line_and_secrets_are_not_stored() {
        assert_eq!(
            parse_header("X-A:  b ").unwrap(),
            ("X-A".into(), "b".into())
        );
        for bad in ["nocolon", ": v", "A B: v", "X: a\r\nInjected: 1", "Host: x"] {
            let err = parse_header(bad).unwrap_err().to_string();
            assert!(err.starts_with("--header"), "{err}");
        }
        let stored = serde_json::to_string(&{
            #[derive(Serialize)]
            struct H(#[serde(serialize_with = "masked_headers")] Vec<(String, String)>);
            H(vec![
                ("Authorization".into(), "Bearer SECRETPW".into()),
                ("Accept".into(), "x".into()),
            ])
        })
        .unwrap();
        assert!(
            !stored.contains("SECRETPW") && stored.contains("\"x\""),
            "{stored}"
        );
    }

    #[test]
    fn listen_addresses_are_loopback() {
        assert_eq!(parse_listen("127.0.0.1,127.0.0.2").unwrap().len(), 2);
        assert!(parse_listen("10.0.0.1")
            .unwrap_err()
            .to_string()
            .contains("not a loopback"));
        assert!(parse_listen("x").is_err());
    }
}
