//! The settings of a database server that the doctor judges and a run's
//! inventory records, read with the server's own queries: PostgreSQL's
//! `pg_settings` (sizes in bytes) and whether pg_wal shares the data
//! directory's device, MariaDB's global variables.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What was read from the server.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DbSettings {
    /// `postgresql` or `mariadb`.
    pub engine: String,
    /// Setting name → value, sizes in bytes.
    pub settings: BTreeMap<String, String>,
    /// PostgreSQL: whether pg_wal lies on the data directory's device, when
    /// the directory is visible from here (a server on this host).
    pub wal_on_data_device: Option<(bool, String)>,
}

/// Whether `data/pg_wal` (a symlink to another disk, or not) shares the
/// data directory's device.
pub fn wal_device(data_dir: &Path) -> Option<(bool, String)> {
    let data = std::fs::metadata(data_dir).ok()?;
    let wal = std::fs::metadata(data_dir.join("pg_wal")).ok()?;
    Some((
        data.dev() == wal.dev(),
        format!(
            "device of {} = {:#x}, of pg_wal = {:#x}",
            data_dir.display(),
            data.dev(),
            wal.dev()
        ),
    ))
}

/// Reads the settings the checks need from a PostgreSQL server.
pub async fn postgres_settings(client: &tokio_postgres::Client) -> anyhow::Result<DbSettings> {
    let rows = client
        .query(
            "SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name = ANY($1)",
            &[&vec![
                "fsync",
                "synchronous_commit",
                "full_page_writes",
                "shared_buffers",
                "max_connections",
                "data_directory",
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
pub async fn mariadb_settings(conn: &mut mysql_async::Conn) -> anyhow::Result<DbSettings> {
    use mysql_async::prelude::Queryable;
    let rows: Vec<(String, String)> = conn
        .query(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_flush_log_at_trx_commit', 'innodb_buffer_pool_size', 'innodb_log_file_size', 'max_connections', 'performance_schema')",
        )
        .await?;
    Ok(DbSettings {
        engine: "mariadb".to_string(),
        settings: rows.into_iter().collect(),
        wal_on_data_device: None,
    })
}
