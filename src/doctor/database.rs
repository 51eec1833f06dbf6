//! The database's own configuration traps (`--target`): PostgreSQL's data
//! directory and pg_wal on the same block device (moving the log to its
//! own drive raised one lab's throughput), durability switched off (fsync,
//! synchronous_commit, full_page_writes), shared_buffers against RAM,
//! max_connections against the planned users; MariaDB's
//! innodb_flush_log_at_trx_commit, buffer pool against RAM and redo log
//! size. The settings are read by the target (`sut::settings`); the
//! checks are pure functions of them.

use super::{Finding, Severity};
use crate::sut::settings::DbSettings;

fn get<'a>(s: &'a DbSettings, name: &str) -> Option<&'a str> {
    s.settings.get(name).map(String::as_str)
}

fn bytes(s: &DbSettings, name: &str) -> Option<u64> {
    get(s, name)?.parse().ok()
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// The findings of a server's settings, on a host with `ram` bytes, for a
/// sweep up to `users`.
pub(crate) fn database_findings(s: &DbSettings, ram: u64, users: Option<u32>) -> Vec<Finding> {
    let mut out = Vec::new();
    match s.engine.as_str() {
        "postgresql" => postgres_findings(s, ram, users, &mut out),
        "mariadb" => mariadb_findings(s, ram, &mut out),
        _ => {}
    }
    out
}

/// How a finding names the setting it read.
fn setting(s: &DbSettings, name: &str, value: &str) -> String {
    format!("{} setting {name} = {value}", s.engine)
}

/// PostgreSQL: the WAL's device, durability, shared_buffers, max_connections.
fn postgres_findings(s: &DbSettings, ram: u64, users: Option<u32>, out: &mut Vec<Finding>) {
    let setting = |name: &str, value: &str| setting(s, name, value);
    if let Some((true, evidence)) = &s.wal_on_data_device {
        out.push(Finding {
            severity: Severity::Warning,
            area: "database".to_string(),
            title: "PostgreSQL's WAL is on the data directory's device".to_string(),
            evidence: vec![evidence.clone()],
            why: "every commit waits for a WAL flush that competes with data writes and checkpoints on the same disk; a log on its own drive serves commits sequentially".to_string(),
            fix: "stop the server, move pg_wal to another device and leave a symlink in its place (or initdb --waldir)".to_string(),
        });
    }
    for (name, severity, why) in [
        ("fsync", Severity::Critical, "with fsync off a crash can corrupt the database: the speed measured is not one a production server may have"),
        ("synchronous_commit", Severity::Warning, "commits return before the WAL is flushed: the last transactions can be lost in a crash, and throughput looks higher than with durable commits"),
        ("full_page_writes", Severity::Warning, "a crash during a page write can leave a torn page: less WAL written than a durable setup writes"),
    ] {
        if let Some(v) = get(s, name).filter(|v| *v == "off") {
            out.push(Finding {
                severity,
                area: "database".to_string(),
                title: format!("{name} is off: durability traded for speed"),
                evidence: vec![setting(name, v)],
                why: why.to_string(),
                fix: format!("ALTER SYSTEM SET {name} = on; SELECT pg_reload_conf(); (or say in the report that the run is not durable)"),
            });
        }
    }
    if let Some(sb) = bytes(s, "shared_buffers").filter(|_| ram > 0) {
        let share = sb as f64 / ram as f64;
        if !(0.1..=0.5).contains(&share) {
            out.push(Finding {
                severity: Severity::Info,
                area: "database".to_string(),
                title: format!("shared_buffers is {} of {} RAM ({:.0}%)", gib(sb), gib(ram), share * 100.0),
                evidence: vec![setting("shared_buffers", &sb.to_string())],
                why: "the usual start is about a quarter of RAM: far less rereads from the OS cache, far more leaves too little for it and for sorts".to_string(),
                fix: format!("ALTER SYSTEM SET shared_buffers = '{}MB'; then restart", ram / 4 / (1 << 20)),
            });
        }
    }
    if let (Some(max), Some(users)) = (
        get(s, "max_connections").and_then(|v| v.parse::<u32>().ok()),
        users,
    ) {
        if max < users + 3 {
            out.push(Finding {
                severity: Severity::Critical,
                area: "database".to_string(),
                title: format!("max_connections is {max}, the sweep needs {users} users"),
                evidence: vec![setting("max_connections", &max.to_string())],
                why: "sessions beyond the limit are refused: the top of the sweep would measure errors, not the server".to_string(),
                fix: format!("ALTER SYSTEM SET max_connections = {}; then restart", users + 10),
            });
        }
    }
}

/// MariaDB: flushed commits, the buffer pool, the redo log.
fn mariadb_findings(s: &DbSettings, ram: u64, out: &mut Vec<Finding>) {
    let setting = |name: &str, value: &str| setting(s, name, value);
    if let Some(v) = get(s, "innodb_flush_log_at_trx_commit").filter(|v| *v != "1") {
        out.push(Finding {
            severity: Severity::Warning,
            area: "database".to_string(),
            title: format!("innodb_flush_log_at_trx_commit is {v}: commits are not flushed"),
            evidence: vec![setting("innodb_flush_log_at_trx_commit", v)],
            why: "up to a second of committed transactions can be lost in a crash; throughput looks higher than with durable commits".to_string(),
            fix: "SET GLOBAL innodb_flush_log_at_trx_commit = 1 (or report the run as not durable)".to_string(),
        });
    }
    if let Some(pool) = bytes(s, "innodb_buffer_pool_size").filter(|_| ram > 0) {
        let share = pool as f64 / ram as f64;
        if share < 0.1 {
            out.push(Finding {
                severity: Severity::Info,
                area: "database".to_string(),
                title: format!("the InnoDB buffer pool is {} of {} RAM ({:.1}%)", gib(pool), gib(ram), share * 100.0),
                evidence: vec![setting("innodb_buffer_pool_size", &pool.to_string())],
                why: "a pool smaller than the working set reads pages from disk that a dedicated server would hold in memory".to_string(),
                fix: format!("SET GLOBAL innodb_buffer_pool_size = {}", ram / 2),
            });
        }
    }
    if let Some(log) = bytes(s, "innodb_log_file_size").filter(|l| *l < 256 << 20) {
        out.push(Finding {
            severity: Severity::Info,
            area: "database".to_string(),
            title: format!("the InnoDB redo log is {} MiB", log >> 20),
            evidence: vec![setting("innodb_log_file_size", &log.to_string())],
            why: "a small redo log forces frequent checkpoints under write load: throughput dips while they flush".to_string(),
            fix: "set innodb_log_file_size = 1G in the server's configuration and restart".to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sut::settings::wal_device;
    use std::path::Path;

    fn pg(pairs: &[(&str, &str)]) -> DbSettings {
        DbSettings {
            engine: "postgresql".to_string(),
            settings: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            wal_on_data_device: None,
        }
    }

    #[test]
    fn durability_off_and_too_few_connections_are_found() {
        let s = pg(&[
            ("fsync", "off"),
            ("synchronous_commit", "off"),
            ("full_page_writes", "on"),
            ("shared_buffers", &(128u64 << 20).to_string()),
            ("max_connections", "100"),
        ]);
        let f = database_findings(&s, 16 << 30, Some(150));
        let titles: Vec<(&str, Severity)> =
            f.iter().map(|f| (f.title.as_str(), f.severity)).collect();
        assert!(
            titles.contains(&(
                "fsync is off: durability traded for speed",
                Severity::Critical
            )),
            "{titles:?}"
        );
        assert!(titles
            .iter()
            .any(|(t, s)| t.starts_with("synchronous_commit") && *s == Severity::Warning));
        assert!(titles
            .iter()
            .any(|(t, s)| t.starts_with("max_connections is 100") && *s == Severity::Critical));
        assert!(titles
            .iter()
            .any(|(t, _)| t.starts_with("shared_buffers is 0.1 GiB")));
        assert!(!titles
            .iter()
            .any(|(t, _)| t.starts_with("full_page_writes")));
    }

    #[test]
    fn a_durable_well_sized_server_gives_nothing() {
        let s = pg(&[
            ("fsync", "on"),
            ("synchronous_commit", "on"),
            ("full_page_writes", "on"),
            ("shared_buffers", &(4u64 << 30).to_string()),
            ("max_connections", "200"),
        ]);
        assert!(database_findings(&s, 16 << 30, Some(150)).is_empty());
    }

    /// The fixture's data directory holds pg_wal as a plain directory: the
    /// same device.
    #[test]
    fn wal_beside_the_data_is_found() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/doctor-traps/var/lib/postgresql/data");
        let mut s = pg(&[]);
        s.wal_on_data_device = wal_device(&dir);
        assert_eq!(s.wal_on_data_device.as_ref().map(|w| w.0), Some(true));
        let f = database_findings(&s, 0, None);
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(f[0].title.contains("WAL is on the data directory's device"));
    }

    #[test]
    fn mariadb_without_flushed_commits_is_found() {
        let s = DbSettings {
            engine: "mariadb".to_string(),
            settings: [
                ("innodb_flush_log_at_trx_commit", "2"),
                ("innodb_buffer_pool_size", "134217728"),
                ("innodb_log_file_size", "100663296"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            wal_on_data_device: None,
        };
        let f = database_findings(&s, 16 << 30, None);
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
    }
}
