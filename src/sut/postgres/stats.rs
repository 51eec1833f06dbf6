//! PostgreSQL's side of the story: pg_stat_database, pg_stat_wal, the
//! checkpoint counters (pg_stat_bgwriter before 17, pg_stat_checkpointer
//! from 17) and the wait events of the benchmark's sessions
//! (application_name `perflab`) in pg_stat_activity, each named
//! `type:event` as PostgreSQL's documentation lists them ("Wait Event
//! Types", monitoring-stats): `LWLock:WALWrite` (a commit waiting for the
//! WAL to be written), `Lock:transactionid` (a row lock), `IO:DataFileRead`,
//! `Client:ClientRead`; `CPU` for a session that waits on nothing.

use super::PgTarget;
use crate::probe::DbStatsSource;
use std::collections::BTreeMap;
use tokio_postgres::{Client, Statement};

/// The benchmark sessions' waits, by `type:event`. The event's name tells
/// a commit waiting for the WAL from a row lock; the class alone lumps
/// them together.
const WAITS_SQL: &str = "SELECT CASE WHEN wait_event_type IS NULL THEN 'CPU'
                         WHEN wait_event IS NULL THEN wait_event_type
                         ELSE wait_event_type || ':' || wait_event END,
                    count(*)
             FROM pg_stat_activity
             WHERE application_name = 'perflab' AND backend_type = 'client backend'
             GROUP BY 1";

/// The database's counters, in the order of [`DATABASE_COUNTERS`].
const DATABASE_SQL: &str =
    "SELECT xact_commit::float8, xact_rollback::float8, blks_hit::float8, blks_read::float8,
            temp_bytes::float8, deadlocks::float8
     FROM pg_stat_database WHERE datname = current_database()";
const DATABASE_COUNTERS: [&str; 6] = [
    "commits",
    "rollbacks",
    "blocks_hit",
    "blocks_read",
    "temp_bytes",
    "deadlocks",
];

/// The relations the sessions touched most, each with the blocks it was
/// asked for (found in the buffers or read) and its size: what a cache
/// model needs to say what fits in more or less memory. Tables and
/// indexes apart, since an index's pages are hotter than its table's; at
/// most [`RELATIONS`] of them, by accesses.
const RELATIONS_SQL: &str = "SELECT name, accesses, bytes FROM (
        SELECT schemaname || '.' || relname AS name,
               (coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0))::float8 AS accesses,
               coalesce(pg_relation_size(relid), 0)::float8 AS bytes
        FROM pg_statio_user_tables
        UNION ALL
        SELECT schemaname || '.' || indexrelname,
               (coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0))::float8,
               coalesce(pg_relation_size(indexrelid), 0)::float8
        FROM pg_statio_user_indexes) r
     WHERE accesses > 0 ORDER BY accesses DESC LIMIT 16";

/// How many relations [`RELATIONS_SQL`] keeps: the hot ones decide what a
/// cache holds, and each costs two values in every interval's record.
pub(crate) const RELATIONS: usize = 16;

/// A statistics connection to PostgreSQL. Its statements are prepared
/// once: the waits are sampled ten times a second beside the run, and an
/// unnamed statement would be parsed and planned by the server and
/// described to the client each time, one more round trip.
pub struct PgStats {
    runtime: tokio::runtime::Runtime,
    client: Client,
    waits: Statement,
    database: Statement,
    checkpoints: Statement,
    wal: Option<Statement>,
    relations: Option<Statement>,
}

impl PgStats {
    /// Opens the statistics connection (named `perflab-probe`, so it never
    /// counts itself among the benchmark's sessions).
    pub fn connect(target: &PgTarget) -> anyhow::Result<Self> {
        Self::open(target).map_err(|e| super::pool::lost_statement(target, e, false))
    }

    /// [`PgStats::connect`], its errors as the server gave them.
    fn open(target: &PgTarget) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut config = target.config.clone();
        config.application_name("perflab-probe");
        let client = runtime.block_on(super::connect(target, &config))?;
        let version: i32 = runtime
            .block_on(client.query_one("SELECT current_setting('server_version_num')::int", &[]))?
            .try_get(0)?;
        let checkpoints_sql = if version >= 170_000 {
            "SELECT (num_timed + num_requested)::float8 FROM pg_stat_checkpointer"
        } else {
            "SELECT (checkpoints_timed + checkpoints_req)::float8 FROM pg_stat_bgwriter"
        };
        let prepare = |sql: &str| runtime.block_on(client.prepare(sql));
        let (waits, database, checkpoints) = (
            prepare(WAITS_SQL)?,
            prepare(DATABASE_SQL)?,
            prepare(checkpoints_sql)?,
        );
        let wal = match version >= 140_000 {
            true => Some(prepare("SELECT wal_bytes::float8 FROM pg_stat_wal")?),
            false => None,
        };
        // Not every role may size every relation: without them the run
        // still has the database's counters.
        let relations = prepare(RELATIONS_SQL).ok();
        Ok(PgStats {
            runtime,
            client,
            waits,
            database,
            checkpoints,
            wal,
            relations,
        })
    }
}

impl DbStatsSource for PgStats {
    fn sample_waits(&mut self, waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
        let rows = self.runtime.block_on(self.client.query(&self.waits, &[]))?;
        for row in rows {
            let class: String = row.try_get(0)?;
            let n: i64 = row.try_get(1)?;
            *waits.entry(class).or_insert(0) += u64::try_from(n).unwrap_or(0);
        }
        Ok(())
    }

    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        let row = self
            .runtime
            .block_on(self.client.query_one(&self.database, &[]))?;
        let mut out = BTreeMap::new();
        for (i, name) in DATABASE_COUNTERS.iter().enumerate() {
            out.insert(name.to_string(), row.try_get::<_, f64>(i)?);
        }
        let checkpoints: f64 = self
            .runtime
            .block_on(self.client.query_one(&self.checkpoints, &[]))?
            .try_get(0)?;
        out.insert("checkpoints".to_string(), checkpoints);
        if let Some(wal) = &self.wal {
            let wal: f64 = self
                .runtime
                .block_on(self.client.query_one(wal, &[]))?
                .try_get(0)?;
            out.insert("wal_bytes".to_string(), wal);
        }
        if let Some(relations) = &self.relations {
            // A relation dropped while it is read, or one the role may not
            // size, costs this sample its relations, not its counters.
            let rows = self.runtime.block_on(self.client.query(relations, &[]));
            for row in rows.iter().flatten().take(RELATIONS) {
                let (Ok(name), Ok(accesses), Ok(bytes)) = (
                    row.try_get::<_, String>(0),
                    row.try_get::<_, f64>(1),
                    row.try_get::<_, f64>(2),
                ) else {
                    continue;
                };
                out.insert(
                    format!("{}{name}", crate::probe::RELATION_ACCESSES),
                    accesses,
                );
                out.insert(format!("{}{name}", crate::probe::RELATION_BYTES_NOW), bytes);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query asks for no more relations than an interval keeps.
    #[test]
    fn the_query_keeps_as_many_relations_as_an_interval_records() {
        assert!(
            RELATIONS_SQL.ends_with(&format!("LIMIT {RELATIONS}")),
            "{RELATIONS_SQL}"
        );
    }
}
