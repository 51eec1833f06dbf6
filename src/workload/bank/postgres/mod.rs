//! The bank on PostgreSQL: one connection per user, owning its socket,
//! every statement prepared once per connection, transactions retried on
//! serialisation failures and deadlocks up to `--max-tries`, a lost
//! connection re-opened on the next operation. Loading, checking and the
//! figures go through tokio-postgres, off the hot path; loading uses
//! parallel COPY and adds the primary keys after the data, as pgbench does.
//! Each of those ends at the first signal (`util::until_interrupted`), and
//! the catalog is read within a look's deadline (`sut::LOOK_QUERY`).

mod load;
mod txn;

pub(crate) use txn::PgConn;

use super::check::BankFigures;
use super::mix::{BankMix, Isolation};
use super::sqlite::LoadReport;
use super::{BankBackend, Tables};
use crate::error::PlanError;
use crate::sut::postgres::{with_admin, PgTarget};
use crate::util::until_interrupted;
use crate::workload::sql::clock::StatementClock;
use crate::workload::Seat;
use anyhow::Context;
use std::sync::Arc;
use std::time::Instant;

/// A PostgreSQL bank.
pub(crate) struct PgBank {
    target: PgTarget,
    tables: Tables,
    isolation: Isolation,
    max_tries: u32,
    /// Send a transaction's statements together (`--pipeline`).
    pipeline: bool,
    /// Runs the few blocking administrative calls (load, check).
    admin: tokio::runtime::Runtime,
    /// Every session's BEGIN and COMMIT, timed.
    clock: Arc<StatementClock>,
}

impl PgBank {
    /// The bank another perflab loaded, for a generator's sessions: no
    /// connection is made here, nothing is loaded or read.
    pub(crate) fn attach(
        target: PgTarget,
        mix: BankMix,
        isolation: Isolation,
        max_tries: u32,
        pipeline: bool,
    ) -> anyhow::Result<Self> {
        Ok(PgBank {
            target,
            tables: Tables::of(mix),
            isolation,
            max_tries,
            pipeline,
            clock: Arc::new(super::txn::clock()),
            admin: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start a runtime")?,
        })
    }

    /// How a generator reaches this bank (`generator::Form`).
    pub(crate) fn target(&self) -> &PgTarget {
        &self.target
    }

    /// Connects, then loads or reuses the bank for `scale` units.
    pub(crate) fn prepare(
        target: PgTarget,
        scale: u32,
        mix: BankMix,
        reload: bool,
        isolation: Isolation,
        max_tries: u32,
        pipeline: bool,
    ) -> anyhow::Result<(Self, LoadReport)> {
        let bank = Self::attach(target, mix, isolation, max_tries, pipeline)?;
        let started = Instant::now();
        let report = bank.admin.block_on(until_interrupted(
            "preparing the bank",
            with_admin(&bank.target, async |client| {
                load::prepare(client, &bank.target, bank.tables, scale, reload, started).await
            }),
        ))??;
        Ok((bank, report))
    }

    /// Opens an existing bank for `perflab check bank`.
    pub(crate) fn existing(target: PgTarget, pgbench: bool) -> anyhow::Result<Self> {
        let mix = if pgbench {
            BankMix::Pgbench
        } else {
            BankMix::Tpcb
        };
        let bank = Self::attach(target, mix, Isolation::ReadCommitted, 1, false)?;
        let loaded = bank.admin.block_on(until_interrupted(
            "reading the bank",
            with_admin(&bank.target, async |client| {
                load::loaded_scale(client, &bank.target, bank.tables).await
            }),
        ))??;
        if loaded.is_none() {
            anyhow::bail!(PlanError::new(format!(
                "{} holds no {} bank; load one with `perflab run bank --target …`{}",
                bank.target.display,
                if pgbench { "pgbench" } else { "perflab" },
                if pgbench {
                    " --mix pgbench, or pgbench -i"
                } else {
                    ""
                }
            )));
        }
        Ok(bank)
    }
}

impl BankBackend for PgBank {
    const POLLS_SOCKETS: bool = true;

    type Conn = PgConn;

    async fn connect(&self, seat: Seat) -> anyhow::Result<PgConn> {
        let driver = txn::PgClient {
            target: self.target.clone(),
            tables: self.tables,
            isolation: self.isolation,
            pipeline: self.pipeline,
            drive: seat.drive(),
            clock: Arc::clone(&self.clock),
        };
        PgConn::open(driver, self.max_tries).await
    }

    fn clock(&self) -> &Arc<StatementClock> {
        &self.clock
    }

    fn figures(&self) -> anyhow::Result<BankFigures> {
        self.admin.block_on(until_interrupted(
            "checking the bank",
            with_admin(&self.target, async |client| {
                load::figures(client, &self.target, self.tables).await
            }),
        ))?
    }
}
