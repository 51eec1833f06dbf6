//! A PostgreSQL server perflab owns for the length of a run
//! (`--target postgres:managed`): initdb in a fresh directory, postgres on a
//! free loopback port with the user's settings, a database named `perflab`,
//! and on drop a fast shutdown (SIGINT) and the directory removed (unless
//! kept). As root, the server runs as the `postgres` system user, since
//! PostgreSQL refuses to run as root.

use super::find_programs;
use super::server::{ManagedKind, ManagedServer, MovedLog, Probe, Reach, Site, Start};
use super::{placed_command, server_command, ServerDir};
use crate::error::PlanError;
use crate::sut::{ServerOptions, TargetKind};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A running managed PostgreSQL.
pub type ManagedPostgres = ManagedServer<Postgres>;

/// The managed PostgreSQL kind: its programs' directory and its port.
pub struct Postgres {
    bindir: PathBuf,
    port: u16,
}

/// Finds the server binaries: on PATH, from `pg_config --bindir`, or the
/// newest /usr/lib/postgresql/*/bin.
pub(crate) fn find_bindir() -> Option<PathBuf> {
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

impl ManagedKind for Postgres {
    const SCHEME: &'static str = "postgres:managed";
    const TARGET_KIND: TargetKind = TargetKind::Postgres;
    const NAME: &'static str = "PostgreSQL";
    const DIR_PREFIX: &'static str = "pg";
    const MOVED_LOG: Option<MovedLog> = Some(MovedLog {
        dir_prefix: "pg-wal",
        what: "PostgreSQL's write-ahead log",
    });
    const USER: &'static str = "postgres";
    const LOG: &'static str = "postgres.log";
    const KNOB: &'static str = "pg";
    const SETTINGS_FLAG: &'static str = "--pg-set";
    const CPUS_FLAG: &'static str = "--pg-cpus";
    const MEMORY_FLAG: &'static str = "--pg-memory";
    const EXAMPLE_SETTING: &'static str = "shared_buffers=128MB";
    const SETTINGS_HELP: &'static str = "a server setting, NAME=VALUE (repeatable)";
    const PROGRAM: &'static str = "postgres";
    const START_TIMEOUT: Duration = Duration::from_secs(60);
    const POLL: Duration = Duration::from_millis(100);
    const READY_MEANS: &'static str = "accept connections";
    /// A fast shutdown.
    const STOP_SIGNAL: libc::c_int = libc::SIGINT;
    const STOP_TIMEOUT: Duration = Duration::from_secs(30);

    type Programs = PathBuf;

    /// Each setting against [`super::guard::postgres`], then all of them
    /// asked of postgres.
    fn ask(settings: &[(String, String)], _accelerating: bool) -> Result<(), String> {
        for (name, value) in settings {
            super::guard::postgres(name, value)?;
        }
        super::asked::postgres(settings, find_bindir)
    }

    fn find(options: &ServerOptions) -> anyhow::Result<PathBuf> {
        for (name, value) in &options.settings {
            super::guard::postgres(name, value).map_err(|e| {
                PlanError::flag(Self::SETTINGS_FLAG, e, "e.g. --pg-set shared_buffers=128MB")
            })?;
        }
        find_bindir().ok_or_else(|| {
            PlanError::new(
                "no PostgreSQL server binaries (initdb, postgres) on PATH, from pg_config or in /usr/lib/postgresql/*/bin; install them (apt-get install postgresql) or give --target postgres://…",
            )
            .into()
        })
    }

    fn version(bindir: &PathBuf, user: Option<(u32, u32)>) -> String {
        server_command(&bindir.join("postgres"), user, &[])
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    }

    fn prepare(bindir: PathBuf, site: &Site) -> anyhow::Result<Self> {
        init_data(&bindir, site)?;
        if let Some(link) = &site.link {
            // initdb trusts loopback only; perflab now comes from the
            // host's end of the pair.
            let hba = site.dir.path().join("data/pg_hba.conf");
            let mut text = std::fs::read_to_string(&hba).context("cannot read pg_hba.conf")?;
            text.push_str(&format!("host all all {}/32 trust\n", link.host_addr));
            std::fs::write(&hba, text).context("cannot write pg_hba.conf")?;
        }
        let port = super::free_loopback_port()?;
        Ok(Postgres { bindir, port })
    }

    /// postgres on the data directory, listening on the site's address,
    /// with the user's settings.
    fn command(&self, site: &Site) -> Command {
        let dir = site.dir.path();
        let mut cmd = placed_command(&self.bindir.join("postgres"), &site.placement());
        cmd.arg("-D")
            .arg(dir.join("data"))
            .args(["-p", &self.port.to_string()])
            .arg("-c")
            .arg(format!("listen_addresses={}", site.address()))
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.display()));
        for (name, value) in &site.settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        cmd
    }

    /// A connection that runs one statement: the first time, the one that
    /// creates the database.
    fn probe<'a>(&'a self, site: &'a Site, start: Start) -> anyhow::Result<Probe<'a>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let url = format!(
            "postgres://perflab@{}:{}/postgres",
            site.address(),
            self.port
        );
        let sql = match start {
            Start::First => "CREATE DATABASE perflab",
            Start::Again => "SELECT 1",
        };
        Ok(Box::new(move || {
            runtime
                .block_on(async {
                    let (client, connection) =
                        tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
                    tokio::spawn(connection);
                    client.batch_execute(sql).await
                })
                .map_err(|e| e.to_string())
        }))
    }

    fn said(dir: &ServerDir) -> Vec<String> {
        let mut said = dir.said(Self::LOG, "FATAL:");
        if said.is_empty() {
            // A check at start (postgres: …) has no FATAL.
            said.extend(dir.last_line(Self::LOG));
        }
        said
    }

    fn reach(&self, site: &Site) -> Result<Reach, PlanError> {
        Ok(Reach::Postgres {
            url: self.url(site),
        })
    }
}

impl Postgres {
    /// The URL of the server's `perflab` database.
    fn url(&self, site: &Site) -> String {
        format!(
            "postgres://perflab@{}:{}/perflab",
            site.address(),
            self.port
        )
    }
}

/// initdb on the site's `data`, its write-ahead log in the log's own
/// directory when it has one.
fn init_data(bindir: &Path, site: &Site) -> anyhow::Result<()> {
    let init = server_command(&bindir.join("initdb"), site.user, &[])
        .arg("-D")
        .arg(site.dir.path().join("data"))
        .args(["-U", "perflab", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .args(
            site.log_dir
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
    Ok(())
}

impl ManagedServer<Postgres> {
    /// The URL to reach the server's `perflab` database.
    pub fn url(&self) -> String {
        self.kind().url(self.site())
    }
}
