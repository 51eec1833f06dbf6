//! Opening a target for a run or a check: a managed server started, the
//! credentials resolved once (URL, environment, password files), a
//! connection failure turned into one line. An [`Opened`] target keeps its
//! managed server alive until it is dropped.

use super::http::{HttpBase, ServerStatus};
use super::managed::cgroup::ServerCgroup;
use super::managed::link::ServerLink;
use super::managed::server::{Reach, Running};
use super::managed::KindEntry;
use super::mysql::{self, MyTarget};
use super::postgres::{self as pg, PgTarget};
use super::settings::DbSettings;
use super::{ServerOptions, Target};
use crate::error::PlanError;
use crate::probe::counters::process::ProcessSelector;
use crate::probe::DbStatsSource;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Where a workload connects.
#[derive(Clone)]
pub(crate) enum Endpoint {
    /// An embedded SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL server, credentials resolved.
    Postgres(Box<PgTarget>),
    /// A MySQL or MariaDB server, credentials resolved.
    Mysql(MyTarget),
    /// An HTTP server: its base URLs, each resolved to the address to
    /// connect to, and its status page if one is known.
    Http {
        bases: Vec<(HttpBase, std::net::SocketAddr)>,
        status: Option<String>,
        /// A managed caching proxy's access log, read each interval.
        cache_log: Option<super::cache_log::CacheAccounting>,
    },
    /// Nothing to connect to.
    InProcess,
}

/// A target made ready: where to connect, and the managed server if perflab
/// runs one (stopped and removed when this is dropped).
pub(crate) struct Opened {
    pub(crate) endpoint: Endpoint,
    managed: Option<Box<dyn Running>>,
    /// What was set up, for the run's record (the managed server's version,
    /// CPUs and settings).
    pub(crate) setup: serde_json::Value,
}

impl Opened {
    /// Opens `target`: starts a managed server with `server`'s options,
    /// resolves the credentials of a server's URL.
    pub(crate) fn open(target: &Target, server: &ServerOptions) -> anyhow::Result<Opened> {
        let endpoint = match target {
            Target::Sqlite { path } => Endpoint::Sqlite(path.clone()),
            Target::InProcess
            | Target::Agent { .. }
            | Target::File { .. }
            | Target::Device { .. }
            | Target::Dir { .. } => Endpoint::InProcess,
            Target::Postgres { url } => Endpoint::Postgres(Box::new(resolve_postgres(url)?)),
            Target::Mysql { url } => Endpoint::Mysql(resolve_mysql(url)?),
            Target::Http { bases } => Endpoint::Http {
                bases: resolve_http(bases)?,
                status: None,
                cache_log: None,
            },
            Target::Managed(kind) => return Opened::start(kind, server),
        };
        Ok(Opened {
            endpoint,
            managed: None,
            setup: serde_json::json!({}),
        })
    }

    /// Starts a managed server of `kind`, announces it, and reaches it as
    /// any server of its protocol.
    fn start(kind: &KindEntry, server: &ServerOptions) -> anyhow::Result<Opened> {
        crate::util::out(format_args!("starting a managed {}\n", kind.name));
        let started = (kind.start)(server)?;
        let setup = announce(
            &Announcement {
                version: started.version(),
                pid: started.pid(),
                dir: started.dir(),
                at: started.at(),
                cgroup: started.cgroup(),
                link: started.link(),
                wal_dir: started.log_dir(),
                settings: written(started.settings()),
            },
            server,
        );
        let endpoint = reach(started.reach()?)?;
        Ok(Opened {
            endpoint,
            managed: Some(started),
            setup,
        })
    }

    /// The managed server as a client reaches it: its URL, its password
    /// inside when it has one (never to be printed whole), and its main
    /// process; none for a server perflab did not start.
    pub(crate) fn managed_url(&self) -> Option<anyhow::Result<(String, u32)>> {
        let server = self.managed.as_ref()?;
        let url = server.reach().map(|reach| match reach {
            Reach::Postgres { url } => url,
            Reach::Mysql(target) => {
                let o = &target.opts;
                let user = o.user.as_deref().unwrap_or_default();
                let password = o
                    .password
                    .as_deref()
                    .map_or(String::new(), |p| format!(":{p}"));
                let socket = o
                    .socket
                    .as_deref()
                    .map_or(String::new(), |s| format!("?socket={s}"));
                let db = o.db.as_deref().unwrap_or_default();
                format!(
                    "mysql://{user}{password}@{}:{}/{db}{socket}",
                    o.host, o.port
                )
            }
            Reach::Http { bases, .. } => bases.join(","),
        });
        Some(url.map(|u| (u, server.pid())).map_err(Into::into))
    }

    /// Runs `prepare` (a workload's loading of its data) with the managed
    /// server's disk at its own speed and its link unshaped, then puts
    /// the throttle and the shaping back: they are what the steps measure,
    /// and no figure is taken while the data go in. A bank loaded, keyed,
    /// vacuumed and checked through 300 reads a second took ten times as
    /// long as on the bare disk; its accounts sent through a 2 Mbit/s link
    /// took 15.8 s where the bare veth took 1.3 s. A throttle or a shaping
    /// that cannot be put back ends the run: no step runs without it.
    pub(crate) fn unthrottled<T>(
        &self,
        prepare: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let managed = self.managed.as_ref();
        let cgroup = managed.and_then(|m| m.cgroup()).filter(|c| c.io.is_some());
        let link = managed.and_then(|m| m.link()).filter(|l| l.is_shaped());
        if let Some(cgroup) = cgroup {
            cgroup.hold_io(false)?;
            crate::util::out(format_args!(
                "its I/O limit is lifted while the data are prepared, and holds from the first step\n"
            ));
        }
        if let Some(link) = link {
            link.hold_shape(false)?;
            crate::util::out(format_args!(
                "its link is unshaped while the data are prepared, and shaped from the first step\n"
            ));
        }
        // A failed preparation ends the run, and the cgroup and the link
        // with it.
        let prepared = prepare()?;
        if let Some(cgroup) = cgroup {
            cgroup
                .hold_io(true)
                .context("cannot put the server's disk throttle back after preparing its data")?;
        }
        if let Some(link) = link {
            link.hold_shape(true)
                .context("cannot shape the server's link again after preparing its data")?;
        }
        Ok(prepared)
    }

    /// The managed server's processes (its main process and children).
    pub(crate) fn server_processes(&self) -> Option<ProcessSelector> {
        self.managed
            .as_ref()
            .map(|m| ProcessSelector::Tree(m.pid()))
    }

    /// The processes of a managed accelerator's managed origin.
    pub(crate) fn origin_processes(&self) -> Option<ProcessSelector> {
        self.managed
            .as_ref()
            .and_then(|m| m.origin_pid())
            .map(ProcessSelector::Tree)
    }

    /// The directory a managed web server serves files from.
    pub(crate) fn docroot(&self) -> Option<std::path::PathBuf> {
        self.managed.as_ref().and_then(|m| m.docroot())
    }
}

impl Endpoint {
    /// How messages name it (no password).
    pub(crate) fn display(&self) -> String {
        match self {
            Endpoint::Sqlite(path) => path.display().to_string(),
            Endpoint::Postgres(t) => t.display.clone(),
            Endpoint::Mysql(t) => t.display.clone(),
            Endpoint::Http { bases, .. } => bases
                .iter()
                .map(|(b, _)| b.url())
                .collect::<Vec<_>>()
                .join(", "),
            Endpoint::InProcess => "in-process".to_string(),
        }
    }

    /// The addresses the run's traffic goes to: each TCP host resolved
    /// (as the connections resolve it), none over a Unix socket or for an
    /// embedded or in-process target. A host that no longer resolves
    /// gives nothing: the connections made already reached it.
    pub(crate) fn addresses(&self) -> Vec<std::net::IpAddr> {
        use std::net::ToSocketAddrs;
        let resolve = |host: &str, port: u16| -> Vec<std::net::IpAddr> {
            (host, port)
                .to_socket_addrs()
                .map(|a| a.map(|s| s.ip()).collect())
                .unwrap_or_default()
        };
        let mut out: Vec<std::net::IpAddr> = match self {
            Endpoint::Sqlite(_) | Endpoint::InProcess => Vec::new(),
            Endpoint::Postgres(t) => {
                let port = t.config.get_ports().first().copied().unwrap_or(5432);
                t.config
                    .get_hosts()
                    .iter()
                    .flat_map(|h| match h {
                        tokio_postgres::config::Host::Tcp(name) => resolve(name, port),
                        tokio_postgres::config::Host::Unix(_) => Vec::new(),
                    })
                    .collect()
            }
            Endpoint::Mysql(t) if t.opts.socket.is_some() => Vec::new(),
            Endpoint::Mysql(t) => resolve(&t.opts.host, t.opts.port),
            Endpoint::Http { bases, .. } => bases.iter().map(|(_, a)| a.ip()).collect(),
        };
        out.sort();
        out.dedup();
        out
    }

    /// The server's own statistics, to be sampled (none for a server
    /// that keeps none perflab reads: an embedded database, a web server
    /// without a status page).
    pub(crate) fn stats_source(&self) -> Option<anyhow::Result<Box<dyn DbStatsSource>>> {
        fn boxed<S: DbStatsSource>(s: anyhow::Result<S>) -> anyhow::Result<Box<dyn DbStatsSource>> {
            Ok(Box::new(s?))
        }
        Some(match self {
            Endpoint::Postgres(t) => boxed(pg::stats::PgStats::connect(t)),
            Endpoint::Mysql(t) => boxed(mysql::stats::MyStats::connect(t)),
            Endpoint::Http {
                status: Some(url), ..
            } => boxed(ServerStatus::connect(url)),
            Endpoint::Sqlite(_) | Endpoint::InProcess | Endpoint::Http { .. } => return None,
        })
    }

    /// The server's settings (none for an embedded database).
    pub(crate) fn settings(&self) -> Option<anyhow::Result<DbSettings>> {
        match self {
            Endpoint::Postgres(t) => Some(block_on(async {
                let client = pg::connect(t, &t.config).await?;
                let mut s = super::settings::postgres_settings(&client)
                    .await
                    .map_err(|e| pg::pool::lost_statement(t, e, false))?;
                let pool = pg::pool::look(t, &s.settings).await;
                s.settings.extend(pool);
                Ok(s)
            })),
            Endpoint::Mysql(t) => Some(block_on(async {
                let mut conn = mysql::connect(t, mysql::LOOK_QUERY).await?;
                let s = super::settings::mariadb_settings(&mut conn).await;
                conn.quit().await;
                s
            })),
            Endpoint::Sqlite(_) | Endpoint::InProcess | Endpoint::Http { .. } => None,
        }
    }
}

/// What a managed server announces of itself when it has started.
struct Announcement<'a> {
    version: &'a str,
    pid: u32,
    dir: &'a std::path::Path,
    /// Where it answers, for the first line (its address, or its URLs).
    at: String,
    cgroup: Option<&'a ServerCgroup>,
    link: Option<&'a ServerLink>,
    wal_dir: Option<&'a std::path::Path>,
    /// Its settings as written (`NAME=VALUE`).
    settings: Vec<String>,
}

/// The moved log's device, its flush timed as a commit meets it (and
/// said): what a what-if of the log there (a lab's variant that moved it)
/// rests on. None when it cannot be timed.
fn moved_log(wal: &Path) -> Option<crate::probe::flush::FlushLatency> {
    let timed = crate::probe::flush::measure(wal, LOG_FLUSH_TIME, "--log-dir").ok();
    crate::util::out(format_args!(
        "its log in {}{}\n",
        wal.display(),
        timed.as_ref().map_or(String::new(), |t| format!(
            " (a flush there takes {} mean, p99 {}, timed by perflab)",
            crate::units::Latency::secs(t.mean),
            crate::units::Latency::secs(t.p99)
        ))
    ));
    timed
}

/// How long a moved log's flushes are timed when its server starts.
const LOG_FLUSH_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// Prints what was started and how it is placed (its link, its memory
/// and I/O limits, its log's directory), and returns the run's record of it.
fn announce(started: &Announcement<'_>, server: &ServerOptions) -> serde_json::Value {
    let Announcement {
        version,
        pid,
        dir,
        at,
        cgroup,
        link,
        wal_dir,
        settings,
    } = started;
    let (cgroup, link, wal_dir) = (*cgroup, *link, *wal_dir);
    crate::util::out(format_args!(
        "{version} on {at}, pid {pid}, files in {}\n",
        dir.display()
    ));
    if let Some(l) = link {
        crate::util::out(format_args!(
            "its link: {} (network namespace {}, veth {} at {} on this host's side)\n",
            l.shape.describe(),
            l.name(),
            l.host_interface(),
            l.host_addr
        ));
    }
    if let Some((limit, dir)) = cgroup.and_then(|c| Some((c.memory?, c.memory_dir()?))) {
        crate::util::out(format_args!(
            "its memory (page cache included) held to {limit} by the cgroup {}\n",
            dir.display()
        ));
    }
    if let Some((io, dir)) = cgroup.and_then(|c| Some((c.io.as_ref()?, c.io_dir()?))) {
        crate::util::out(format_args!(
            "its I/O on {} ({}:{}) held to {} by the cgroup {}\n",
            io.disk,
            io.device.0,
            io.device.1,
            io.limits.describe(),
            dir.display()
        ));
    }
    let log_flush = wal_dir.and_then(moved_log);
    serde_json::json!({
        "managed_server": {
            "version": version,
            "cpus": server.cpus,
            "memory_bytes": server.memory.map(|m| m.0),
            "io": cgroup.and_then(|c| c.io.as_ref()).map(|io| serde_json::json!({
                "disk": io.disk,
                "device": format!("{}:{}", io.device.0, io.device.1),
                "read_iops": io.limits.read_iops,
                "write_iops": io.limits.write_iops,
                "read_bytes_per_sec": io.limits.read_bps.map(|b| b.0),
                "write_bytes_per_sec": io.limits.write_bps.map(|b| b.0),
            })),
            "log_dir": wal_dir.map(|w| w.display().to_string()),
            "log_flush": log_flush.map(|t| serde_json::json!({
                "mean_s": t.mean,
                "p99_s": t.p99,
                "flushes": t.flushes,
            })),
            "link": link.map(|l| serde_json::json!({
                "rate_bits_per_sec": l.shape.rate.map(|r| r.0),
                "loss_to_server": l.shape.loss_to_server,
                "loss_from_server": l.shape.loss_from_server,
                "delay_us": l.shape.delay.map(|d| d.as_micros() as u64),
                "namespace": l.name(),
                "host_interface": l.host_interface(),
            })),
            "settings": settings,
            "origin": server.origin.as_ref().map(|o| o.describe()),
        }
    })
}

/// Where a run connects to a managed server: as to any server of its
/// protocol.
fn reach(reach: Reach) -> anyhow::Result<Endpoint> {
    Ok(match reach {
        Reach::Postgres { url } => Endpoint::Postgres(Box::new(resolve_postgres(&url)?)),
        Reach::Mysql(target) => Endpoint::Mysql(target),
        Reach::Http {
            bases,
            status,
            cache_log,
        } => {
            let bases = bases
                .iter()
                .map(|u| HttpBase::parse(u).map_err(anyhow::Error::msg))
                .collect::<anyhow::Result<Vec<_>>>()?;
            Endpoint::Http {
                bases: resolve_http(&bases)?,
                status,
                cache_log,
            }
        }
    })
}

/// Settings as they are written, `NAME=VALUE`.
fn written(settings: &[(String, String)]) -> Vec<String> {
    settings.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// Runs one administrative call on a runtime of its own.
fn block_on<T>(work: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(work)
}

/// A `postgres://` URL with libpq's fallbacks (environment, ~/.pgpass).
fn resolve_postgres(url: &str) -> Result<PgTarget, PlanError> {
    let env = |name: &str| std::env::var(name).ok();
    pg::resolve(url, &env, pg::read_pgpass(&env).as_deref()).map_err(|e| {
        PlanError::flag(
            "--target",
            e,
            "e.g. --target postgres://shop@localhost/shop",
        )
    })
}

/// Each base URL with the address it resolves to.
fn resolve_http(bases: &[HttpBase]) -> Result<Vec<(HttpBase, std::net::SocketAddr)>, PlanError> {
    bases
        .iter()
        .map(|b| {
            b.resolve().map(|addr| (b.clone(), addr)).map_err(|e| {
                PlanError::flag(
                    "--target",
                    e,
                    "give a host name that resolves, or an address",
                )
            })
        })
        .collect()
}

/// A `mysql://` URL with the client library's environment variables.
fn resolve_mysql(url: &str) -> Result<MyTarget, PlanError> {
    let env = |name: &str| std::env::var(name).ok();
    mysql::resolve(url, &env).map_err(|e| {
        PlanError::flag(
            "--target",
            e,
            "e.g. --target mysql://shop:secret@localhost/shop",
        )
    })
}
