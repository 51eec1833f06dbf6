//! The bank on embedded SQLite (WAL mode). SQLite's calls block: a user
//! with its worker thread to itself calls SQLite right there; users that
//! share a worker each keep their connection on a thread of its own
//! ([`BlockingConn`]). Every statement, BEGIN and COMMIT included,
//! is prepared once per connection. `SQLITE_BUSY` (another writer holds the lock) is
//! retried with capped exponential backoff and full jitter until the
//! operation's deadline, and every retry is counted. Loading and checking
//! stop at the first signal: SQLite interrupts the running statement.

use super::check::BankFigures;
use super::ops::{BankOp, ACCOUNTS_PER_BRANCH, INITIAL_BALANCE, TELLERS_PER_BRANCH};
use super::owned::{Catalog, LEDGER, MADE_BY};
use super::txn;
use super::{BankBackend, BankConn, Tables, META_TABLE};
use crate::measure::{ErrorKind, OpResult, Outcome};
use crate::workload::blocking_conn::{Blocking, BlockingConn};
use crate::workload::sql::clock::StatementClock;
use crate::workload::Seat;
use anyhow::Context;
use futures_util::FutureExt;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rusqlite::{params, Connection, OpenFlags, Statement};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The tables of the bank on SQLite: perflab's layout (the pgbench mix
/// runs on PostgreSQL only).
const TABLES: Tables = Tables::PERFLAB;
/// Version of the bank schema this code writes.
const SCHEMA_VERSION: i64 = 1;
/// First backoff after SQLITE_BUSY; doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_micros(50);
const MAX_BACKOFF: Duration = Duration::from_millis(5);

/// How a bank database was made ready.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LoadReport {
    /// True when a database of the same scale was found, checked and reused.
    pub(crate) reused: bool,
    /// Rows written (0 when reused).
    pub(crate) rows: u64,
    pub(crate) elapsed: Duration,
}

/// The SQLite bank.
#[derive(Clone)]
pub(crate) struct SqliteBank {
    path: PathBuf,
    /// Every session's BEGIN and COMMIT, timed.
    clock: Arc<StatementClock>,
}

impl SqliteBank {
    /// Opens (loading or reusing) the bank at `path` for `scale` units.
    pub(crate) fn prepare(
        path: &Path,
        scale: u32,
        reload: bool,
    ) -> anyhow::Result<(Self, LoadReport)> {
        let started = Instant::now();
        let bad = |why: String| {
            crate::error::PlanError::flag(
                "--target",
                format!("{} {why}", path.display()),
                "give sqlite:PATH of a file in a writable directory (made when missing)",
            )
        };
        if path.is_dir() {
            return Err(bad("is a directory, not a database file".to_string()).into());
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(bad(format!("is in {}, which does not exist", dir.display())).into());
            }
        }
        let location = format!("sqlite:{}", path.display());
        let bank = SqliteBank {
            path: path.to_path_buf(),
            clock: Arc::new(super::txn::clock()),
        };
        // Looked at read-only first: a file perflab may not write (not a
        // database, or one whose tables are somebody else's) is refused
        // byte for byte as it was.
        if path.exists() {
            let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
                .map_err(|e| bad(format!("cannot be opened as a SQLite database ({e})")))?;
            let found = catalog(&conn)
                .map_err(|e| bad(format!("is not a SQLite database perflab can use ({e:#})")))?;
            let existing = if found.owns_all(&TABLES) {
                loaded_scale(&conn)
                    .map_err(|e| bad(format!("holds a bank perflab cannot read ({e:#})")))?
            } else {
                None
            };
            drop(conn);
            if existing == Some(i64::from(scale)) && !reload {
                let conn = open(path)
                    .map_err(|e| bad(format!("cannot be opened as a SQLite database ({e})")))?;
                let figures =
                    cut_at_signal(&conn, "checking the loaded bank", || read_figures(&conn))?;
                super::ensure_reusable(&figures, &location)?;
                return Ok((
                    bank,
                    LoadReport {
                        reused: true,
                        rows: 0,
                        elapsed: started.elapsed(),
                    },
                ));
            }
            found.replaceable(&TABLES, &location)?;
        }
        let mut conn =
            open(path).map_err(|e| bad(format!("cannot be opened as a SQLite database ({e})")))?;
        let handle = conn.get_interrupt_handle();
        let watch = crate::util::InterruptWatch::start(move || handle.interrupt());
        let rows = load(&mut conn, scale, &location);
        if rows.is_err() {
            watch.cut("loading the bank")?;
        }
        drop(watch);
        let rows = rows.with_context(|| format!("cannot load the bank into {}", path.display()))?;
        Ok((
            bank,
            LoadReport {
                reused: false,
                rows,
                elapsed: started.elapsed(),
            },
        ))
    }

    /// Opens an existing bank for `perflab check bank`.
    pub(crate) fn existing(path: &Path) -> anyhow::Result<Self> {
        if !path.exists() {
            anyhow::bail!(crate::error::PlanError::new(format!(
                "{} does not exist; run `perflab run bank --target sqlite:{}` first",
                path.display(),
                path.display()
            )));
        }
        // Looked at read-only: a file that holds no bank (empty, another
        // database, not a database) is left exactly as it was.
        let not_a_bank = |why: String| {
            crate::error::PlanError::new(format!(
                "{} {why}; give --target sqlite:PATH of a file a bank run loaded (`perflab run bank --target sqlite:PATH`)",
                path.display()
            ))
        };
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| not_a_bank(format!("cannot be opened ({e})")))?;
        let found = catalog(&conn).map_err(|e| {
            not_a_bank(format!("is not a SQLite database perflab can read ({e:#})"))
        })?;
        let scale = if found.owns_all(&TABLES) {
            loaded_scale(&conn)
                .map_err(|e| not_a_bank(format!("holds a bank perflab cannot read ({e:#})")))?
        } else {
            None
        };
        drop(conn);
        if scale.is_none() {
            anyhow::bail!(crate::error::PlanError::new(format!(
                "{} holds no perflab bank; run `perflab run bank --target sqlite:{}` first",
                path.display(),
                path.display()
            )));
        }
        Ok(SqliteBank {
            path: path.to_path_buf(),
            clock: Arc::new(super::txn::clock()),
        })
    }
}

/// Opens a connection with the settings every bank connection uses.
fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

/// What the database's catalog says of the bank's tables and perflab's
/// ledger (SQLite's names are case-insensitive, as the ledger's are read).
fn catalog(conn: &Connection) -> rusqlite::Result<Catalog> {
    let mut present = Vec::new();
    for table in TABLES.all() {
        let exists: bool = conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1 COLLATE NOCASE",
            [table],
            |r| r.get(0),
        )?;
        if exists {
            present.push(table);
        }
    }
    let columns: Vec<String> = conn
        .prepare(&format!("PRAGMA table_info({LEDGER})"))?
        .query_map([], |r| r.get::<_, String>(1))?
        .collect::<rusqlite::Result<_>>()?;
    let mut found = Catalog::found(present, columns);
    if found.ledger_is_ours() {
        found.listed = conn
            .prepare(&format!(
                "SELECT table_name FROM {LEDGER} WHERE made_by = ?1"
            ))?
            .query_map([MADE_BY], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<_>>()?;
    }
    Ok(found)
}

/// The scale of the bank in this database, if one is loaded; read only
/// once the catalog says every table is perflab's.
fn loaded_scale(conn: &Connection) -> anyhow::Result<Option<i64>> {
    let scale = conn
        .query_row(
            &format!("SELECT scale FROM {META_TABLE} WHERE schema_version = ?1"),
            [SCHEMA_VERSION],
            |r| r.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            other => Err(other),
        })?;
    Ok(scale)
}

/// Makes the bank's tables afresh and fills them: rows padded to TPC-B's
/// 100 bytes (50 for history), primary keys as the rowid so no index is
/// built after the data. SQLite has one writer, so the load is one
/// transaction generated inside SQLite rather than parallel inserts; the
/// catalog is read again inside it, every table is in perflab's ledger
/// before it is made, and only tables the ledger lists are dropped.
fn load(conn: &mut Connection, scale: u32, location: &str) -> anyhow::Result<u64> {
    let scale = i64::from(scale);
    let accounts = scale * ACCOUNTS_PER_BRANCH;
    let tellers = scale * TELLERS_PER_BRANCH;
    let teller_balance = INITIAL_BALANCE * ACCOUNTS_PER_BRANCH / TELLERS_PER_BRANCH;
    let branch_balance = INITIAL_BALANCE * ACCOUNTS_PER_BRANCH;
    let t = TABLES;
    conn.pragma_update(None, "synchronous", "OFF")?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let ours = catalog(&tx)?.replaceable(&t, location)?;
    tx.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {LEDGER} (table_name TEXT PRIMARY KEY COLLATE NOCASE, made_at TEXT NOT NULL, made_by TEXT NOT NULL)"
    ))?;
    for table in t.all() {
        tx.execute(
            &format!("INSERT OR IGNORE INTO {LEDGER} VALUES (?1, datetime('now'), ?2)"),
            [table, MADE_BY],
        )?;
    }
    for table in ours {
        tx.execute_batch(&format!("DROP TABLE {table}"))?;
    }
    tx.execute_batch(&format!(
        "CREATE TABLE {b} (bid INTEGER PRIMARY KEY, bbalance INTEGER NOT NULL, filler TEXT NOT NULL);
         CREATE TABLE {te} (tid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, tbalance INTEGER NOT NULL, filler TEXT NOT NULL);
         CREATE TABLE {a} (aid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, abalance INTEGER NOT NULL, filler TEXT NOT NULL);
         CREATE TABLE {h} (tid INTEGER NOT NULL, bid INTEGER NOT NULL, aid INTEGER NOT NULL, delta INTEGER NOT NULL, mtime INTEGER NOT NULL, filler TEXT NOT NULL);
         CREATE TABLE {META_TABLE} (scale INTEGER NOT NULL, initial_total INTEGER NOT NULL, loaded_at TEXT NOT NULL, schema_version INTEGER NOT NULL);",
        b = t.branches,
        te = t.tellers,
        a = t.accounts,
        h = t.history,
    ))?;
    // Three 8-byte integers + 76 bytes of filler = 100 bytes per row.
    let filler = " ".repeat(76);
    let series = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)";
    tx.execute(
        &format!(
            "{series} INSERT INTO {} SELECT i, ?2, ?3 FROM n",
            t.branches
        ),
        params![scale, branch_balance, filler],
    )?;
    tx.execute(
        &format!(
            "{series} INSERT INTO {} SELECT i, (i - 1) / ?4 + 1, ?2, ?3 FROM n",
            t.tellers
        ),
        params![tellers, teller_balance, filler, TELLERS_PER_BRANCH],
    )?;
    tx.execute(
        &format!(
            "{series} INSERT INTO {} SELECT i, (i - 1) / ?4 + 1, ?2, ?3 FROM n",
            t.accounts
        ),
        params![accounts, INITIAL_BALANCE, filler, ACCOUNTS_PER_BRANCH],
    )?;
    tx.execute(
        &format!("INSERT INTO {META_TABLE} VALUES (?1, ?2, datetime('now'), ?3)"),
        params![scale, accounts * INITIAL_BALANCE, SCHEMA_VERSION],
    )?;
    tx.commit()?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Statistics for perflab's tables only: a bare ANALYZE would rewrite
    // the statistics of every other table in the database too.
    conn.execute_batch(&format!(
        "PRAGMA wal_checkpoint(TRUNCATE); ANALYZE {}; ANALYZE {}; ANALYZE {};",
        t.branches, t.tellers, t.accounts
    ))?;
    Ok(u64::try_from(scale + tellers + accounts).unwrap_or(0))
}

/// Reads the check's figures in one read transaction (a consistent snapshot).
fn read_figures(conn: &Connection) -> anyhow::Result<BankFigures> {
    conn.busy_timeout(Duration::from_secs(30))?;
    conn.execute_batch("BEGIN")?;
    let result = (|| -> rusqlite::Result<BankFigures> {
        let (scale, initial_total) = conn.query_row(
            &format!("SELECT scale, initial_total FROM {META_TABLE}"),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let (accounts, accounts_sum, negative_accounts, min_balance) = conn.query_row(
            &format!("SELECT count(*), coalesce(sum(abalance), 0), coalesce(sum(abalance < 0), 0), coalesce(min(abalance), 0) FROM {}", TABLES.accounts),
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        let (tellers, tellers_sum) = conn.query_row(
            &format!(
                "SELECT count(*), coalesce(sum(tbalance), 0) FROM {}",
                TABLES.tellers
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let (branches, branches_sum) = conn.query_row(
            &format!(
                "SELECT count(*), coalesce(sum(bbalance), 0) FROM {}",
                TABLES.branches
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let (history_rows, history_sum) = conn.query_row(
            &format!(
                "SELECT count(*), coalesce(sum(delta), 0) FROM {}",
                TABLES.history
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(BankFigures {
            scale,
            initial_total,
            branches,
            tellers,
            accounts,
            accounts_sum,
            tellers_sum,
            branches_sum,
            history_rows,
            history_sum,
            negative_accounts,
            min_balance,
        })
    })();
    let _ = conn.execute_batch("COMMIT");
    Ok(result?)
}

impl BankBackend for SqliteBank {
    type Conn = SqliteConn;

    async fn connect(&self, seat: Seat) -> anyhow::Result<SqliteConn> {
        let conn =
            open(&self.path).with_context(|| format!("cannot open {}", self.path.display()))?;
        // perflab retries busy itself, so that every retry is counted.
        conn.busy_timeout(Duration::ZERO)?;
        let path = self.path.display().to_string();
        let clock = Arc::clone(&self.clock);
        // A connection's statements stay on the thread that prepared them.
        let conn = BlockingConn::open(seat, "perflab-sqlite", move || {
            let conn = BankConnection::try_new(conn, |c| Prepared::new(c, clock)).map_err(|e| {
                anyhow::anyhow!("cannot prepare the bank's statements in {path}: {e}")
            })?;
            Ok(Runner {
                conn,
                rng: SmallRng::from_entropy(),
            })
        })?;
        Ok(SqliteConn(conn))
    }

    fn clock(&self) -> &Arc<StatementClock> {
        &self.clock
    }

    fn figures(&self) -> anyhow::Result<BankFigures> {
        let conn = open(&self.path)?;
        cut_at_signal(&conn, "checking the bank", || read_figures(&conn))
    }
}

/// Runs `work` on `conn`, its statements interrupted by SQLite at the
/// first signal (`util::InterruptWatch`): a long read of a large bank
/// ends then as [`crate::util::Interrupted`] (`while_doing`).
fn cut_at_signal<T>(
    conn: &Connection,
    while_doing: &'static str,
    work: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let handle = conn.get_interrupt_handle();
    let watch = crate::util::InterruptWatch::start(move || handle.interrupt());
    let done = work();
    if done.is_err() {
        watch.cut(while_doing)?;
    }
    done
}

/// A user's connection: its statements and the stream its retries'
/// waits are drawn from, blocking ([`BlockingConn`]).
pub(crate) struct SqliteConn(BlockingConn<Runner>);

/// A connection on the thread that calls it.
pub(crate) struct Runner {
    conn: BankConnection,
    rng: SmallRng,
}

impl Blocking for Runner {
    type Op = BankOp;

    fn run(&mut self, op: BankOp, deadline: Instant) -> Outcome {
        run_with_retries(&mut self.conn, op, deadline, &mut self.rng)
    }
}

impl BankConn for SqliteConn {
    async fn execute(&mut self, op: BankOp) -> Outcome {
        self.0.execute(op).await
    }
}

fn run_with_retries(
    conn: &mut BankConnection,
    op: BankOp,
    deadline: Instant,
    rng: &mut impl Rng,
) -> Outcome {
    let mut retries = 0u32;
    let mut backoff = FIRST_BACKOFF;
    loop {
        match conn.with_dependent_mut(|_, prepared| attempt(prepared, op)) {
            Ok(result) => {
                return Outcome {
                    result,
                    bytes: 0,
                    retries,
                }
            }
            Err(e) if crate::sut::sqlite::is_busy(&e) => {
                let wait = backoff.mul_f64(rng.gen::<f64>());
                if Instant::now() + wait >= deadline {
                    return Outcome {
                        result: OpResult::Error(ErrorKind::Busy),
                        bytes: 0,
                        retries,
                    };
                }
                retries += 1;
                std::thread::sleep(wait);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(e) => {
                return Outcome {
                    result: OpResult::Error(crate::sut::sqlite::error_kind(&e)),
                    bytes: 0,
                    retries,
                }
            }
        }
    }
}

/// One try of one transaction. SQLite's calls block and never pend, so the
/// shared transaction logic's future completes on its first poll.
fn attempt(prepared: &mut Prepared<'_>, op: BankOp) -> rusqlite::Result<OpResult> {
    let result = txn::run(prepared, op)
        .now_or_never()
        .unwrap_or(Err(rusqlite::Error::InvalidQuery));
    if result.is_err() {
        // Whatever failed, leave no transaction open for the next try.
        let _ = prepared.rollback.execute([]);
    }
    result
}

/// History rows: 4 integers, the time in ms and 10 bytes of filler reach
/// TPC-B's 50 bytes.
fn history_insert() -> String {
    format!(
        "INSERT INTO {} (tid, bid, aid, delta, mtime, filler) \
         VALUES (?1, ?2, ?3, ?4, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), '          ')",
        TABLES.history
    )
}

/// The bank's statements on one connection, each prepared once.
pub(crate) struct Prepared<'c> {
    begin: Statement<'c>,
    commit: Statement<'c>,
    rollback: Statement<'c>,
    credit: Statement<'c>,
    debit_if_covered: Statement<'c>,
    balance: Statement<'c>,
    teller: Statement<'c>,
    branch: Statement<'c>,
    history: Statement<'c>,
    clock: Arc<StatementClock>,
}

impl<'c> Prepared<'c> {
    fn new(conn: &'c Connection, clock: Arc<StatementClock>) -> rusqlite::Result<Self> {
        let a = TABLES.accounts;
        Ok(Prepared {
            clock,
            // Take the write lock up front: a deferred transaction that must
            // upgrade later can only fail, never wait, under WAL.
            begin: conn.prepare("BEGIN IMMEDIATE")?,
            commit: conn.prepare("COMMIT")?,
            rollback: conn.prepare("ROLLBACK")?,
            credit: conn.prepare(&format!(
                "UPDATE {a} SET abalance = abalance + ?1 WHERE aid = ?2"
            ))?,
            debit_if_covered: conn.prepare(&format!(
                "UPDATE {a} SET abalance = abalance - ?1 WHERE aid = ?2 AND abalance >= ?1"
            ))?,
            balance: conn.prepare(&format!("SELECT abalance FROM {a} WHERE aid = ?1"))?,
            teller: conn.prepare(&format!(
                "UPDATE {} SET tbalance = tbalance + ?1 WHERE tid = ?2",
                TABLES.tellers
            ))?,
            branch: conn.prepare(&format!(
                "UPDATE {} SET bbalance = bbalance + ?1 WHERE bid = ?2",
                TABLES.branches
            ))?,
            history: conn.prepare(&history_insert())?,
        })
    }
}

self_cell::self_cell!(
    /// A connection and its prepared statements, kept together.
    pub(crate) struct BankConnection {
        owner: Connection,
        #[not_covariant]
        dependent: Prepared,
    }
);

impl txn::Statements for Prepared<'_> {
    type Error = rusqlite::Error;

    fn clock(&self) -> Option<&StatementClock> {
        Some(&self.clock)
    }

    async fn begin(&mut self) -> rusqlite::Result<()> {
        self.begin.execute([]).map(drop)
    }

    async fn commit(&mut self) -> rusqlite::Result<()> {
        self.commit.execute([]).map(drop)
    }

    async fn rollback(&mut self) -> rusqlite::Result<()> {
        self.rollback.execute([]).map(drop)
    }

    async fn credit(&mut self, aid: i64, amount: i64) -> rusqlite::Result<()> {
        self.credit.execute(params![amount, aid]).map(drop)
    }

    async fn debit_if_covered(&mut self, aid: i64, amount: i64) -> rusqlite::Result<bool> {
        Ok(self.debit_if_covered.execute(params![amount, aid])? == 1)
    }

    async fn balance(&mut self, aid: i64) -> rusqlite::Result<()> {
        self.balance
            .query_row([aid], |r| r.get::<_, i64>(0))
            .map(drop)
    }

    async fn teller(&mut self, tid: i64, delta: i64) -> rusqlite::Result<()> {
        self.teller.execute(params![delta, tid]).map(drop)
    }

    async fn branch(&mut self, bid: i64, delta: i64) -> rusqlite::Result<()> {
        self.branch.execute(params![delta, bid]).map(drop)
    }

    async fn history(&mut self, tid: i64, bid: i64, aid: i64, delta: i64) -> rusqlite::Result<()> {
        self.history
            .execute(params![tid, bid, aid, delta])
            .map(drop)
    }
}
