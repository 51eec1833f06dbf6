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

use super::find_programs;
use super::server::{ManagedKind, ManagedServer, MovedLog, Probe, Reach, Site, Start};
use super::{placed_command, server_command, ServerDir};
use crate::error::PlanError;
use crate::sut::mysql::{self, MyTarget};
use crate::sut::{ServerOptions, TargetKind};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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

#[cfg(test)]
/// A running managed MariaDB.
pub(crate) type ManagedMariadb = ManagedServer<Mariadb>;

/// The managed MariaDB kind: its server program, its port and the
/// `perflab` user's password.
pub(crate) struct Mariadb {
    mariadbd: PathBuf,
    port: u16,
    password: String,
}

/// The programs a managed MariaDB runs: the server, and the installer of
/// its system tables.
pub(crate) struct Programs {
    mariadbd: PathBuf,
    install_db: PathBuf,
}

impl ManagedKind for Mariadb {
    const SCHEME: &'static str = "mariadb:managed";
    const TARGET_KIND: TargetKind = TargetKind::Mysql;
    const NAME: &'static str = "MariaDB";
    const DIR_PREFIX: &'static str = "mariadb";
    const MOVED_LOG: Option<MovedLog> = Some(MovedLog {
        dir_prefix: "mariadb-redo",
        what: "MariaDB's redo log",
    });
    const USER: &'static str = "mysql";
    const LOG: &'static str = "mariadb.log";
    const KNOB: &'static str = "mariadb";
    const SETTINGS_FLAG: &'static str = "--mariadb-set";
    const CPUS_FLAG: &'static str = "--mariadb-cpus";
    const MEMORY_FLAG: &'static str = "--mariadb-memory";
    const EXAMPLE_SETTING: &'static str = "innodb_buffer_pool_size=256M";
    const SETTINGS_HELP: &'static str =
        "a server option, NAME=VALUE, given to mariadbd as --NAME=VALUE (repeatable)";
    const PROGRAM: &'static str = "mariadbd";
    const CACHE_SETTING: Option<&'static str> = Some("innodb_buffer_pool_size");
    const START_TIMEOUT: Duration = Duration::from_secs(60);
    const POLL: Duration = Duration::from_millis(100);
    const READY_MEANS: &'static str = "accept connections";
    const STOP_SIGNAL: libc::c_int = libc::SIGTERM;
    /// InnoDB flushes its buffer pool's dirty pages first.
    const STOP_TIMEOUT: Duration = Duration::from_secs(60);

    type Programs = Programs;

    /// Each setting's form and [`super::guard::mariadb`], then all of
    /// them asked of mariadbd.
    fn ask(settings: &[(String, String)], _accelerating: bool) -> Result<(), String> {
        for (name, value) in settings {
            check_setting(name, value)?;
        }
        super::asked::mariadb(settings, || find("mariadbd"))
    }

    fn find(options: &ServerOptions) -> anyhow::Result<Programs> {
        let (Some(mariadbd), Some(install_db)) = (find("mariadbd"), find("mariadb-install-db"))
        else {
            return Err(PlanError::new(
                "no MariaDB server programs (mariadbd, mariadb-install-db) on PATH or in /usr/sbin, /usr/bin; install them (apt-get install mariadb-server) or give --target mysql://…",
            )
            .into());
        };
        for (name, value) in &options.settings {
            check_setting(name, value).map_err(|e| {
                PlanError::flag(
                    "--mariadb-set",
                    e,
                    "e.g. --mariadb-set innodb_buffer_pool_size=256M",
                )
            })?;
        }
        Ok(Programs {
            mariadbd,
            install_db,
        })
    }

    fn version(programs: &Programs, user: Option<(u32, u32)>) -> String {
        server_command(&programs.mariadbd, user, &[])
            .arg("--version")
            .output()
            .map(|o| version_of(&String::from_utf8_lossy(&o.stdout)))
            .unwrap_or_default()
    }

    fn prepare(programs: Programs, site: &Site) -> anyhow::Result<Self> {
        install(&programs.install_db, site)?;
        let password = fresh_password()?;
        write_init_file(site, &password)?;
        let port = super::free_loopback_port()?;
        Ok(Mariadb {
            mariadbd: programs.mariadbd,
            port,
            password,
        })
    }

    /// mariadbd with no option files but perflab's and the user's, its
    /// init file making the `perflab` user before the first connection.
    fn command(&self, site: &Site) -> Command {
        let mut cmd = placed_command(&self.mariadbd, &site.placement());
        let at = |name: &str| site.dir.path().join(name).display().to_string();
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", at("data")))
            .arg(format!("--tmpdir={}", at("")))
            .arg(format!("--socket={}", at("mariadb.sock")))
            .arg(format!("--pid-file={}", at("mariadb.pid")))
            .arg(format!("--log-error={}", at(Self::LOG)))
            .arg(format!("--init-file={}", at(INIT_FILE)))
            .arg(format!("--port={}", self.port))
            .arg(format!("--bind-address={}", site.address()))
            .arg("--skip-name-resolve")
            .args(redo_option(site))
            .args(PERFORMANCE_SCHEMA);
        if site.user.is_some() {
            cmd.arg("--user=mysql");
        }
        for (name, value) in &site.settings {
            cmd.arg(format!("--{name}={value}"));
        }
        cmd
    }

    /// A login as the `perflab` user.
    fn probe<'a>(&'a self, site: &'a Site, _start: Start) -> anyhow::Result<Probe<'a>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let target = self.target(site)?;
        Ok(Box::new(move || {
            runtime
                .block_on(async {
                    let conn = mysql::connect(&target, mysql::LOOK_QUERY).await?;
                    conn.quit().await;
                    Ok::<_, PlanError>(())
                })
                .map_err(|e| e.to_string())
        }))
    }

    fn said(dir: &ServerDir) -> Vec<String> {
        dir.said(Self::LOG, "[ERROR]")
    }

    fn reach(&self, site: &Site) -> Result<Reach, PlanError> {
        Ok(Reach::Mysql(self.target(site)?))
    }
}

impl Mariadb {
    /// The server's `perflab` database, as a target (its password inside,
    /// never shown).
    fn target(&self, site: &Site) -> Result<MyTarget, PlanError> {
        let url = format!(
            "mysql://perflab:{}@{}:{}/perflab",
            self.password,
            site.address(),
            self.port
        );
        mysql::resolve(&url, &|_| None).map_err(PlanError::new)
    }
}

/// The server's init file, in its directory.
const INIT_FILE: &str = "init.sql";

/// The option that puts the InnoDB redo log in its own directory, when
/// `--log-dir` gave it one.
fn redo_option(site: &Site) -> Option<String> {
    site.log_dir
        .as_ref()
        .map(|r| format!("--innodb-log-group-home-dir={}", r.path().display()))
}

/// mariadb-install-db on the site's `data`.
fn install(install_db: &Path, site: &Site) -> anyhow::Result<()> {
    let dir = site.dir.path();
    let mut install = server_command(install_db, None, &[]);
    install
        .arg("--no-defaults")
        .arg(format!("--datadir={}", dir.join("data").display()))
        // Its own temporary directory: installs side by side in one
        // /tmp now and then lose each other's temporary tables.
        .arg(format!("--tmpdir={}", dir.display()))
        .args(["--skip-test-db", "--skip-name-resolve"])
        .args(redo_option(site));
    if site.user.is_some() {
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
    Ok(())
}

/// The init file: the `perflab` database, and its user with `password`,
/// reaching it from where perflab comes from.
fn write_init_file(site: &Site, password: &str) -> anyhow::Result<()> {
    let client = site.client();
    let init = site.dir.path().join(INIT_FILE);
    std::fs::write(
        &init,
        format!(
            "CREATE DATABASE IF NOT EXISTS perflab;\n\
             CREATE USER IF NOT EXISTS 'perflab'@'{client}' IDENTIFIED BY '{password}';\n\
             GRANT ALL ON *.* TO 'perflab'@'{client}';\n"
        ),
    )
    .context("cannot write the managed MariaDB's init file")?;
    site.hand_over(&init)
}

impl ManagedServer<Mariadb> {
    #[cfg(test)]
    /// The server's `perflab` database, as a target (its password inside,
    /// never shown).
    pub(crate) fn target(&self) -> Result<MyTarget, PlanError> {
        self.kind().target(self.site())
    }
}

/// The directories that hold `program`: PATH, then where Debian and Red
/// Hat put MariaDB's.
pub(crate) fn find(program: &str) -> Option<PathBuf> {
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
pub(crate) fn check_setting(name: &str, value: &str) -> Result<(), String> {
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
    super::guard::mariadb(name, value)
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
