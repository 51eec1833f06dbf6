//! One user's MySQL/MariaDB connection (perflab's own session, see
//! `sut::mysql::wire`) and the bank's transactions on it.

use super::super::mix::Isolation;
use super::super::ops::BankOp;
use super::super::txn;
use super::super::Tables;
use crate::measure::OpResult;
use crate::sut::mysql::wire::{Command, MyError, MyWire};
use crate::sut::mysql::MyTarget;
use crate::workload::server_conn::{DbClient, Failure, ServerConn};
use crate::workload::sql::clock::StatementClock;
use anyhow::Context;
use std::sync::Arc;

/// A connection's commands, each encoded once.
pub(crate) struct Statements {
    begin: Command,
    commit: Command,
    rollback: Command,
    credit: Command,
    debit_if_covered: Command,
    balance: Command,
    teller: Command,
    branch: Command,
    history: Command,
}

/// How to reach MySQL/MariaDB for one user.
pub(crate) struct MyClient {
    pub(crate) target: MyTarget,
    pub(crate) tables: Tables,
    pub(crate) isolation: Isolation,
    /// How its socket is driven (held or polled: each operation allowed
    /// its timeout).
    pub(crate) drive: crate::sut::stream::Drive,
    /// The run's clock of BEGIN and COMMIT.
    pub(crate) clock: Arc<StatementClock>,
}

/// A user's MySQL/MariaDB connection.
pub(crate) type MyConn = ServerConn<MyClient>;

/// An open connection and its commands.
pub(crate) struct Conn {
    wire: MyWire,
    st: Statements,
    clock: Arc<StatementClock>,
}

async fn connect(driver: &MyClient) -> anyhow::Result<Conn> {
    let (target, t) = (&driver.target, driver.tables);
    let mut wire = MyWire::connect(target).await?;
    let isolation = Command::query(&format!(
        "SET SESSION TRANSACTION ISOLATION LEVEL {}",
        driver.isolation.sql()
    ));
    if let Err(e) = wire.run(&isolation, &[]).await {
        anyhow::bail!("{}: cannot set the isolation level ({e})", target.display);
    }
    let mut prepare = async |sql: String| wire.prepare(target, &sql).await;
    let st = Statements {
        begin: Command::query("BEGIN"),
        commit: Command::query("COMMIT"),
        rollback: Command::query("ROLLBACK"),
        credit: prepare(format!(
            "UPDATE {} SET abalance = abalance + ? WHERE aid = ?",
            t.accounts
        ))
        .await?,
        debit_if_covered: prepare(format!(
            "UPDATE {} SET abalance = abalance - ? WHERE aid = ? AND abalance >= ?",
            t.accounts
        ))
        .await?,
        balance: prepare(format!("SELECT abalance FROM {} WHERE aid = ?", t.accounts)).await?,
        teller: prepare(format!(
            "UPDATE {} SET tbalance = tbalance + ? WHERE tid = ?",
            t.tellers
        ))
        .await?,
        branch: prepare(format!(
            "UPDATE {} SET bbalance = bbalance + ? WHERE bid = ?",
            t.branches
        ))
        .await?,
        history: prepare(format!(
            "INSERT INTO {} (tid, bid, aid, delta, mtime, filler) VALUES (?, ?, ?, ?, NOW(6), '')",
            t.history
        ))
        .await?,
    };
    let wire = wire
        .drive(driver.drive)
        .with_context(|| format!("cannot drive the connection to {}", target.display))?;
    Ok(Conn {
        wire,
        st,
        clock: Arc::clone(&driver.clock),
    })
}

impl DbClient for MyClient {
    type Conn = Conn;
    type Error = MyError;
    type Op = BankOp;

    async fn connect(&self) -> anyhow::Result<Self::Conn> {
        connect(self).await
    }

    fn begin(conn: &mut Self::Conn) {
        conn.wire.begin_operation();
    }

    fn is_closed(conn: &Self::Conn) -> bool {
        conn.wire.is_broken()
    }

    async fn run(conn: &mut Self::Conn, op: &mut BankOp) -> Result<OpResult, Self::Error> {
        txn::run(conn, *op).await
    }

    async fn rollback(conn: &mut Self::Conn) -> Result<(), Self::Error> {
        conn.wire.run(&conn.st.rollback, &[]).await.map(drop)
    }

    fn classify(e: &Self::Error) -> Failure {
        Failure::of_my(e)
    }

    fn opens_transaction(op: &BankOp) -> bool {
        !matches!(op, BankOp::Balance { .. })
    }
}

impl txn::Statements for Conn {
    type Error = MyError;

    fn clock(&self) -> Option<&StatementClock> {
        Some(&self.clock)
    }

    async fn begin(&mut self) -> Result<(), Self::Error> {
        self.wire.run(&self.st.begin, &[]).await.map(drop)
    }

    async fn commit(&mut self) -> Result<(), Self::Error> {
        self.wire.run(&self.st.commit, &[]).await.map(drop)
    }

    async fn rollback(&mut self) -> Result<(), Self::Error> {
        self.wire.run(&self.st.rollback, &[]).await.map(drop)
    }

    async fn credit(&mut self, aid: i64, amount: i64) -> Result<(), Self::Error> {
        self.wire
            .run(&self.st.credit, &[amount, aid])
            .await
            .map(drop)
    }

    async fn debit_if_covered(&mut self, aid: i64, amount: i64) -> Result<bool, Self::Error> {
        let reply = self
            .wire
            .run(&self.st.debit_if_covered, &[amount, aid, amount])
            .await?;
        Ok(reply.affected == 1)
    }

    async fn balance(&mut self, aid: i64) -> Result<(), Self::Error> {
        self.wire.run(&self.st.balance, &[aid]).await.map(drop)
    }

    async fn teller(&mut self, tid: i64, delta: i64) -> Result<(), Self::Error> {
        self.wire
            .run(&self.st.teller, &[delta, tid])
            .await
            .map(drop)
    }

    async fn branch(&mut self, bid: i64, delta: i64) -> Result<(), Self::Error> {
        self.wire
            .run(&self.st.branch, &[delta, bid])
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
        self.wire
            .run(&self.st.history, &[tid, bid, aid, delta])
            .await
            .map(drop)
    }
}
