//! A connection pool in front of PostgreSQL (pgbouncer, or any pool or
//! proxy that relays the protocol): found by the port perflab connected to
//! against the port the server says it listens on, and, for pgbouncer, its
//! own settings read from its console (`SHOW CONFIG` on its database
//! `pgbouncer`) when the run's user may read them. A pool decides how many
//! sessions reach the server, and in session pooling perflab's own
//! statistics session holds one of its server connections for the run.

use super::PgTarget;
use std::collections::BTreeMap;

/// Not settings of the server: the port perflab connected to (beside the
/// server's own `port`), and a pool's settings, each `pool.NAME`.
pub(crate) const CONNECTED_PORT: &str = "connected_port";
pub(crate) const POOL_PREFIX: &str = "pool.";

/// pgbouncer's settings that decide how many sessions it passes and how
/// long the rest wait.
const POOL_SETTINGS: [&str; 6] = [
    "pool_mode",
    "default_pool_size",
    "reserve_pool_size",
    "max_client_conn",
    "max_db_connections",
    "query_wait_timeout",
];

/// What a session whose statements went unanswered past the look's
/// deadline did, as the wire's error says it (read back by [`held`]).
pub(crate) const UNANSWERED: &str = "did not answer a statement perflab prepares";

/// tokio-postgres's words for a reply its client did not expect.
const UNEXPECTED: &str = "unexpected message from server";

/// How long the pool's console may take to answer.
const CONSOLE: std::time::Duration = std::time::Duration::from_secs(3);

/// The port perflab connects to over TCP, when the target names one host.
fn connected_port(target: &PgTarget) -> Option<u16> {
    let config = &target.config;
    match config.get_hosts() {
        [tokio_postgres::config::Host::Tcp(_)] => config.get_ports().first().copied(),
        _ => None,
    }
}

/// What the inventory records of a pool in front of the server whose
/// settings are `server`: the port perflab connected to, and, where the
/// server listens on another port (something relays the sessions), the
/// pool's settings from pgbouncer's console, when it answers. Nothing for
/// a server reached directly, or over a socket file.
pub(crate) async fn look(
    target: &PgTarget,
    server: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(port) = connected_port(target) else {
        return out;
    };
    out.insert(CONNECTED_PORT.to_string(), port.to_string());
    if server.get("port").map(String::as_str) == Some(port.to_string().as_str()) {
        return out;
    }
    let mut config = target.config.clone();
    config.dbname("pgbouncer");
    let console = async {
        let (client, connection) = config.connect(tokio_postgres::NoTls).await.ok()?;
        let task = tokio::spawn(async move {
            let _ = connection.await;
        });
        let rows = client.simple_query("SHOW CONFIG").await.ok();
        drop(client);
        let _ = task.await;
        rows
    };
    let Ok(Some(rows)) = tokio::time::timeout(CONSOLE, console).await else {
        return out;
    };
    for row in rows {
        if let tokio_postgres::SimpleQueryMessage::Row(row) = row {
            if let (Some(key), Some(value)) = (row.get(0), row.get(1)) {
                if POOL_SETTINGS.contains(&key) {
                    out.insert(format!("{POOL_PREFIX}{key}"), value.to_string());
                }
            }
        }
    }
    out
}

/// The lines a verdict says of a pool in front of the server, from the
/// run's inventory (`db.NAME`): that one relays the sessions, and its
/// settings where they were read. None when perflab reached the server
/// directly, or its ports were not recorded.
pub(crate) fn said(inv: &BTreeMap<String, String>) -> Vec<String> {
    let get = |key: &str| inv.get(&format!("db.{key}"));
    let (Some(connected), Some(server)) = (get(CONNECTED_PORT), get("port")) else {
        return Vec::new();
    };
    if connected == server {
        return Vec::new();
    }
    let mut out = vec![format!(
        "perflab connected to port {connected} and the server listens on {server}: a connection pool or a proxy relays the sessions, and decides how many reach the server"
    )];
    let settings: Vec<String> = POOL_SETTINGS
        .iter()
        .filter_map(|k| Some(format!("{k} = {}", get(&format!("{POOL_PREFIX}{k}"))?)))
        .collect();
    if !settings.is_empty() {
        let session = get(&format!("{POOL_PREFIX}pool_mode")).is_some_and(|m| m == "session");
        out.push(format!(
            "pgbouncer's console said: {}{}",
            settings.join(", "),
            if session {
                "; in session pooling each client holds a server connection for its whole session, perflab's statistics session one of them"
            } else {
                ""
            }
        ));
    }
    out
}

/// The one line for a pool that hands a session's transactions to
/// different server connections (pgbouncer's `pool_mode = transaction` or
/// `statement`), which the server showed by `said` (a statement the
/// session never prepared already there, or one it prepared gone): perflab
/// prepares each session's statements once, as `pgbench -M prepared`
/// does, and its own looks at the server use prepared statements too.
pub(crate) fn by_transaction(at: &str, said: &str) -> crate::error::PlanError {
    crate::error::PlanError::new(format!(
        "a connection pool in front of PostgreSQL at {at} pools by transaction or statement ({said}): it hands a session's transactions to other sessions' server connections, where the statements perflab prepares on a session are not; point perflab at the server itself, or at the pool in session mode (pgbouncer: pool_mode = session)"
    ))
}

/// Refuses a pool whose console said it pools by transaction or by
/// statement (`pool` as [`look`] read it), before anything is loaded.
pub(crate) fn refuse_transaction_pooling(
    at: &str,
    pool: &BTreeMap<String, String>,
) -> Result<(), crate::error::PlanError> {
    match pool
        .get(&format!("{POOL_PREFIX}pool_mode"))
        .map(String::as_str)
    {
        Some(mode @ ("transaction" | "statement")) => Err(by_transaction(
            at,
            &format!("pgbouncer's console said pool_mode = {mode}"),
        )),
        _ => Ok(()),
    }
}

/// Before an administrative session's work: refuses a pool in front of
/// the server that pools by transaction or statement, where its console
/// says so (one query of the server's port on a server reached directly).
/// Whether something relays the sessions (the ports differ).
pub(crate) async fn check(
    target: &PgTarget,
    client: &tokio_postgres::Client,
) -> Result<bool, crate::error::PlanError> {
    let asked = client.simple_query("SELECT current_setting('port')");
    let Ok(Ok(rows)) = tokio::time::timeout(crate::sut::LOOK_QUERY, asked).await else {
        // Unanswered here, the work's own deadlines say so.
        return Ok(false);
    };
    let port = rows.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
        _ => None,
    });
    let Some(port) = port else {
        return Ok(false);
    };
    let server = BTreeMap::from([("port".to_string(), port)]);
    let pool = look(target, &server).await;
    refuse_transaction_pooling(&target.display, &pool)?;
    Ok(pool
        .get(CONNECTED_PORT)
        .is_some_and(|connected| Some(connected) != server.get("port")))
}

/// An administrative session's error, said as the pool's doing when the
/// server answered that a statement the session prepared does not exist
/// (26000), or that one it was preparing already did (42P05): its
/// transactions went to other sessions' server connections. Where
/// something relays the sessions (`relayed`), a reply the session's client
/// did not expect is said so too: a CI run on record, through pgbouncer
/// pooling by transaction, ended its load on "unexpected message from
/// server" (not seen in 20 runs since, loaded or not).
pub(crate) fn lost_statement(target: &PgTarget, e: anyhow::Error, relayed: bool) -> anyhow::Error {
    let errors = || {
        e.chain()
            .filter_map(|c| c.downcast_ref::<tokio_postgres::Error>())
    };
    let lost = errors()
        .filter_map(|pg| pg.as_db_error())
        .find(|db| matches!(db.code().code(), "26000" | "42P05"))
        .map(|db| format!("{}: {}", db.code().code(), db.message()))
        .or_else(|| {
            errors()
                .find(|pg| relayed && pg.as_db_error().is_none() && pg.to_string() == UNEXPECTED)
                .map(|_| format!("{UNEXPECTED}: a reply to another session's statement"))
        });
    match lost {
        Some(said) => by_transaction(&target.display, &said).into(),
        None => e,
    }
}

/// Whether a session that could not open was held by a pool in front of
/// the server the inventory `inv` records: its statements went unanswered
/// past perflab's deadline (`reason`) while the ports say a pool or proxy
/// relays the sessions. Such a pool gives a session no server connection
/// while all of them are taken, and keeps it waiting (pgbouncer for its
/// `query_wait_timeout`, 120 s by default): its size refused the session.
pub(crate) fn held(reason: &str, inv: &BTreeMap<String, String>) -> bool {
    reason.contains(UNANSWERED) && !said(inv).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("db.{k}"), v.to_string()))
            .collect()
    }

    /// A pool is said when the ports differ, with what its console said;
    /// a server reached directly, or ports not recorded, say nothing.
    #[test]
    fn a_pool_is_said_where_the_ports_differ() {
        let pooled = inventory(&[
            ("port", "5432"),
            ("connected_port", "6432"),
            ("pool.pool_mode", "session"),
            ("pool.default_pool_size", "4"),
        ]);
        let lines = said(&pooled);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("perflab connected to port 6432 and the server listens on 5432")
        );
        assert!(
            lines[1].starts_with("pgbouncer's console said: pool_mode = session, default_pool_size = 4; in session pooling"),
            "{lines:?}"
        );
        let relayed = inventory(&[("port", "5432"), ("connected_port", "6432")]);
        assert_eq!(said(&relayed).len(), 1);
        assert!(said(&inventory(&[("port", "5432"), ("connected_port", "5432")])).is_empty());
        assert!(said(&inventory(&[("port", "5432")])).is_empty());
    }

    /// A session left unanswered is the pool's only where a pool relays.
    #[test]
    fn an_unanswered_session_is_held_by_the_pool_only_behind_one() {
        let reason = format!(
            "cannot open the session of user 2: x took the session but {} within 10 s",
            super::UNANSWERED
        );
        let pooled = inventory(&[("port", "5432"), ("connected_port", "6432")]);
        let direct = inventory(&[("port", "5432"), ("connected_port", "5432")]);
        assert!(held(&reason, &pooled));
        assert!(!held(&reason, &direct));
        assert!(!held("cannot open the session of user 2: reset", &pooled));
    }
}
