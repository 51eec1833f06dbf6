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

use super::literal::{write_statement, Dialect};
use super::program::{self, Exec, Fail, Scripts, Turn, GSET_ROWS};
use super::script::vars::Vars;
use super::script::Statement;
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
    /// How its socket is driven (held or polled: each operation allowed
    /// its timeout).
    pub(crate) drive: crate::sut::stream::Drive,
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
    let wire = wire
        .drive(driver.drive)
        .with_context(|| format!("cannot drive the connection to {}", target.display))?;
    Ok(Conn {
        wire,
        prepared,
        row: Vec::new(),
        sql: String::new(),
    })
}

impl DbClient for PgScripts {
    type Conn = Conn;
    type Error = Fail<WireError>;
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

    async fn run(conn: &mut Conn, turn: &mut Turn) -> Result<OpResult, Fail<WireError>> {
        conn.wire.discard();
        turn.run(conn).await
    }

    async fn rollback(conn: &mut Conn) -> Result<(), Fail<WireError>> {
        conn.wire.discard();
        conn.wire
            .query_keeping("ROLLBACK", None)
            .await
            .map(drop)
            .map_err(Fail::Db)
    }

    fn classify(e: &Fail<WireError>) -> Failure {
        match e {
            Fail::Db(e) => Failure::of_pg(e),
            Fail::Script(code) => Failure::sql(code),
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
        write_statement(&mut self.sql, statement, vars, Dialect::Postgres).map_err(Fail::Script)?;
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
        program::keep_row(vars, &prepared.capture, columns_of(&self.row));
        Ok(())
    }

    async fn sleep(&mut self, for_: Duration) {
        crate::util::poller::sleep(for_).await;
    }
}
