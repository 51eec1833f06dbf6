//! A `mysql://` or `mariadb://` target: its URL resolved with the client
//! library's environment variables, connections, and one line for each
//! way a connection can fail.

pub mod stats;
pub(crate) mod wire;

use crate::error::PlanError;
use mysql_async::{Conn, Opts, OptsBuilder};

/// Connection settings of a MySQL or MariaDB target.
#[derive(Clone)]
pub struct MyTarget {
    pub(crate) opts: Opts,
    /// user@host:port/db: what messages may show.
    pub(crate) display: String,
}

/// Resolves a `mysql://` or `mariadb://` URL, with MYSQL_HOST,
/// MYSQL_TCP_PORT, MYSQL_PWD and USER as the client library uses them.
pub fn resolve(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<MyTarget, String> {
    let url = url.replacen("mariadb://", "mysql://", 1);
    let opts = Opts::from_url(&url).map_err(|e| {
        format!(
            "'{}' is not a MySQL URL ({e}); write mysql://USER:PASSWORD@HOST:PORT/DB",
            super::redact(&url)
        )
    })?;
    let mut builder = OptsBuilder::from_opts(opts.clone());
    let host_given = url
        .strip_prefix("mysql://")
        .and_then(|rest| rest.split(['/', '?']).next())
        .is_some_and(|authority| !authority.rsplit('@').next().unwrap_or_default().is_empty());
    if !host_given {
        if let Some(host) = env("MYSQL_HOST") {
            builder = builder.ip_or_hostname(host);
        }
        if let Some(port) = env("MYSQL_TCP_PORT").and_then(|p| p.parse().ok()) {
            builder = builder.tcp_port(port);
        }
    }
    if opts.user().is_none() {
        builder = builder.user(env("USER"));
    }
    if opts.pass().is_none() {
        if let Some(pw) = env("MYSQL_PWD") {
            builder = builder.pass(Some(pw));
        }
    }
    let opts = Opts::from(builder);
    let display = format!(
        "{}@{}:{}/{}",
        opts.user().unwrap_or("?"),
        opts.ip_or_hostname(),
        opts.tcp_port(),
        opts.db_name().unwrap_or("")
    );
    Ok(MyTarget { opts, display })
}

/// Explains a failed connection in one line.
pub(crate) fn connect_error(target: &MyTarget, e: &mysql_async::Error) -> PlanError {
    match e {
        mysql_async::Error::Server(s) => refusal(target, s.code, &s.message),
        mysql_async::Error::Io(mysql_async::IoError::Io(io)) => unreachable(target, io),
        other => {
            let text = other.to_string();
            if text.contains("refused") {
                unreachable(target, &std::io::ErrorKind::ConnectionRefused.into())
            } else {
                PlanError::new(format!(
                    "cannot talk to MariaDB/MySQL at {} ({text}); is it a MySQL server?",
                    target.display
                ))
            }
        }
    }
}

/// The server refused the connection with error `code`: one line naming
/// the fix.
pub(crate) fn refusal(target: &MyTarget, code: u16, message: &str) -> PlanError {
    let at = &target.display;
    PlanError::new(match code {
        1045 => format!("the server refused the password for {at}; check the URL or MYSQL_PWD"),
        1049 => format!(
            "the database of {at} does not exist; create it (CREATE DATABASE) or name another in the URL"
        ),
        _ => format!("the server at {at} refused the connection ({code}: {message})"),
    })
}

/// The server could not be reached, or went away during the handshake.
pub(crate) fn unreachable(target: &MyTarget, e: &std::io::Error) -> PlanError {
    let at = &target.display;
    PlanError::new(if e.kind() == std::io::ErrorKind::ConnectionRefused {
        format!("nothing answers at {at} (connection refused); start MariaDB/MySQL there or fix the host and port")
    } else {
        format!("cannot talk to MariaDB/MySQL at {at} ({e}); is it a MySQL server?")
    })
}

pub(crate) async fn connect(target: &MyTarget) -> Result<Conn, PlanError> {
    tokio::time::timeout(super::HANDSHAKE, Conn::new(target.opts.clone()))
        .await
        .map_err(|_| super::silent_peer("MySQL/MariaDB", &target.display))?
        .map_err(|e| connect_error(target, &e))
}
