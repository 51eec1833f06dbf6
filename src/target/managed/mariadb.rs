//! A MariaDB server perflab owns for the length of a run
//! (`--target mariadb:managed`): `mariadb-install-db` in a fresh directory,
//! `mariadbd` on a free loopback port with the user's options
//! (`--mariadb-set NAME=VALUE` is the server's `--NAME=VALUE`), a database
//! and a user named `perflab` made by the server's init file before it
//! takes its first connection, and on drop a shutdown (SIGTERM) and the
//! directory removed (unless kept). It starts with performance_schema on,
//! collecting the waits in progress on file and socket I/O and on locks
//! (the server's default is off, and it cannot be switched on without a
//! restart), so the sessions' waits are named, not all `CPU`; a
//! `--mariadb-set performance_schema=OFF` comes after and wins. As root, the server runs as the `mysql`
//! system user. The user's password is drawn afresh for each server and
//! lives only in memory: any other local user who reaches the port still
//! needs it.

use super::cgroup::ServerCgroup;
use super::ledger::Leftovers;
use super::link::ServerLink;
use super::{
    find_programs, free_loopback_port, log_file, placed_command, server_command, server_user,
    NotReady, Placement, ServerDir, ServerProcess,
};
use crate::error::PlanError;
use crate::target::mysql::{self, MyTarget};
use crate::target::ServerOptions;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// performance_schema on with the events_waits_current consumer and the
/// instruments of I/O and locks: the waits the sampler names (the
/// mutexes' instruments are left at the server's default, off: they cost
/// the most and name the least).
const PERFORMANCE_SCHEMA: [&str; 4] = [
    "--performance-schema=ON",
    "--performance-schema-consumer-events-waits-current=ON",
    "--performance-schema-instrument=wait/io/%=ON",
    "--performance-schema-instrument=wait/lock/%=ON",
];

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a shutdown may take before the server is killed (InnoDB
/// flushes its buffer pool's dirty pages first).
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// The server's error log, in its directory.
const LOG: &str = "mariadb.log";
/// Where it listens when its link is not shaped.
const LOOPBACK: std::net::Ipv4Addr = std::net::Ipv4Addr::LOCALHOST;

/// A running managed server. The process is stopped before its directory
/// is removed (fields drop in order).
pub struct ManagedMariadb {
    process: ServerProcess,
    /// The shaped link it runs behind, when it does.
    link: Option<ServerLink>,
    /// The memory cgroup it runs in, when it is held to a limit.
    cgroup: Option<ServerCgroup>,
    dir: ServerDir,
    /// The directory of its InnoDB redo log, when it is not the data's.
    redo_dir: Option<ServerDir>,
    /// The ledger's record of all the above; struck off last.
    _leftovers: Leftovers,
    port: u16,
    password: String,
    /// `MariaDB 10.11.14`, from `mariadbd --version`.
    pub version: String,
    /// The user it runs as (none: perflab's own).
    user: Option<(u32, u32)>,
    /// Whether `--mariadb-set` gave any option.
    settings_given: bool,
}

/// The directories that hold `program`: PATH, then where Debian and Red
/// Hat put MariaDB's.
pub fn find(program: &str) -> Option<PathBuf> {
    let dirs = [
        "/usr/sbin",
        "/usr/bin",
        "/usr/libexec",
        "/usr/local/mysql/bin",
    ];
    find_programs(&[program], dirs.map(PathBuf::from)).map(|dir| dir.join(program))
}

/// Validates one `--mariadb-set` pair: a server option's name (letters,
/// digits, `_` and `-`) and a value on one line; the server itself judges
/// the value when it starts.
pub fn check_setting(name: &str, value: &str) -> Result<(), String> {
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !name_ok {
        return Err(format!(
            "'{name}' is not a server option's name (letters, digits, _ and -)"
        ));
    }
    if value.contains(['\n', '\r', '\0']) {
        return Err(format!("the value of '{name}' holds a line break"));
    }
    Ok(())
}

/// `MariaDB 10.11.14` from `mariadbd --version`'s `… Ver
/// 10.11.14-MariaDB-0+deb12u2 for …` (the whole line where it differs).
fn version_of(text: &str) -> String {
    let text = text.trim();
    text.split_whitespace()
        .skip_while(|w| *w != "Ver")
        .nth(1)
        .and_then(|v| v.split('-').next())
        .map_or_else(|| text.to_string(), |v| format!("MariaDB {v}"))
}

/// A password of 32 hexadecimal digits from the system's random source.
fn fresh_password() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .context("cannot read /dev/urandom for the managed MariaDB's password")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl ManagedMariadb {
    /// Creates and starts a server with `settings` (option name, value
    /// pairs); `cpus`, when not empty, is its affinity mask; `memory`
    /// holds it and its page cache to a limit (`--mariadb-memory`).
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
        let (Some(mariadbd), Some(install_db)) = (find("mariadbd"), find("mariadb-install-db"))
        else {
            return Err(PlanError::new(
                "no MariaDB server programs (mariadbd, mariadb-install-db) on PATH or in /usr/sbin, /usr/bin; install them (apt-get install mariadb-server) or give --target mysql://…",
            )
            .into());
        };
        for (name, value) in settings {
            check_setting(name, value).map_err(|e| {
                PlanError::flag(
                    "--mariadb-set",
                    e,
                    "e.g. --mariadb-set innodb_buffer_pool_size=256M",
                )
            })?;
        }
        let user = server_user("mysql", "MariaDB")?;
        let mut leftovers = Leftovers::begin("MariaDB")?;
        let dir = ServerDir::create("mariadb", "MariaDB", user, *keep, &mut leftovers)?;
        let redo_dir = log_dir
            .as_ref()
            .map(|parent| {
                ServerDir::create_in(
                    parent,
                    "mariadb-redo",
                    "MariaDB",
                    user,
                    *keep,
                    &mut leftovers,
                )
            })
            .transpose()?;
        let redo_option = redo_dir
            .as_ref()
            .map(|r| format!("--innodb-log-group-home-dir={}", r.path().display()));
        let link = link
            .as_ref()
            .map(|shape| ServerLink::create(shape, &mut leftovers))
            .transpose()?;
        // Where it listens, and where perflab comes from.
        let (address, client) = match &link {
            Some(l) => (l.server_addr, l.host_addr),
            None => (LOOPBACK, LOOPBACK),
        };
        let version = server_command(&mariadbd, user, &[])
            .arg("--version")
            .output()
            .map(|o| version_of(&String::from_utf8_lossy(&o.stdout)))
            .unwrap_or_default();
        let mut install = server_command(&install_db, None, &[]);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.path().join("data").display()))
            // Its own temporary directory: installs side by side in one
            // /tmp now and then lose each other's temporary tables.
            .arg(format!("--tmpdir={}", dir.path().display()))
            .args(["--skip-test-db", "--skip-name-resolve"])
            .args(&redo_option);
        if user.is_some() {
            install.arg("--user=mysql");
        }
        let installed = install
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("cannot run mariadb-install-db")?;
        if !installed.status.success() {
            anyhow::bail!(
                "mariadb-install-db failed: {}",
                crate::util::one_line(String::from_utf8_lossy(&installed.stderr).trim())
            );
        }
        let password = fresh_password()?;
        let init = dir.path().join("init.sql");
        std::fs::write(
            &init,
            format!(
                "CREATE DATABASE IF NOT EXISTS perflab;\n\
                 CREATE USER IF NOT EXISTS 'perflab'@'{client}' IDENTIFIED BY '{password}';\n\
                 GRANT ALL ON *.* TO 'perflab'@'{client}';\n"
            ),
        )
        .context("cannot write the managed MariaDB's init file")?;
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&init, Some(uid), Some(gid))?;
        }
        let port = free_loopback_port()?;
        let cgroup = ServerCgroup::for_server(
            dir.path(),
            *memory,
            io.as_ref(),
            "--mariadb-memory",
            &mut leftovers,
        )?;
        let mut cmd = placed_command(
            &mariadbd,
            &Placement {
                user,
                cpus,
                cgroup: cgroup.as_ref(),
                link: link.as_ref(),
            },
        );
        let at = |name: &str| dir.path().join(name).display().to_string();
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", at("data")))
            .arg(format!("--tmpdir={}", at("")))
            .arg(format!("--socket={}", at("mariadb.sock")))
            .arg(format!("--pid-file={}", at("mariadb.pid")))
            .arg(format!("--log-error={}", at(LOG)))
            .arg(format!("--init-file={}", init.display()))
            .arg(format!("--port={port}"))
            .arg(format!("--bind-address={address}"))
            .arg("--skip-name-resolve")
            .args(&redo_option)
            .args(PERFORMANCE_SCHEMA);
        if user.is_some() {
            cmd.arg("--user=mysql");
        }
        for (name, value) in settings {
            cmd.arg(format!("--{name}={value}"));
        }
        cmd.stderr(log_file(&dir, LOG, user)?);
        let process =
            ServerProcess::spawn(cmd, libc::SIGTERM, STOP_TIMEOUT, "mariadbd", &mut leftovers)?;
        let mut server = ManagedMariadb {
            process,
            link,
            cgroup,
            dir,
            redo_dir,
            _leftovers: leftovers,
            port,
            password,
            version,
            user,
            settings_given: !settings.is_empty(),
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Waits until the `perflab` user can log in.
    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let target = self.target()?;
        let ready = || {
            runtime
                .block_on(async {
                    let conn = mysql::connect(&target).await?;
                    let _ = conn.disconnect().await;
                    Ok::<_, PlanError>(())
                })
                .map_err(|e| e.to_string())
        };
        match self
            .process
            .wait_ready(START_TIMEOUT, Duration::from_millis(100), ready)
        {
            Ok(()) => Ok(()),
            Err(NotReady::Exited(status)) => Err(super::start_failure(
                "MariaDB",
                &status,
                &self.dir.said(LOG, "[ERROR]"),
                self.user.map(|_| "mysql"),
                ("--mariadb-set", self.settings_given),
            )
            .into()),
            Err(NotReady::Timeout(e)) => {
                anyhow::bail!("the managed MariaDB did not accept connections in 60 s: {e}")
            }
            Err(NotReady::Interrupted(i)) => Err(i.into()),
        }
    }

    /// The server's `perflab` database, as a target (its password inside,
    /// never shown).
    pub fn target(&self) -> Result<MyTarget, PlanError> {
        let url = format!(
            "mysql://perflab:{}@{}:{}/perflab",
            self.password,
            self.address(),
            self.port
        );
        mysql::resolve(&url, &|_| None).map_err(PlanError::new)
    }

    /// The address it listens on: loopback, or its end of a shaped link.
    pub fn address(&self) -> std::net::Ipv4Addr {
        self.link.as_ref().map_or(LOOPBACK, |l| l.server_addr)
    }

    /// The shaped link it runs behind, when it does.
    pub fn link(&self) -> Option<&ServerLink> {
        self.link.as_ref()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Where the server's files are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The directory of its redo log, when `--log-dir` moved it.
    pub fn redo_dir(&self) -> Option<&Path> {
        self.redo_dir.as_ref().map(ServerDir::path)
    }

    /// Its memory and I/O cgroup, when it runs in one.
    pub fn cgroup(&self) -> Option<&ServerCgroup> {
        self.cgroup.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_option_names_and_one_line_values() {
        assert!(check_setting("innodb_buffer_pool_size", "256M").is_ok());
        assert!(check_setting("innodb-flush-log-at-trx-commit", "2").is_ok());
        assert!(check_setting("", "1").is_err());
        assert!(check_setting("a b", "1").is_err());
        assert!(check_setting("x;DROP", "1").is_err());
        assert!(check_setting("port", "1\n--skip-grant-tables").is_err());
    }

    #[test]
    fn the_version_is_read_from_the_servers_own_line() {
        assert_eq!(
            version_of("/usr/sbin/mariadbd  Ver 10.11.14-MariaDB-0+deb12u2 for debian-linux-gnu on x86_64 (Debian 12)\n"),
            "MariaDB 10.11.14"
        );
        assert_eq!(version_of("something else"), "something else");
    }

    #[test]
    fn passwords_are_fresh_hex() {
        let (a, b) = (fresh_password().unwrap(), fresh_password().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
