//! Schema migrations. Each entry moves the schema one version forward; the
//! version lives in `PRAGMA user_version`. Never edit a released entry:
//! append a new one.

use anyhow::{bail, Context};
use rusqlite::{Connection, TransactionBehavior};

const MIGRATIONS: &[&str] = &[
    // 1: runs, steps, intervals and per-operation interval tallies.
    "CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL,
        status_reason TEXT,
        workload TEXT NOT NULL,
        target TEXT NOT NULL,
        op_names TEXT NOT NULL,
        plan_given TEXT NOT NULL,
        plan_resolved TEXT NOT NULL,
        tool_version TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        setup TEXT,
        check_report TEXT
    );
    CREATE TABLE steps (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        idx INTEGER NOT NULL,
        level_kind TEXT NOT NULL,
        level REAL NOT NULL,
        status TEXT NOT NULL,
        status_reason TEXT,
        started_at TEXT NOT NULL,
        usage TEXT NOT NULL,
        UNIQUE (run_id, idx)
    );
    CREATE TABLE intervals (
        step_id INTEGER NOT NULL REFERENCES steps(id),
        idx INTEGER NOT NULL,
        phase TEXT NOT NULL,
        start_s REAL NOT NULL,
        length_s REAL NOT NULL,
        dropped INTEGER NOT NULL,
        lag_hist BLOB NOT NULL,
        think_total_s REAL NOT NULL,
        thinks INTEGER NOT NULL,
        PRIMARY KEY (step_id, idx)
    );
    CREATE TABLE interval_ops (
        step_id INTEGER NOT NULL,
        interval_idx INTEGER NOT NULL,
        op_idx INTEGER NOT NULL,
        ok INTEGER NOT NULL,
        refused INTEGER NOT NULL,
        errors TEXT NOT NULL,
        retries INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        service_hist BLOB NOT NULL,
        response_hist BLOB NOT NULL,
        PRIMARY KEY (step_id, interval_idx, op_idx),
        FOREIGN KEY (step_id, interval_idx) REFERENCES intervals(step_id, idx)
    );",
    // 2: what the database reported over each interval (counters, waits).
    "CREATE TABLE interval_db (
        step_id INTEGER NOT NULL,
        interval_idx INTEGER NOT NULL,
        sample TEXT NOT NULL,
        PRIMARY KEY (step_id, interval_idx),
        FOREIGN KEY (step_id, interval_idx) REFERENCES intervals(step_id, idx)
    );",
    // 3: what this host's /proc and /sys counters did over each interval.
    "CREATE TABLE interval_host (
        step_id INTEGER NOT NULL,
        interval_idx INTEGER NOT NULL,
        sample TEXT NOT NULL,
        PRIMARY KEY (step_id, interval_idx),
        FOREIGN KEY (step_id, interval_idx) REFERENCES intervals(step_id, idx)
    );",
    // 4: what each remote probe (agent, node_exporter) saw over each
    // interval; a NULL sample is an interval the probe did not answer.
    "CREATE TABLE interval_probe (
        step_id INTEGER NOT NULL,
        interval_idx INTEGER NOT NULL,
        source TEXT NOT NULL,
        position INTEGER NOT NULL,
        sample TEXT,
        PRIMARY KEY (step_id, interval_idx, source),
        FOREIGN KEY (step_id, interval_idx) REFERENCES intervals(step_id, idx)
    );",
    // 5: the verdict printed at the end of the run (JSON).
    "ALTER TABLE runs ADD COLUMN verdict TEXT;",
    // 6: the hosts' inventory when the run started (JSON map of facts).
    "ALTER TABLE runs ADD COLUMN inventory TEXT;",
    // 7: which process writes the run, beyond its pid (which the kernel
    // reuses): `BOOT_ID:START_TICKS` (see `store::writer`).
    "ALTER TABLE runs ADD COLUMN writer TEXT;",
    // 8: labs (`perflab lab`): the lab file's variants and order, and each
    // cell (one run of one variant) with the run it became.
    "CREATE TABLE labs (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        file TEXT NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL,
        spec TEXT NOT NULL,
        pid INTEGER NOT NULL
    );
    CREATE TABLE lab_cells (
        lab_id INTEGER NOT NULL REFERENCES labs(id),
        position INTEGER NOT NULL,
        variant INTEGER NOT NULL,
        repetition INTEGER NOT NULL,
        args TEXT NOT NULL,
        status TEXT NOT NULL,
        status_reason TEXT,
        run_id INTEGER REFERENCES runs(id),
        pid INTEGER,
        PRIMARY KEY (lab_id, position)
    );",
    // 9: a cell whose variant's teardown is owed: set before its setup
    // runs, cleared once its teardown has run (`lab resume` runs it when
    // the lab was killed in between).
    "ALTER TABLE lab_cells ADD COLUMN teardown_owed INTEGER NOT NULL DEFAULT 0;",
    // 10: a step run on generators: what each did (JSON array of
    // `GeneratorStep`); null for a local step.
    "ALTER TABLE steps ADD COLUMN generators TEXT;",
    // 11: the time users spent in each operation kind's failed operations,
    // seconds (failed operations keep no latency; Little's law counts it).
    "ALTER TABLE interval_ops ADD COLUMN failed_s REAL NOT NULL DEFAULT 0;",
    // 12: operations still in flight when the window ended, each one's time
    // so far (µs, an HdrHistogram like the others); null before it.
    "ALTER TABLE intervals ADD COLUMN unfinished_hist BLOB;",
    // 13: the run's labels (`run --label KEY=VALUE`: its commit, branch,
    // build), a JSON object; null for none.
    "ALTER TABLE runs ADD COLUMN labels TEXT;",
];

/// The schema version this build writes.
pub(crate) const VERSION: i64 = MIGRATIONS.len() as i64;

/// Why a store cannot be used by this build: a newer perflab wrote it.
pub(crate) fn newer_than_this_build(version: i64) -> String {
    format!(
        "it was written by a newer perflab (schema {version}, this build knows {VERSION}); use that version of perflab, or another --store"
    )
}

/// Brings the schema up to [`VERSION`], in one immediate transaction: two
/// processes opening a new store at once take turns (the second waits on
/// the busy timeout, then finds the schema made and does nothing), never
/// both creating the tables.
pub(crate) fn migrate(conn: &mut Connection) -> anyhow::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Read inside the transaction: another process may have migrated
    // between this one's open and its lock.
    let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if current > VERSION {
        bail!(newer_than_this_build(current));
    }
    if current == VERSION {
        return Ok(());
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(sql)
            .with_context(|| format!("migration {} failed", index + 1))?;
    }
    tx.pragma_update(None, "user_version", VERSION)?;
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrating_twice_is_harmless_and_newer_stores_are_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, VERSION);
        conn.pragma_update(None, "user_version", VERSION + 1)
            .unwrap();
        assert!(migrate(&mut conn).is_err());
    }
}
