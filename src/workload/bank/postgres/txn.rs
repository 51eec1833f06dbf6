//! One user's PostgreSQL connection and the bank's transactions on it, on
//! a connection that owns its socket ([`Wire`]): every statement is
//! prepared once per connection (as `pgbench -M prepared` does), its
//! parameters bigint so the same code serves pgbench's int columns and
//! perflab's bigint ones. One statement is one round trip, as in pgbench;
//! with `--pipeline` a transaction's statements travel together until a
//! result decides what comes next (a debit's row count) or it ends.

use super::super::mix::Isolation;
use super::super::ops::BankOp;
use super::super::txn;
use super::super::Tables;
use crate::measure::OpResult;
use crate::sut::postgres::wire::{Statement, Wire, WireError};
use crate::sut::postgres::PgTarget;
use crate::workload::server_conn::{DbClient, Failure, ServerConn};
use crate::workload::sql::clock::StatementClock;
use anyhow::Context;
use std::sync::Arc;

/// The prepared statements of one connection.
pub(crate) struct Statements {
    begin: Statement,
    commit: Statement,
    rollback: Statement,
    credit: Statement,
    debit_if_covered: Statement,
    balance: Statement,
    teller: Statement,
    branch: Statement,
    history: Statement,
}

/// How to reach PostgreSQL for one user.
pub(crate) struct PgClient {
    pub(crate) target: PgTarget,
    pub(crate) tables: Tables,
    pub(crate) isolation: Isolation,
    /// Send a transaction's statements together (pipeline mode).
    pub(crate) pipeline: bool,
    /// How its socket is driven (held or polled: each operation allowed
    /// its timeout).
    pub(crate) drive: crate::sut::stream::Drive,
    /// The run's clock of BEGIN and COMMIT.
    pub(crate) clock: Arc<StatementClock>,
}

/// A user's PostgreSQL connection.
pub(crate) type PgConn = ServerConn<PgClient>;

/// An open connection and what it runs.
pub(crate) struct Conn {
    wire: Wire,
    st: Statements,
    pipeline: bool,
    clock: Arc<StatementClock>,
}

async fn connect(driver: &PgClient) -> anyhow::Result<Conn> {
    let target = &driver.target;
    let t = driver.tables;
    let mut wire = Wire::connect(target).await?;
    let mut prepare =
        async |name: &str, sql: &str, params: usize| wire.prepare(target, name, sql, params).await;
    let st = Statements {
        begin: prepare(
            "begin",
            &format!("BEGIN ISOLATION LEVEL {}", driver.isolation.sql()),
            0,
        )
        .await?,
        commit: prepare("commit", "COMMIT", 0).await?,
        rollback: prepare("rollback", "ROLLBACK", 0).await?,
        credit: prepare(
            "credit",
            &format!("UPDATE {} SET abalance = abalance + $1 WHERE aid = $2", t.accounts),
            2,
        )
        .await?,
        debit_if_covered: prepare(
            "debit",
            &format!(
                "UPDATE {} SET abalance = abalance - $1 WHERE aid = $2 AND abalance >= $1",
                t.accounts
            ),
            2,
        )
        .await?,
        balance: prepare(
            "balance",
            &format!("SELECT abalance FROM {} WHERE aid = $1", t.accounts),
            1,
        )
        .await?,
        teller: prepare(
            "teller",
            &format!("UPDATE {} SET tbalance = tbalance + $1 WHERE tid = $2", t.tellers),
            2,
        )
        .await?,
        branch: prepare(
            "branch",
            &format!("UPDATE {} SET bbalance = bbalance + $1 WHERE bid = $2", t.branches),
            2,
        )
        .await?,
        history: prepare(
            "history",
            &format!(
                "INSERT INTO {} (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
                t.history
            ),
            4,
        )
        .await?,
    };
    let wire = wire
        .drive(driver.drive)
        .with_context(|| format!("cannot drive the connection to {}", target.display))?;
    Ok(Conn {
        wire,
        st,
        pipeline: driver.pipeline,
        clock: Arc::clone(&driver.clock),
    })
}

impl DbClient for PgClient {
    type Conn = Conn;
    type Error = WireError;
    type Op = BankOp;

    async fn connect(&self) -> anyhow::Result<Conn> {
        connect(self).await
    }

    fn begin(conn: &mut Conn) {
        conn.wire.begin_operation();
    }

    fn is_closed(conn: &Conn) -> bool {
        conn.wire.is_broken()
    }

    async fn run(conn: &mut Conn, op: &mut BankOp) -> Result<OpResult, WireError> {
        conn.wire.discard();
        let mut statements = PgStatements {
            conn,
            in_transaction: false,
        };
        txn::run(&mut statements, *op).await
    }

    async fn rollback(conn: &mut Conn) -> Result<(), WireError> {
        conn.wire.discard();
        conn.wire.queue(&conn.st.rollback, &[]);
        conn.wire.flush().await.map(drop)
    }

    fn classify(e: &WireError) -> Failure {
        Failure::of_pg(e)
    }

    fn opens_transaction(op: &BankOp) -> bool {
        !matches!(op, BankOp::Balance { .. })
    }
}

/// One connection's statements, borrowed for one transaction.
struct PgStatements<'a> {
    conn: &'a mut Conn,
    /// Between BEGIN and its end: in pipeline mode, statements whose
    /// result nothing reads wait for the next flush.
    in_transaction: bool,
}

impl PgStatements<'_> {
    /// Queues a statement and, unless it may wait in a pipeline, runs
    /// everything queued; the last statement's row count.
    async fn run(
        &mut self,
        pick: fn(&Statements) -> &Statement,
        params: &[i64],
        needed: bool,
    ) -> Result<u64, WireError> {
        let conn = &mut *self.conn;
        conn.wire.queue(pick(&conn.st), params);
        if conn.pipeline && self.in_transaction && !needed {
            return Ok(0);
        }
        conn.wire.flush().await.map(|reply| reply.rows)
    }
}

impl txn::Statements for PgStatements<'_> {
    type Error = WireError;

    fn clock(&self) -> Option<&StatementClock> {
        (!self.conn.pipeline).then_some(&*self.conn.clock)
    }

    async fn begin(&mut self) -> Result<(), WireError> {
        self.in_transaction = true;
        self.run(|s| &s.begin, &[], false).await.map(drop)
    }

    async fn commit(&mut self) -> Result<(), WireError> {
        self.in_transaction = false;
        self.run(|s| &s.commit, &[], true).await.map(drop)
    }

    async fn rollback(&mut self) -> Result<(), WireError> {
        self.in_transaction = false;
        self.run(|s| &s.rollback, &[], true).await.map(drop)
    }

    async fn credit(&mut self, aid: i64, amount: i64) -> Result<(), WireError> {
        self.run(|s| &s.credit, &[amount, aid], false)
            .await
            .map(drop)
    }

    async fn debit_if_covered(&mut self, aid: i64, amount: i64) -> Result<bool, WireError> {
        let rows = self
            .run(|s| &s.debit_if_covered, &[amount, aid], true)
            .await?;
        Ok(rows == 1)
    }

    async fn balance(&mut self, aid: i64) -> Result<(), WireError> {
        self.run(|s| &s.balance, &[aid], false).await.map(drop)
    }

    async fn teller(&mut self, tid: i64, delta: i64) -> Result<(), WireError> {
        self.run(|s| &s.teller, &[delta, tid], false)
            .await
            .map(drop)
    }

    async fn branch(&mut self, bid: i64, delta: i64) -> Result<(), WireError> {
        self.run(|s| &s.branch, &[delta, bid], false)
            .await
            .map(drop)
    }

    async fn history(&mut self, tid: i64, bid: i64, aid: i64, delta: i64) -> Result<(), WireError> {
        self.run(|s| &s.history, &[tid, bid, aid, delta], false)
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::mix::BankMix;
    use super::super::PgBank;
    use crate::sut::managed::postgres::ManagedPostgres;
    use crate::workload::bank::BankWorkload;
    use crate::workload::{Session, Workload};

    fn bank(pg: &ManagedPostgres, mix: BankMix, pipeline: bool) -> BankWorkload<PgBank> {
        let target = crate::sut::postgres::resolve(&pg.url(), &|_| None, None).unwrap();
        let isolation = super::Isolation::ReadCommitted;
        let (bank, _) = PgBank::prepare(target, 1, mix, false, isolation, 10, pipeline).unwrap();
        BankWorkload::new(bank, mix, 1).unwrap()
    }

    /// Round trips per transaction of a warmed-up session.
    fn round_trips(workload: &BankWorkload<PgBank>) -> f64 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut session = workload
                .open_session(
                    0,
                    7,
                    crate::workload::Seat::alone(std::time::Duration::from_secs(10)),
                )
                .await
                .unwrap();
            let trips = |s: &crate::workload::bank::BankSession<super::PgConn>| {
                s.conn.conn().map_or(0, |l| l.wire.round_trips())
            };
            for _ in 0..100 {
                let op = session.choose();
                session.execute(op).await;
            }
            let before = trips(&session);
            for _ in 0..1_000 {
                let op = session.choose();
                let outcome = session.execute(op).await;
                assert!(
                    !matches!(outcome.result, crate::measure::OpResult::Error(_)),
                    "{:?}",
                    outcome.result
                );
            }
            (trips(&session) - before) as f64 / 1_000.0
        })
    }

    #[test]
    fn a_transaction_takes_one_round_trip_per_statement_or_one_pipelined() {
        let pg = ManagedPostgres::start(&Default::default()).unwrap();
        // TPC-B's seven statements are seven round trips, or one pipelined;
        // the ATM mix's withdrawals and transfers wait for their debit.
        for (mix, pipeline, trips) in [
            (BankMix::Tpcb, false, 7.0..7.0001),
            (BankMix::Tpcb, true, 1.0..1.0001),
            (BankMix::Atm(Default::default()), false, 3.0..6.0),
            (BankMix::Atm(Default::default()), true, 1.0..2.0),
        ] {
            let per = round_trips(&bank(&pg, mix, pipeline));
            assert!(
                trips.contains(&per),
                "{mix:?} pipeline {pipeline}: {per} round trips per transaction"
            );
        }
    }
}
