//! The `web` workload: WebBench's static test, as web labs run it, on any
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

mod cache;
pub(crate) mod client;
pub mod fileset;
mod flow;
mod generator;
mod session;
pub(crate) mod targets;

use session::Shared;
pub(crate) use session::WebWorkload;

use super::{CheckReport, Started, SweepDriver, WorkloadKind};
use crate::error::PlanError;
use crate::plan::Plan;
use crate::sut::managed::flags::{Family, Given, KindFlags, WebServers};
use crate::sut::managed::server::ManagedKind;
use crate::sut::managed::Roles;
use crate::sut::{Endpoint, Opened, Origin, ServerOptions, Target};
use fileset::{FileSet, FileSetSpec};
use serde::{Deserialize, Serialize, Serializer};
use std::path::PathBuf;
use std::sync::Arc;

/// The web workload's target when none is given.
pub(crate) const DEFAULT_TARGET: &str = NGINX;

/// `perflab run web`.
pub struct Web;

/// The web workload's flags.
#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// The server.
    #[arg(long, value_name = "URL", default_value = DEFAULT_TARGET, help = target_help())]
    pub(crate) target: String,

    /// The files requested: webbench, specweb:DIRS or tree:DIR.
    #[arg(
        long,
        value_name = "SET",
        default_value = "webbench",
        conflicts_with = "urls"
    )]
    pub(crate) fileset: String,

    /// Request the paths listed in FILE instead (one "/PATH [WEIGHT]" per line, # comments).
    #[arg(long, value_name = "FILE")]
    pub(crate) urls: Option<PathBuf>,

    /// Send the requests of FILE in turn (vegeta's text form: "METHOD URL", "Name: value" lines, "@body-file"; see docs/web.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["urls", "method"])]
    pub(crate) targets: Option<PathBuf>,

    /// Run each user through the journey of FILE: its requests in order, values captured from replies and sent on, think times, cookies, a CSV row per user (see docs/web.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["urls", "method", "targets", "pipeline"])]
    pub(crate) flow: Option<PathBuf>,

    /// keep-alive (one connection per user) or close (a connection per request).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = Connection::KeepAlive)]
    pub(crate) connection: Connection,

    /// Requests in flight on each keep-alive connection (HTTP/1.1 pipelining); 1 sends the next only after a reply.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) pipeline: u32,

    /// The request method.
    #[arg(long, value_name = "METHOD", value_enum, default_value_t = Method::Get)]
    pub(crate) method: Method,

    /// A header sent with every request, "Name: value" (repeatable). A secret one's value (Authorization, cookies, tokens) is never printed or stored.
    #[arg(long = "header", value_name = "HEADER")]
    pub(crate) headers: Vec<String>,

    /// A header sent with every request, "Name: value", read from the environment variable VAR (repeatable): a secret kept off the command line, as perflab kube's manifests pass it.
    #[arg(long = "header-env", value_name = "VAR")]
    pub(crate) header_env: Vec<String>,

    /// The share of bodies checksummed against the file set (0 to 1).
    #[arg(long, value_name = "SHARE", default_value_t = 0.01)]
    pub(crate) verify_share: f64,

    /// HTTPS: trust the CA certificates of this PEM file instead of the system's.
    #[arg(long, value_name = "FILE")]
    pub(crate) cacert: Option<PathBuf>,

    /// HTTPS: accept any server certificate (the connection is encrypted, not authenticated).
    #[arg(long)]
    pub(crate) insecure: bool,

    /// The server's status page (nginx stub_status or Apache server-status?auto), sampled each interval.
    #[arg(long, value_name = "URL")]
    pub(crate) server_status: Option<String>,

    /// An accelerator's origin.
    #[arg(long, value_name = "URL", help = origin_help())]
    pub(crate) origin: Option<String>,

    /// Each managed web kind's own flags (`--nginx-set`, `--varnish-cpus`, …).
    #[command(flatten)]
    pub(crate) kinds: KindFlags<WebServers>,

    // Boxed: the workloads' flags share one enum, kept small.
    #[command(flatten)]
    pub(crate) surroundings: Box<crate::sut::SurroundingsArgs>,

    /// A managed server: keep its directory (configuration, files, log) after the run.
    #[arg(long)]
    pub(crate) keep: bool,
}

/// Connection handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Connection {
    /// One HTTP/1.1 connection per user, reused.
    KeepAlive,
    /// A new connection per request (`Connection: close`).
    Close,
}

/// The request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Method {
    #[value(name = "GET")]
    Get,
    #[value(name = "HEAD")]
    Head,
}

/// The web workload's validated options, as the run's plan stores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebSpec {
    pub(crate) target: Target,
    pub(crate) fileset: FileSetSpec,
    /// `--targets`: the file of requests sent instead of the file set's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) targets: Option<PathBuf>,
    /// `--flow`: the users' journey.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) flow: Option<PathBuf>,
    pub(crate) connection: Connection,
    /// Requests in flight per connection (1: no pipelining).
    #[serde(default = "one")]
    pub(crate) pipeline: u32,
    pub(crate) method: Method,
    /// Extra request headers (name, value); secret ones are stored masked.
    #[serde(serialize_with = "masked_headers")]
    pub(crate) headers: Vec<(String, String)>,
    /// Share of bodies checksummed, 0 to 1.
    pub(crate) verify_share: f64,
    /// How HTTPS servers are checked.
    pub(crate) tls: crate::sut::tls::TlsOptions,
    pub(crate) server_status: Option<String>,
    /// A managed server's settings, CPUs, addresses, and whether its files
    /// are kept (boxed: the workloads' specs share one enum, kept small).
    pub(crate) server: Box<ServerOptions>,
}

fn one() -> u32 {
    1
}

/// The most requests in flight on one connection.
pub(crate) const MAX_PIPELINE: u32 = 1024;

/// `perflab check web` takes no flags.
#[derive(Debug, clap::Args)]
pub struct WebCheckArgs {}

impl WorkloadKind for Web {
    const NAME: &'static str = "web";
    const ABOUT: &'static str = "WebBench's static test: users requesting a file set over HTTP/1.1 from any web server or a managed nginx.";
    const CHECK_ABOUT: &'static str =
        "The web workload checks every reply as it runs (nothing to check after).";
    const RATE_UNIT: crate::units::RateUnit = crate::units::RateUnit::Requests;
    type RunArgs = WebArgs;
    type CheckArgs = WebCheckArgs;
    type Spec = WebSpec;

    fn figures(
        steps: &[crate::record::StepResult],
        _op_names: &[String],
    ) -> Option<crate::workload::figures::Figures> {
        cache::figures(steps)
    }

    fn validate(args: &WebArgs) -> Result<WebSpec, PlanError> {
        let target = web_target(args)?;
        let managed = target.traits().managed;
        let fileset = fileset_of(args, &target)?;
        check_requests(args)?;
        if let Some(file) = &args.targets {
            read_targets(file, &target)?;
        }
        if let Some(file) = &args.flow {
            read_flow(file, &target)?;
        }
        let headers = headers_of(args)?;
        let server = server_options(args, &target, managed)?;
        let tls = tls_of(args)?;
        Ok(WebSpec {
            target,
            fileset,
            targets: args.targets.clone(),
            flow: args.flow.clone(),
            connection: args.connection,
            pipeline: args.pipeline,
            method: args.method,
            headers,
            verify_share: args.verify_share,
            tls,
            server_status: args.server_status.clone(),
            server: Box::new(server),
        })
    }

    fn target(spec: &WebSpec) -> Target {
        spec.target.clone()
    }

    const ON_GENERATORS: bool = true;

    fn check_form(form: &serde_json::Value) -> Result<(), PlanError> {
        generator::read(form.clone()).map(|_| ())
    }

    fn on_generator<D: SweepDriver>(
        form: serde_json::Value,
        driver: D,
    ) -> anyhow::Result<D::Output> {
        generator::build(form, driver)
    }

    fn start<D: SweepDriver>(spec: &WebSpec, _plan: &Plan, driver: D) -> anyhow::Result<D::Output> {
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
        let Endpoint::Http {
            bases,
            status,
            cache_log,
        } = &opened.endpoint
        else {
            anyhow::bail!("the web workload needs a web server target");
        };
        if spec.tls.insecure && bases.iter().any(|(b, _)| b.tls) {
            crate::util::out(format_args!(
                "--insecure: the server's certificate is not checked (encrypted, not authenticated)\n"
            ));
        }
        let db_probe = server_probe(spec, status, cache_log)?;
        // Read again here, once, with every body: the run sends them from memory.
        let (targets, flow) = match (&spec.flow, &spec.targets) {
            (Some(file), _) => {
                let (targets, flow) = read_flow(file, &spec.target)?;
                (Some(targets), Some(flow))
            }
            (None, Some(file)) => (Some(read_targets(file, &spec.target)?), None),
            (None, None) => (None, None),
        };
        let workload = Shared::new(spec, files, bases, targets, flow)?;
        workload.preflight(bases)?;
        let started = Started {
            setup: Some(setup_record(spec, &opened.setup, &workload, bases)),
            db_probe,
            server: opened.server_processes(),
            origin: opened.origin_processes(),
            addresses: Some(opened.endpoint.addresses()),
            endpoint: Some(opened.endpoint.clone()),
        };
        // A targets file's requests and a flow are sent from here only.
        let form = (spec.targets.is_none() && spec.flow.is_none())
            .then(|| generator::form(spec, &workload.files, bases))
            .flatten();
        driver.drive(
            Arc::new(WebWorkload {
                shared: Arc::new(workload),
                form,
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

/// The server's own statistics each interval: its status page (`--server-status`
/// or the managed server's), with a caching proxy's log when it writes one.
fn server_probe(
    spec: &WebSpec,
    status: &Option<String>,
    cache_log: &Option<crate::sut::cache_log::CacheAccounting>,
) -> anyhow::Result<Option<crate::probe::DbProbe>> {
    let status = spec.server_status.clone().or_else(|| status.clone());
    let status = status
        .map(|url| crate::sut::http::ServerStatus::connect(&url))
        .transpose()?;
    Ok(match (status, cache_log) {
        (status, Some(at)) => Some(crate::probe::DbProbe::start(
            crate::sut::cache_log::ProxyStats {
                status,
                log: crate::sut::cache_log::CacheLog::new(at.clone()),
            },
        )?),
        (Some(status), None) => Some(crate::probe::DbProbe::start(status)?),
        (None, None) => None,
    })
}

/// The run's record of how the web target was made ready: the target's
/// own, whether its certificate was checked, the file set, the addresses
/// and a targets file's requests.
fn setup_record(
    spec: &WebSpec,
    target: &serde_json::Value,
    workload: &Shared,
    bases: &[(crate::sut::http::HttpBase, std::net::SocketAddr)],
) -> serde_json::Value {
    let mut setup = target.clone();
    if bases.iter().any(|(b, _)| b.tls) {
        setup = super::merged_setup(
            &setup,
            serde_json::json!({ "tls_certificate_checked": !spec.tls.insecure }),
        );
    }
    super::merged_setup(
        &setup,
        serde_json::json!({
            "fileset": {
                "files": workload.files.files.len(),
                "bytes": workload.files.total_bytes(),
                "class_shares": workload.files.class_shares(),
            },
            "addresses": bases.iter().map(|(b, a)| format!("{} ({a})", b.url())).collect::<Vec<_>>(),
            "targets": workload.targets.as_ref().map(|t| serde_json::json!({
                "file": spec.targets.as_ref().or(spec.flow.as_ref()),
                "flow": workload.flow.as_ref().map(|f| serde_json::json!({
                    "steps": f.flow.steps.len(),
                    "captured": f.flow.captured,
                    "data_rows": f.flow.rows.len(),
                    "follow_redirects": f.flow.follow_redirects,
                    "cookies": f.flow.cookies,
                })),
                "requests": t.requests(),
                "names": t.names,
                "body_bytes": t.body_bytes,
            })),
        }),
    )
}

/// The `--target`, which must be a web server.
fn web_target(args: &WebArgs) -> Result<Target, PlanError> {
    let target = crate::sut::validate_target(Some(&args.target), DEFAULT_TARGET)?;
    if target.traits().kind != crate::sut::TargetKind::Http {
        return Err(PlanError::flag(
            "--target",
            format!("{} is not a web server", target.redacted()),
            &format!("give http://HOST:PORT/ or {NGINX}"),
        ));
    }
    Ok(target)
}

/// The files requested (`--urls` or `--fileset`), read now so that a bad
/// line or directory is reported before anything starts; a managed
/// server (nginx, or Varnish in front of its origin) needs files to serve.
fn fileset_of(args: &WebArgs, target: &Target) -> Result<FileSetSpec, PlanError> {
    let fileset = match &args.urls {
        Some(file) => {
            FileSet::build(&FileSetSpec::Urls { file: file.clone() })?;
            FileSetSpec::Urls { file: file.clone() }
        }
        None => FileSetSpec::parse(&args.fileset)
            .map_err(|e| PlanError::flag("--fileset", e, "e.g. --fileset specweb:2"))?,
    };
    if let FileSetSpec::Tree { dir } = &fileset {
        check_tree(dir)?;
    }
    if let (Target::Managed(kind), FileSetSpec::Urls { .. }) = (target, &fileset) {
        return Err(PlanError::flag(
            "--urls",
            format!(
                "a managed {} serves a file set perflab writes, and a URL list has no files",
                kind.name
            ),
            "use --fileset webbench, specweb:DIRS or tree:DIR, or give --target http://…",
        ));
    }
    Ok(fileset)
}

/// `--targets`' requests, checked against the target: one line naming
/// the file and line when one cannot be sent.
pub(super) fn read_targets(
    file: &std::path::Path,
    target: &Target,
) -> Result<targets::Targets, PlanError> {
    let allowed = match target {
        Target::Http { bases } => targets::Allowed::Bases(bases),
        _ => targets::Allowed::Managed,
    };
    targets::read(file, allowed).map_err(|e| PlanError::new(format!("--targets: {e}")))
}

/// `--flow`'s journey, checked against the target: one line naming the
/// file and line when it cannot be run.
fn read_flow(
    file: &std::path::Path,
    target: &Target,
) -> Result<(targets::Targets, flow::Flow), PlanError> {
    let allowed = match target {
        Target::Http { bases } => targets::Allowed::Bases(bases),
        _ => targets::Allowed::Managed,
    };
    flow::read(file, allowed).map_err(|e| PlanError::new(format!("--flow: {e}")))
}

/// `--verify-share`, `--pipeline` and `--connection`, which must agree.
fn check_requests(args: &WebArgs) -> Result<(), PlanError> {
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
    Ok(())
}

/// The extra request headers: `--header`, then `--header-env`'s.
fn headers_of(args: &WebArgs) -> Result<Vec<(String, String)>, PlanError> {
    let mut headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    for var in &args.header_env {
        let text = std::env::var(var).map_err(|_| {
            PlanError::flag(
                "--header-env",
                format!("the environment variable {var} is not set (or not text)"),
                "set it to the header, Name: value",
            )
        })?;
        headers.push(parse_header(&text).map_err(|e| {
            PlanError::new(format!(
                "--header-env {var}: {}",
                e.to_string().trim_start_matches("--header: ")
            ))
        })?);
    }
    Ok(headers)
}

/// The managed server's options (its kind's own flags, `--keep`, the
/// surroundings, the origin), refused for a server perflab does not
/// manage.
fn server_options(
    args: &WebArgs,
    target: &Target,
    managed: bool,
) -> Result<ServerOptions, PlanError> {
    let own = args.kinds.own(target)?;
    check_managed_only(args, managed, own)?;
    let origin = origin_of(args, own)?;
    let (link, io) = args.surroundings.validate(target)?;
    let mut options = ServerOptions {
        settings: Vec::new(),
        keep: args.keep,
        cpus: Vec::new(),
        memory: None,
        link,
        io,
        log_dir: None,
        addresses: Vec::new(),
        tls_files: None,
        origin,
        origin_of_link: None,
    };
    if let Some(given) = own {
        options.settings = given.settings(given.accelerates())?;
        options.cpus = given.cpus()?;
        options.memory = given.memory()?;
        options.addresses = given.listen(options.link.is_some())?;
        options.tls_files = given.tls()?;
    }
    Ok(options)
}

/// The web workload's default target, the kind an accelerator's managed
/// origin is when no kind says it serves as one.
const NGINX: &str = <crate::sut::managed::nginx::Nginx as ManagedKind>::SCHEME;

/// `--target`'s help, naming the managed kinds.
fn target_help() -> String {
    format!(
        "The server: http://HOST:PORT/ (several, comma-separated, one per adapter), or one perflab runs: {}.",
        crate::sut::in_words(&crate::sut::managed::schemes(WebServers::takes), "or")
    )
}

/// `--origin`'s help, naming the managed origin.
fn origin_help() -> String {
    format!(
        "An accelerator's origin: http://HOST:PORT/ or {} (a managed server serving the file set). To run an accelerator: {}.",
        origin_scheme(),
        accelerators()
    )
}

/// The `--origin` of a managed origin.
fn origin_scheme() -> &'static str {
    crate::sut::managed::origin_kind().map_or(NGINX, |k| k.scheme)
}

/// The accelerator's origin: `--origin` with a kind that accelerates (by
/// its nature or its role), one without the other refused.
fn origin_of(args: &WebArgs, own: Option<&Given>) -> Result<Option<Origin>, PlanError> {
    let managed_origin = origin_scheme();
    let give = format!("give http://HOST:PORT/ or {managed_origin}");
    match (own.filter(|g| g.accelerates()), &args.origin) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(PlanError::flag(
            "--origin",
            "only an accelerator has an origin",
            &format!("{}, or drop --origin", accelerators()),
        )),
        (Some(given), None) => Err(PlanError::flag(
            &if given.kind.roles == Roles::Either {
                given.kind.flag("role")
            } else {
                "--origin".to_string()
            },
            format!(
                "a managed {}{} caches an origin, and none was given",
                given.kind.name,
                if given.kind.roles == Roles::Either {
                    " as an accelerator"
                } else {
                    ""
                }
            ),
            &format!("add --origin http://HOST:PORT/ or --origin {managed_origin}"),
        )),
        (Some(_), Some(text)) if text.trim() == managed_origin => Ok(Some(Origin::Managed)),
        (Some(_), Some(text)) => {
            let base = crate::sut::http::HttpBase::parse(text)
                .map_err(|e| PlanError::flag("--origin", e, &give))?;
            crate::sut::managed::origin::check_origin_path(&base.path).map_err(|e| {
                PlanError::flag("--origin", e, "percent-encode the path, e.g. %22 for '\"'")
            })?;
            if base.tls {
                return Err(PlanError::flag(
                    "--origin",
                    format!(
                        "{}: the accelerator reaches its origin over plain HTTP",
                        base.url()
                    ),
                    &give,
                ));
            }
            Ok(Some(Origin::Url(base.url())))
        }
    }
}

/// How to run an accelerator, from the kinds: "add --nginx-role
/// accelerator, or use --target varnish:managed".
fn accelerators() -> String {
    let ways: Vec<String> = crate::sut::managed::KINDS
        .iter()
        .filter_map(|k| match k.roles {
            Roles::Either => Some(format!("add {} accelerator", k.flag("role"))),
            Roles::Accelerates => Some(format!("use --target {}", k.scheme)),
            Roles::Serves => None,
        })
        .collect();
    ways.join(", or ")
}

/// Refuses `--keep` for a server perflab does not manage, and
/// `--server-status` for a managed one (whose own statistics are read
/// already); a kind's flags given for another are refused by
/// [`KindFlags::own`].
fn check_managed_only(args: &WebArgs, managed: bool, own: Option<&Given>) -> Result<(), PlanError> {
    if !managed && args.keep {
        return Err(PlanError::flag(
            "--keep",
            "only a managed server is configured by perflab",
            &format!(
                "use --target {}, or configure your server yourself",
                crate::sut::in_words(&crate::sut::managed::schemes(WebServers::takes), "or")
            ),
        ));
    }
    if let (Some(given), Some(_)) = (own, &args.server_status) {
        return Err(PlanError::flag(
            "--server-status",
            format!(
                "a managed {}'s own statistics are read already",
                given.kind.name
            ),
            "drop --server-status",
        ));
    }
    Ok(())
}

/// How HTTPS servers are checked: `--cacert` or `--insecure`, not both; a
/// bad CA file is refused before anything starts.
fn tls_of(args: &WebArgs) -> Result<crate::sut::tls::TlsOptions, PlanError> {
    let tls = crate::sut::tls::TlsOptions {
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
    crate::sut::tls::client_config(&tls)?;
    Ok(tls)
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
            format!("'{}': {why}", crate::secret::redact_header(text)),
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

/// Headers as stored: a secret header's value masked.
fn masked_headers<S: Serializer>(headers: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    let shown: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str(),
                if crate::secret::secret_header(k) {
                    crate::secret::MASK
                } else {
                    v.as_str()
                },
            )
        })
        .collect();
    shown.serialize(s)
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
}
