//! A user's scripts on PostgreSQL, on perflab's own connection. Each
//! statement runs in its own round trip as one simple query, its variables
//! written into the text as literals (a number as itself, a text as a
//! quoted string, never as SQL), as a client running the script in its
//! default mode does: the server parses and plans it each time, and infers
//! every value's type from the literal. Each statement is also prepared
//! once per connection, to refuse a syntax error or a missing table before
//! any load and to learn the columns a `\gset` keeps.
//! Reconnection, the rollback of an abandoned transaction and retries of
//! serialisation failures and deadlocks are the shared server connection's
//! ([`ServerConn`]).

use super::program::{self, Exec, Fail, Scripts, State, GSET_ROWS};
use super::script::vars::{Param, Vars};
use super::script::{Piece, Statement};
use crate::measure::OpResult;
use crate::sut::postgres::wire::{columns_of, Wire, WireError};
use crate::sut::postgres::PgTarget;
use crate::workload::server_conn::{DbClient, Failure, ServerConn};
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;

/// How to reach PostgreSQL for one user.
pub(crate) struct PgScripts {
    pub(crate) target: PgTarget,
    pub(crate) scripts: Arc<Scripts>,
    /// Hold the socket (blocking calls), each operation allowed this long:
    /// for a user alone on its worker thread.
    pub(crate) held: Option<Duration>,
}

/// A user's connection.
pub(crate) type PgConn = ServerConn<PgScripts>;

/// The variable each column of one statement sets (`\gset`).
struct Prepared {
    capture: Vec<Option<usize>>,
}

/// Whether a statement failed to prepare only because its parameters had
/// no type to infer from (an operator on two of them): as literals, it runs.
fn untyped_only(e: &anyhow::Error) -> bool {
    let text = e.to_string();
    ["(42725:", "(42804:", "(42P18:", "(42883:"]
        .iter()
        .any(|code| text.contains(code))
}

/// An open connection and its statements, by script and statement.
pub(crate) struct Conn {
    wire: Wire,
    prepared: Vec<Vec<Prepared>>,
    /// The first row of a `\gset` statement's reply.
    row: Vec<u8>,
    /// The statement being sent, its variables written in.
    sql: String,
}

/// One operation: which script, and the session's state it runs with.
pub(crate) struct Turn {
    pub(crate) script: usize,
    pub(crate) state: State,
    pub(crate) scripts: Arc<Scripts>,
}

/// Why a try failed.
#[derive(Debug)]
pub(crate) enum ScriptError {
    Db(WireError),
    Script(&'static str),
}

/// Prepares every statement of every script on a new connection; a
/// statement the server refuses is one line naming the script and line.
pub(crate) async fn connect(driver: &PgScripts) -> anyhow::Result<Conn> {
    let target = &driver.target;
    let mut wire = Wire::connect(target).await?;
    let mut prepared = Vec::new();
    let names = driver.scripts.slots.names();
    for (i, script) in driver.scripts.scripts.iter().enumerate() {
        let mut statements = Vec::new();
        for (j, st) in script.statements.iter().enumerate() {
            let sql = st.render(|n| format!("${n}"));
            let name = format!("perflab_s{i}_{j}");
            let columns = match wire
                .prepare_text(target, &name, &sql, st.params.len())
                .await
            {
                Ok(statement) => statement.columns,
                Err(e) if st.gset.is_none() && untyped_only(&e) => Vec::new(),
                Err(e) => {
                    return Err(e.context(format!(
                        "{}:{}: `{}`",
                        script.name,
                        st.line,
                        st.shown(&names)
                    )))
                }
            };
            let capture = driver.scripts.captures(i, j, &columns);
            statements.push(Prepared { capture });
        }
        prepared.push(statements);
    }
    let wire = match driver.held {
        Some(timeout) => wire
            .hold(timeout)
            .with_context(|| format!("cannot hold the connection to {}", target.display))?,
        None => wire,
    };
    Ok(Conn {
        wire,
        prepared,
        row: Vec::new(),
        sql: String::new(),
    })
}

impl DbClient for PgScripts {
    type Conn = Conn;
    type Error = ScriptError;
    type Op = Turn;

    async fn connect(&self) -> anyhow::Result<Conn> {
        connect(self).await
    }

    fn begin(conn: &mut Conn) {
        conn.wire.begin_operation();
    }

    fn is_closed(conn: &Conn) -> bool {
        conn.wire.is_broken()
    }

    async fn run(conn: &mut Conn, turn: &mut Turn) -> Result<OpResult, ScriptError> {
        conn.wire.discard();
        match program::run(conn, &turn.scripts, turn.script, &mut turn.state).await {
            Ok(()) => Ok(OpResult::Ok),
            Err(Fail::Db(e)) => Err(ScriptError::Db(e)),
            Err(Fail::Script(code)) => Err(ScriptError::Script(code)),
        }
    }

    async fn rollback(conn: &mut Conn) -> Result<(), ScriptError> {
        conn.wire.discard();
        conn.wire
            .query_keeping("ROLLBACK", None)
            .await
            .map(drop)
            .map_err(ScriptError::Db)
    }

    fn classify(e: &ScriptError) -> Failure {
        match e {
            ScriptError::Db(e) => Failure::of_pg(e),
            ScriptError::Script(code) => Failure::sql(code),
        }
    }

    fn opens_transaction(_turn: &Turn) -> bool {
        true
    }
}

impl Exec for Conn {
    type Error = WireError;

    async fn exec(
        &mut self,
        script: usize,
        stmt: usize,
        statement: &Statement,
        vars: &mut Vars,
    ) -> Result<(), Fail<WireError>> {
        program::check_params(statement, vars)?;
        let Some(prepared) = self.prepared.get(script).and_then(|s| s.get(stmt)) else {
            return Ok(());
        };
        self.sql.clear();
        let mut params = program::params(statement, vars);
        for piece in &statement.pieces {
            match piece {
                Piece::Text(t) => self.sql.push_str(t),
                Piece::Param => literal(&mut self.sql, params.next().unwrap_or(Param::Null)),
            }
        }
        drop(params);
        if statement.gset.is_none() {
            return self
                .wire
                .query_keeping(&self.sql, None)
                .await
                .map(drop)
                .map_err(Fail::Db);
        }
        let reply = self
            .wire
            .query_keeping(&self.sql, Some(&mut self.row))
            .await
            .map_err(Fail::Db)?;
        if reply.data_rows != 1 {
            return Err(Fail::Script(GSET_ROWS));
        }
        for (column, slot) in columns_of(&self.row).zip(&prepared.capture) {
            let Some(slot) = *slot else { continue };
            match column {
                None => vars.set_null(slot),
                Some(bytes) => vars.set_text(slot, &String::from_utf8_lossy(bytes)),
            }
        }
        Ok(())
    }

    async fn sleep(&mut self, for_: Duration) {
        tokio::time::sleep(for_).await;
    }
}

/// Writes a variable's value into SQL as a literal: a number as itself
/// (in parentheses when negative, so that `-:x` never becomes a comment),
/// a text holding a number as that number, any other text as a quoted
/// string (its quotes doubled, NULs dropped): never as SQL of its own.
fn literal(out: &mut String, param: Param<'_>) {
    use std::fmt::Write as _;
    let _ = match param {
        Param::Null => out.write_str("NULL"),
        Param::Bool(b) => out.write_str(if b { "true" } else { "false" }),
        Param::Int(i) if i < 0 => write!(out, "({i})"),
        Param::Int(i) => write!(out, "{i}"),
        Param::Double(d) if d.is_nan() => out.write_str("'NaN'::float8"),
        Param::Double(d) if d.is_infinite() => out.write_str(if d > 0.0 {
            "'Infinity'::float8"
        } else {
            "'-Infinity'::float8"
        }),
        Param::Double(d) if d < 0.0 => write!(out, "({d:?})"),
        Param::Double(d) => write!(out, "{d:?}"),
        Param::Text(t) => {
            let trimmed = t.trim();
            if let Ok(i) = trimmed.parse::<i64>() {
                return literal(out, Param::Int(i));
            }
            if let Ok(d) = trimmed.parse::<f64>() {
                if d.is_finite()
                    && trimmed
                        .bytes()
                        .all(|b| b.is_ascii_digit() || b".-+eE".contains(&b))
                {
                    return literal(out, Param::Double(d));
                }
            }
            out.push('\'');
            for c in t.chars().filter(|c| *c != '\0') {
                if c == '\'' {
                    out.push('\'');
                }
                out.push(c);
            }
            out.push('\'');
            Ok(())
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_written_as_a_literal_never_as_sql() {
        for (param, want) in [
            (Param::Int(5), "5"),
            (Param::Int(-5), "(-5)"),
            (Param::Double(1.5), "1.5"),
            (Param::Double(-0.25), "(-0.25)"),
            (Param::Double(f64::INFINITY), "'Infinity'::float8"),
            (Param::Null, "NULL"),
            (Param::Bool(true), "true"),
            (Param::Text(" 42 "), "42"),
            (Param::Text("9.99"), "9.99"),
            (Param::Text("-3"), "(-3)"),
            (Param::Text("it's"), "'it''s'"),
            (Param::Text("1; DROP TABLE x; --"), "'1; DROP TABLE x; --'"),
            (Param::Text("inf"), "'inf'"),
            (Param::Text("a\0b"), "'ab'"),
        ] {
            let mut out = String::new();
            literal(&mut out, param);
            assert_eq!(out, want, "{param:?}");
        }
    }
}
