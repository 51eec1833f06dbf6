//! One user's MySQL/MariaDB connection and the bank's transactions on it.

use super::super::ops::BankOp;
use super::super::{BankConn, Tables};
use super::MyTarget;
use crate::measure::{ErrorKind, OpResult, Outcome};
use crate::plan::Isolation;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Statement};
use std::time::Duration;

/// ER_LOCK_DEADLOCK and ER_LOCK_WAIT_TIMEOUT: the transaction is worth retrying.
const RETRYABLE: [u16; 2] = [1213, 1205];

struct Statements {
    credit: Statement,
    debit_if_covered: Statement,
    balance: Statement,
    teller: Statement,
    branch: Statement,
    history: Statement,
}

/// A user's connection; re-opened on the next operation when lost.
pub struct MyConn {
    target: MyTarget,
    tables: Tables,
    isolation: Isolation,
    max_tries: u32,
    link: Option<(Conn, Statements)>,
    /// A transaction was begun and not seen to end: roll it back first.
    open_transaction: bool,
    reconnect_backoff: Duration,
}

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

impl MyConn {
    pub async fn open(
        target: MyTarget,
        tables: Tables,
        isolation: Isolation,
        max_tries: u32,
    ) -> anyhow::Result<Self> {
        let link = connect(&target, tables, isolation).await?;
        Ok(MyConn {
            target,
            tables,
            isolation,
            max_tries,
            link: Some(link),
            open_transaction: false,
            reconnect_backoff: Duration::ZERO,
        })
    }
}

enum Failure {
    Retry,
    Lost,
    Sql(String),
}

fn classify(e: &mysql_async::Error) -> Failure {
    match e {
        mysql_async::Error::Server(s) if RETRYABLE.contains(&s.code) => Failure::Retry,
        mysql_async::Error::Server(s) => Failure::Sql(format!("{}", s.code)),
        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => Failure::Lost,
        other => Failure::Sql(other.to_string()),
    }
}

impl BankConn for MyConn {
    async fn execute(&mut self, op: BankOp) -> Outcome {
        if self.link.is_none() {
            if !self.reconnect_backoff.is_zero() {
                tokio::time::sleep(self.reconnect_backoff).await;
            }
            match connect(&self.target, self.tables, self.isolation).await {
                Ok(link) => {
                    self.link = Some(link);
                    self.open_transaction = false;
                    self.reconnect_backoff = Duration::ZERO;
                }
                Err(_) => {
                    self.reconnect_backoff = (self.reconnect_backoff * 2)
                        .clamp(Duration::from_millis(10), Duration::from_secs(1));
                    return Outcome::error(ErrorKind::Connect);
                }
            }
        }
        let Some((conn, st)) = self.link.as_mut() else {
            return Outcome::error(ErrorKind::Connect);
        };
        if self.open_transaction && conn.query_drop("ROLLBACK").await.is_err() {
            self.link = None;
            return Outcome::error(ErrorKind::Connect);
        }
        let mut retries = 0;
        loop {
            self.open_transaction = !matches!(op, BankOp::Balance { .. });
            let failure = match run(conn, st, op).await {
                Ok(result) => {
                    self.open_transaction = false;
                    return Outcome {
                        result,
                        bytes: 0,
                        retries,
                    };
                }
                Err(e) => classify(&e),
            };
            let rolled_back = conn.query_drop("ROLLBACK").await.is_ok();
            self.open_transaction = !rolled_back;
            let kind = match failure {
                Failure::Retry if retries + 1 < self.max_tries && rolled_back => {
                    retries += 1;
                    continue;
                }
                Failure::Retry => ErrorKind::Sql("1213".to_string()),
                Failure::Sql(code) => ErrorKind::Sql(code),
                Failure::Lost => ErrorKind::Connect,
            };
            if !rolled_back {
                self.link = None;
            }
            return Outcome {
                result: OpResult::Error(kind),
                bytes: 0,
                retries,
            };
        }
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
