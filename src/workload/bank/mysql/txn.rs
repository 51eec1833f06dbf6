//! One user's MySQL/MariaDB connection and the bank's transactions on it.

use super::super::mix::Isolation;
use super::super::ops::BankOp;
use super::super::server::{Driver, Failure, ServerConn};
use super::super::txn;
use super::super::Tables;
use crate::measure::OpResult;
use crate::target::mysql::MyTarget;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Statement};

/// ER_LOCK_DEADLOCK and ER_LOCK_WAIT_TIMEOUT: the transaction is worth retrying.
const RETRYABLE: [u16; 2] = [1213, 1205];

pub struct Statements {
    credit: Statement,
    debit_if_covered: Statement,
    balance: Statement,
    teller: Statement,
    branch: Statement,
    history: Statement,
}

/// How to reach MySQL/MariaDB for one user.
pub struct MyDriver {
    pub target: MyTarget,
    pub tables: Tables,
    pub isolation: Isolation,
}

/// A user's MySQL/MariaDB connection.
pub type MyConn = ServerConn<MyDriver>;

async fn connect(
    target: &MyTarget,
    t: Tables,
    isolation: Isolation,
) -> anyhow::Result<(Conn, Statements)> {
    let mut conn = crate::target::mysql::connect(target).await?;
    conn.query_drop(format!(
        "SET SESSION TRANSACTION ISOLATION LEVEL {}",
        isolation.sql()
    ))
    .await?;
    let statements = Statements {
        credit: conn
            .prep(format!("UPDATE {} SET abalance = abalance + ? WHERE aid = ?", t.accounts))
            .await?,
        debit_if_covered: conn
            .prep(format!(
                "UPDATE {} SET abalance = abalance - ? WHERE aid = ? AND abalance >= ?",
                t.accounts
            ))
            .await?,
        balance: conn
            .prep(format!("SELECT abalance FROM {} WHERE aid = ?", t.accounts))
            .await?,
        teller: conn
            .prep(format!("UPDATE {} SET tbalance = tbalance + ? WHERE tid = ?", t.tellers))
            .await?,
        branch: conn
            .prep(format!("UPDATE {} SET bbalance = bbalance + ? WHERE bid = ?", t.branches))
            .await?,
        history: conn
            .prep(format!(
                "INSERT INTO {} (tid, bid, aid, delta, mtime, filler) VALUES (?, ?, ?, ?, NOW(6), '')",
                t.history
            ))
            .await?,
    };
    Ok((conn, statements))
}

fn classify(e: &mysql_async::Error) -> Failure {
    match e {
        mysql_async::Error::Server(s) if RETRYABLE.contains(&s.code) => Failure::retry(s.code),
        // ER_CONNECTION_KILLED and ER_SERVER_SHUTDOWN: the session is gone.
        mysql_async::Error::Server(s) if s.code == 1927 || s.code == 1053 => Failure::Lost,
        mysql_async::Error::Server(s) => Failure::sql(s.code),
        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => Failure::Lost,
        other => Failure::sql(other),
    }
}

impl Driver for MyDriver {
    type Link = (Conn, Statements);
    type Error = mysql_async::Error;

    async fn connect(&self) -> anyhow::Result<Self::Link> {
        connect(&self.target, self.tables, self.isolation).await
    }

    fn is_closed(_link: &Self::Link) -> bool {
        // mysql_async reports a lost connection as an I/O error on use.
        false
    }

    async fn run(link: &mut Self::Link, op: BankOp) -> Result<OpResult, Self::Error> {
        let (conn, st) = link;
        txn::run(&mut MyStatements { conn, st }, op).await
    }

    async fn rollback(link: &mut Self::Link) -> bool {
        link.0.query_drop("ROLLBACK").await.is_ok()
    }

    fn classify(e: &Self::Error) -> Failure {
        classify(e)
    }
}

/// One connection's statements, borrowed for one transaction.
struct MyStatements<'a> {
    conn: &'a mut Conn,
    st: &'a Statements,
}

impl txn::Statements for MyStatements<'_> {
    type Error = mysql_async::Error;

    async fn begin(&mut self) -> Result<(), Self::Error> {
        self.conn.query_drop("BEGIN").await
    }

    async fn commit(&mut self) -> Result<(), Self::Error> {
        self.conn.query_drop("COMMIT").await
    }

    async fn rollback(&mut self) -> Result<(), Self::Error> {
        self.conn.query_drop("ROLLBACK").await
    }

    async fn credit(&mut self, aid: i64, amount: i64) -> Result<(), Self::Error> {
        self.conn.exec_drop(&self.st.credit, (amount, aid)).await
    }

    async fn debit_if_covered(&mut self, aid: i64, amount: i64) -> Result<bool, Self::Error> {
        self.conn
            .exec_drop(&self.st.debit_if_covered, (amount, aid, amount))
            .await?;
        Ok(self.conn.affected_rows() == 1)
    }

    async fn balance(&mut self, aid: i64) -> Result<(), Self::Error> {
        let _: Option<i64> = self.conn.exec_first(&self.st.balance, (aid,)).await?;
        Ok(())
    }

    async fn teller(&mut self, tid: i64, delta: i64) -> Result<(), Self::Error> {
        self.conn.exec_drop(&self.st.teller, (delta, tid)).await
    }

    async fn branch(&mut self, bid: i64, delta: i64) -> Result<(), Self::Error> {
        self.conn.exec_drop(&self.st.branch, (delta, bid)).await
    }

    async fn history(
        &mut self,
        tid: i64,
        bid: i64,
        aid: i64,
        delta: i64,
    ) -> Result<(), Self::Error> {
        self.conn
            .exec_drop(&self.st.history, (tid, bid, aid, delta))
            .await
    }
}
