//! MariaDB/MySQL's side of the story. Counters from SHOW GLOBAL STATUS:
//! commits (`Com_commit`, and the storage engines' `Handler_commit`),
//! InnoDB row-lock waits (their count, time and the waits in progress),
//! buffer-pool reads against read requests, redo-log waits, write
//! requests, writes, bytes and fsyncs, data-file fsyncs (whichever the
//! server has: MariaDB 10.8+ has no `Innodb_os_log_fsyncs`, its log's
//! fsyncs are counted in `Innodb_data_fsyncs`), the running threads and
//! the buffer pool's pages and page size (gauges); with performance_schema
//! on, the relations the buffer pool is asked for ([`super::relations`]).
//!
//! The fsyncs and reads in flight (`Innodb_os_log_pending_fsyncs`,
//! `Innodb_data_pending_fsyncs`, `Innodb_data_pending_reads`) are gauges that one look a second would
//! catch by chance: they are read at every wait sample (10 a second) and
//! kept as running sums with the number of looks (`log_fsyncs_pending`,
//! `data_fsyncs_pending`, `data_reads_pending`, `pending_looks`), so an interval's increase over
//! its looks is the mean number in flight — and, by Little's law, that over
//! the fsyncs per second is the time each took.
//!
//! Wait classes, in PostgreSQL's `Type:Event` vocabulary so both servers
//! read alike: the benchmark's sessions are the URL's user's sessions on its
//! database, other than the sampler's own (`CONNECTION_ID()`), from
//! information_schema.PROCESSLIST. Each is sampled once per look:
//! - a transaction in INNODB_TRX `trx_state = 'LOCK WAIT'` → `Lock:row lock`;
//! - idle between statements (`COMMAND = 'Sleep'`) → `Client:ClientRead`,
//!   the server waiting on the client, as PostgreSQL names it;
//! - running a statement (`Query`, or `Execute` for prepared statements) →
//!   `CPU`, or, when performance_schema is ON with the events_waits_current
//!   consumer, the wait that thread has in progress: the redo log
//!   (`wait/io/file/innodb/innodb_log_file`) → `IO:log file`, other files →
//!   `IO:data file`, `wait/synch/…` → `LWLock:<last segment>`,
//!   `wait/lock/<kind>/…` → `Lock:<kind>`, `wait/io/socket/…` →
//!   `Client:ClientWrite`. Table I/O (`wait/io/table/…`) is the engine
//!   working on rows, not a wait: it stays `CPU`.
//!
//! Sources: MariaDB's information_schema PROCESSLIST and INNODB_TRX pages,
//! and performance_schema's events_waits_current page. INNODB_TRX is served
//! from a cache InnoDB refreshes at most every 100 ms, so a lock wait
//! shorter than that may be missed or seen late; that is also the
//! sampling period. MariaDB 10.8+ no longer instruments the redo log file,
//! so `IO:log file` appears only on servers that do (MySQL, older MariaDB).
//! Without the PROCESS privilege INNODB_TRX cannot be read; then no wait
//! classes are sampled (rather than calling every lock wait `CPU`).

use super::{MyTarget, MyWire, Row};
use crate::probe::DbStatsSource;
use std::collections::BTreeMap;

/// SHOW GLOBAL STATUS names and what perflab calls them (`now_`: a gauge).
/// A name the server does not have is left out.
const COUNTERS: [(&str, &str); 16] = [
    ("Com_commit", "commits"),
    ("Handler_commit", "handler_commits"),
    ("Innodb_row_lock_waits", "row_lock_waits"),
    ("Innodb_row_lock_time", "row_lock_time_ms"),
    (
        "Innodb_row_lock_current_waits",
        "now_row_lock_current_waits",
    ),
    ("Innodb_buffer_pool_reads", "buffer_pool_reads"),
    (
        "Innodb_buffer_pool_read_requests",
        "buffer_pool_read_requests",
    ),
    ("Innodb_log_waits", "log_waits"),
    ("Innodb_log_write_requests", "log_write_requests"),
    ("Innodb_log_writes", "log_writes"),
    ("Innodb_os_log_written", "log_bytes"),
    ("Innodb_os_log_fsyncs", "log_fsyncs"),
    ("Innodb_data_fsyncs", "data_fsyncs"),
    ("Threads_running", "now_threads_running"),
    ("Innodb_buffer_pool_pages_total", "now_buffer_pool_pages"),
    ("Innodb_page_size", "now_page_bytes"),
];

/// The fsyncs in flight, read at every wait sample, and the running sums
/// they are kept in.
const PENDING: [(&str, &str); 3] = [
    ("Innodb_os_log_pending_fsyncs", "log_fsyncs_pending"),
    ("Innodb_data_pending_fsyncs", "data_fsyncs_pending"),
    ("Innodb_data_pending_reads", "data_reads_pending"),
];

/// The running sums' count of looks.
const PENDING_LOOKS: &str = "pending_looks";

/// The query that reads the fsyncs in flight.
const PENDING_SQL: &str = "SHOW GLOBAL STATUS WHERE Variable_name IN \
     ('Innodb_os_log_pending_fsyncs', 'Innodb_data_pending_fsyncs', 'Innodb_data_pending_reads')";

/// The benchmark's sessions: the URL's user on its database, not this one.
const SESSIONS: &str = "p.USER = SUBSTRING_INDEX(USER(), '@', 1) AND p.DB <=> DATABASE() \
     AND p.ID <> CONNECTION_ID()";

/// One row per session: its id, command, InnoDB transaction state, and no
/// wait event (performance_schema is off or its consumer is).
fn plain_sql() -> String {
    format!(
        "SELECT p.ID, p.COMMAND, t.trx_state, NULL, NULL
         FROM information_schema.PROCESSLIST p
         LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID
         WHERE {SESSIONS}"
    )
}

/// As [`plain_sql`], plus each wait in progress on the session's thread
/// with its event id (nested waits give several rows; the innermost, the
/// highest id, is the one the thread is blocked in).
fn performance_schema_sql() -> String {
    format!(
        "SELECT p.ID, p.COMMAND, t.trx_state, w.EVENT_NAME, w.EVENT_ID
         FROM information_schema.PROCESSLIST p
         LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID
         LEFT JOIN performance_schema.threads th ON th.PROCESSLIST_ID = p.ID
         LEFT JOIN performance_schema.events_waits_current w
                ON w.THREAD_ID = th.THREAD_ID AND w.END_EVENT_ID IS NULL
         WHERE {SESSIONS}"
    )
}

/// A session's row: id, COMMAND, trx_state, EVENT_NAME, EVENT_ID.
type SessionRow = (u64, String, Option<String>, Option<String>, Option<u64>);

/// The sessions of a result of [`plain_sql`] or [`performance_schema_sql`]
/// (a row without an id or command, which the server never sends, is
/// passed over).
fn session_rows(rows: &[Row]) -> Vec<SessionRow> {
    rows.iter()
        .filter_map(|r| {
            Some((
                r.get(0)?,
                r.text(1)?.to_string(),
                r.text(2).map(str::to_string),
                r.text(3).map(str::to_string),
                r.get(4),
            ))
        })
        .collect()
}

/// The (name, value) pairs of a SHOW … STATUS or VARIABLES result.
pub(crate) fn name_values(rows: &[Row]) -> Vec<(String, String)> {
    rows.iter()
        .filter_map(|r| Some((r.text(0)?.to_string(), r.text(1).unwrap_or("").to_string())))
        .collect()
}

/// A statistics connection to MariaDB/MySQL.
pub struct MyStats {
    runtime: tokio::runtime::Runtime,
    conn: MyWire,
    /// The sessions query, or none when the server does not let this user
    /// see InnoDB's transactions.
    waits_sql: Option<String>,
    performance_schema: bool,
    /// Whether each counters' look reports the relations InnoDB's buffer
    /// pool is asked for ([`super::relations`]): performance_schema is on
    /// and the user may read its index summary.
    relations: bool,
    /// Running sums of the fsyncs in flight at each look, by perflab's
    /// name, and the number of looks ([`PENDING_LOOKS`]).
    pending: BTreeMap<String, f64>,
}

impl MyStats {
    /// Opens the statistics connection and chooses how to sample waits:
    /// with performance_schema's current waits when the server collects
    /// them (it cannot be switched on without a restart), without otherwise.
    pub fn connect(target: &MyTarget) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut conn = runtime.block_on(super::connect(target, super::LOOK_QUERY))?;
        let collecting = runtime.block_on(collects_current_waits(&mut conn));
        let mut candidates = Vec::new();
        if collecting {
            candidates.push((performance_schema_sql(), true));
        }
        candidates.push((plain_sql(), false));
        let mut chosen = None;
        let mut refusal = None;
        for (sql, with_ps) in candidates {
            match runtime.block_on(conn.query_rows(&sql)) {
                Ok(_) => {
                    chosen = Some((sql, with_ps));
                    break;
                }
                Err(e) => refusal = Some(e),
            }
        }
        if chosen.is_none() {
            crate::util::err(format_args!(
                "warning: no MariaDB wait classes for this run: {} (grant PROCESS to the user to see InnoDB's lock waits)\n",
                refusal.map_or_else(String::new, |e| e.to_string())
            ));
        }
        let performance_schema = chosen.as_ref().is_some_and(|(_, ps)| *ps);
        let relations = performance_schema
            && runtime
                .block_on(conn.query_rows(super::relations::SQL))
                .is_ok();
        Ok(MyStats {
            runtime,
            conn,
            waits_sql: chosen.map(|(sql, _)| sql),
            performance_schema,
            relations,
            pending: BTreeMap::new(),
        })
    }

    /// Whether the wait classes come from performance_schema's current
    /// waits (finer than `CPU` for a running statement).
    pub fn uses_performance_schema(&self) -> bool {
        self.performance_schema
    }
}

/// performance_schema is ON and events_waits_current is consumed (it needs
/// global and thread instrumentation too).
async fn collects_current_waits(conn: &mut MyWire) -> bool {
    let first = |row: Option<Row>| row.and_then(|r| r.get::<i64>(0));
    let on = conn
        .query_first("SELECT @@performance_schema")
        .await
        .ok()
        .and_then(first);
    if on != Some(1) {
        return false;
    }
    let enabled = conn
        .query_first(
            "SELECT COUNT(*) FROM performance_schema.setup_consumers
             WHERE NAME IN ('global_instrumentation', 'thread_instrumentation', 'events_waits_current')
               AND ENABLED = 'YES'",
        )
        .await
        .ok()
        .and_then(first);
    enabled == Some(3)
}

/// The wait class of one session, or none for a session that is neither
/// running a statement nor idle (connecting, being killed).
pub(crate) fn wait_class(
    command: &str,
    trx_state: Option<&str>,
    event: Option<&str>,
) -> Option<String> {
    if trx_state == Some("LOCK WAIT") {
        return Some("Lock:row lock".to_string());
    }
    match command {
        "Sleep" => Some("Client:ClientRead".to_string()),
        "Query" | "Execute" | "Prepare" | "Fetch" | "Close stmt" | "Reset stmt" | "Long Data" => {
            Some(
                event
                    .and_then(event_class)
                    .unwrap_or_else(|| "CPU".to_string()),
            )
        }
        _ => None,
    }
}

/// A performance_schema wait instrument's class, or none when it is not a
/// wait (table I/O) or not a wait instrument at all.
fn event_class(event: &str) -> Option<String> {
    let rest = event.strip_prefix("wait/")?;
    let last = rest.rsplit('/').next().unwrap_or(rest);
    let kind = rest.split('/').nth(1).unwrap_or(rest);
    let class = if rest == "io/file/innodb/innodb_log_file" {
        "IO:log file".to_string()
    } else if rest.starts_with("io/file/") {
        "IO:data file".to_string()
    } else if rest.starts_with("io/socket/") {
        "Client:ClientWrite".to_string()
    } else if rest.starts_with("synch/") {
        format!("LWLock:{last}")
    } else if rest.starts_with("lock/") {
        format!("Lock:{kind}")
    } else {
        return None;
    };
    Some(class)
}

/// Counts each session once into `waits`, from rows that may repeat a
/// session (one per nested wait in progress).
fn count_sessions(rows: Vec<SessionRow>, waits: &mut BTreeMap<String, u64>) {
    let mut sessions: BTreeMap<u64, SessionRow> = BTreeMap::new();
    for row in rows {
        match sessions.get(&row.0) {
            Some(seen) if seen.4 >= row.4 => {}
            _ => {
                sessions.insert(row.0, row);
            }
        }
    }
    for (_, command, trx_state, event, _) in sessions.into_values() {
        if let Some(class) = wait_class(&command, trx_state.as_deref(), event.as_deref()) {
            *waits.entry(class).or_insert(0) += 1;
        }
    }
}

impl DbStatsSource for MyStats {
    fn sample_waits(&mut self, waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
        // A failed look at the fsyncs in flight is a gap, as a failed
        // sample is: neither the look nor its values are counted.
        if let Ok(rows) = self.runtime.block_on(self.conn.query_rows(PENDING_SQL)) {
            add_pending(&mut self.pending, &name_values(&rows));
        }
        let Some(sql) = &self.waits_sql else {
            return Ok(());
        };
        let rows = self.runtime.block_on(self.conn.query_rows(sql))?;
        count_sessions(session_rows(&rows), waits);
        Ok(())
    }

    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        let rows = self
            .runtime
            .block_on(self.conn.query_rows("SHOW GLOBAL STATUS"))?;
        let mut out = BTreeMap::new();
        for (name, value) in name_values(&rows) {
            if let Some((_, ours)) = COUNTERS.iter().find(|(theirs, _)| *theirs == name) {
                if let Ok(v) = value.parse::<f64>() {
                    out.insert(ours.to_string(), v);
                }
            }
        }
        out.extend(self.pending.iter().map(|(k, v)| (k.clone(), *v)));
        if self.relations {
            // A table dropped while it is read costs this look its
            // relations, not its counters.
            if let Ok(rows) = self
                .runtime
                .block_on(self.conn.query_rows(super::relations::SQL))
            {
                for (name, accesses, bytes) in super::relations::of_rows(&rows) {
                    out.insert(
                        format!("{}{name}", crate::probe::RELATION_ACCESSES),
                        accesses,
                    );
                    out.insert(format!("{}{name}", crate::probe::RELATION_BYTES_NOW), bytes);
                }
            }
        }
        Ok(out)
    }
}

/// Adds one look at the fsyncs in flight to the running sums: the values
/// the server has, and one look.
fn add_pending(sums: &mut BTreeMap<String, f64>, rows: &[(String, String)]) {
    let mut seen = false;
    for (name, value) in rows {
        let ours = PENDING.iter().find(|(theirs, _)| theirs == name);
        if let (Some((_, ours)), Ok(v)) = (ours, value.parse::<f64>()) {
            *sums.entry(ours.to_string()).or_insert(0.0) += v;
            seen = true;
        }
    }
    if seen {
        *sums.entry(PENDING_LOOKS.to_string()).or_insert(0.0) += 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_get_postgresql_style_classes() {
        let class = |c, t, e| wait_class(c, t, e);
        assert_eq!(
            class("Execute", Some("LOCK WAIT"), None).as_deref(),
            Some("Lock:row lock")
        );
        assert_eq!(
            class("Sleep", Some("RUNNING"), None).as_deref(),
            Some("Client:ClientRead")
        );
        assert_eq!(class("Query", None, None).as_deref(), Some("CPU"));
        assert_eq!(
            class("Query", None, Some("wait/io/file/innodb/innodb_log_file")).as_deref(),
            Some("IO:log file")
        );
        assert_eq!(
            class(
                "Execute",
                None,
                Some("wait/io/file/innodb/innodb_data_file")
            )
            .as_deref(),
            Some("IO:data file")
        );
        assert_eq!(
            class(
                "Execute",
                None,
                Some("wait/synch/mutex/innodb/flush_list_mutex")
            )
            .as_deref(),
            Some("LWLock:flush_list_mutex")
        );
        assert_eq!(
            class("Query", None, Some("wait/lock/metadata/sql/mdl")).as_deref(),
            Some("Lock:metadata")
        );
        assert_eq!(
            class("Query", None, Some("wait/io/socket/sql/client_connection")).as_deref(),
            Some("Client:ClientWrite")
        );
        assert_eq!(
            class("Execute", None, Some("wait/io/table/sql/handler")).as_deref(),
            Some("CPU")
        );
        assert_eq!(class("Connect", None, None), None);
    }

    /// Each look adds what was in flight and one look; a server without
    /// the log's gauge (MariaDB 10.8+) sums the data files' alone.
    #[test]
    fn fsyncs_in_flight_are_summed_over_looks() {
        let row = |n: &str, v: &str| (n.to_string(), v.to_string());
        let mut sums = BTreeMap::new();
        add_pending(&mut sums, &[row("Innodb_data_pending_fsyncs", "1")]);
        add_pending(&mut sums, &[row("Innodb_data_pending_fsyncs", "2")]);
        add_pending(&mut sums, &[row("Innodb_data_pending_fsyncs", "x")]);
        add_pending(&mut sums, &[]);
        assert_eq!(
            sums,
            BTreeMap::from([
                ("data_fsyncs_pending".to_string(), 3.0),
                ("pending_looks".to_string(), 2.0),
            ])
        );
    }

    #[test]
    fn a_session_with_nested_waits_counts_once_at_its_innermost_wait() {
        let row = |id, cmd: &str, trx: Option<&str>, ev: Option<&str>, eid| {
            (
                id,
                cmd.to_string(),
                trx.map(str::to_string),
                ev.map(str::to_string),
                eid,
            )
        };
        let rows = vec![
            row(
                7,
                "Execute",
                None,
                Some("wait/io/table/sql/handler"),
                Some(10),
            ),
            row(
                7,
                "Execute",
                None,
                Some("wait/io/file/innodb/innodb_data_file"),
                Some(11),
            ),
            row(8, "Execute", Some("LOCK WAIT"), None, None),
            row(9, "Sleep", None, None, None),
        ];
        let mut waits = BTreeMap::new();
        count_sessions(rows, &mut waits);
        assert_eq!(
            waits,
            BTreeMap::from([
                ("Client:ClientRead".to_string(), 1),
                ("IO:data file".to_string(), 1),
                ("Lock:row lock".to_string(), 1),
            ])
        );
    }
}
