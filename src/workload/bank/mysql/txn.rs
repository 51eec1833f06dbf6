//! One user's MySQL/MariaDB connection and the bank's transactions on it.

use super::super::ops::BankOp;
use super::super::server::{Driver, Failure, ServerConn};
use super::super::Tables;
use super::MyTarget;
use crate::measure::OpResult;
use crate::plan::Isolation;
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
    let mut conn = super::connect(target).await?;
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
        mysql_async::Error::Server(s) if RETRYABLE.contains(&s.code) => {
            Failure::Retry(s.code.to_string())
        }
        mysql_async::Error::Server(s) => Failure::Sql(s.code.to_string()),
        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => Failure::Lost,
        other => Failure::Sql(other.to_string()),
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
        let (conn, statements) = link;
        run(conn, statements, op).await
    }

    async fn rollback(link: &mut Self::Link) -> bool {
        link.0.query_drop("ROLLBACK").await.is_ok()
    }

    fn classify(e: &Self::Error) -> Failure {
        classify(e)
    }
}

/// One try of one transaction.
async fn run(c: &mut Conn, st: &Statements, op: BankOp) -> Result<OpResult, mysql_async::Error> {
    if let BankOp::Balance { aid } = op {
        let _: Option<i64> = c.exec_first(&st.balance, (aid,)).await?;
        return Ok(OpResult::Ok);
    }
    c.query_drop("BEGIN").await?;
    match op {
        BankOp::Balance { .. } => {}
        BankOp::Tpcb {
            aid,
            tid,
            bid,
            delta,
        } => {
            c.exec_drop(&st.credit, (delta, aid)).await?;
            let _: Option<i64> = c.exec_first(&st.balance, (aid,)).await?;
            teller_branch_history(c, st, tid, bid, aid, delta).await?;
        }
        BankOp::Deposit {
            aid,
            tid,
            bid,
            amount,
        } => {
            c.exec_drop(&st.credit, (amount, aid)).await?;
            teller_branch_history(c, st, tid, bid, aid, amount).await?;
        }
        BankOp::Withdraw {
            aid,
            tid,
            bid,
            amount,
        } => {
            c.exec_drop(&st.debit_if_covered, (amount, aid, amount))
                .await?;
            if c.affected_rows() == 0 {
                c.query_drop("ROLLBACK").await?;
                return Ok(OpResult::Refused);
            }
            teller_branch_history(c, st, tid, bid, aid, -amount).await?;
        }
        BankOp::Transfer {
            from,
            to,
            tid,
            bid,
            amount,
        } => {
            c.exec_drop(&st.debit_if_covered, (amount, from, amount))
                .await?;
            if c.affected_rows() == 0 {
                c.query_drop("ROLLBACK").await?;
                return Ok(OpResult::Refused);
            }
            c.exec_drop(&st.credit, (amount, to)).await?;
            c.exec_drop(&st.history, (tid, bid, from, -amount)).await?;
            c.exec_drop(&st.history, (tid, bid, to, amount)).await?;
        }
    }
    c.query_drop("COMMIT").await?;
    Ok(OpResult::Ok)
}

async fn teller_branch_history(
    c: &mut Conn,
    st: &Statements,
    tid: i64,
    bid: i64,
    aid: i64,
    delta: i64,
) -> Result<(), mysql_async::Error> {
    c.exec_drop(&st.teller, (delta, tid)).await?;
    c.exec_drop(&st.branch, (delta, bid)).await?;
    c.exec_drop(&st.history, (tid, bid, aid, delta)).await?;
    Ok(())
}
