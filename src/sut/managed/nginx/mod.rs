//! An nginx perflab owns for the length of a run (`--target nginx:managed`):
//! a fresh directory holding the configuration, the document root (which
//! the workload fills), the logs and nginx's temporary files; nginx in the
//! foreground (`daemon off`) as the `www-data` user when perflab is root,
//! listening on a free port of each loopback address asked for (over TLS
//! when given a certificate and key), with `stub_status` at
//! [`STATUS_PATH`] on a plain-HTTP port of 127.0.0.1 of its own; on drop a
//! fast shutdown (SIGTERM) and the directory removed unless kept.
//!
//! `--nginx-set NAME=VALUE` sets one directive. Where it goes follows
//! nginx's documentation of each directive's context: the main context
//! ([`MAIN_DIRECTIVES`]), `events` ([`EVENTS_DIRECTIVES`]), else `http`.
//! A setting replaces perflab's default of the same name.
//!
//! In the accelerator role (`--nginx-role accelerator --origin …`) it is
//! a reverse-proxy cache in front of an origin: an `http://` URL, or a
//! second managed nginx ([`crate::sut::Origin::Managed`]) that serves the file set and
//! lives and dies with it. Its cache is `proxy_cache_path` in its own
//! directory, sized by perflab's parts of that directive
//! ([`CACHE_PARTS`], set with `--nginx-set` like any directive), and its
//! own accounting of every request (`$upstream_cache_status`, the bytes
//! and time of the origin's reply) goes to [`CACHE_LOG`] in the format
//! [`crate::sut::cache_log`] reads.

mod accelerator;

use accelerator::{accelerator_blocks, check_cache_part, ACCELERATOR_DEFAULTS, CACHE_DIR};
pub(crate) use accelerator::{CACHE_LOG, CACHE_PARTS};

use super::find_programs;
use super::origin::{start_origin, upstream_of, Accelerating, OriginPlan, Upstream};
use super::server::{ManagedKind, ManagedServer, MovedLog, Probe, Reach, Site, Start};
use super::{placed_command, Advice, Roles, ServerDir};
use crate::error::PlanError;
use crate::sut::cache_log::CacheAccounting;
use crate::sut::{ServerOptions, TargetKind};
use anyhow::Context;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where the managed nginx answers with `stub_status`.
pub(crate) const STATUS_PATH: &str = "/perflab-nginx-status";

/// Directives of nginx's main context.
const MAIN_DIRECTIVES: &[&str] = &[
    "worker_processes",
    "worker_cpu_affinity",
    "worker_priority",
    "worker_rlimit_nofile",
    "worker_shutdown_timeout",
    "timer_resolution",
    "pcre_jit",
    "thread_pool",
];
/// Directives of nginx's `events` block.
const EVENTS_DIRECTIVES: &[&str] = &[
    "worker_connections",
    "multi_accept",
    "accept_mutex",
    "accept_mutex_delay",
    "use",
];

/// perflab's defaults, each replaced by a setting of the same name: as
/// many workers as CPUs, connections enough for any sweep, the access
/// log off (it would measure the log's disk), keep-alive connections
/// that live through a whole run.
const DEFAULTS: &[(&str, &str)] = &[
    ("worker_processes", "auto"),
    ("worker_rlimit_nofile", "65536"),
    ("worker_connections", "16384"),
    ("access_log", "off"),
    ("sendfile", "on"),
    ("tcp_nopush", "on"),
    ("keepalive_requests", "10000000"),
    ("keepalive_timeout", "300s"),
    ("open_file_cache", "max=10000 inactive=60s"),
];

/// A running managed nginx.
pub type ManagedNginx = ManagedServer<Nginx>;

/// The managed nginx kind: its program and configuration, and where it
/// listens.
pub struct Nginx {
    program: PathBuf,
    port: u16,
    /// The plain-HTTP address of the status page: 127.0.0.1, or the
    /// server's end of its link.
    status: SocketAddr,
    addresses: Vec<IpAddr>,
    tls: bool,
    /// The directives as written into its configuration, in order.
    directives: Vec<(String, String)>,
    /// In the accelerator role: the origin, and its managed nginx when
    /// perflab runs it (stopped after the accelerator: fields drop after
    /// the server's process).
    accelerator: Option<Accelerating>,
}

/// What a managed nginx is given before anything is made: its program,
/// the addresses asked for and its certificate and key.
pub(crate) struct Programs {
    nginx: PathBuf,
    addresses: Vec<IpAddr>,
    tls_files: Option<(PathBuf, PathBuf)>,
    origin: Option<OriginPlan>,
}

impl ManagedKind for Nginx {
    const SCHEME: &'static str = "nginx:managed";
    const SERVES_AS_ORIGIN: bool = true;
    const TARGET_KIND: TargetKind = TargetKind::Http;
    const NAME: &'static str = "nginx";
    const DIR_PREFIX: &'static str = "nginx";
    const MOVED_LOG: Option<MovedLog> = None;
    const USER: &'static str = "www-data";
    const LOG: &'static str = "error.log";
    const KNOB: &'static str = "nginx";
    const SETTINGS_FLAG: &'static str = "--nginx-set";
    const CPUS_FLAG: &'static str = "--nginx-cpus";
    const MEMORY_FLAG: &'static str = "--nginx-memory";
    const EXAMPLE_SETTING: &'static str = "worker_processes=2";
    const SETTINGS_HELP: &'static str =
        "a directive, NAME=VALUE (repeatable), e.g. worker_processes=2";
    const ROLES: Roles = Roles::Either;
    const LISTENS: bool = true;
    const SERVES_TLS: bool = true;
    const ADVICE: Advice = Advice {
        more_workers: Some("worker_processes=auto"),
        open_files: Some("worker_rlimit_nofile"),
        cache_size: Some("proxy_cache_max_size=…"),
        cache_ttl: Some("proxy_cache_valid='200 1h'"),
    };
    const PROGRAM: &'static str = "nginx";
    /// How long it may take to answer its status page.
    const START_TIMEOUT: Duration = Duration::from_secs(20);
    const POLL: Duration = Duration::from_millis(50);
    const READY_MEANS: &'static str = "answer";
    /// A fast shutdown.
    const STOP_SIGNAL: libc::c_int = libc::SIGTERM;
    const STOP_TIMEOUT: Duration = Duration::from_secs(10);

    type Programs = Programs;

    /// A directive's form; a part of the cache's path refused for an
    /// nginx that serves files.
    fn check_setting(name: &str, value: &str, accelerating: bool) -> Result<(), String> {
        check_setting(name, value)?;
        if !accelerating && CACHE_PARTS.contains(&name) {
            return Err(format!(
                "{name} sizes an accelerator's cache, and this nginx serves files (add --nginx-role accelerator --origin …, or drop it)"
            ));
        }
        Ok(())
    }

    fn ask(settings: &[(String, String)], accelerating: bool) -> Result<(), String> {
        let accelerating = accelerating
            || settings
                .iter()
                .any(|(k, _)| CACHE_PARTS.contains(&k.as_str()));
        check_settings(settings, accelerating)
    }

    /// Its program, its settings and its addresses (loopback ones only).
    fn find(options: &ServerOptions) -> anyhow::Result<Programs> {
        let nginx = find_nginx().ok_or_else(|| {
            PlanError::new(
                "no nginx on PATH or in /usr/sbin; install it (apt-get install nginx-light) or give --target http://HOST:PORT/",
            )
        })?;
        for (name, value) in &options.settings {
            check_setting(name, value).map_err(|e| {
                PlanError::flag("--nginx-set", e, "e.g. --nginx-set worker_processes=2")
            })?;
        }
        if let Some(a) = options.addresses.iter().find(|a| !a.is_loopback()) {
            return Err(PlanError::new(format!(
                "a managed nginx listens on loopback addresses only, not {a}"
            ))
            .into());
        }
        let origin = options
            .origin
            .as_ref()
            .map(|o| OriginPlan::of(o, options.keep))
            .transpose()?;
        // An origin behind an accelerator's link listens on the link's
        // end on this host (perflab's, reached from its namespace only).
        let addresses = match options.origin_of_link {
            Some(end) => vec![IpAddr::V4(end)],
            None => options.addresses.clone(),
        };
        Ok(Programs {
            nginx,
            addresses,
            tls_files: options.tls_files.clone(),
            origin,
        })
    }

    fn version(programs: &Programs, _user: Option<(u32, u32)>) -> String {
        String::from_utf8_lossy(
            &Command::new(&programs.nginx)
                .arg("-v")
                .output()
                .map(|o| o.stderr)
                .unwrap_or_default(),
        )
        .trim()
        .trim_start_matches("nginx version: ")
        .to_string()
    }

    /// Its document root and temporary directory, its two ports and its
    /// configuration.
    fn prepare(programs: Programs, site: &Site) -> anyhow::Result<Self> {
        let subs: &[&str] = match programs.origin {
            Some(_) => &["html", "tmp", CACHE_DIR],
            None => &["html", "tmp"],
        };
        for sub in subs {
            let path = site.dir.path().join(sub);
            std::fs::create_dir(&path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            site.hand_over(&path)?;
        }
        let link_host = site.link.as_ref().map(|_| site.client());
        let accelerator = programs
            .origin
            .map(|o| start_origin(o, link_host))
            .transpose()?;
        let upstream = accelerator
            .as_ref()
            .map(|a| upstream_of(&a.origin_url))
            .transpose()?;
        let listening = Listening::on(site, &programs.addresses)?;
        let mut directives = merged(&site.settings, accelerator.is_some());
        if let Some((cert, key)) = &programs.tls_files {
            directives.extend(tls_directives(cert, key)?);
        }
        let tls = programs.tls_files.is_some();
        let config = configuration(
            site.dir.path(),
            listening.port,
            (listening.status, listening.status_client),
            &listening.addresses,
            tls,
            &directives,
            upstream.as_ref(),
        );
        let conf_path = site.dir.path().join(CONF);
        std::fs::write(&conf_path, config)
            .with_context(|| format!("cannot write {}", conf_path.display()))?;
        Ok(Nginx {
            program: programs.nginx,
            port: listening.port,
            status: listening.status,
            addresses: listening.addresses,
            tls,
            directives,
            accelerator,
        })
    }

    fn command(&self, site: &Site) -> Command {
        let dir = site.dir.path();
        let mut cmd = placed_command(&self.program, &site.placement());
        cmd.arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join(CONF))
            .arg("-e")
            .arg(dir.join(Self::LOG));
        cmd
    }

    /// Its status page answers (nginx has bound every listening socket
    /// by then).
    fn probe<'a>(&'a self, _site: &'a Site, _start: Start) -> anyhow::Result<Probe<'a>> {
        let status = self.status;
        Ok(Box::new(move || {
            status_answers(status).map_err(|e| format!("{status}: {e}"))
        }))
    }

    fn said(dir: &ServerDir) -> Vec<String> {
        dir.said(Self::LOG, "[emerg]")
    }

    fn reach(&self, site: &Site) -> Result<Reach, PlanError> {
        Ok(Reach::Http {
            bases: self.base_urls(),
            status: Some(self.status_url()),
            cache_log: self.accelerator.as_ref().map(|_| CacheAccounting {
                log: site.dir.path().join(CACHE_LOG),
                max_bytes: self
                    .directives
                    .iter()
                    .rev()
                    .find(|(k, _)| k == "proxy_cache_max_size")
                    .and_then(|(_, v)| nginx_size(v)),
            }),
        })
    }

    fn at(&self, _site: &Site) -> String {
        let at = self.base_urls().join(", ");
        match &self.accelerator {
            Some(a) => format!("{at}, caching {}", a.origin_url),
            None => at,
        }
    }

    fn origin_pid(&self) -> Option<u32> {
        self.accelerator.as_ref()?.pid()
    }

    /// Its certificate, and an origin URL it was given.
    fn given_flags(&self) -> Vec<&'static str> {
        // nginx opens the key as it opens the certificate: either may be
        // the file it could not read.
        let tls = self.tls.then_some("--nginx-tls-cert and --nginx-tls-key");
        let origin = self.accelerator.as_ref().and_then(Accelerating::url_given);
        tls.into_iter().chain(origin).collect()
    }

    fn settings<'a>(&'a self, _site: &'a Site) -> &'a [(String, String)] {
        &self.directives
    }

    /// Its own, or its managed origin's; none in front of an origin
    /// perflab does not run.
    fn docroot(&self, site: &Site) -> Option<PathBuf> {
        match &self.accelerator {
            None => Some(site.dir.path().join("html")),
            Some(a) => a.docroot(),
        }
    }
}

/// Its configuration file, in its directory.
const CONF: &str = "nginx.conf";

/// Where a managed nginx listens: behind a link on its end of it, status
/// page included, answering the status page to perflab's end.
struct Listening {
    addresses: Vec<IpAddr>,
    port: u16,
    status: SocketAddr,
    status_client: Option<std::net::Ipv4Addr>,
}

impl Listening {
    /// On the link's address or `asked` (127.0.0.1 when empty), with its
    /// two free ports.
    fn on(site: &Site, asked: &[IpAddr]) -> anyhow::Result<Listening> {
        let loopback = IpAddr::from([127, 0, 0, 1]);
        let (addresses, status_ip, status_client) = match &site.link {
            Some(l) => (
                vec![IpAddr::V4(l.server_addr)],
                IpAddr::V4(l.server_addr),
                Some(l.host_addr),
            ),
            None if asked.is_empty() => (vec![loopback], loopback, None),
            None => (asked.to_vec(), loopback, None),
        };
        // Both ports are found while both are held, so they differ.
        let (port, status_port) = {
            let a = std::net::TcpListener::bind("127.0.0.1:0")
                .context("cannot find a free loopback port")?;
            let b = std::net::TcpListener::bind("127.0.0.1:0")
                .context("cannot find a free loopback port")?;
            (a.local_addr()?.port(), b.local_addr()?.port())
        };
        Ok(Listening {
            addresses,
            port,
            status: SocketAddr::new(status_ip, status_port),
            status_client,
        })
    }
}

/// The certificate and key (`--nginx-tls-cert`, `--nginx-tls-key`) by
/// their absolute paths, which must be readable files with plain paths:
/// they are written into the configuration, and nginx would read a
/// relative path from its own directory, not from where perflab started.
pub(crate) fn tls_paths(cert: &Path, key: &Path) -> Result<(PathBuf, PathBuf), PlanError> {
    super::flags::tls_files(("--nginx-tls-cert", cert), ("--nginx-tls-key", key))
}

/// The directives that serve HTTPS with `cert` and `key` (see
/// [`tls_paths`]).
fn tls_directives(cert: &Path, key: &Path) -> Result<[(String, String); 2], PlanError> {
    let (cert, key) = tls_paths(cert, key)?;
    Ok([
        ("ssl_certificate".to_string(), cert.display().to_string()),
        ("ssl_certificate_key".to_string(), key.display().to_string()),
    ])
}

impl Nginx {
    /// The base URLs it serves, one per address.
    fn base_urls(&self) -> Vec<String> {
        self.addresses
            .iter()
            .map(|a| {
                let scheme = if self.tls { "https" } else { "http" };
                format!("{scheme}://{}/", SocketAddr::new(*a, self.port))
            })
            .collect()
    }

    /// The URL of its `stub_status` page.
    fn status_url(&self) -> String {
        format!("http://{}{STATUS_PATH}", self.status)
    }
}

impl ManagedServer<Nginx> {
    /// The base URLs it serves, one per address.
    pub fn base_urls(&self) -> Vec<String> {
        self.kind().base_urls()
    }

    /// The directory it serves files from.
    pub fn docroot(&self) -> PathBuf {
        self.dir().join("html")
    }
}

/// Finds the nginx program: on PATH or in /usr/sbin.
pub(crate) fn find_nginx() -> Option<PathBuf> {
    find_programs(&["nginx"], [PathBuf::from("/usr/sbin")]).map(|dir| dir.join("nginx"))
}

/// Checks a setting's name and value before anything is started: a name
/// of letters, digits and `_`, a value without `;`, braces or newlines
/// (it is written into the configuration as one directive).
pub(crate) fn check_setting(name: &str, value: &str) -> Result<(), String> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("'{name}' is not an nginx directive's name"));
    }
    if value.is_empty() || value.contains([';', '{', '}', '\n', '\r', '#']) {
        return Err(format!(
            "the value of {name} must be non-empty and hold no ';', '{{', '}}', '#' or line break"
        ));
    }
    check_cache_part(name, value)?;
    super::guard::nginx(name, value)?;
    check_count(name, value)
}

/// A size as nginx writes it (`64m`, `512k`, `1g`, bytes), in bytes.
pub(crate) fn nginx_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.char_indices().last()? {
        (at, c) if c.is_ascii_alphabetic() => (&text[..at], c.to_ascii_lowercase()),
        _ => (text, 'b'),
    };
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(match unit {
        'b' => 1,
        'k' => 1 << 10,
        'm' => 1 << 20,
        'g' => 1 << 30,
        _ => return None,
    })
}

/// The most connections a worker is given (nginx allocates each one's
/// structures at the worker's start), and the most open files.
const MAX_CONNECTIONS: u64 = 1 << 20;
/// The most threads in one of nginx's thread pools.
const MAX_POOL_THREADS: u64 = 1024;

/// The most workers a managed nginx may have: 16 per CPU of this host,
/// from 16 to nginx's own limit of 1024 processes.
pub(crate) fn max_workers() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    (cpus * 16).clamp(16, 1024)
}

/// A directive that sets how many processes, connections or threads
/// nginx makes takes a count in reason, checked before nginx starts:
/// nginx itself would fork 99999999999 workers until the host gives out
/// (602 of them and 5 GB once), and 0 workers would answer nothing.
fn check_count(name: &str, value: &str) -> Result<(), String> {
    let count = |text: &str, most: u64| -> Result<(), String> {
        match text.parse::<u64>() {
            Ok(n) if (1..=most).contains(&n) => Ok(()),
            _ => Err(format!("{name}={value}: give 1 to {most}")),
        }
    };
    match name {
        "worker_processes" if value != "auto" => {
            let most = max_workers();
            count(value, most).map_err(|_| {
                format!(
                    "{name}={value}: give auto (a worker per CPU) or 1 to {most} (16 per CPU of this host)"
                )
            })
        }
        "worker_connections" | "worker_rlimit_nofile" => count(value, MAX_CONNECTIONS),
        "thread_pool" => value
            .split_whitespace()
            .filter_map(|word| word.strip_prefix("threads="))
            .try_for_each(|threads| count(threads, MAX_POOL_THREADS)),
        _ => Ok(()),
    }
}

/// Whether nginx takes these `--nginx-set` directives, asked with
/// `nginx -t` over the configuration perflab would write (see
/// [`super::asked`]).
pub(crate) fn check_settings(
    settings: &[(String, String)],
    accelerating: bool,
) -> Result<(), String> {
    let Some(program) = find_nginx() else {
        return Ok(());
    };
    let directives = merged(settings, accelerating);
    // The answer is kept per settings and role.
    let mut asked = settings.to_vec();
    if accelerating && !asked.is_empty() {
        asked.push(("perflab_role".to_string(), "accelerator".to_string()));
    }
    let upstream = accelerating.then(|| Upstream {
        authority: "127.0.0.1:8082".to_string(),
        host: "127.0.0.1".to_string(),
        port: 8082,
        path: "/".to_string(),
    });
    super::asked::nginx(&program, &asked, |dir| {
        let loopback = IpAddr::from([127, 0, 0, 1]);
        configuration(
            dir,
            8080,
            (SocketAddr::new(loopback, 8081), None),
            &[loopback],
            false,
            &directives,
            upstream.as_ref(),
        )
    })
}

/// perflab's defaults with the settings put in their place: a setting of
/// a default's name replaces it, others follow.
fn merged(settings: &[(String, String)], accelerating: bool) -> Vec<(String, String)> {
    let extra: &[(&str, &str)] = if accelerating {
        ACCELERATOR_DEFAULTS
    } else {
        &[]
    };
    let mut out: Vec<(String, String)> = DEFAULTS
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (name, value) in settings {
        match out.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = value.clone(),
            None => out.push((name.clone(), value.clone())),
        }
    }
    out
}

/// The configuration file's text.
fn configuration(
    dir: &Path,
    port: u16,
    (status, client): (SocketAddr, Option<std::net::Ipv4Addr>),
    addresses: &[IpAddr],
    tls: bool,
    directives: &[(String, String)],
    upstream: Option<&Upstream>,
) -> String {
    let lines = |names: &dyn Fn(&str) -> bool| {
        directives
            .iter()
            .filter(|(k, _)| names(k))
            .map(|(k, v)| format!("{k} {v};\n"))
            .collect::<String>()
    };
    let main = lines(&|k| MAIN_DIRECTIVES.contains(&k));
    let events = lines(&|k| EVENTS_DIRECTIVES.contains(&k));
    let http = lines(&|k| {
        !MAIN_DIRECTIVES.contains(&k)
            && !EVENTS_DIRECTIVES.contains(&k)
            && !CACHE_PARTS.contains(&k)
    });
    let listen: String = addresses
        .iter()
        .map(|a| {
            let ssl = if tls { " ssl" } else { "" };
            format!("listen {}{ssl};\n", SocketAddr::new(*a, port))
        })
        .collect();
    let d = dir.display();
    let log = Nginx::LOG;
    let allow_client = client.map_or(String::new(), |c| format!("allow {c};\n"));
    let (proxy, serve) = match upstream {
        None => (String::new(), format!("root {d}/html;\n")),
        Some(u) => accelerator_blocks(dir, u, directives),
    };
    format!(
        "# Written by perflab for one run.\n\
         daemon off;\n\
         master_process on;\n\
         pid {d}/nginx.pid;\n\
         error_log {d}/{log} warn;\n\
         {main}\
         events {{\n{events}}}\n\
         http {{\n\
         default_type application/octet-stream;\n\
         client_body_temp_path {d}/tmp/body;\n\
         proxy_temp_path {d}/tmp/proxy;\n\
         fastcgi_temp_path {d}/tmp/fastcgi;\n\
         uwsgi_temp_path {d}/tmp/uwsgi;\n\
         scgi_temp_path {d}/tmp/scgi;\n\
         {http}\
         {proxy}\
         server {{\n\
         {listen}\
         {serve}\
         }}\n\
         server {{\n\
         listen {status};\n\
         location = {STATUS_PATH} {{\n\
         stub_status;\n\
         access_log off;\n\
         allow 127.0.0.0/8;\n\
         {allow_client}\
         deny all;\n\
         }}\n\
         }}\n\
         }}\n"
    )
}

/// One GET of the status page: `Ok` on a 200 reply.
fn status_answers(addr: SocketAddr) -> Result<(), String> {
    let text = crate::sut::http::get_text(addr, STATUS_PATH, Duration::from_secs(2))?;
    if text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200") {
        Ok(())
    } else {
        Err(text.lines().next().unwrap_or_default().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A managed nginx that could not start over its TLS files points at
    /// both of them: its own words name the key as often as the
    /// certificate.
    #[test]
    fn a_tls_start_failure_points_at_the_certificate_and_the_key() {
        let nginx = Nginx {
            program: PathBuf::from("nginx"),
            port: 8443,
            status: "127.0.0.1:8081".parse().unwrap(),
            addresses: vec![IpAddr::from([127, 0, 0, 1])],
            tls: true,
            directives: Vec::new(),
            accelerator: None,
        };
        let said =
            vec!["cannot load certificate key \"/tmp/k.pem\": Permission denied".to_string()];
        let e = crate::sut::managed::start_failure(
            "nginx",
            "exit status: 1",
            &said,
            Some("www-data"),
            ("--nginx-set", false),
            &nginx.given_flags(),
        )
        .to_string();
        assert!(
            e.ends_with("; check --nginx-tls-cert and --nginx-tls-key"),
            "{e}"
        );
    }

    #[test]
    fn settings_go_to_their_context_and_replace_defaults() {
        let directives = merged(
            &[
                ("worker_processes".into(), "2".into()),
                ("sendfile".into(), "off".into()),
                ("multi_accept".into(), "on".into()),
            ],
            false,
        );
        let conf = configuration(
            Path::new("/tmp/x"),
            8080,
            ("127.0.0.1:8081".parse().unwrap(), None),
            &[IpAddr::from([127, 0, 0, 1]), IpAddr::from([127, 0, 0, 2])],
            true,
            &directives,
            None,
        );
        let (before_events, rest) = conf.split_once("events {").unwrap();
        let (events, http) = rest.split_once("http {").unwrap();
        assert!(before_events.contains("worker_processes 2;"), "{conf}");
        assert!(!conf.contains("worker_processes auto"), "{conf}");
        assert!(events.contains("multi_accept on;"), "{conf}");
        assert!(http.contains("sendfile off;"), "{conf}");
        assert!(http.contains("listen 127.0.0.2:8080 ssl;"), "{conf}");
        assert!(http.contains("listen 127.0.0.1:8081;"), "{conf}");
        assert_eq!(conf.matches('{').count(), conf.matches('}').count());
        // Behind a link: the status page on the server's end, answering
        // perflab's end.
        let linked = configuration(
            Path::new("/tmp/x"),
            8080,
            (
                "10.215.0.2:8081".parse().unwrap(),
                Some([10, 215, 0, 1].into()),
            ),
            &[IpAddr::from([10, 215, 0, 2])],
            false,
            &directives,
            None,
        );
        assert!(linked.contains("listen 10.215.0.2:8081;"), "{linked}");
        assert!(linked.contains("allow 10.215.0.1;\ndeny all;"), "{linked}");
    }

    #[test]
    fn settings_cannot_inject_directives() {
        assert!(check_setting("sendfile", "off").is_ok());
        assert!(check_setting("sendfile", "off; user root").is_err());
        assert!(check_setting("send file", "off").is_err());
        assert!(check_setting("x", "}").is_err());
        assert!(check_setting("x", "").is_err());
    }

    /// Counts of processes, connections and threads are refused out of
    /// reason, zero included, before nginx could fork them.
    #[test]
    fn absurd_counts_are_refused_before_nginx_starts() {
        assert!(check_setting("worker_processes", "auto").is_ok());
        assert!(check_setting("worker_processes", "2").is_ok());
        for (name, value) in [
            ("worker_processes", "99999999999"),
            ("worker_processes", "0"),
            ("worker_processes", "-1"),
            ("worker_processes", "1025"),
            ("worker_connections", "0"),
            ("worker_connections", "99999999999"),
            ("worker_rlimit_nofile", "4294967296"),
            ("thread_pool", "default threads=100000 max_queue=65536"),
        ] {
            let e = check_setting(name, value).unwrap_err();
            assert!(e.starts_with(&format!("{name}={value}: give ")), "{e}");
        }
        assert!(check_setting("worker_connections", "16384").is_ok());
        assert!(check_setting("thread_pool", "default threads=32").is_ok());
    }
}
