//! How perflab runs a server it manages ([`ServerOptions`]): its settings,
//! CPUs, memory, link, disk limits, log directory, addresses and
//! certificate, as the flags gave them. Plain data the flags make and every
//! managed kind's start reads.

use serde::{Deserialize, Serialize};

/// How perflab runs a server it manages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerOptions {
    /// Settings of the server (`--pg-set NAME=VALUE`).
    pub settings: Vec<(String, String)>,
    /// Keep the server's files after the run.
    pub keep: bool,
    /// The CPUs it may run on (all when empty).
    pub cpus: Vec<usize>,
    /// The memory its cgroup holds it (and its page cache) to.
    #[serde(default)]
    pub memory: Option<crate::units::Bytes>,
    /// Its link, when it runs behind a shaped one in a namespace of its own.
    #[serde(default)]
    pub link: Option<super::link::LinkShape>,
    /// Its disk I/O limits, on the disk under its files.
    #[serde(default)]
    pub io: Option<super::disk::IoLimits>,
    /// The directory its write-ahead log goes in (a new directory inside).
    #[serde(default)]
    pub log_dir: Option<std::path::PathBuf>,
    /// A managed web server: the loopback addresses it listens on
    /// (127.0.0.1 when empty).
    #[serde(default)]
    pub addresses: Vec<std::net::IpAddr>,
    /// A managed web server: its certificate and key (PEM), to serve HTTPS.
    #[serde(default)]
    pub tls_files: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// A managed web server in the accelerator role: the origin it caches
    /// (none: it serves the files itself).
    #[serde(default)]
    pub origin: Option<Origin>,
    /// A managed origin of an accelerator behind a shaped link: the
    /// host's end of that link, which perflab made and which only the
    /// link's namespace reaches. It listens there instead of on loopback,
    /// the accelerator's namespace having a loopback of its own. Never
    /// from a flag.
    #[serde(skip)]
    pub origin_of_link: Option<std::net::Ipv4Addr>,
}

/// A managed web server in the accelerator role: a caching reverse proxy
/// in front of an origin, which perflab either reaches at a URL or runs
/// itself (a second managed server of the same kind, serving the files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// An origin at a plain-HTTP base URL (`http://HOST:PORT/`).
    Url(String),
    /// A second managed server perflab starts, follows and stops.
    Managed,
}

impl Origin {
    /// How messages and the run's record name it.
    pub fn describe(&self) -> String {
        match self {
            Origin::Url(url) => url.clone(),
            Origin::Managed => "a managed origin".to_string(),
        }
    }
}
