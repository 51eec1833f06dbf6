//! Targets: where the server under test lives, and everything perflab
//! knows of a kind of target — parsing `--target`, credentials (URL,
//! environment, password files), connections and their errors
//! ([`postgres`], [`mysql`]), the statistics source sampled during a run,
//! the settings the doctor and the inventory read ([`settings`]), and the
//! servers perflab runs itself ([`managed`]). Nothing outside this folder
//! looks inside a target's text: what the rest needs is in [`Traits`].
//! Credentials never leave this module unredacted: [`Target::redacted`] is
//! what the store and reports see.

mod args;
pub(crate) mod cache_log;
mod cpus;
pub(crate) mod device;
pub(crate) mod http;
pub(crate) mod knobs;
pub mod managed;
pub mod mysql;
mod open;
pub mod postgres;
pub(crate) mod settings;
pub(crate) mod sqlite;
pub(crate) mod stream;
pub(crate) mod tls;

pub(crate) use args::{validate_target, SurroundingsArgs, TargetArgs};
pub(crate) use cpus::parse_kernel_cpu_list;
pub use managed::{Origin, ServerOptions};
pub(crate) use open::{Endpoint, Opened};

use crate::error::PlanError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::path::PathBuf;

/// The system under test.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// An embedded SQLite database file, opened in process.
    Sqlite { path: PathBuf },
    /// A PostgreSQL server; the URL may hold a password, so it is only ever
    /// shown or stored redacted.
    Postgres { url: String },
    /// A MySQL or MariaDB server; the URL is only ever shown redacted.
    Mysql { url: String },
    /// An HTTP server at one or more base URLs (one per adapter).
    Http { bases: Vec<http::HttpBase> },
    /// A server that perflab creates, starts and removes, of one of the
    /// kinds in [`managed::KINDS`].
    Managed(&'static managed::KindEntry),
    /// A file the disk workload reads and writes.
    File { path: PathBuf },
    /// A block device the disk workload reads (and writes, if told to
    /// destroy what it holds).
    Device { path: PathBuf },
    /// A directory on any mounted file system (local, NFS, SMB): the file
    /// server the files workload writes and reads.
    Dir { path: PathBuf },
    /// A perflab agent with its echo role (`agent://HOST:PORT`, its HTTP
    /// port): the far end of the net workload.
    Agent { address: String },
    /// No server: the `null` workload's in-process stand-in.
    InProcess,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({})", self.redacted())
    }
}

/// Targets serialise as their redacted text: a plan stored in the results
/// store never holds a password.
impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

/// A stored target reads back from its redacted text (a password shown as
/// `***` stays so: a stored plan is never used to connect).
impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == "in-process" {
            return Ok(Target::InProcess);
        }
        Target::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What the rest of perflab may know of a target, typed and stored with the
/// run's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traits {
    /// The kind of target.
    pub kind: TargetKind,
    /// The server runs inside perflab's process (its CPU is perflab's).
    pub embedded: bool,
    /// One writer at a time: writers queue on the database's lock.
    pub single_writer: bool,
    /// perflab created the server for this run.
    pub managed: bool,
    /// No process serves the target: the kernel does, in perflab's own
    /// system calls and its interrupts (a file, a device). Its CPU is
    /// perflab's; the host's other busy CPU is others'.
    #[serde(default)]
    pub(crate) kernel_served: bool,
}

/// The kinds of target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    Sqlite,
    Postgres,
    Mysql,
    Http,
    /// A file or a block device: the storage below it is what is measured.
    Storage,
    /// A perflab agent's echo: the network path is what is measured.
    Network,
    InProcess,
}

impl TargetKind {
    /// Whether the kind is a database (the bank's targets).
    pub(crate) fn is_database(self) -> bool {
        matches!(
            self,
            TargetKind::Sqlite | TargetKind::Postgres | TargetKind::Mysql
        )
    }
}

impl Target {
    /// The target's traits.
    pub fn traits(&self) -> Traits {
        let (kind, embedded, single_writer, managed) = match self {
            Target::Sqlite { .. } => (TargetKind::Sqlite, true, true, false),
            Target::Postgres { .. } => (TargetKind::Postgres, false, false, false),
            Target::Managed(kind) => (kind.target_kind, false, false, true),
            Target::Mysql { .. } => (TargetKind::Mysql, false, false, false),
            Target::Http { .. } => (TargetKind::Http, false, false, false),
            Target::File { .. } | Target::Device { .. } | Target::Dir { .. } => {
                (TargetKind::Storage, false, false, false)
            }
            Target::Agent { .. } => (TargetKind::Network, false, false, false),
            Target::InProcess => (TargetKind::InProcess, true, false, false),
        };
        Traits {
            kind,
            embedded,
            single_writer,
            managed,
            kernel_served: kind == TargetKind::Storage,
        }
    }

    /// The traits of a target stored as text by a run whose plan predates
    /// stored traits (an unknown text: a server of no known kind).
    pub(crate) fn traits_of_text(text: &str) -> Traits {
        if text == "in-process" {
            return Target::InProcess.traits();
        }
        Target::parse(text).map_or(
            Traits {
                kind: TargetKind::InProcess,
                embedded: false,
                single_writer: false,
                managed: false,
                kernel_served: false,
            },
            |t| t.traits(),
        )
    }

    /// Parses a `--target` value.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(path) = text.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err("'sqlite:' needs a file path, e.g. sqlite:data.db".to_string());
            }
            return Ok(Target::Sqlite {
                path: PathBuf::from(path),
            });
        }
        if let Some(kind) = managed::KindEntry::by_scheme(text) {
            return Ok(Target::Managed(kind));
        }
        if let Some(path) = text.strip_prefix("file:") {
            if path.is_empty() {
                return Err("'file:' needs a path, e.g. file:/tmp/perflab-disk.bin".to_string());
            }
            return Ok(Target::File {
                path: PathBuf::from(path),
            });
        }
        if let Some(path) = text.strip_prefix("dir:") {
            if path.is_empty() {
                return Err("'dir:' needs a directory, e.g. dir:/mnt/share".to_string());
            }
            return Ok(Target::Dir {
                path: PathBuf::from(path),
            });
        }
        if let Some(path) = text.strip_prefix("device:") {
            if !path.starts_with("/dev/") {
                return Err(format!(
                    "'{text}' needs a device path, e.g. device:/dev/sdb"
                ));
            }
            return Ok(Target::Device {
                path: PathBuf::from(path),
            });
        }
        if let Some(address) = text.strip_prefix("agent://") {
            let ok = address
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !ok || address.contains('@') || address.contains('/') {
                return Err(format!(
                    "'{}' needs HOST:PORT (the agent's port), e.g. agent://127.0.0.1:7071",
                    redact(text)
                ));
            }
            return Ok(Target::Agent {
                address: address.to_string(),
            });
        }
        if text.starts_with("http://") || text.starts_with("https://") {
            return Ok(Target::Http {
                bases: http::parse_bases(text)?,
            });
        }
        let scheme = text.split(':').next().unwrap_or_default();
        match scheme {
            "postgres" | "postgresql" if text.contains("://") => Ok(Target::Postgres {
                url: text.to_string(),
            }),
            "mysql" | "mariadb" if text.contains("://") => Ok(Target::Mysql {
                url: text.to_string(),
            }),
            _ => Err(format!(
                "'{}' is not a target this workload knows; use {}",
                redact(text),
                schemes()
            )),
        }
    }

    /// The file of an embedded database or a disk target, none for a server.
    pub(crate) fn file(&self) -> Option<&std::path::Path> {
        match self {
            Target::Sqlite { path }
            | Target::File { path }
            | Target::Device { path }
            | Target::Dir { path } => Some(path),
            _ => None,
        }
    }

    /// Whether the target is the file at `path` (an embedded database
    /// given the results store's path): compared by their absolute paths,
    /// symbolic links resolved where the files exist.
    pub(crate) fn is_file(&self, path: &std::path::Path) -> bool {
        let Some(own) = self.file() else {
            return false;
        };
        let resolved = |p: &std::path::Path| {
            p.canonicalize()
                .or_else(|_| std::path::absolute(p))
                .unwrap_or_else(|_| p.to_path_buf())
        };
        resolved(own) == resolved(path)
    }

    /// The target as it may be shown and stored: no password.
    pub fn redacted(&self) -> String {
        match self {
            Target::Sqlite { path } => format!("sqlite:{}", path.display()),
            Target::Postgres { url } | Target::Mysql { url } => redact(url),
            Target::Managed(kind) => kind.scheme.to_string(),
            Target::Http { bases } => bases
                .iter()
                .map(http::HttpBase::url)
                .collect::<Vec<_>>()
                .join(","),
            Target::File { path } => format!("file:{}", path.display()),
            Target::Device { path } => format!("device:{}", path.display()),
            Target::Dir { path } => format!("dir:{}", path.display()),
            Target::Agent { address } => format!("agent://{address}"),
            Target::InProcess => "in-process".to_string(),
        }
    }
}

/// Which network a target's traffic crosses on this host: what a link
/// must carry to be a candidate for what stopped the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Network {
    /// None: an embedded database, a file, a device, a directory, the
    /// in-process stand-in, a server reached over a Unix socket.
    None,
    /// The loopback interface alone (every address the target names is
    /// 127.0.0.0/8, ::1 or `localhost`).
    Loopback,
    /// Some interface of the host's, or a managed server's own link: any
    /// link may carry it.
    Any,
}

impl Target {
    /// Which network the target's traffic crosses.
    pub(crate) fn network(&self) -> Network {
        let of_host = |host: &str| {
            if host.is_empty() || host.starts_with('/') {
                Network::None
            } else if is_loopback_host(host) {
                Network::Loopback
            } else {
                Network::Any
            }
        };
        match self {
            Target::Sqlite { .. }
            | Target::File { .. }
            | Target::Device { .. }
            | Target::Dir { .. }
            | Target::InProcess => Network::None,
            // On loopback, or behind a link of their own in a namespace.
            Target::Managed(_) => Network::Any,
            Target::Http { bases } => {
                if bases.iter().all(|b| is_loopback_host(&b.host)) {
                    Network::Loopback
                } else {
                    Network::Any
                }
            }
            Target::Postgres { url } | Target::Mysql { url } => of_host(&url_host(url)),
            Target::Agent { address } => of_host(
                address
                    .rsplit_once(':')
                    .map_or(address.as_str(), |(h, _)| h),
            ),
        }
    }
}

/// True for `localhost` and every loopback address.
fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The host of a `scheme://[user[:password]@]host[:port][/…]` URL (empty
/// when it names none, as a Unix socket's URL may; then a `host=` query
/// parameter, when given, is the host).
fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        hostport.split([':', ',']).next().unwrap_or_default()
    };
    if !host.is_empty() {
        return host.to_string();
    }
    rest[authority_end..]
        .split(['?', '&'])
        .find_map(|p| p.strip_prefix("host="))
        .map(|h| h.replace("%2F", "/").replace("%2f", "/"))
        .unwrap_or_default()
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// The forms of the targets perflab reaches (not those it manages), by
/// kind, in the order help texts give them.
const FORMS: &[(TargetKind, &str)] = &[
    (TargetKind::Sqlite, "sqlite:PATH"),
    (TargetKind::Postgres, "postgres://USER:PASS@HOST:PORT/DB"),
    (TargetKind::Mysql, "mysql://USER:PASS@HOST:PORT/DB"),
    (TargetKind::Http, "http(s)://HOST:PORT/[,http://…]"),
    (TargetKind::Storage, "file:PATH"),
    (TargetKind::Storage, "device:/dev/NAME"),
    (TargetKind::Storage, "dir:PATH"),
    (TargetKind::Network, "agent://HOST:PORT"),
];

/// The forms `--target` takes whose kind `keep` lets through, each
/// managed kind after the forms of the protocol it speaks, in words.
pub(crate) fn schemes_of(keep: impl Fn(TargetKind) -> bool) -> String {
    let mut forms: Vec<&str> = Vec::new();
    for (at, (kind, form)) in FORMS.iter().enumerate() {
        if !keep(*kind) {
            continue;
        }
        forms.push(form);
        let last_of_kind = FORMS.get(at + 1).is_none_or(|(next, _)| next != kind);
        if last_of_kind {
            forms.extend(
                managed::KINDS
                    .iter()
                    .filter(|m| m.target_kind == *kind)
                    .map(|m| m.scheme),
            );
        }
    }
    in_words(&forms, "or")
}

/// Every form `--target` takes, for help texts and error messages.
pub(crate) fn schemes() -> String {
    schemes_of(|_| true)
}

/// `a, b, c LAST d`: a list in words.
pub(crate) fn in_words(items: &[&str], last: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., end] => format!("{} {last} {end}", init.join(", ")),
    }
}

/// How long a connection may take from its first packet to a session
/// ready for queries (TCP, the server's greeting, authentication): a peer
/// that accepts and then says nothing ends here, not never.
pub(crate) const HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a look at a database server's statistics, settings or
/// catalog may take: a server that logs in and then says nothing is
/// given up here, not at a load's deadline.
pub(crate) const LOOK_QUERY: std::time::Duration = std::time::Duration::from_secs(10);

/// A server that did not answer a look ([`LOOK_QUERY`]) at `what`.
pub(crate) fn silent_look(kind: &str, at: &str, what: &str) -> PlanError {
    PlanError::new(format!(
        "{at} did not answer a look at {what} within {} s; is the {kind} server overloaded or hung? try again once it answers",
        LOOK_QUERY.as_secs()
    ))
}

/// The error of a server that accepted a connection and did not complete
/// the handshake within [`HANDSHAKE`].
fn silent_peer(kind: &str, at: &str) -> PlanError {
    PlanError::new(format!(
        "{at} accepted the connection but did not complete a {kind} handshake within {} s; is a {kind} server listening there, and not overloaded?",
        HANDSHAKE.as_secs()
    ))
}

pub use crate::secret::redact;

#[cfg(test)]
mod tests {
    use super::*;

    fn postgres_managed() -> Target {
        Target::parse("postgres:managed").unwrap()
    }

    /// The help's list of targets is the one it always was, and it holds
    /// every managed kind there is.
    #[test]
    fn the_schemes_are_every_form_and_every_managed_kind() {
        // The text it always was; a new kind joins it after its protocol's,
        // as the test-only proof kind (a PostgreSQL) does.
        let all = schemes();
        assert!(
            all.contains("postgres:managed, proof:managed, mysql://"),
            "{all}"
        );
        let always = all.replace(", proof:managed", "");
        assert!(
            always.starts_with("sqlite:PATH, postgres://USER:PASS@HOST:PORT/DB, postgres:managed, mysql://USER:PASS@HOST:PORT/DB, mariadb:managed, http(s)://HOST:PORT/[,http://…], nginx:managed, "),
            "{all}"
        );
        assert!(
            all.ends_with(", file:PATH, device:/dev/NAME, dir:PATH or agent://HOST:PORT"),
            "{all}"
        );
        for kind in managed::KINDS {
            assert!(all.contains(kind.scheme), "{}", kind.scheme);
            let target = Target::parse(kind.scheme).unwrap();
            assert_eq!(target.redacted(), kind.scheme);
            assert!(target.traits().managed);
            assert_eq!(target.traits().kind, kind.target_kind);
        }
        assert_eq!(
            schemes_of(TargetKind::is_database),
            "sqlite:PATH, postgres://USER:PASS@HOST:PORT/DB, postgres:managed, proof:managed, mysql://USER:PASS@HOST:PORT/DB or mariadb:managed"
        );
    }

    #[test]
    fn a_target_says_which_network_it_crosses() {
        let net = |t: &str| Target::parse(t).expect(t).network();
        assert_eq!(net("sqlite:bank.db"), Network::None);
        assert_eq!(net("file:/tmp/x.bin"), Network::None);
        assert_eq!(net("http://127.0.0.1:8080/"), Network::Loopback);
        assert_eq!(
            net("http://[::1]:8080/,http://localhost/"),
            Network::Loopback
        );
        assert_eq!(net("http://127.0.0.1/,http://10.0.0.2/"), Network::Any);
        assert_eq!(net("postgres://u:p@w@127.0.0.2:5432/db"), Network::Loopback);
        assert_eq!(net("postgres://bank@db.example/bank"), Network::Any);
        assert_eq!(
            net("postgres:///bank?host=/var/run/postgresql"),
            Network::None
        );
        assert_eq!(net("mysql://u:***@[::1]:3306/db"), Network::Loopback);
        assert_eq!(net("nginx:managed"), Network::Any);
    }

    #[test]
    fn sqlite_targets_parse() {
        assert_eq!(
            Target::parse("sqlite:data.db").unwrap(),
            Target::Sqlite {
                path: "data.db".into()
            }
        );
        assert!(Target::parse("sqlite:").is_err());
        let err = Target::parse("ftp://u:pw@h/x").unwrap_err();
        assert!(!err.contains("pw"), "{err}");
        let pg = Target::parse("postgres://bob:hunter2@db/shop").unwrap();
        assert_eq!(pg.redacted(), "postgres://bob:***@db/shop");
        assert_eq!(
            serde_json::to_string(&pg).unwrap(),
            "\"postgres://bob:***@db/shop\""
        );
        assert!(!format!("{pg:?}").contains("hunter2"));
        assert_eq!(
            Target::parse("postgres:managed").unwrap(),
            postgres_managed()
        );
    }

    #[test]
    fn an_embedded_target_knows_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.db");
        let target = Target::parse(&format!("sqlite:{}", file.display())).unwrap();
        assert!(target.is_file(&file));
        assert!(target.is_file(&dir.path().join("./x.db")));
        assert!(!target.is_file(&dir.path().join("y.db")));
        assert!(!postgres_managed().is_file(&file));
    }
}
