//! MariaDB/MySQL's side of the story, from SHOW GLOBAL STATUS: commits,
//! InnoDB row-lock waits and their time, buffer-pool reads against read
//! requests, log waits, and the running threads (a gauge). MariaDB has no
//! per-session wait events without performance_schema, so no wait classes.

use super::MyTarget;
use crate::probe::DbStatsSource;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use std::collections::BTreeMap;

/// SHOW GLOBAL STATUS names and what perflab calls them.
const COUNTERS: [(&str, &str); 7] = [
    ("Com_commit", "commits"),
    ("Innodb_row_lock_waits", "row_lock_waits"),
    ("Innodb_row_lock_time", "row_lock_time_ms"),
    ("Innodb_buffer_pool_reads", "buffer_pool_reads"),
    (
        "Innodb_buffer_pool_read_requests",
        "buffer_pool_read_requests",
    ),
    ("Innodb_log_waits", "log_waits"),
    ("Threads_running", "now_threads_running"),
];

/// A statistics connection to MariaDB/MySQL.
pub struct MyStats {
    runtime: tokio::runtime::Runtime,
    conn: Conn,
}

impl MyStats {
    pub fn connect(target: &MyTarget) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let conn = runtime.block_on(super::connect(target))?;
        Ok(MyStats { runtime, conn })
    }
}

impl DbStatsSource for MyStats {
    fn sample_waits(&mut self, _waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
        Ok(())
    }

    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        let rows: Vec<(String, String)> = self
            .runtime
            .block_on(self.conn.query("SHOW GLOBAL STATUS"))?;
        let mut out = BTreeMap::new();
        for (name, value) in rows {
            if let Some((_, ours)) = COUNTERS.iter().find(|(theirs, _)| *theirs == name) {
                if let Ok(v) = value.parse::<f64>() {
                    out.insert(ours.to_string(), v);
                }
            }
        }
        Ok(out)
    }
}
