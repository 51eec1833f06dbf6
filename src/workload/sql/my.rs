//! A user's scripts on MySQL or MariaDB, on perflab's own session
//! (`sut::mysql::wire`). Each statement runs in its own round trip as one
//! text query (COM_QUERY), its variables written in as literals (see
//! [`super::literal`]): the server parses it each time and takes every
//! value's type from the literal. Each statement is also prepared once
//! per connection and closed at once, to refuse a syntax error or a
//! missing table before any load and to learn the columns a `\gset`
//! keeps; a statement the server cannot prepare (1295) but may run as
//! text is let through unless it keeps columns. A reply may hold up to
//! [`MAX_SCRIPT_REPLY`]; past it the operation fails as `reply-too-large`
//! and the connection is made again. Reconnection, the rollback of an
//! abandoned transaction and retries of deadlocks and lock-wait timeouts
//! are the shared server connection's ([`ServerConn`]).

use super::literal::{write_statement, Dialect};
use super::program::{self, Exec, Fail, Scripts, Turn, GSET_ROWS};
use super::script::vars::Vars;
use super::script::Statement;
use crate::error::PlanError;
use crate::measure::OpResult;
use crate::sut::mysql::wire::{row_values, Command, MyError, MyWire, MAX_SCRIPT_REPLY};
use crate::sut::mysql::MyTarget;
use crate::workload::server_conn::{DbClient, Failure, ServerConn};
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;

/// ER_UNSUPPORTED_PS: the statement cannot be prepared, only run as text.
const UNSUPPORTED_PS: u16 = 1295;

/// How to reach MySQL/MariaDB for one user.
pub(crate) struct MyScripts {
    pub(crate) target: MyTarget,
    pub(crate) scripts: Arc<Scripts>,
    /// How its socket is driven (held or polled: each operation allowed
    /// its timeout).
    pub(crate) drive: crate::sut::stream::Drive,
}

/// A user's connection.
pub(crate) type MyConn = ServerConn<MyScripts>;

/// An open connection and the columns each `\gset` keeps, by script and
/// statement.
pub(crate) struct Conn {
    wire: MyWire,
    rollback: Command,
    captures: Vec<Vec<Vec<Option<usize>>>>,
    /// The first row of a `\gset` statement's reply.
    row: Vec<u8>,
    /// The statement being sent, its variables written in.
    sql: String,
}

/// Prepares every statement of every script on a new connection; a
/// statement the server refuses is one line naming the script and line.
pub(crate) async fn connect(driver: &MyScripts) -> anyhow::Result<Conn> {
    let target = &driver.target;
    let mut wire = MyWire::connect(target).await?;
    wire.accept_replies(MAX_SCRIPT_REPLY);
    let names = driver.scripts.slots.names();
    let mut captures = Vec::new();
    for (i, script) in driver.scripts.scripts.iter().enumerate() {
        let mut statements = Vec::new();
        for (j, st) in script.statements.iter().enumerate() {
            let sql = st.render(|_| "?".to_string());
            let columns = match wire.describe(target, &sql).await? {
                Ok(columns) => columns,
                Err((UNSUPPORTED_PS, _)) if st.gset.is_none() => Vec::new(),
                Err((code, message)) => {
                    return Err(PlanError::new(format!(
                        "{}:{}: `{}`: the server cannot prepare it ({code}: {})",
                        script.name,
                        st.line,
                        st.shown(&names),
                        crate::util::one_line(&message)
                    ))
                    .into())
                }
            };
            statements.push(driver.scripts.captures(i, j, &columns));
        }
        captures.push(statements);
    }
    let wire = wire
        .drive(driver.drive)
        .with_context(|| format!("cannot drive the connection to {}", target.display))?;
    Ok(Conn {
        wire,
        rollback: Command::query("ROLLBACK"),
        captures,
        row: Vec::new(),
        sql: String::new(),
    })
}

impl DbClient for MyScripts {
    type Conn = Conn;
    type Error = Fail<MyError>;
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

    async fn run(conn: &mut Conn, turn: &mut Turn) -> Result<OpResult, Fail<MyError>> {
        turn.run(conn).await
    }

    async fn rollback(conn: &mut Conn) -> Result<(), Fail<MyError>> {
        conn.wire
            .run(&conn.rollback, &[])
            .await
            .map(drop)
            .map_err(Fail::Db)
    }

    fn classify(e: &Fail<MyError>) -> Failure {
        match e {
            Fail::Db(e) => Failure::of_my(e),
            Fail::Script(code) => Failure::sql(code),
        }
    }

    fn opens_transaction(_turn: &Turn) -> bool {
        true
    }
}

impl Exec for Conn {
    type Error = MyError;

    async fn exec(
        &mut self,
        script: usize,
        stmt: usize,
        statement: &Statement,
        vars: &mut Vars,
    ) -> Result<(), Fail<MyError>> {
        program::check_params(statement, vars)?;
        let Some(capture) = self.captures.get(script).and_then(|s| s.get(stmt)) else {
            return Ok(());
        };
        write_statement(&mut self.sql, statement, vars, Dialect::Mysql).map_err(Fail::Script)?;
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
        if reply.rows != 1 {
            return Err(Fail::Script(GSET_ROWS));
        }
        program::keep_row(vars, capture, row_values(&self.row));
        Ok(())
    }

    async fn sleep(&mut self, for_: Duration) {
        crate::util::poller::sleep(for_).await;
    }
}
