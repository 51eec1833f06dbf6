//! One user's PostgreSQL connection and the bank's transactions on it.
//! Every statement is prepared once per connection (as `pgbench -M
//! prepared` does), with parameter types fixed to bigint so the same code
//! serves pgbench's int columns and perflab's bigint ones.

use super::super::mix::Isolation;
use super::super::ops::BankOp;
use super::super::server::{Driver, Failure, ServerConn};
use super::super::txn;
use super::super::Tables;
use crate::measure::OpResult;
use crate::target::postgres::PgTarget;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Statement};

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
    let client = crate::target::postgres::connect(target, &target.config).await?;
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
            Failure::retry(c.code())
        }
        // Class 08 (connection exception) and 57P0x (the server is shutting
        // down or ended this session): the connection is gone.
        Some(c) if c.code().starts_with("08") || c.code().starts_with("57P0") => Failure::Lost,
        Some(c) => Failure::sql(c.code()),
        None if std::error::Error::source(e).is_some() => Failure::Lost,
        None => Failure::sql("client"),
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
        let mut statements = PgStatements {
            client: &link.0,
            st: &link.1,
        };
        txn::run(&mut statements, op).await
    }

    async fn rollback(link: &mut Self::Link) -> bool {
        link.0.batch_execute("ROLLBACK").await.is_ok()
    }

    fn classify(e: &Self::Error) -> Failure {
        classify(e)
    }
}

/// One connection's statements, borrowed for one transaction.
struct PgStatements<'a> {
    client: &'a Client,
    st: &'a Statements,
}

impl txn::Statements for PgStatements<'_> {
    type Error = tokio_postgres::Error;

    async fn begin(&mut self) -> Result<(), Self::Error> {
        self.client.execute(&self.st.begin, &[]).await.map(drop)
    }

    async fn commit(&mut self) -> Result<(), Self::Error> {
        self.client.execute(&self.st.commit, &[]).await.map(drop)
    }

    async fn rollback(&mut self) -> Result<(), Self::Error> {
        self.client.batch_execute("ROLLBACK").await
    }

    async fn credit(&mut self, aid: i64, amount: i64) -> Result<(), Self::Error> {
        self.client
            .execute(&self.st.credit, &[&amount, &aid])
            .await
            .map(drop)
    }

    async fn debit_if_covered(&mut self, aid: i64, amount: i64) -> Result<bool, Self::Error> {
        let rows = self
            .client
            .execute(&self.st.debit_if_covered, &[&amount, &aid])
            .await?;
        Ok(rows == 1)
    }

    async fn balance(&mut self, aid: i64) -> Result<(), Self::Error> {
        self.client
            .query_opt(&self.st.balance, &[&aid])
            .await
            .map(drop)
    }

    async fn teller(&mut self, tid: i64, delta: i64) -> Result<(), Self::Error> {
        self.client
            .execute(&self.st.teller, &[&delta, &tid])
            .await
            .map(drop)
    }

    async fn branch(&mut self, bid: i64, delta: i64) -> Result<(), Self::Error> {
        self.client
            .execute(&self.st.branch, &[&delta, &bid])
            .await
            .map(drop)
    }

    async fn history(
        &mut self,
        tid: i64,
        bid: i64,
        aid: i64,
        delta: i64,
    ) -> Result<(), Self::Error> {
        self.client
            .execute(&self.st.history, &[&tid, &bid, &aid, &delta])
            .await
            .map(drop)
    }
}
