//! Resolving a `postgres://` target the way libpq does: the URL first, then
//! the standard environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE,
//! PGPASSWORD), then `~/.pgpass` for the password. The environment and the
//! password file are passed in, so the rules are testable. Connections,
//! and one line for each way a connection can fail, are here too; the
//! statistics sampled during a run are in [`stats`].

pub(crate) mod pool;
pub mod stats;
pub(crate) mod wire;

use crate::error::PlanError;
use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls};

/// The connection settings of a PostgreSQL target.
#[derive(Clone)]
pub struct PgTarget {
    pub(crate) config: Config,
    /// host:port/dbname as user: what messages may show (no password).
    pub(crate) display: String,
}

/// Resolves `dsn` with libpq's fallbacks. `env` reads an environment
/// variable; `pgpass` is the text of the password file, if there is one.
pub fn resolve(
    dsn: &str,
    env: &dyn Fn(&str) -> Option<String>,
    pgpass: Option<&str>,
) -> Result<PgTarget, String> {
    let mut config: Config = dsn.parse().map_err(|e| {
        format!(
            "'{}' is not a PostgreSQL URL ({e}); write postgres://USER:PASSWORD@HOST:PORT/DB",
            super::redact(dsn)
        )
    })?;
    if config.get_hosts().is_empty() {
        let host = env("PGHOST").unwrap_or_else(|| "localhost".to_string());
        if host.starts_with('/') {
            config.host_path(host);
        } else {
            config.host(&host);
        }
    }
    if config.get_ports().is_empty() {
        let port = match env("PGPORT") {
            Some(p) => p
                .parse()
                .map_err(|_| format!("PGPORT '{p}' is not a port number"))?,
            None => 5432,
        };
        config.port(port);
    }
    if config.get_user().is_none() {
        let user = env("PGUSER")
            .or_else(|| env("USER"))
            .unwrap_or_else(|| "postgres".to_string());
        config.user(&user);
    }
    let user = config.get_user().unwrap_or("postgres").to_string();
    if config.get_dbname().is_none() {
        config.dbname(env("PGDATABASE").as_deref().unwrap_or(&user));
    }
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let dbname = config.get_dbname().unwrap_or_default().to_string();
    if config.get_password().is_none() {
        let password = env("PGPASSWORD")
            .or_else(|| pgpass.and_then(|text| pgpass_lookup(text, &host, port, &dbname, &user)));
        if let Some(pw) = password {
            config.password(pw);
        }
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    config.application_name("perflab");
    Ok(PgTarget {
        display: format!("{user}@{host}:{port}/{dbname}"),
        config,
    })
}

/// Finds the password for a connection in `.pgpass` text: lines of
/// `host:port:database:user:password`, `*` matching anything, `\:` and `\\`
/// escaped, the first match winning.
pub(crate) fn pgpass_lookup(
    text: &str,
    host: &str,
    port: u16,
    db: &str,
    user: &str,
) -> Option<String> {
    let port = port.to_string();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .find_map(|line| {
            let fields = split_escaped(line);
            if fields.len() != 5 {
                return None;
            }
            let matches = |field: &str, value: &str| field == "*" || field == value;
            let host_ok = matches(&fields[0], host)
                || (fields[0] == "localhost" && (host.starts_with('/') || host == "127.0.0.1"));
            (host_ok
                && matches(&fields[1], &port)
                && matches(&fields[2], db)
                && matches(&fields[3], user))
            .then(|| fields[4].clone())
        })
}

fn split_escaped(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(field)) = (chars.next(), fields.last_mut()) {
                    field.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            _ => {
                if let Some(field) = fields.last_mut() {
                    field.push(c);
                }
            }
        }
    }
    fields
}

/// Reads `~/.pgpass` (or `$PGPASSFILE`), if it is a regular file of at
/// most 1 MiB (`PGPASSFILE=/dev/zero` is not read for ever).
pub(crate) fn read_pgpass(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let path = env("PGPASSFILE").or_else(|| env("HOME").map(|h| format!("{h}/.pgpass")))?;
    crate::util::read_text_bounded(std::path::Path::new(&path), 1 << 20).ok()
}

/// The name perflab's administrative sessions (loading, checking,
/// reading the bank) give themselves, so that the wait samples, which
/// count the sessions named `perflab`, never count them as the benchmark's.
pub(crate) const ADMIN_NAME: &str = "perflab-admin";

/// How long a closing administrative session may take to say goodbye.
const ADMIN_CLOSE: std::time::Duration = std::time::Duration::from_secs(2);

/// Opens a connection with `config` (the target's, or a variant of it) and
/// runs its socket on the current runtime.
pub(crate) async fn connect(
    target: &PgTarget,
    config: &tokio_postgres::Config,
) -> anyhow::Result<Client> {
    let (client, _) = open(target, config).await?;
    Ok(client)
}

/// A connection and the task that runs its socket.
async fn open(
    target: &PgTarget,
    config: &tokio_postgres::Config,
) -> anyhow::Result<(Client, tokio::task::JoinHandle<()>)> {
    let (client, connection) = tokio::time::timeout(super::HANDSHAKE, config.connect(NoTls))
        .await
        .map_err(|_| super::silent_peer("PostgreSQL", &target.display))?
        .map_err(|e| connect_error(target, &e))?;
    let task = tokio::spawn(async move {
        // A socket that fails after the handshake fails the calls made
        // on the client, which say so; the task itself has nothing to add.
        let _ = connection.await;
    });
    Ok((client, task))
}

/// Runs `work` on an administrative session of its own (named
/// [`ADMIN_NAME`]) and closes it before returning: on a runtime that is
/// only driven by `block_on`, a connection left to close by itself would
/// stay open, idle, for the rest of the run, holding one of the server's
/// `max_connections` and showing among its sessions.
pub(crate) async fn with_admin<T>(
    target: &PgTarget,
    work: impl AsyncFnOnce(&Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let (client, task) = open(target, &admin_config(target)).await?;
    let out = match pool::check(target, &client).await {
        Ok(relayed) => work(&client)
            .await
            .map_err(|e| pool::lost_statement(target, e, relayed)),
        Err(e) => Err(e.into()),
    };
    drop(client);
    // The client gone, the connection says Terminate and ends.
    let _ = tokio::time::timeout(ADMIN_CLOSE, task).await;
    out
}

/// The target's settings under the administrative sessions' name.
pub(crate) fn admin_config(target: &PgTarget) -> Config {
    let mut config = target.config.clone();
    config.application_name(ADMIN_NAME);
    config
}

/// Explains a failed connection, naming the server and the fix.
pub(crate) fn connect_error(target: &PgTarget, e: &tokio_postgres::Error) -> PlanError {
    let cause = std::error::Error::source(e)
        .map(|s| s.to_string())
        .unwrap_or_default();
    refusal(target, e.code().map(SqlState::code), &e.to_string(), &cause)
}

/// Which of PostgreSQL's limits a refusal for too many connections names:
/// a role's or a database's own `CONNECTION LIMIT`, else the server's
/// `max_connections` (its slots reserved for superusers included).
fn connection_limit(text: &str) -> &'static str {
    if text.contains("for role") {
        "the role's CONNECTION LIMIT"
    } else if text.contains("for database") {
        "the database's CONNECTION LIMIT"
    } else {
        "max_connections"
    }
}

/// A connection pool's own refusal (pgbouncer's words, which it sends as
/// a FATAL error): the limit it names, and what it did.
fn pool_limit(text: &str) -> Option<(&'static str, &'static str)> {
    if text.contains("query_wait_timeout") {
        Some((
            "pool size",
            "ended the session after it waited the pool's query_wait_timeout for a server connection, every one the pool may open taken",
        ))
    } else if text.contains("max_client_conn") {
        Some((
            "pool's max_client_conn",
            "refused the session: it holds as many clients as it takes",
        ))
    } else {
        None
    }
}

/// The one line for a connection that failed: with the server's SQLSTATE
/// when it refused, else from the client's text and its cause.
pub(crate) fn refusal(target: &PgTarget, code: Option<&str>, text: &str, cause: &str) -> PlanError {
    let at = &target.display;
    let message = match code {
        Some(c) if c == SqlState::INVALID_PASSWORD.code() => format!(
            "PostgreSQL refused the password for {at}; check the URL, PGPASSWORD or ~/.pgpass"
        ),
        Some(c) if c == SqlState::INVALID_CATALOG_NAME.code() => format!(
            "the database of {at} does not exist; create it (createdb) or name another in the URL"
        ),
        Some(c) if c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION.code() => {
            format!("PostgreSQL refused the user of {at}; check the user name and pg_hba.conf")
        }
        Some(c) if c == SqlState::TOO_MANY_CONNECTIONS.code() => {
            return PlanError::new(format!(
                "PostgreSQL at {at} refused the session ({c}: {text}); it takes no more connections"
            ))
            .refused_by(connection_limit(text));
        }
        Some(c) => match pool_limit(text) {
            Some((setting, what)) => {
                return PlanError::new(format!(
                    "the connection pool in front of PostgreSQL at {at} {what} ({c}: {text})"
                ))
                .refused_by(setting)
            }
            None => format!("PostgreSQL at {at} refused the connection ({c}: {text})"),
        },
        None => {
            if cause.contains("refused") {
                format!("nothing answers at {at} (connection refused); start PostgreSQL there or fix the host and port")
            } else if cause.contains("reset by peer")
                || cause.contains("Broken pipe")
                || cause.contains("end of file")
            {
                format!("{at} closed the connection ({cause}); the server may be shutting down, out of connections, or not PostgreSQL")
            } else if text.contains("timeout") || cause.contains("timed out") {
                format!(
                    "no PostgreSQL answered at {at} within 10 s; check the host, port and firewall"
                )
            } else {
                format!("cannot talk to PostgreSQL at {at} ({text}{}{cause}); is it a PostgreSQL server?", if cause.is_empty() || text.is_empty() { "" } else { ": " })
            }
        }
    };
    PlanError::new(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_url_wins_then_the_environment() {
        let env = env_of(&[("PGHOST", "db1"), ("PGPORT", "6543"), ("PGUSER", "ann")]);
        let t = resolve("postgres://bob:pw@db9:5555/shop", &env, None).unwrap();
        assert_eq!(t.display, "bob@db9:5555/shop");
        assert_eq!(t.config.get_password(), Some(&b"pw"[..]));
        let t = resolve("postgres:///shop", &env, None).unwrap();
        assert_eq!(t.display, "ann@db1:6543/shop");
        let t = resolve("postgresql://", &env_of(&[("USER", "eve")]), None).unwrap();
        assert_eq!(t.display, "eve@localhost:5432/eve");
    }

    #[test]
    fn passwords_come_from_pgpassword_then_pgpass() {
        let pgpass =
            "# comment\nother:*:*:*:nope\nlocalhost:5432:shop:bob:s\\:cret\n*:*:*:*:fallback\n";
        let t = resolve("postgres://bob@localhost/shop", &env_of(&[]), Some(pgpass)).unwrap();
        assert_eq!(t.config.get_password(), Some(&b"s:cret"[..]));
        let t = resolve(
            "postgres://bob@localhost/shop",
            &env_of(&[("PGPASSWORD", "env")]),
            Some(pgpass),
        )
        .unwrap();
        assert_eq!(t.config.get_password(), Some(&b"env"[..]));
        assert_eq!(
            pgpass_lookup(pgpass, "h", 1, "d", "u").as_deref(),
            Some("fallback")
        );
    }

    #[test]
    fn a_bad_url_is_reported_without_its_password() {
        let err = resolve(
            "postgres://bob:hunter2@host:notaport/db",
            &env_of(&[]),
            None,
        )
        .err()
        .unwrap();
        assert!(!err.contains("hunter2"), "{err}");
    }
}
