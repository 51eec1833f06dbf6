//! A PostgreSQL server perflab owns for the length of a run
//! (`--target postgres:managed`): initdb in a fresh directory, postgres on a
//! free loopback port with the user's settings, a database named `perflab`,
//! and on drop a fast shutdown (SIGINT) and the directory removed (unless
//! kept). As root, the server runs as the `postgres` system user, since
//! PostgreSQL refuses to run as root.

use super::cgroup::ServerCgroup;
use super::{
    find_programs, free_loopback_port, log_file, server_command, server_user, NotReady, ServerDir,
    ServerProcess,
};
use crate::error::PlanError;
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

/// A running managed server. The process is stopped before its directory
/// is removed (fields drop in order).
pub struct ManagedPostgres {
    process: ServerProcess,
    /// The memory cgroup it runs in, when it is held to a limit.
    cgroup: Option<ServerCgroup>,
    dir: ServerDir,
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

/// Starts postgres on `dir`/data, logging to `dir`/postgres.log.
fn spawn_postmaster(
    bindir: &Path,
    user: Option<(u32, u32)>,
    dir: &ServerDir,
    port: u16,
    settings: &[(String, String)],
    cpus: &[usize],
    cgroup: Option<&ServerCgroup>,
) -> anyhow::Result<ServerProcess> {
    let mut cmd = server_command(&bindir.join("postgres"), user, cpus);
    if let Some(cgroup) = cgroup {
        cgroup.join(&mut cmd);
    }
    cmd.arg("-D")
        .arg(dir.path().join("data"))
        .args(["-p", &port.to_string()])
        .args(["-c", "listen_addresses=127.0.0.1"])
        .arg("-c")
        .arg(format!("unix_socket_directories={}", dir.path().display()));
    for (name, value) in settings {
        cmd.arg("-c").arg(format!("{name}={value}"));
    }
    cmd.stderr(log_file(dir, LOG, user)?);
    ServerProcess::spawn(cmd, libc::SIGINT, STOP_TIMEOUT, "postgres")
}

impl ManagedPostgres {
    /// Creates and starts a server with `settings` (name, value pairs).
    /// `cpus`, when not empty, is the server's affinity mask (its backends
    /// inherit it from the postmaster); `memory` holds it and its page
    /// cache to a limit (`--pg-memory`).
    pub fn start(
        settings: &[(String, String)],
        keep: bool,
        cpus: &[usize],
        memory: Option<crate::units::Bytes>,
    ) -> anyhow::Result<Self> {
        let bindir = find_bindir().ok_or_else(|| {
            PlanError::new(
                "no PostgreSQL server binaries (initdb, postgres) on PATH, from pg_config or in /usr/lib/postgresql/*/bin; install them (apt-get install postgresql) or give --target postgres://…",
            )
        })?;
        let user = server_user("postgres", "PostgreSQL")?;
        let dir = ServerDir::create("pg", "PostgreSQL", user, keep)?;
        let version = server_command(&bindir.join("postgres"), user, &[])
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let init = server_command(&bindir.join("initdb"), user, &[])
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-U", "perflab", "--auth=trust", "-E", "UTF8", "--no-sync"])
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
        let cgroup = memory
            .map(|limit| ServerCgroup::create(limit, "--pg-memory"))
            .transpose()?;
        let process = spawn_postmaster(&bindir, user, &dir, port, settings, cpus, cgroup.as_ref())?;
        let mut server = ManagedPostgres {
            process,
            cgroup,
            dir,
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
            self.process = spawn_postmaster(
                &self.bindir,
                self.user,
                &self.dir,
                self.port,
                &self.settings,
                &self.cpus,
                self.cgroup.as_ref(),
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
        let url = format!("postgres://perflab@127.0.0.1:{}/postgres", self.port);
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
                let fatal = self.dir.log_lines(LOG, "FATAL");
                Err(PlanError::new(format!(
                    "the managed PostgreSQL did not start ({status}): {}; check the --pg-set values",
                    if fatal.is_empty() { "see its log".to_string() } else { fatal }
                ))
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
        format!("postgres://perflab@127.0.0.1:{}/perflab", self.port)
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
