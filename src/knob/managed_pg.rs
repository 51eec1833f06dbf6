//! A PostgreSQL server perflab owns for the length of a run: initdb in a
//! fresh directory, postgres on a free loopback port with the user's
//! settings, a database named `perflab`, and on drop a fast shutdown and
//! the directory removed (unless kept). As root, the server runs as the
//! `postgres` system user, since PostgreSQL refuses to run as root.

use crate::cli::PlanError;
use anyhow::Context;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a fast shutdown may take before the server is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// A running managed server.
pub struct ManagedPostgres {
    dir: PathBuf,
    child: Child,
    port: u16,
    keep: bool,
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
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_server(&dir) {
                return Some(dir);
            }
        }
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_server(&dir) {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            has_server(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// The uid and gid to run the server as: ours, or `postgres`'s when we are root.
fn server_user() -> anyhow::Result<Option<(u32, u32)>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let name = std::ffi::CString::new("postgres").expect("no NUL in a literal");
    // SAFETY: getpwnam reads a NUL-terminated name; the result is copied at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err(PlanError::new(
            "a managed PostgreSQL cannot run as root and there is no 'postgres' user to run it as; create one (useradd postgres) or run perflab as another user",
        )
        .into());
    }
    // SAFETY: pw is non-null and points at a valid passwd entry.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Ok(Some((uid, gid)))
}

fn command(bindir: &Path, program: &str, user: Option<(u32, u32)>) -> Command {
    let mut cmd = Command::new(bindir.join(program));
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

/// Starts postgres on `dir`/data, logging to `dir`/postgres.log.
fn spawn_postmaster(
    bindir: &Path,
    user: Option<(u32, u32)>,
    dir: &Path,
    port: u16,
    settings: &[(String, String)],
    cpus: &[usize],
) -> anyhow::Result<Child> {
    let log_path = dir.join("postgres.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&log_path, Some(uid), Some(gid))?;
    }
    let mut cmd = command(bindir, "postgres", user);
    cmd.arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string()])
        .args(["-c", "listen_addresses=127.0.0.1"])
        .arg("-c")
        .arg(format!("unix_socket_directories={}", dir.display()));
    for (name, value) in settings {
        cmd.arg("-c").arg(format!("{name}={value}"));
    }
    if !cpus.is_empty() {
        // SAFETY: between fork and exec only async-signal-safe calls are
        // made: CPU_ZERO/CPU_SET on a local set and sched_setaffinity(2).
        let mask = {
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            for &cpu in cpus {
                unsafe { libc::CPU_SET(cpu, &mut set) };
            }
            set
        };
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mask) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("cannot start postgres")
}

fn free_port() -> anyhow::Result<u16> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

impl ManagedPostgres {
    /// Creates and starts a server with `settings` (name, value pairs).
    /// `cpus`, when not empty, is the server's affinity mask (its backends
    /// inherit it from the postmaster).
    pub fn start(
        settings: &[(String, String)],
        keep: bool,
        cpus: &[usize],
    ) -> anyhow::Result<Self> {
        let bindir = find_bindir().ok_or_else(|| {
            PlanError::new(
                "no PostgreSQL server binaries (initdb, postgres) on PATH, from pg_config or in /usr/lib/postgresql/*/bin; install them (apt-get install postgresql) or give --target postgres://…",
            )
        })?;
        let user = server_user()?;
        let dir = tempfile::Builder::new()
            .prefix("perflab-pg-")
            .tempdir()
            .context("cannot create a directory for the managed server")?
            .keep();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .context("cannot hand the server directory to the postgres user")?;
        }
        let data = dir.join("data");
        let version = command(&bindir, "postgres", user)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let init = command(&bindir, "initdb", user)
            .arg("-D")
            .arg(&data)
            .args(["-U", "perflab", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("cannot run initdb")?;
        if !init.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            anyhow::bail!(
                "initdb failed: {}",
                String::from_utf8_lossy(&init.stderr).trim()
            );
        }
        let port = free_port()?;
        let child = spawn_postmaster(&bindir, user, &dir, port, settings, cpus)?;
        let mut server = ManagedPostgres {
            dir,
            child,
            port,
            keep,
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
        let _ = self.child.try_wait();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.child = spawn_postmaster(
                &self.bindir,
                self.user,
                &self.dir,
                self.port,
                &self.settings,
                &self.cpus,
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
        let deadline = Instant::now() + START_TIMEOUT;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let url = format!("postgres://perflab@127.0.0.1:{}/postgres", self.port);
        loop {
            if let Some(status) = self.child.try_wait()? {
                let fatal = self.log_lines("FATAL");
                return Err(PlanError::new(format!(
                    "the managed PostgreSQL did not start ({status}): {}; check the --pg-set values",
                    if fatal.is_empty() { "see its log".to_string() } else { fatal }
                ))
                .into());
            }
            let ready = runtime.block_on(async {
                let (client, connection) =
                    tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
                tokio::spawn(connection);
                let sql = if create {
                    "CREATE DATABASE perflab"
                } else {
                    "SELECT 1"
                };
                client.batch_execute(sql).await
            });
            match ready {
                Ok(()) => return Ok(()),
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(e) => {
                    anyhow::bail!("the managed PostgreSQL did not accept connections in 60 s: {e}")
                }
            }
        }
    }

    fn log_lines(&self, marker: &str) -> String {
        std::fs::read_to_string(self.dir.join("postgres.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(marker))
            .collect::<Vec<_>>()
            .join(" / ")
    }

    /// The URL to reach the server's `perflab` database.
    pub fn url(&self) -> String {
        format!("postgres://perflab@127.0.0.1:{}/perflab", self.port)
    }

    /// The postmaster's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where the server's files are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ManagedPostgres {
    fn drop(&mut self) {
        // SIGINT asks the postmaster for a fast shutdown.
        // SAFETY: signalling the child we started, by its PID.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if self.keep {
            eprintln!(
                "kept the managed PostgreSQL's files in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
