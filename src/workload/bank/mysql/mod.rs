//! The bank on MySQL or MariaDB, on perflab's own session
//! (`sut::mysql::wire`): one connection per user, the bank's statements
//! prepared once per connection, deadlocks and lock-wait timeouts retried
//! up to `--max-tries`. The schema, the load and the check go over the
//! same session's text protocol. The load inserts rows in multi-row
//! INSERTs of at most [`ROWS_PER_INSERT`] rows (well inside one packet and
//! the server's default `max_allowed_packet`), the accounts over four
//! connections at once. InnoDB clusters rows by primary key, so the keys
//! are declared before the data (adding them after would rebuild every
//! table); rows arrive in key order. Preparing and checking end at the
//! first signal (`util::until_interrupted`); the catalog is read within a
//! look's deadline (`sut::LOOK_QUERY`).

mod txn;

pub(crate) use txn::MyConn;

use super::check::BankFigures;
use super::mix::{BankMix, Isolation};
use super::ops::{ACCOUNTS_PER_BRANCH, INITIAL_BALANCE, TELLERS_PER_BRANCH};
use super::owned::{Catalog, LEDGER, MADE_BY};
use super::sqlite::LoadReport;
use super::{BankBackend, Tables, META_TABLE};
use crate::error::PlanError;
use crate::sut::mysql::{connect, MyTarget, MyWire, Row, BANK_QUERY};
use crate::sut::{silent_look, LOOK_QUERY};
use crate::util::until_interrupted;
use crate::workload::sql::clock::StatementClock;
use crate::workload::Seat;
use anyhow::Context;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Instant;

/// Parallel INSERT streams while loading accounts.
const INSERT_STREAMS: i64 = 4;
/// Rows per multi-row INSERT.
const ROWS_PER_INSERT: i64 = 2_000;
/// Version of the schema this code writes.
const SCHEMA_VERSION: i64 = 1;

/// A MySQL/MariaDB bank.
pub(crate) struct MyBank {
    target: MyTarget,
    tables: Tables,
    isolation: Isolation,
    max_tries: u32,
    admin: tokio::runtime::Runtime,
    /// Every session's BEGIN and COMMIT, timed.
    clock: Arc<StatementClock>,
}

impl MyBank {
    /// The bank another perflab loaded, for a generator's sessions: no
    /// connection is made here, nothing is loaded or read.
    pub(crate) fn attach(
        target: MyTarget,
        mix: BankMix,
        isolation: Isolation,
        max_tries: u32,
    ) -> anyhow::Result<Self> {
        Ok(MyBank {
            target,
            tables: Tables::of(mix),
            isolation,
            max_tries,
            clock: Arc::new(super::txn::clock()),
            admin: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start a runtime")?,
        })
    }

    /// How a generator reaches this bank (`generator::Form`).
    pub(crate) fn target(&self) -> &MyTarget {
        &self.target
    }

    /// Connects, then loads or reuses the bank for `scale` units.
    pub(crate) fn prepare(
        target: MyTarget,
        scale: u32,
        mix: BankMix,
        reload: bool,
        isolation: Isolation,
        max_tries: u32,
    ) -> anyhow::Result<(Self, LoadReport)> {
        if mix == BankMix::Pgbench {
            anyhow::bail!(PlanError::flag(
                "--mix",
                "pgbench runs on pgbench's tables in PostgreSQL",
                "use tpcb or atm on MySQL/MariaDB"
            ));
        }
        let bank = Self::attach(target, mix, isolation, max_tries)?;
        let started = Instant::now();
        let report = bank.admin.block_on(until_interrupted(
            "preparing the bank",
            bank.prepare_tables(i64::from(scale), reload, started),
        ))??;
        Ok((bank, report))
    }

    /// Starts sampling the server's statistics for the run.
    /// Opens an existing bank for `perflab check bank`.
    pub(crate) fn existing(target: MyTarget) -> anyhow::Result<Self> {
        let bank = Self::attach(target, BankMix::Tpcb, Isolation::ReadCommitted, 1)?;
        let loaded = bank
            .admin
            .block_on(until_interrupted("reading the bank", async {
                let mut conn = connect(&bank.target, BANK_QUERY).await?;
                let found = catalog(&mut conn, &bank.target, &bank.tables).await?;
                let scale = loaded_scale(&mut conn, &bank.tables, &found).await;
                conn.quit().await;
                scale
            }))??;
        if loaded.is_none() {
            anyhow::bail!(PlanError::new(format!(
                "{} holds no perflab bank; load one with `perflab run bank --target mysql://…`",
                bank.target.display
            )));
        }
        Ok(bank)
    }

    async fn prepare_tables(
        &self,
        scale: i64,
        reload: bool,
        started: Instant,
    ) -> anyhow::Result<LoadReport> {
        let mut conn = connect(&self.target, BANK_QUERY).await?;
        let report = self.prepare_on(&mut conn, scale, reload, started).await;
        conn.quit().await;
        report
    }

    async fn prepare_on(
        &self,
        conn: &mut MyWire,
        scale: i64,
        reload: bool,
        started: Instant,
    ) -> anyhow::Result<LoadReport> {
        let found = catalog(conn, &self.target, &self.tables).await?;
        if !reload && loaded_scale(conn, &self.tables, &found).await? == Some(scale) {
            super::ensure_reusable(&figures(conn, &self.tables).await?, &self.target.display)?;
            return Ok(LoadReport {
                reused: true,
                rows: 0,
                elapsed: started.elapsed(),
            });
        }
        let ours = found.replaceable(&self.tables, &self.target.display)?;
        let rows = self
            .load(conn, scale, &ours)
            .await
            .with_context(|| format!("cannot load the bank into {}", self.target.display))?;
        Ok(LoadReport {
            reused: false,
            rows,
            elapsed: started.elapsed(),
        })
    }

    /// Makes the bank's tables afresh and fills them. MySQL commits each
    /// DDL statement on its own, so the order is what keeps the promise:
    /// each table goes into perflab's ledger before it is made, and only
    /// `ours` (tables the ledger lists) are dropped.
    async fn load(&self, conn: &mut MyWire, scale: i64, ours: &[&str]) -> anyhow::Result<u64> {
        let t = &self.tables;
        let tellers = scale * TELLERS_PER_BRANCH;
        let accounts = scale * ACCOUNTS_PER_BRANCH;
        let teller_balance = INITIAL_BALANCE * ACCOUNTS_PER_BRANCH / TELLERS_PER_BRANCH;
        let branch_balance = INITIAL_BALANCE * ACCOUNTS_PER_BRANCH;
        conn.query_drop(&format!(
            "CREATE TABLE IF NOT EXISTS {LEDGER} (table_name VARCHAR(64) NOT NULL PRIMARY KEY, \
             made_at DATETIME NOT NULL, made_by VARCHAR(16) NOT NULL) ENGINE=InnoDB"
        ))
        .await?;
        let rows: Vec<String> = t
            .all()
            .iter()
            .map(|table| format!("('{table}', NOW(), '{MADE_BY}')"))
            .collect();
        conn.query_drop(&format!(
            "INSERT IGNORE INTO {LEDGER} VALUES {}",
            rows.join(", ")
        ))
        .await?;
        if !ours.is_empty() {
            conn.query_drop(&format!("DROP TABLE {}", ours.join(", ")))
                .await?;
        }
        for ddl in [
            format!("CREATE TABLE {} (bid INT NOT NULL PRIMARY KEY, bbalance BIGINT NOT NULL, filler CHAR(88) CHARACTER SET latin1) ENGINE=InnoDB", t.branches),
            format!("CREATE TABLE {} (tid INT NOT NULL PRIMARY KEY, bid INT NOT NULL, tbalance BIGINT NOT NULL, filler CHAR(84) CHARACTER SET latin1) ENGINE=InnoDB", t.tellers),
            format!("CREATE TABLE {} (aid INT NOT NULL PRIMARY KEY, bid INT NOT NULL, abalance BIGINT NOT NULL, filler CHAR(84) CHARACTER SET latin1) ENGINE=InnoDB", t.accounts),
            format!("CREATE TABLE {} (tid INT, bid INT, aid INT, delta BIGINT, mtime DATETIME(6), filler CHAR(22) CHARACTER SET latin1) ENGINE=InnoDB", t.history),
            format!("CREATE TABLE {META_TABLE} (scale BIGINT NOT NULL, initial_total BIGINT NOT NULL, loaded_at DATETIME NOT NULL, schema_version BIGINT NOT NULL) ENGINE=InnoDB"),
        ] {
            conn.query_drop(&ddl).await?;
        }
        insert_rows(conn, t.branches, 1, scale, |bid| {
            format!("({bid},{branch_balance},'')")
        })
        .await?;
        insert_rows(conn, t.tellers, 1, tellers, |tid| {
            let bid = (tid - 1) / TELLERS_PER_BRANCH + 1;
            format!("({tid},{bid},{teller_balance},'')")
        })
        .await?;

        let per_stream = (accounts + INSERT_STREAMS - 1) / INSERT_STREAMS;
        let streams = (0..INSERT_STREAMS).map(|i| {
            let from = i * per_stream + 1;
            let to = ((i + 1) * per_stream).min(accounts);
            insert_accounts(&self.target, t.accounts, from, to)
        });
        futures_util::future::try_join_all(streams).await?;
        conn.query_drop(&format!(
            "INSERT INTO {META_TABLE} VALUES ({scale}, {}, NOW(), {SCHEMA_VERSION})",
            accounts * INITIAL_BALANCE
        ))
        .await?;
        conn.query_drop(&format!(
            "ANALYZE TABLE {}, {}, {}",
            t.branches, t.tellers, t.accounts
        ))
        .await?;
        Ok(u64::try_from(scale + tellers + accounts).unwrap_or(0))
    }
}

/// Inserts accounts `from..=to` on a connection of its own.
async fn insert_accounts(target: &MyTarget, table: &str, from: i64, to: i64) -> anyhow::Result<()> {
    let mut conn = connect(target, BANK_QUERY).await?;
    insert_rows(&mut conn, table, from, to, |aid| {
        let bid = (aid - 1) / ACCOUNTS_PER_BRANCH + 1;
        format!("({aid},{bid},{INITIAL_BALANCE},'')")
    })
    .await?;
    conn.quit().await;
    Ok(())
}

/// Inserts the rows `row(n)` for `n` in `from..=to` into `table`, in
/// multi-row INSERTs of at most [`ROWS_PER_INSERT`] rows.
async fn insert_rows(
    conn: &mut MyWire,
    table: &str,
    from: i64,
    to: i64,
    row: impl Fn(i64) -> String,
) -> anyhow::Result<()> {
    let mut start = from;
    while start <= to {
        crate::util::check_interrupt("loading the bank")?;
        let end = (start + ROWS_PER_INSERT - 1).min(to);
        let mut sql = String::with_capacity(64 + 32 * ROWS_PER_INSERT as usize);
        let _ = write!(sql, "INSERT INTO {table} VALUES ");
        for n in start..=end {
            if n > start {
                sql.push(',');
            }
            sql.push_str(&row(n));
        }
        conn.query_drop(&sql).await?;
        start = end + 1;
    }
    Ok(())
}

/// The first column of each row, as text (NULLs left out).
fn first_column(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| r.text(0).map(str::to_string))
        .collect()
}

/// What the catalog says of the bank's tables and perflab's ledger in
/// the connection's database; within a look's deadline, as the first
/// statement a server that went silent gets.
async fn catalog(conn: &mut MyWire, target: &MyTarget, tables: &Tables) -> anyhow::Result<Catalog> {
    tokio::time::timeout(LOOK_QUERY, catalog_now(conn, tables))
        .await
        .map_err(|_| silent_look("MariaDB/MySQL", &target.display, "its catalog"))?
}

async fn catalog_now(conn: &mut MyWire, tables: &Tables) -> anyhow::Result<Catalog> {
    let all = tables.all();
    let names = first_column(
        &conn
            .query_rows(&format!(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() \
             AND table_name IN ('{}')",
                all.join("', '")
            ))
            .await?,
    );
    let present = all
        .into_iter()
        .filter(|t| names.iter().any(|n| n.eq_ignore_ascii_case(t)))
        .collect();
    let columns = first_column(
        &conn
            .query_rows(&format!(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() \
                 AND table_name = '{LEDGER}' ORDER BY ordinal_position"
            ))
            .await?,
    );
    let mut found = Catalog::found(present, columns);
    if found.ledger_is_ours() {
        found.listed = first_column(
            &conn
                .query_rows(&format!(
                    "SELECT table_name FROM {LEDGER} WHERE made_by = '{MADE_BY}'"
                ))
                .await?,
        );
    }
    Ok(found)
}

/// The scale of the bank, when every one of its tables is perflab's.
async fn loaded_scale(
    conn: &mut MyWire,
    tables: &Tables,
    found: &Catalog,
) -> anyhow::Result<Option<i64>> {
    if !found.owns_all(tables) {
        return Ok(None);
    }
    Ok(conn
        .query_first(&format!(
            "SELECT MAX(scale) FROM {META_TABLE} WHERE schema_version = {SCHEMA_VERSION}"
        ))
        .await?
        .and_then(|row| row.get(0)))
}

/// The check's figures, read in one consistent snapshot.
async fn figures(conn: &mut MyWire, t: &Tables) -> anyhow::Result<BankFigures> {
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await?;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await?;
    let row = conn
        .query_first(&format!(
            // One scan of each table (a bank larger than the buffer pool
            // is read from its disk once per scan).
            "SELECT (SELECT MAX(scale) FROM {META_TABLE}), (SELECT MAX(initial_total) FROM {META_TABLE}),
                    b.n, te.n, a.n, a.total, te.total, b.total, h.n, h.total, a.negative, a.lowest
             FROM (SELECT COUNT(*) AS n, CAST(COALESCE(SUM(bbalance), 0) AS SIGNED) AS total FROM {b}) AS b,
                  (SELECT COUNT(*) AS n, CAST(COALESCE(SUM(tbalance), 0) AS SIGNED) AS total FROM {te}) AS te,
                  (SELECT COUNT(*) AS n, CAST(COALESCE(SUM(abalance), 0) AS SIGNED) AS total,
                          CAST(COALESCE(SUM(abalance < 0), 0) AS SIGNED) AS negative,
                          COALESCE(MIN(abalance), 0) AS lowest FROM {a}) AS a,
                  (SELECT COUNT(*) AS n, CAST(COALESCE(SUM(delta), 0) AS SIGNED) AS total FROM {h}) AS h",
            b = t.branches,
            te = t.tellers,
            a = t.accounts,
            h = t.history,
        ))
        .await?;
    conn.query_drop("COMMIT").await?;
    let row = row.context("the figures query returned nothing")?;
    let get = |i: usize| -> anyhow::Result<i64> {
        row.get::<i64>(i)
            .with_context(|| format!("figure {i} is not a number"))
    };
    Ok(BankFigures {
        scale: get(0)?,
        initial_total: get(1)?,
        branches: get(2)?,
        tellers: get(3)?,
        accounts: get(4)?,
        accounts_sum: get(5)?,
        tellers_sum: get(6)?,
        branches_sum: get(7)?,
        history_rows: get(8)?,
        history_sum: get(9)?,
        negative_accounts: get(10)?,
        min_balance: get(11)?,
    })
}

impl BankBackend for MyBank {
    const POLLS_SOCKETS: bool = true;

    type Conn = MyConn;

    async fn connect(&self, seat: Seat) -> anyhow::Result<MyConn> {
        let driver = txn::MyClient {
            target: self.target.clone(),
            tables: self.tables,
            isolation: self.isolation,
            drive: seat.drive(),
            clock: Arc::clone(&self.clock),
        };
        MyConn::open(driver, self.max_tries).await
    }

    fn clock(&self) -> &Arc<StatementClock> {
        &self.clock
    }

    fn figures(&self) -> anyhow::Result<BankFigures> {
        self.admin
            .block_on(until_interrupted("checking the bank", async {
                let mut conn = connect(&self.target, BANK_QUERY).await?;
                let figures = figures(&mut conn, &self.tables).await;
                conn.quit().await;
                figures
            }))?
    }
}
