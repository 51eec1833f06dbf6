//! One user's PostgreSQL connection and the bank's transactions on it.
//! Every statement is prepared once per connection (as `pgbench -M
//! prepared` does), with parameter types fixed to bigint so the same code
//! serves pgbench's int columns and perflab's bigint ones.

use super::super::ops::BankOp;
use super::super::{BankConn, Tables};
use super::PgTarget;
use crate::measure::{ErrorKind, OpResult, Outcome};
use crate::plan::Isolation;
use std::time::Duration;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, Statement};

/// The prepared statements of one connection.
struct Statements {
    begin: Statement,
    commit: Statement,
    credit: Statement,
    debit_if_covered: Statement,
    balance: Statement,
    teller: Statement,
    branch: Statement,
    history: Statement,
}

/// A user's connection; re-opened on the next operation when lost.
pub struct PgConn {
    target: PgTarget,
    tables: Tables,
    isolation: Isolation,
    max_tries: u32,
    link: Option<(Client, Statements)>,
    /// A transaction was begun and not seen to end (its operation was
    /// abandoned at a timeout): roll it back before the next one.
    open_transaction: bool,
    /// Wait before the next reconnect attempt after a failed one.
    reconnect_backoff: Duration,
}

impl PgConn {
    /// Opens and prepares a connection.
    pub async fn open(
        target: PgTarget,
        tables: Tables,
        isolation: Isolation,
        max_tries: u32,
    ) -> anyhow::Result<Self> {
        let link = connect(&target, tables, isolation).await?;
        Ok(PgConn {
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

async fn connect(
    target: &PgTarget,
    t: Tables,
    isolation: Isolation,
) -> anyhow::Result<(Client, Statements)> {
    let (client, connection) = target
        .config
        .connect(NoTls)
        .await
        .map_err(|e| super::connect_error(target, &e))?;
    tokio::spawn(connection);
    let big = Type::INT8;
    let statements = Statements {
        begin: client
            .prepare(&format!("BEGIN ISOLATION LEVEL {}", isolation.sql()))
            .await?,
        commit: client.prepare("COMMIT").await?,
        credit: client
            .prepare_typed(
                &format!("UPDATE {} SET abalance = abalance + $1 WHERE aid = $2", t.accounts),
                &[big.clone(), big.clone()],
            )
            .await?,
        debit_if_covered: client
            .prepare_typed(
                &format!(
                    "UPDATE {} SET abalance = abalance - $1 WHERE aid = $2 AND abalance >= $1",
                    t.accounts
                ),
                &[big.clone(), big.clone()],
            )
            .await?,
        balance: client
            .prepare_typed(
                &format!("SELECT abalance FROM {} WHERE aid = $1", t.accounts),
                std::slice::from_ref(&big),
            )
            .await?,
        teller: client
            .prepare_typed(
                &format!("UPDATE {} SET tbalance = tbalance + $1 WHERE tid = $2", t.tellers),
                &[big.clone(), big.clone()],
            )
            .await?,
        branch: client
            .prepare_typed(
                &format!("UPDATE {} SET bbalance = bbalance + $1 WHERE bid = $2", t.branches),
                &[big.clone(), big.clone()],
            )
            .await?,
        history: client
            .prepare_typed(
                &format!(
                    "INSERT INTO {} (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
                    t.history
                ),
                &[big.clone(), big.clone(), big.clone(), big],
            )
            .await?,
    };
    Ok((client, statements))
}

/// Why one try of a transaction failed.
enum Failure {
    /// Serialisation failure or deadlock: try again.
    Retry(String),
    /// The connection is gone.
    Lost,
    /// Any other database error: counted by SQLSTATE.
    Sql(String),
}

fn classify(e: &tokio_postgres::Error) -> Failure {
    if e.is_closed() {
        return Failure::Lost;
    }
    match e.code() {
        Some(c)
            if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED =>
        {
            Failure::Retry(c.code().to_string())
        }
        Some(c) => Failure::Sql(c.code().to_string()),
        None if std::error::Error::source(e).is_some() => Failure::Lost,
        None => Failure::Sql("client".to_string()),
    }
}

impl BankConn for PgConn {
    async fn execute(&mut self, op: BankOp) -> Outcome {
        if self.link.as_ref().is_none_or(|(c, _)| c.is_closed()) {
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
                    self.link = None;
                    self.reconnect_backoff = (self.reconnect_backoff * 2)
                        .clamp(Duration::from_millis(10), Duration::from_secs(1));
                    return Outcome::error(ErrorKind::Connect);
                }
            }
        }
        let Some((client, st)) = self.link.as_ref() else {
            return Outcome::error(ErrorKind::Connect);
        };
        if self.open_transaction && client.batch_execute("ROLLBACK").await.is_err() {
            self.link = None;
            return Outcome::error(ErrorKind::Connect);
        }
        let mut retries = 0;
        loop {
            self.open_transaction = !matches!(op, BankOp::Balance { .. });
            let attempt = run(client, st, op).await;
            let failure = match attempt {
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
            let rolled_back = client.batch_execute("ROLLBACK").await.is_ok();
            self.open_transaction = !rolled_back;
            let kind = match failure {
                Failure::Retry(code) if retries + 1 < self.max_tries && rolled_back => {
                    retries += 1;
                    let _ = code;
                    continue;
                }
                Failure::Retry(code) | Failure::Sql(code) => ErrorKind::Sql(code),
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
async fn run(c: &Client, st: &Statements, op: BankOp) -> Result<OpResult, tokio_postgres::Error> {
    if let BankOp::Balance { aid } = op {
        c.query_opt(&st.balance, &[&aid]).await?;
        return Ok(OpResult::Ok);
    }
    c.execute(&st.begin, &[]).await?;
    match op {
        BankOp::Balance { .. } => {}
        BankOp::Tpcb {
            aid,
            tid,
            bid,
            delta,
        } => {
            c.execute(&st.credit, &[&delta, &aid]).await?;
            c.query_opt(&st.balance, &[&aid]).await?;
            teller_branch_history(c, st, tid, bid, aid, delta).await?;
        }
        BankOp::Deposit {
            aid,
            tid,
            bid,
            amount,
        } => {
            c.execute(&st.credit, &[&amount, &aid]).await?;
            teller_branch_history(c, st, tid, bid, aid, amount).await?;
        }
        BankOp::Withdraw {
            aid,
            tid,
            bid,
            amount,
        } => {
            if c.execute(&st.debit_if_covered, &[&amount, &aid]).await? == 0 {
                c.batch_execute("ROLLBACK").await?;
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
            if c.execute(&st.debit_if_covered, &[&amount, &from]).await? == 0 {
                c.batch_execute("ROLLBACK").await?;
                return Ok(OpResult::Refused);
            }
            c.execute(&st.credit, &[&amount, &to]).await?;
            c.execute(&st.history, &[&tid, &bid, &from, &(-amount)])
                .await?;
            c.execute(&st.history, &[&tid, &bid, &to, &amount]).await?;
        }
    }
    c.execute(&st.commit, &[]).await?;
    Ok(OpResult::Ok)
}

async fn teller_branch_history(
    c: &Client,
    st: &Statements,
    tid: i64,
    bid: i64,
    aid: i64,
    delta: i64,
) -> Result<(), tokio_postgres::Error> {
    c.execute(&st.teller, &[&delta, &tid]).await?;
    c.execute(&st.branch, &[&delta, &bid]).await?;
    c.execute(&st.history, &[&tid, &bid, &aid, &delta]).await?;
    Ok(())
}
