//! A `mysql://` or `mariadb://` target: its URL resolved with the
//! environment variables the MySQL client library reads, connections (on
//! perflab's own session, `wire`), and one line for each way a connection
//! can fail.

mod relations;
pub mod stats;
pub(crate) mod wire;

use crate::error::PlanError;
use std::time::Duration;

pub(crate) use wire::{MyWire, Row};

/// The port a URL without one means.
const DEFAULT_PORT: u16 = 3306;
/// The host a URL without one means (when MYSQL_HOST names none).
const DEFAULT_HOST: &str = "127.0.0.1";

/// Where and as whom a MySQL or MariaDB server is reached. No `Debug`: it
/// holds the password.
#[derive(Clone)]
pub(crate) struct MyOpts {
    /// Host name or address (an IPv6 address without its brackets).
    pub(crate) host: String,
    pub(crate) port: u16,
    /// A Unix socket to connect over instead of TCP (`?socket=PATH`).
    pub(crate) socket: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
    /// The database the session starts in.
    pub(crate) db: Option<String>,
    /// The URL asked for TLS (`?require_ssl=true` and its kin), which
    /// perflab's session does not speak: refused when connecting.
    pub(crate) tls: bool,
}

/// Connection settings of a MySQL or MariaDB target.
#[derive(Clone)]
pub struct MyTarget {
    pub(crate) opts: MyOpts,
    /// user@host:port/db: what messages may show.
    pub(crate) display: String,
}

impl MyTarget {
    /// The target for `opts`, with the text messages show for it.
    pub(crate) fn new(opts: MyOpts) -> MyTarget {
        let host = if opts.host.contains(':') {
            format!("[{}]", opts.host)
        } else {
            opts.host.clone()
        };
        // Over a Unix socket, the socket is where it is, not a TCP port.
        let place = match &opts.socket {
            Some(socket) => format!("unix:{socket}:"),
            None => format!("{host}:{}", opts.port),
        };
        let display = format!(
            "{}@{place}/{}",
            opts.user.as_deref().unwrap_or("?"),
            opts.db.as_deref().unwrap_or("")
        );
        MyTarget { opts, display }
    }
}

/// Resolves a `mysql://` or `mariadb://` URL, with MYSQL_HOST,
/// MYSQL_TCP_PORT, MYSQL_PWD and USER as the client library uses them.
/// The user, password and database may be percent-encoded. Parameters:
/// `socket=PATH`; `require_ssl`, `verify_ca`, `verify_identity` and
/// `built_in_roots` ask for TLS (refused when connecting); any other is
/// refused here.
pub fn resolve(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<MyTarget, String> {
    let url = url.replacen("mariadb://", "mysql://", 1);
    let not_one = |why: &dyn std::fmt::Display| {
        format!(
            "'{}' is not a MySQL URL ({why}); write mysql://USER:PASSWORD@HOST:PORT/DB",
            super::redact(&url)
        )
    };
    let rest = url
        .strip_prefix("mysql://")
        .ok_or_else(|| not_one(&"its scheme is not mysql:// or mariadb://"))?;
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let decode = |part: &str| -> Result<String, String> {
        crate::util::percent_decoded(part)
            .ok_or_else(|| not_one(&"a part of it is not UTF-8 once decoded"))
    };
    let mut socket = None;
    let mut tls = false;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = decode(&value.replace('+', " "))?;
        match decode(name)?.as_str() {
            "socket" => socket = Some(value),
            "require_ssl" | "verify_ca" | "verify_identity" | "built_in_roots" => {
                tls |= value != "false";
            }
            other => {
                return Err(not_one(&format_args!(
                    "perflab does not know the parameter `{other}`; it reads socket= alone"
                )))
            }
        }
    }
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => (Some(userinfo), hostport),
        None => (None, authority),
    };
    let (host, port) = if hostport.is_empty() {
        (
            env("MYSQL_HOST").unwrap_or_else(|| DEFAULT_HOST.to_string()),
            env("MYSQL_TCP_PORT")
                .and_then(|p| p.parse().ok())
                .unwrap_or(DEFAULT_PORT),
        )
    } else {
        crate::sut::http::split_host_port(hostport, DEFAULT_PORT)
            .ok_or_else(|| not_one(&"its HOST:PORT is not valid"))?
    };
    let (user, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
        Some((user, password)) => (
            Some(user).filter(|u| !u.is_empty()),
            userinfo
                .is_some_and(|u| u.contains(':'))
                .then_some(password),
        ),
        None => (None, None),
    };
    let user = match user {
        None => env("USER"),
        Some(user) => Some(decode(user)?),
    };
    let password = match password {
        Some(password) => Some(decode(password)?),
        None => env("MYSQL_PWD"),
    };
    let db = Some(decode(path)?).filter(|db| !db.is_empty());
    Ok(MyTarget::new(MyOpts {
        host,
        port,
        socket,
        user,
        password,
        db,
        tls,
    }))
}

/// How long a statement that loads or checks a bank may take before the
/// connection is given up (a bound on a hang, far above any real one).
pub(crate) const BANK_QUERY: Duration = Duration::from_secs(30 * 60);
pub(crate) use super::LOOK_QUERY;

/// The server refused the connection with error `code`: one line naming
/// the fix.
pub(crate) fn refusal(target: &MyTarget, code: u16, message: &str) -> PlanError {
    let at = &target.display;
    let limit = match code {
        1040 => Some("max_connections"),
        1203 => Some("max_user_connections"),
        _ => None,
    };
    if let Some(limit) = limit {
        return PlanError::new(format!(
            "the server at {at} refused the session ({code}: {message}); it takes no more connections"
        ))
        .refused_by(limit);
    }
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
    let missing = matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
    );
    PlanError::new(if missing && target.opts.socket.is_some() {
        format!(
            "nothing answers at {at} ({e}); start MariaDB/MySQL there or fix ?socket= in the URL"
        )
    } else if e.kind() == std::io::ErrorKind::ConnectionRefused {
        format!("nothing answers at {at} (connection refused); start MariaDB/MySQL there or fix the host and port")
    } else {
        format!("cannot talk to MariaDB/MySQL at {at} ({e}); is it a MySQL server?")
    })
}

/// A connection for statements off the hot path (COM_QUERY), each allowed
/// `query_timeout`; the handshake is allowed [`super::HANDSHAKE`].
pub(crate) async fn connect(
    target: &MyTarget,
    query_timeout: Duration,
) -> Result<MyWire, PlanError> {
    let mut wire = MyWire::connect(target).await?;
    wire.set_query_timeout(query_timeout);
    Ok(wire)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "MYSQL_HOST" => Some("db.example".to_string()),
            "MYSQL_TCP_PORT" => Some("3307".to_string()),
            "MYSQL_PWD" => Some("from-env".to_string()),
            "USER" => Some("me".to_string()),
            _ => None,
        }
    }

    #[test]
    fn a_url_gives_its_parts_decoded() {
        let t = resolve(
            "mariadb://sh%40p:p%2Fw%3F@[::1]:3310/my%20db?socket=/run/my.sock",
            &env,
        )
        .unwrap();
        let o = &t.opts;
        assert_eq!(o.user.as_deref(), Some("sh@p"));
        assert_eq!(o.password.as_deref(), Some("p/w?"));
        assert_eq!((o.host.as_str(), o.port), ("::1", 3310));
        assert_eq!(o.db.as_deref(), Some("my db"));
        assert_eq!(o.socket.as_deref(), Some("/run/my.sock"));
        assert!(!o.tls);
        // Over its socket: no TCP port is named.
        assert_eq!(t.display, "sh@p@unix:/run/my.sock:/my db");
        let e = unreachable(&t, &std::io::Error::from(std::io::ErrorKind::NotFound)).to_string();
        assert!(
            e.contains("unix:/run/my.sock") && e.contains("?socket="),
            "{e}"
        );
        assert!(!e.contains("3310"), "{e}");
    }

    #[test]
    fn the_environment_fills_in_what_the_url_leaves_out() {
        let t = resolve("mysql:///bank", &env).unwrap();
        let o = &t.opts;
        assert_eq!((o.host.as_str(), o.port), ("db.example", 3307));
        assert_eq!(o.user.as_deref(), Some("me"));
        assert_eq!(o.password.as_deref(), Some("from-env"));
        assert_eq!(t.display, "me@db.example:3307/bank");
        // A host in the URL keeps the default port over MYSQL_TCP_PORT.
        let t = resolve("mysql://u:pw@h/bank", &env).unwrap();
        assert_eq!((t.opts.host.as_str(), t.opts.port), ("h", 3306));
        assert_eq!(t.opts.password.as_deref(), Some("pw"));
        let t = resolve("mysql://u@h", &|_| None).unwrap();
        assert_eq!(
            (t.opts.password.as_deref(), t.opts.db.as_deref()),
            (None, None)
        );
    }

    #[test]
    fn tls_is_noted_and_unknown_parameters_refused_without_the_password() {
        assert!(
            resolve("mysql://u:pw@h/db?require_ssl=true", &env)
                .unwrap()
                .opts
                .tls
        );
        assert!(
            !resolve("mysql://u:pw@h/db?require_ssl=false", &env)
                .unwrap()
                .opts
                .tls
        );
        for bad in [
            "mysql://u:SECRET@h/db?pool_max=3",
            "mysql://u:SECRET@h:99999/db",
            "postgres://u:SECRET@h/db",
        ] {
            let e = resolve(bad, &env).err().unwrap();
            assert!(
                e.contains("is not a MySQL URL") && !e.contains("SECRET"),
                "{e}"
            );
        }
    }
}
