//! A PostgreSQL server perflab owns for the length of a run
//! (`--target postgres:managed`): initdb in a fresh directory, postgres on a
//! free loopback port with the user's settings, a database named `perflab`,
//! and on drop a fast shutdown (SIGINT) and the directory removed (unless
//! kept). As root, the server runs as the `postgres` system user, since
//! PostgreSQL refuses to run as root.

use super::cgroup::ServerCgroup;
use super::ledger::Leftovers;
use super::link::ServerLink;
use super::{
    find_programs, free_loopback_port, log_file, placed_command, server_command, server_user,
    NotReady, Placement, ServerDir, ServerProcess,
};
use crate::error::PlanError;
use crate::target::ServerOptions;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a fast shutdown may take before the server is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// The server's log, in its directory.
const LOG: &str = "postgres.log";
/// Where it listens when its link is not shaped.
const LOOPBACK: std::net::Ipv4Addr = std::net::Ipv4Addr::LOCALHOST;

/// A running managed server. The process is stopped before its directory
/// is removed (fields drop in order).
pub struct ManagedPostgres {
    process: ServerProcess,
    /// The shaped link it runs behind, when it does.
    link: Option<ServerLink>,
    /// The memory cgroup it runs in, when it is held to a limit.
    cgroup: Option<ServerCgroup>,
    dir: ServerDir,
    /// Its write-ahead log's directory, when it has one of its own.
    wal_dir: Option<ServerDir>,
    /// The ledger's record of all the above; struck off last.
    leftovers: Leftovers,
    port: u16,
    /// How to start the postmaster again (restart after a crash).
    bindir: PathBuf,
    user: Option<(u32, u32)>,
    settings: Vec<(String, String)>,
    /// The CPUs it runs on (all when empty).
    cpus: Vec<usize>,
    /// `postgres --version`.
    pub version: String,
}

/// Finds the server binaries: on PATH, from `pg_config --bindir`, or the
/// newest /usr/lib/postgresql/*/bin.
pub fn find_bindir() -> Option<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        if out.status.success() {
            dirs.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((version, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    dirs.extend(versions.into_iter().rev().map(|(_, bin)| bin));
    find_programs(&["initdb", "postgres"], dirs)
}

/// Starts postgres on `dir`/data, logging to `dir`/postgres.log,
/// listening on `address`.
fn spawn_postmaster(
    bindir: &Path,
    placement: &Placement,
    dir: &ServerDir,
    address: std::net::Ipv4Addr,
    port: u16,
    settings: &[(String, String)],
    leftovers: &mut Leftovers,
) -> anyhow::Result<ServerProcess> {
    let mut cmd = placed_command(&bindir.join("postgres"), placement);
    cmd.arg("-D")
        .arg(dir.path().join("data"))
        .args(["-p", &port.to_string()])
        .arg("-c")
        .arg(format!("listen_addresses={address}"))
        .arg("-c")
        .arg(format!("unix_socket_directories={}", dir.path().display()));
    for (name, value) in settings {
        cmd.arg("-c").arg(format!("{name}={value}"));
    }
    cmd.stderr(log_file(dir, LOG, placement.user)?);
    ServerProcess::spawn(cmd, libc::SIGINT, STOP_TIMEOUT, "postgres", leftovers)
}

impl ManagedPostgres {
    /// Creates and starts a server with `server`'s settings (name, value
    /// pairs). Its CPUs, when given, are the server's affinity mask (its
    /// backends inherit it from the postmaster); its memory holds it and
    /// its page cache to a limit (`--pg-memory`); its link puts it in a
    /// namespace of its own behind a shaped veth pair (`--link-*`).
    pub fn start(server: &ServerOptions) -> anyhow::Result<Self> {
        let ServerOptions {
            settings,
            keep,
            cpus,
            memory,
            link,
            io,
            log_dir,
            ..
        } = server;
        let bindir = find_bindir().ok_or_else(|| {
            PlanError::new(
                "no PostgreSQL server binaries (initdb, postgres) on PATH, from pg_config or in /usr/lib/postgresql/*/bin; install them (apt-get install postgresql) or give --target postgres://…",
            )
        })?;
        let user = server_user("postgres", "PostgreSQL")?;
        let mut leftovers = Leftovers::begin("PostgreSQL")?;
        let dir = ServerDir::create("pg", "PostgreSQL", user, *keep, &mut leftovers)?;
        let wal_dir = log_dir
            .as_ref()
            .map(|parent| {
                ServerDir::create_in(parent, "pg-wal", "PostgreSQL", user, *keep, &mut leftovers)
            })
            .transpose()?;
        let version = server_command(&bindir.join("postgres"), user, &[])
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let init = server_command(&bindir.join("initdb"), user, &[])
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-U", "perflab", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .args(
                wal_dir
                    .as_ref()
                    .map(|w| format!("--waldir={}", w.path().display())),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("cannot run initdb")?;
        if !init.status.success() {
            anyhow::bail!(
                "initdb failed: {}",
                String::from_utf8_lossy(&init.stderr).trim()
            );
        }
        let port = free_loopback_port()?;
        let cgroup = ServerCgroup::for_server(
            dir.path(),
            *memory,
            io.as_ref(),
            "--pg-memory",
            &mut leftovers,
        )?;
        let link = link
            .as_ref()
            .map(|shape| ServerLink::create(shape, &mut leftovers))
            .transpose()?;
        if let Some(link) = &link {
            // initdb trusts loopback only; perflab now comes from the
            // host's end of the pair.
            let hba = dir.path().join("data/pg_hba.conf");
            let mut text = std::fs::read_to_string(&hba).context("cannot read pg_hba.conf")?;
            text.push_str(&format!("host all all {}/32 trust\n", link.host_addr));
            std::fs::write(&hba, text).context("cannot write pg_hba.conf")?;
        }
        let placement = Placement {
            user,
            cpus,
            cgroup: cgroup.as_ref(),
            link: link.as_ref(),
        };
        let address = link.as_ref().map_or(LOOPBACK, |l| l.server_addr);
        let process = spawn_postmaster(
            &bindir,
            &placement,
            &dir,
            address,
            port,
            settings,
            &mut leftovers,
        )?;
        let mut server = ManagedPostgres {
            process,
            link,
            cgroup,
            dir,
            wal_dir,
            leftovers,
            port,
            bindir,
            user,
            settings: settings.to_vec(),
            cpus: cpus.to_vec(),
            version,
        };
        server.wait_ready(true)?;
        Ok(server)
    }

    /// Starts the postmaster again on the same files and port (after a
    /// crash), waiting out the old backends' shared memory.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        let _ = self.process.exited();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let placement = Placement {
                user: self.user,
                cpus: &self.cpus,
                cgroup: self.cgroup.as_ref(),
                link: self.link.as_ref(),
            };
            self.process = spawn_postmaster(
                &self.bindir,
                &placement,
                &self.dir,
                self.address(),
                self.port,
                &self.settings,
                &mut self.leftovers,
            )?;
            match self.wait_ready(false) {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// Waits until the server accepts connections, then (the first time)
    /// creates the database.
    fn wait_ready(&mut self, create: bool) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let url = format!(
            "postgres://perflab@{}:{}/postgres",
            self.address(),
            self.port
        );
        let sql = if create {
            "CREATE DATABASE perflab"
        } else {
            "SELECT 1"
        };
        let ready = || {
            runtime
                .block_on(async {
                    let (client, connection) =
                        tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
                    tokio::spawn(connection);
                    client.batch_execute(sql).await
                })
                .map_err(|e| e.to_string())
        };
        match self
            .process
            .wait_ready(START_TIMEOUT, Duration::from_millis(100), ready)
        {
            Ok(()) => Ok(()),
            Err(NotReady::Exited(status)) => {
                let mut said = self.dir.said(LOG, "FATAL:");
                if said.is_empty() {
                    // A check at start (postgres: …) has no FATAL.
                    said.extend(self.dir.last_line(LOG));
                }
                Err(super::start_failure(
                    "PostgreSQL",
                    &status,
                    &said,
                    self.user.map(|_| "postgres"),
                    ("--pg-set", !self.settings.is_empty()),
                )
                .into())
            }
            Err(NotReady::Timeout(e)) => {
                anyhow::bail!("the managed PostgreSQL did not accept connections in 60 s: {e}")
            }
            Err(NotReady::Interrupted(i)) => Err(i.into()),
        }
    }

    /// The URL to reach the server's `perflab` database.
    pub fn url(&self) -> String {
        format!(
            "postgres://perflab@{}:{}/perflab",
            self.address(),
            self.port
        )
    }

    /// The address it listens on: loopback, or its end of a shaped link.
    pub fn address(&self) -> std::net::Ipv4Addr {
        self.link.as_ref().map_or(LOOPBACK, |l| l.server_addr)
    }

    /// Its write-ahead log's own directory, when it has one.
    pub fn wal_dir(&self) -> Option<&Path> {
        self.wal_dir.as_ref().map(ServerDir::path)
    }

    /// The shaped link it runs behind, when it does.
    pub fn link(&self) -> Option<&ServerLink> {
        self.link.as_ref()
    }

    /// The postmaster's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Where the server's files are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The memory cgroup it runs in, when it is held to a limit.
    pub fn cgroup(&self) -> Option<&ServerCgroup> {
        self.cgroup.as_ref()
    }
}
