//! One user's PostgreSQL connection and the bank's transactions on it.
//! Every statement is prepared once per connection (as `pgbench -M
//! prepared` does), with parameter types fixed to bigint so the same code
//! serves pgbench's int columns and perflab's bigint ones.

use super::super::ops::BankOp;
use super::super::server::{Driver, Failure, ServerConn};
use super::super::Tables;
use super::PgTarget;
use crate::measure::OpResult;
use crate::plan::Isolation;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, Statement};

/// The prepared statements of one connection.
pub struct Statements {
    begin: Statement,
    commit: Statement,
    credit: Statement,
    debit_if_covered: Statement,
    balance: Statement,
    teller: Statement,
    branch: Statement,
    history: Statement,
}

/// How to reach PostgreSQL for one user.
pub struct PgDriver {
    pub target: PgTarget,
    pub tables: Tables,
    pub isolation: Isolation,
}

/// A user's PostgreSQL connection.
pub type PgConn = ServerConn<PgDriver>;

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

impl Driver for PgDriver {
    type Link = (Client, Statements);
    type Error = tokio_postgres::Error;

    async fn connect(&self) -> anyhow::Result<Self::Link> {
        connect(&self.target, self.tables, self.isolation).await
    }

    fn is_closed(link: &Self::Link) -> bool {
        link.0.is_closed()
    }

    async fn run(link: &mut Self::Link, op: BankOp) -> Result<OpResult, Self::Error> {
        run(&link.0, &link.1, op).await
    }

    async fn rollback(link: &mut Self::Link) -> bool {
        link.0.batch_execute("ROLLBACK").await.is_ok()
    }

    fn classify(e: &Self::Error) -> Failure {
        classify(e)
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
