//! The all-electronic bank of the classic labs: TPC-B's branches, tellers,
//! accounts and history, driven by the `tpcb` or `atm` mix. The mixes draw
//! [`BankOp`]s; a [`BankBackend`] (SQLite here; PostgreSQL and MariaDB
//! beside it) runs them. The mixes never see SQL.

mod check;
mod generator;
pub(crate) mod mix;
pub(crate) mod mysql;
mod ops;
pub(crate) mod owned;
pub(crate) mod postgres;
mod spec;
pub(crate) mod sqlite;
mod txn;

pub(crate) use check::{check_database, check_run, ensure_reusable, BankFigures};
pub(crate) use ops::{op_names, BankOp, OpPicker};
pub(crate) use spec::Bank;

use super::{CheckReport, OpCounts, Seat, Session, Workload};
use crate::measure::Outcome;
use mix::BankMix;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::future::Future;

/// What perflab's layout loaded: scale, opening total, schema version.
pub(crate) const META_TABLE: &str = "perflab_bank_meta";

/// The names of the bank's tables: perflab's own (named `perflab_…`, with
/// a table of what was loaded), or pgbench's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tables {
    pub(crate) branches: &'static str,
    pub(crate) tellers: &'static str,
    pub(crate) accounts: &'static str,
    pub(crate) history: &'static str,
    /// What was loaded (scale, opening total, schema version); none in
    /// pgbench's layout.
    pub(crate) meta: Option<&'static str>,
    /// pgbench's layout: int balances opening at 0, no perflab metadata.
    pub(crate) pgbench: bool,
}

impl Tables {
    /// perflab's own layout.
    pub(crate) const PERFLAB: Tables = Tables {
        branches: "perflab_branches",
        tellers: "perflab_tellers",
        accounts: "perflab_accounts",
        history: "perflab_history",
        meta: Some(META_TABLE),
        pgbench: false,
    };
    /// pgbench's layout, as `pgbench -i` makes it.
    pub(crate) const PGBENCH: Tables = Tables {
        branches: "pgbench_branches",
        tellers: "pgbench_tellers",
        accounts: "pgbench_accounts",
        history: "pgbench_history",
        meta: None,
        pgbench: true,
    };

    /// The tables a mix runs on.
    pub(crate) fn of(mix: BankMix) -> Self {
        if mix == BankMix::Pgbench {
            Self::PGBENCH
        } else {
            Self::PERFLAB
        }
    }

    /// Every table a load makes, in the order it makes them.
    pub(crate) fn all(&self) -> Vec<&'static str> {
        let mut all = vec![self.branches, self.tellers, self.accounts, self.history];
        all.extend(self.meta);
        all
    }
}

/// A database that can hold the bank.
pub(crate) trait BankBackend: Send + Sync + 'static {
    /// One user's connection.
    type Conn: BankConn + 'static;

    /// Opens a connection for one user, to run where `seat` says.
    fn connect(&self, seat: Seat) -> impl Future<Output = anyhow::Result<Self::Conn>>;

    /// Its connections speak the server's protocol on a socket of their
    /// own, which the worker's loop can poll ([`Workload::polls_sockets`]).
    const POLLS_SOCKETS: bool = false;

    /// The clock its sessions time BEGIN and COMMIT on.
    fn clock(&self) -> &std::sync::Arc<crate::workload::sql::clock::StatementClock>;

    /// Reads the figures the check compares (sums, row counts), consistently.
    fn figures(&self) -> anyhow::Result<BankFigures>;
}

/// One connection to the bank.
pub(crate) trait BankConn {
    /// Runs one transaction to its end (commit, refusal or error).
    fn execute(&mut self, op: BankOp) -> impl Future<Output = Outcome>;
}

/// The bank workload on some backend.
pub(crate) struct BankWorkload<B> {
    backend: B,
    mix: BankMix,
    scale: u32,
    /// The database's figures before the run's first transaction.
    baseline: BankFigures,
    /// What a generator attaches the bank from; none for an embedded
    /// bank and on a generator.
    form: Option<serde_json::Value>,
}

impl<B: BankBackend> BankWorkload<B> {
    /// A bank on a loaded backend; reads the baseline figures for the check.
    pub(crate) fn new(backend: B, mix: BankMix, scale: u32) -> anyhow::Result<Self> {
        let baseline = backend.figures()?;
        Ok(BankWorkload {
            backend,
            mix,
            scale,
            baseline,
            form: None,
        })
    }

    /// The bank on a generator: no baseline (the coordinator checks).
    pub fn on_generator(backend: B, mix: BankMix, scale: u32) -> Self {
        BankWorkload {
            backend,
            mix,
            scale,
            baseline: BankFigures::default(),
            form: None,
        }
    }

    /// Sets what generators attach the bank from.
    pub(crate) fn with_form(mut self, form: Option<serde_json::Value>) -> Self {
        self.form = form;
        self
    }
}

/// One bank user: a connection and a random stream.
pub(crate) struct BankSession<C> {
    conn: C,
    picker: OpPicker,
    rng: SmallRng,
}

impl<B: BankBackend> Workload for BankWorkload<B> {
    type Session = BankSession<B::Conn>;

    fn op_names(&self) -> &[&'static str] {
        op_names(self.mix)
    }

    fn generator_form(&self) -> Option<serde_json::Value> {
        self.form.clone()
    }

    fn polls_sockets(&self) -> bool {
        B::POLLS_SOCKETS
    }

    async fn open_session(
        &self,
        _user: u32,
        seed: u64,
        seat: Seat,
    ) -> anyhow::Result<Self::Session> {
        Ok(BankSession {
            conn: self.backend.connect(seat).await?,
            picker: OpPicker::new(self.mix, self.scale),
            rng: SmallRng::seed_from_u64(seed),
        })
    }

    fn check(&self, run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        let after = self.backend.figures()?;
        Ok(Some(check_run(self.mix, &self.baseline, &after, run)))
    }
}

impl<D: crate::workload::server_conn::DbClient<Op = BankOp>> BankConn
    for crate::workload::server_conn::ServerConn<D>
{
    async fn execute(&mut self, mut op: BankOp) -> Outcome {
        crate::workload::server_conn::ServerConn::execute(self, &mut op).await
    }
}

impl<C: BankConn> Session for BankSession<C> {
    fn choose(&mut self) -> usize {
        self.picker.choose(&mut self.rng)
    }

    async fn execute(&mut self, op: usize) -> Outcome {
        let op = self.picker.draw(op, &mut self.rng);
        self.conn.execute(op).await
    }
}
