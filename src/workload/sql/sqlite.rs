//! A user's scripts on SQLite, in process. Each statement is prepared once
//! per connection (SQLite's own cache, sized to hold them all) with its
//! variables bound as parameters: SQLite takes any value in any place, so
//! nothing is written into the SQL text. A connection runs where
//! [`BlockingConn`] puts it. `SQLITE_BUSY` (another writer holds the lock)
//! rolls the script back and runs it again from its start, with the same
//! draws, after a backoff, until the operation's deadline; every retry is
//! counted. perflab leaves the database's settings as they are (its
//! journal mode included): the file is the user's.

use super::program::{self, Exec, Fail, Scripts, State, GSET_ROWS};
use super::script::vars::{Param, Vars};
use super::script::Statement;
use crate::measure::{ErrorKind, OpResult, Outcome, SqlCode};
use crate::sut::sqlite::{error_kind, is_busy};
use crate::workload::blocking_conn::Blocking;
use futures_util::FutureExt;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::Connection;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// First backoff after SQLITE_BUSY; doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_micros(50);
const MAX_BACKOFF: Duration = Duration::from_millis(5);

/// Opens the database at `path` for scripts: perflab retries a busy lock
/// itself, so that every retry is counted.
pub(crate) fn open(path: &Path) -> anyhow::Result<Connection> {
    let conn = Connection::open(path)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    conn.busy_timeout(Duration::ZERO)?;
    Ok(conn)
}

/// The scripts' statements, each with placeholders `?N`, by script.
fn rendered(scripts: &Scripts) -> Vec<Vec<String>> {
    scripts
        .scripts
        .iter()
        .map(|s| {
            s.statements
                .iter()
                .map(|st| st.render(|n| format!("?{n}")))
                .collect()
        })
        .collect()
}

/// Prepares every statement once: one that SQLite refuses is one line
/// naming its script and line. Returns the variable each `\gset` column
/// sets, by script and statement.
pub(crate) fn prepare_all(
    conn: &Connection,
    scripts: &Scripts,
    sql: &[Vec<String>],
) -> anyhow::Result<Vec<Vec<Vec<Option<usize>>>>> {
    let names = scripts.slots.names();
    conn.set_prepared_statement_cache_capacity(sql.iter().map(Vec::len).sum::<usize>() + 4);
    let mut captures = Vec::new();
    for (i, (script, texts)) in scripts.scripts.iter().zip(sql).enumerate() {
        let mut per = Vec::new();
        for (j, (st, text)) in script.statements.iter().zip(texts).enumerate() {
            let prepared = conn.prepare_cached(text).map_err(|e| {
                crate::error::PlanError::new(format!(
                    "{}:{}: `{}`: SQLite cannot prepare it ({e})",
                    script.name,
                    st.line,
                    st.shown(&names)
                ))
            })?;
            let columns: Vec<String> = prepared
                .column_names()
                .iter()
                .map(|c| c.to_string())
                .collect();
            per.push(scripts.captures(i, j, &columns));
        }
        captures.push(per);
    }
    Ok(captures)
}

/// One user's connection, its scripts and its state.
pub(crate) struct Runner {
    conn: Connection,
    sql: Vec<Vec<String>>,
    captures: Vec<Vec<Vec<Option<usize>>>>,
    scripts: Arc<Scripts>,
    state: State,
    /// Draws the waits before retries.
    backoff: SmallRng,
}

impl Runner {
    /// Opens `path` and prepares the scripts for virtual user `user`.
    pub(crate) fn new(
        path: &Path,
        scripts: Arc<Scripts>,
        user: u32,
        seed: u64,
    ) -> anyhow::Result<Runner> {
        let conn = open(path)?;
        let sql = rendered(&scripts);
        let captures = prepare_all(&conn, &scripts, &sql)?;
        Ok(Runner {
            conn,
            sql,
            captures,
            state: State::new(scripts.vars_for(user), seed),
            scripts,
            backoff: SmallRng::seed_from_u64(seed ^ 0x5eed),
        })
    }
}

impl Blocking for Runner {
    type Op = usize;

    fn run(&mut self, script: usize, deadline: Instant) -> Outcome {
        self.state.mark();
        let mut retries = 0u32;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let mut exec = SqliteExec {
                conn: &self.conn,
                sql: &self.sql,
                captures: &self.captures,
            };
            // SQLite's calls block and never pend: the run completes on
            // its first poll.
            let done = program::run(&mut exec, &self.scripts, script, &mut self.state)
                .now_or_never()
                .unwrap_or(Err(Fail::Script("script-pending")));
            let failure = match done {
                Ok(()) => {
                    return Outcome {
                        result: OpResult::Ok,
                        bytes: 0,
                        retries,
                    }
                }
                Err(failure) => failure,
            };
            if !self.conn.is_autocommit() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
            let kind = match failure {
                Fail::Db(e) if is_busy(&e) => {
                    let wait = backoff.mul_f64(self.backoff.gen::<f64>());
                    if Instant::now() + wait < deadline {
                        retries += 1;
                        std::thread::sleep(wait);
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                    ErrorKind::Busy
                }
                Fail::Db(e) => error_kind(&e),
                Fail::Script(code) => ErrorKind::Sql(SqlCode::of(code)),
            };
            return Outcome {
                result: OpResult::Error(kind),
                bytes: 0,
                retries,
            };
        }
    }
}

/// A connection's statements, borrowed for one try.
struct SqliteExec<'a> {
    conn: &'a Connection,
    sql: &'a [Vec<String>],
    captures: &'a [Vec<Vec<Option<usize>>>],
}

impl Exec for SqliteExec<'_> {
    type Error = rusqlite::Error;

    async fn exec(
        &mut self,
        script: usize,
        stmt: usize,
        statement: &Statement,
        vars: &mut Vars,
    ) -> Result<(), Fail<rusqlite::Error>> {
        program::check_params(statement, vars)?;
        let (Some(text), Some(capture)) = (
            self.sql.get(script).and_then(|s| s.get(stmt)),
            self.captures.get(script).and_then(|s| s.get(stmt)),
        ) else {
            return Ok(());
        };
        let mut prepared = self.conn.prepare_cached(text).map_err(Fail::Db)?;
        for (i, param) in program::params(statement, vars).enumerate() {
            prepared
                .raw_bind_parameter(i + 1, bound(param))
                .map_err(Fail::Db)?;
        }
        let mut rows = prepared.raw_query();
        let mut seen = 0u64;
        while let Some(row) = rows.next().map_err(Fail::Db)? {
            seen += 1;
            if statement.gset.is_some() && seen == 1 {
                for (i, slot) in capture.iter().enumerate() {
                    let Some(slot) = *slot else { continue };
                    match row.get_ref(i).map_err(Fail::Db)? {
                        ValueRef::Null => vars.set_null(slot),
                        ValueRef::Integer(n) => vars.set(slot, super::script::expr::Val::Int(n)),
                        ValueRef::Real(d) => vars.set(slot, super::script::expr::Val::Double(d)),
                        ValueRef::Text(t) | ValueRef::Blob(t) => {
                            vars.set_text(slot, &String::from_utf8_lossy(t));
                        }
                    }
                }
            }
        }
        if statement.gset.is_some() && seen != 1 {
            return Err(Fail::Script(GSET_ROWS));
        }
        Ok(())
    }

    async fn sleep(&mut self, for_: Duration) {
        std::thread::sleep(for_);
    }
}

/// A variable's value as SQLite binds it.
fn bound(param: Param<'_>) -> ToSqlOutput<'_> {
    match param {
        Param::Null => ToSqlOutput::Owned(Value::Null),
        Param::Bool(b) => ToSqlOutput::Owned(Value::Integer(i64::from(b))),
        Param::Int(i) => ToSqlOutput::Owned(Value::Integer(i)),
        Param::Double(d) => ToSqlOutput::Owned(Value::Real(d)),
        Param::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
    }
}
