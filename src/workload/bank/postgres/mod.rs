//! The bank on PostgreSQL, through tokio-postgres: one connection per user,
//! every statement prepared once per connection, transactions retried on
//! serialisation failures and deadlocks up to `--max-tries`, a lost
//! connection re-opened on the next operation. Loading uses parallel COPY
//! and adds the primary keys after the data, as pgbench does.

pub mod config;
mod load;
pub mod stats;
mod txn;

pub use config::PgTarget;
pub use txn::PgConn;

use super::check::BankFigures;
use super::sqlite::LoadReport;
use super::{BankBackend, Tables};
use crate::cli::PlanError;
use crate::plan::{BankMix, Isolation};
use anyhow::Context;
use std::time::Instant;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

/// A PostgreSQL bank.
pub struct PgBank {
    target: PgTarget,
    tables: Tables,
    isolation: Isolation,
    max_tries: u32,
    /// Runs the few blocking administrative calls (load, check).
    admin: tokio::runtime::Runtime,
}

impl PgBank {
    /// Connects, then loads or reuses the bank for `scale` units.
    pub fn prepare(
        target: PgTarget,
        scale: u32,
        mix: BankMix,
        reload: bool,
        isolation: Isolation,
        max_tries: u32,
    ) -> anyhow::Result<(Self, LoadReport)> {
        let admin = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start a runtime")?;
        let bank = PgBank {
            target,
            tables: Tables::of(mix),
            isolation,
            max_tries,
            admin,
        };
        let started = Instant::now();
        let report = bank.admin.block_on(async {
            let client = bank.admin_client().await?;
            load::prepare(&client, &bank.target, bank.tables, scale, reload, started).await
        })?;
        Ok((bank, report))
    }

    /// Starts sampling the server's statistics for the run.
    pub fn probe(&self) -> anyhow::Result<crate::probe::DbProbe> {
        let source = stats::PgStats::connect(&self.target)?;
        Ok(crate::probe::DbProbe::start(source)?)
    }

    /// Opens an existing bank for `perflab check bank`.
    pub fn existing(target: PgTarget, pgbench: bool) -> anyhow::Result<Self> {
        let mix = if pgbench {
            BankMix::Pgbench
        } else {
            BankMix::Tpcb
        };
        let bank = PgBank {
            target,
            tables: Tables::of(mix),
            isolation: Isolation::ReadCommitted,
            max_tries: 1,
            admin: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start a runtime")?,
        };
        let loaded = bank.admin.block_on(async {
            let client = bank.admin_client().await?;
            load::loaded_scale(&client, bank.tables).await
        })?;
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

    /// An administrative connection; connection failures become one clear
    /// line (wrong password, unknown database, nothing listening).
    async fn admin_client(&self) -> anyhow::Result<Client> {
        connect(&self.target, &self.target.config).await
    }
}

/// Opens a connection with `config` (the target's, or a variant of it) and
/// runs its socket on the current runtime.
pub(crate) async fn connect(
    target: &PgTarget,
    config: &tokio_postgres::Config,
) -> anyhow::Result<Client> {
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| connect_error(target, &e))?;
    tokio::spawn(connection);
    Ok(client)
}

/// Explains a failed connection, naming the server and the fix.
pub fn connect_error(target: &PgTarget, e: &tokio_postgres::Error) -> PlanError {
    let at = &target.display;
    let message = match e.code() {
        Some(c) if *c == SqlState::INVALID_PASSWORD => format!(
            "PostgreSQL refused the password for {at}; check the URL, PGPASSWORD or ~/.pgpass"
        ),
        Some(c) if *c == SqlState::INVALID_CATALOG_NAME => format!(
            "the database of {at} does not exist; create it (createdb) or name another in the URL"
        ),
        Some(c) if *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            format!("PostgreSQL refused the user of {at}; check the user name and pg_hba.conf")
        }
        Some(c) => format!(
            "PostgreSQL at {at} refused the connection ({}: {e})",
            c.code()
        ),
        None => {
            let text = e.to_string();
            let cause = std::error::Error::source(e)
                .map(|s| s.to_string())
                .unwrap_or_default();
            if cause.contains("refused") {
                format!("nothing answers at {at} (connection refused); start PostgreSQL there or fix the host and port")
            } else if cause.contains("reset by peer") || cause.contains("Broken pipe") {
                format!("{at} closed the connection ({cause}); the server may be shutting down, out of connections, or not PostgreSQL")
            } else if text.contains("timeout") || cause.contains("timed out") {
                format!(
                    "no PostgreSQL answered at {at} within 10 s; check the host, port and firewall"
                )
            } else {
                format!("cannot talk to PostgreSQL at {at} ({text}{}{cause}); is it a PostgreSQL server?", if cause.is_empty() { "" } else { ": " })
            }
        }
    };
    PlanError::new(message)
}

impl BankBackend for PgBank {
    type Conn = PgConn;

    async fn connect(&self) -> anyhow::Result<PgConn> {
        let driver = txn::PgDriver {
            target: self.target.clone(),
            tables: self.tables,
            isolation: self.isolation,
        };
        PgConn::open(driver, self.max_tries).await
    }

    fn figures(&self) -> anyhow::Result<BankFigures> {
        self.admin.block_on(async {
            let client = self.admin_client().await?;
            load::figures(&client, self.tables).await
        })
    }
}
