//! The settings of a database server that the doctor judges and a run's
//! inventory records, read with the server's own queries: PostgreSQL's
//! `pg_settings` (sizes in bytes), MariaDB's global variables, and
//! whether the log (pg_wal, the InnoDB redo log) shares the data
//! directory's device.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What was read from the server.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct DbSettings {
    /// `postgresql` or `mariadb`.
    pub(crate) engine: String,
    /// Setting name → value, sizes in bytes.
    pub(crate) settings: BTreeMap<String, String>,
    /// Whether the log (PostgreSQL's pg_wal, InnoDB's redo log) lies on the
    /// data directory's device, when the directories are visible from here
    /// (a server on this host).
    pub(crate) wal_on_data_device: Option<(bool, String)>,
}

/// Whether `data/pg_wal` (a symlink to another disk, or not) shares the
/// data directory's device.
pub(crate) fn wal_device(data_dir: &Path) -> Option<(bool, String)> {
    log_device(data_dir, &data_dir.join("pg_wal"), "pg_wal")
}

/// Whether the log directory `log` shares the data directory's device.
fn log_device(data_dir: &Path, log: &Path, name: &str) -> Option<(bool, String)> {
    let data = std::fs::metadata(data_dir).ok()?;
    let wal = std::fs::metadata(log).ok()?;
    Some((
        data.dev() == wal.dev(),
        format!(
            "device of {} = {:#x}, of {name} = {:#x}",
            data_dir.display(),
            data.dev(),
            wal.dev()
        ),
    ))
}

/// Not a setting: the client sessions the server held, besides the one
/// reading its settings, when the run started (they count against its
/// connection limit), and how many of them were perflab's own.
pub(crate) const SESSIONS_OPEN: &str = "sessions_open_at_start";
pub(crate) const SESSIONS_OPEN_PERFLAB: &str = "sessions_open_at_start_perflab";

/// Reads the settings the checks need from a PostgreSQL server.
pub(crate) async fn postgres_settings(
    client: &tokio_postgres::Client,
) -> anyhow::Result<DbSettings> {
    let rows = client
        .query(
            "SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name = ANY($1)",
            &[&vec![
                "fsync",
                "synchronous_commit",
                "full_page_writes",
                "shared_buffers",
                "max_connections",
                "superuser_reserved_connections",
                "reserved_connections",
                "data_directory",
                "port",
            ]],
        )
        .await?;
    let mut settings = BTreeMap::new();
    for row in rows {
        let (name, value, unit): (String, String, String) = (row.get(0), row.get(1), row.get(2));
        let value = match unit.as_str() {
            "8kB" => value
                .parse::<u64>()
                .map_or(value, |v| (v * 8192).to_string()),
            "kB" => value
                .parse::<u64>()
                .map_or(value, |v| (v * 1024).to_string()),
            _ => value,
        };
        settings.insert(name, value);
    }
    // The client sessions already open besides this one: they count
    // against max_connections before the sweep's first user.
    if let Ok(row) = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE application_name LIKE 'perflab%') FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            &[],
        )
        .await
    {
        let (open, own): (i64, i64) = (row.get(0), row.get(1));
        settings.insert(SESSIONS_OPEN.to_string(), open.to_string());
        settings.insert(SESSIONS_OPEN_PERFLAB.to_string(), own.to_string());
    }
    let wal_on_data_device = settings
        .get("data_directory")
        .and_then(|d| wal_device(Path::new(d)));
    Ok(DbSettings {
        engine: "postgresql".to_string(),
        settings,
        wal_on_data_device,
    })
}

/// Reads the settings the checks need from a MariaDB or MySQL server.
pub(crate) async fn mariadb_settings(
    conn: &mut super::mysql::MyWire,
) -> anyhow::Result<DbSettings> {
    let rows = conn
        .query_rows(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_flush_log_at_trx_commit', 'innodb_buffer_pool_size', 'innodb_log_file_size', 'max_connections', 'performance_schema', 'datadir', 'innodb_log_group_home_dir')",
        )
        .await?;
    let mut settings: BTreeMap<String, String> = super::mysql::stats::name_values(&rows)
        .into_iter()
        .collect();
    // The client sessions already open besides this one (all of them
    // with the PROCESS privilege, this user's own without it).
    if let Ok(rows) = conn
        .query_rows(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Daemon', 'Binlog Dump')",
        )
        .await
    {
        if let Some(open) = rows.first().and_then(|r| r.text(0)).and_then(|t| t.parse::<u64>().ok()) {
            settings.insert(SESSIONS_OPEN.to_string(), open.to_string());
        }
    }
    // The redo log's directory, relative to the data directory (`./`)
    // unless moved.
    let wal_on_data_device = settings.get("datadir").and_then(|data| {
        let data = Path::new(data);
        let home = settings
            .get("innodb_log_group_home_dir")
            .map_or(data.to_path_buf(), |h| data.join(h));
        log_device(data, &home, "the redo log's directory")
    });
    Ok(DbSettings {
        engine: "mariadb".to_string(),
        settings,
        wal_on_data_device,
    })
}
