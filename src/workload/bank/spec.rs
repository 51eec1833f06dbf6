//! `perflab run bank` and `perflab check bank`: the bank's flags, their
//! validation, and how a run makes its database ready — SQLite in process,
//! a PostgreSQL or MariaDB server given by URL, or a PostgreSQL perflab
//! starts — before handing the bank to the sweep.

use super::mix::{BankMix, Isolation};
use super::mysql::MyBank;
use super::postgres::PgBank;
use super::sqlite::{LoadReport, SqliteBank};
use super::{check_database, BankBackend, BankWorkload};
use crate::error::PlanError;
use crate::plan::Plan;
use crate::probe::DbStatsSource;
use crate::sut::{Endpoint, Opened, ServerOptions, Target, TargetArgs, TargetKind};
use crate::workload::sql::clock::ClockSource;
use crate::workload::{CheckReport, Started, SweepDriver, WorkloadKind};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use super::ops::MAX_SCALE;

/// A managed PostgreSQL's `--target`, as its kind names it.
const POSTGRES: &str =
    <crate::sut::managed::postgres::Postgres as crate::sut::managed::server::ManagedKind>::SCHEME;

macro_rules! default_target {
    () => {
        "sqlite:perflab-bank.db"
    };
}

/// The bank's database when no `--target` is given.
pub(crate) const DEFAULT_TARGET: &str = default_target!();

/// The all-electronic bank of TPC-B.
pub struct Bank;

/// The bank's flags.
#[derive(Debug, clap::Args)]
pub struct BankArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,

    /// Scale units (1 branch, 10 tellers, 100,000 accounts each).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) scale: u32,

    /// The transaction mix: tpcb, atm, atm:balance=40,withdraw=30,deposit=20,transfer=10, or pgbench.
    #[arg(long, value_name = "MIX", default_value = "tpcb")]
    pub(crate) mix: String,

    /// Load perflab's own tables afresh even if a loaded bank of the same
    /// scale exists (never a table perflab did not make).
    #[arg(long)]
    pub(crate) reload: bool,

    /// On a server: transaction isolation.
    #[arg(long, value_name = "LEVEL", value_enum, default_value_t = Isolation::ReadCommitted)]
    pub(crate) isolation: Isolation,

    /// On a server: tries per transaction on serialisation failures and deadlocks.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(crate) max_tries: u32,

    /// On PostgreSQL: send each transaction's statements together in one
    /// round trip (pipeline mode) until a result decides what follows.
    #[arg(long)]
    pub(crate) pipeline: bool,
}

/// The bank's validated options, as the run's plan stores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BankSpec {
    pub(crate) target: Target,
    /// Scale units: 1 branch, 10 tellers, 100,000 accounts each.
    pub(crate) scale: u32,
    pub(crate) mix: BankMix,
    /// Drop and reload perflab's own tables even when a loaded bank of the
    /// same scale exists.
    pub(crate) reload: bool,
    /// Isolation level of every transaction (server databases).
    pub(crate) isolation: Isolation,
    /// Tries per transaction on serialisation failures and deadlocks.
    pub(crate) max_tries: u32,
    /// PostgreSQL: a transaction's statements sent together (pipeline mode).
    #[serde(default)]
    pub(crate) pipeline: bool,
    /// Settings of a managed server (`--pg-set NAME=VALUE`).
    pub(crate) server_settings: Vec<(String, String)>,
    /// Keep a managed server's data directory after the run.
    pub(crate) keep: bool,
    /// Managed server: the CPUs it may run on (all when empty).
    pub(crate) server_cpus: Vec<usize>,
    /// Managed server: the memory its cgroup holds it to (with its page
    /// cache), when limited.
    #[serde(default)]
    pub(crate) server_memory: Option<crate::units::Bytes>,
    /// Managed server: the shaped link it runs behind, when it does.
    #[serde(default)]
    pub(crate) server_link: Option<crate::sut::managed::link::LinkShape>,
    /// Managed server: its disk I/O limits, when held.
    #[serde(default)]
    pub(crate) server_io: Option<crate::sut::managed::disk::IoLimits>,
    /// Managed server: where its write-ahead log goes, when moved.
    #[serde(default)]
    pub(crate) server_log_dir: Option<std::path::PathBuf>,
}

/// The flags of `perflab check bank`.
#[derive(Debug, clap::Args)]
pub struct BankCheckArgs {
    /// The bank's database (default sqlite:perflab-bank.db), postgres://… or mysql://…
    #[arg(long, value_name = "DSN")]
    pub(crate) target: Option<String>,

    /// Check pgbench's tables (pgbench_accounts …) instead of perflab's.
    #[arg(long)]
    pub(crate) pgbench: bool,
}

/// Refuses what the target's kind cannot run: an isolation level SQLite
/// lacks, pgbench's mix or pipeline mode outside PostgreSQL.
fn check_for_kind(args: &BankArgs, kind: TargetKind, mix: &BankMix) -> Result<(), PlanError> {
    if kind == TargetKind::Sqlite && args.isolation != Isolation::ReadCommitted {
        return Err(PlanError::flag(
            "--isolation",
            "SQLite transactions are always serializable",
            "drop --isolation, or use a postgres:// target",
        ));
    }
    if kind != TargetKind::Postgres && *mix == BankMix::Pgbench {
        return Err(PlanError::flag(
            "--mix",
            "pgbench runs on pgbench's tables in PostgreSQL",
            &format!("use --target postgres://USER@HOST/DB or {POSTGRES}"),
        ));
    }
    if args.pipeline && kind != TargetKind::Postgres {
        return Err(PlanError::flag(
            "--pipeline",
            "pipeline mode is PostgreSQL's",
            &format!("drop --pipeline, or use a postgres:// or {POSTGRES} target"),
        ));
    }
    Ok(())
}

impl WorkloadKind for Bank {
    const NAME: &'static str = "bank";
    const ABOUT: &'static str = concat!(
        "TPC-B's bank on a database: SQLite in process (",
        default_target!(),
        " unless --target names another), PostgreSQL or MariaDB/MySQL."
    );
    const CHECK_ABOUT: &'static str = "Check the bank: money conserved, rows present.";
    const RATE_UNIT: crate::units::RateUnit = crate::units::RateUnit::Transactions;
    type RunArgs = BankArgs;
    type CheckArgs = BankCheckArgs;
    type Spec = BankSpec;

    fn validate(args: &BankArgs) -> Result<BankSpec, PlanError> {
        let (target, server) = args.target.validate(DEFAULT_TARGET)?;
        if args.scale == 0 || args.scale > MAX_SCALE {
            return Err(PlanError::flag(
                "--scale",
                format!("{} is out of range", args.scale),
                "give 1 or more (each unit is 100,000 accounts)",
            ));
        }
        let mix = BankMix::parse(&args.mix).map_err(|e| {
            PlanError::flag(
                "--mix",
                e,
                "e.g. --mix tpcb or --mix atm:balance=40,withdraw=30",
            )
        })?;
        let isolation = args.isolation;
        let kind = target.traits().kind;
        check_for_kind(args, kind, &mix)?;
        if args.max_tries == 0 {
            return Err(PlanError::flag(
                "--max-tries",
                "0 tries runs nothing",
                "give 1 or more (default 10)",
            ));
        }
        if !kind.is_database() {
            return Err(PlanError::flag(
                "--target",
                format!("{} is not a database", target.redacted()),
                &format!(
                    "give {} (perflab run web drives web servers)",
                    crate::sut::schemes_of(TargetKind::is_database)
                ),
            ));
        }
        let ServerOptions {
            settings,
            keep,
            cpus,
            memory,
            link,
            io,
            log_dir,
            ..
        } = server;
        Ok(BankSpec {
            target,
            scale: args.scale,
            mix,
            reload: args.reload,
            isolation,
            max_tries: args.max_tries,
            pipeline: args.pipeline,
            server_settings: settings,
            keep,
            server_cpus: cpus,
            server_memory: memory,
            server_link: link,
            server_io: io,
            server_log_dir: log_dir,
        })
    }

    fn target(spec: &BankSpec) -> Target {
        spec.target.clone()
    }

    const ON_GENERATORS: bool = true;

    fn check_form(form: &serde_json::Value) -> Result<(), PlanError> {
        super::generator::read(form.clone()).map(|_| ())
    }

    fn on_generator<D: SweepDriver>(
        form: serde_json::Value,
        driver: D,
    ) -> anyhow::Result<D::Output> {
        super::generator::build(form, driver)
    }

    fn start<D: SweepDriver>(
        spec: &BankSpec,
        _plan: &Plan,
        driver: D,
    ) -> anyhow::Result<D::Output> {
        let server = ServerOptions {
            settings: spec.server_settings.clone(),
            keep: spec.keep,
            cpus: spec.server_cpus.clone(),
            memory: spec.server_memory,
            link: spec.server_link.clone(),
            io: spec.server_io.clone(),
            log_dir: spec.server_log_dir.clone(),
            addresses: Vec::new(),
            tls_files: None,
            origin: None,
            origin_of_link: None,
        };
        // A managed server lives until this function returns.
        let opened = Opened::open(&spec.target, &server)?;
        let scale = spec.scale;
        crate::util::out(format_args!(
            "preparing the bank (scale {scale}) in {}\n",
            opened.endpoint.display()
        ));
        let mut started = Started {
            server: opened.server_processes(),
            addresses: Some(opened.endpoint.addresses()),
            endpoint: Some(opened.endpoint.clone()),
            ..Started::default()
        };
        match &opened.endpoint {
            Endpoint::Sqlite(path) => {
                let (backend, load) = SqliteBank::prepare(path, scale, spec.reload)?;
                started.setup = Some(load_setup(&load));
                started.db_probe = clock_probe(&backend, None);
                let workload = Arc::new(BankWorkload::new(backend, spec.mix, scale)?);
                driver.drive(workload, started)
            }
            Endpoint::Postgres(pg) => {
                let prepared = opened.unthrottled(|| {
                    PgBank::prepare(
                        (**pg).clone(),
                        scale,
                        spec.mix,
                        spec.reload,
                        spec.isolation,
                        spec.max_tries,
                        spec.pipeline,
                    )
                })?;
                let form = super::generator::Form::postgres(
                    prepared.0.target(),
                    spec.mix,
                    scale,
                    spec.isolation,
                    spec.max_tries,
                    spec.pipeline,
                );
                drive_server(prepared, form, spec, &opened, started, driver)
            }
            Endpoint::Mysql(my) => {
                let prepared = opened.unthrottled(|| {
                    MyBank::prepare(
                        my.clone(),
                        scale,
                        spec.mix,
                        spec.reload,
                        spec.isolation,
                        spec.max_tries,
                    )
                })?;
                let form = super::generator::Form::mysql(
                    prepared.0.target(),
                    spec.mix,
                    scale,
                    spec.isolation,
                    spec.max_tries,
                );
                drive_server(prepared, form, spec, &opened, started, driver)
            }
            Endpoint::InProcess | Endpoint::Http { .. } => {
                anyhow::bail!("the bank needs a database target")
            }
        }
    }

    fn check(args: &BankCheckArgs) -> anyhow::Result<(String, CheckReport)> {
        let target = crate::sut::validate_target(args.target.as_deref(), DEFAULT_TARGET)?;
        if target.traits().managed {
            return Err(PlanError::flag(
                "--target",
                "a managed server is gone after its run",
                "check a sqlite:, postgres:// or mysql:// target",
            )
            .into());
        }
        let opened = Opened::open(&target, &ServerOptions::default())?;
        let figures = match &opened.endpoint {
            Endpoint::Sqlite(path) => SqliteBank::existing(path)?.figures()?,
            Endpoint::Postgres(pg) => PgBank::existing((**pg).clone(), args.pgbench)?.figures()?,
            Endpoint::Mysql(my) => MyBank::existing(my.clone())?.figures()?,
            Endpoint::InProcess | Endpoint::Http { .. } => {
                anyhow::bail!("the bank needs a database target")
            }
        };
        Ok((
            format!("bank in {}", target.redacted()),
            check_database(&figures),
        ))
    }
}

/// Hands a bank loaded on a database server to the driver, with the
/// server's setup record and its statistics probe.
fn drive_server<B: BankBackend, D: SweepDriver>(
    (backend, load): (B, LoadReport),
    form: Option<serde_json::Value>,
    spec: &BankSpec,
    opened: &Opened,
    mut started: Started,
    driver: D,
) -> anyhow::Result<D::Output> {
    started.setup = Some(crate::workload::merged_setup(
        &opened.setup,
        load_setup(&load),
    ));
    let server = opened.endpoint.stats_source().and_then(keep_source);
    started.db_probe = clock_probe(&backend, server);
    let workload = Arc::new(BankWorkload::new(backend, spec.mix, spec.scale)?.with_form(form));
    driver.drive(workload, started)
}

/// The server's statistics, or a warning and none: statistics are worth
/// having, not worth failing the run for.
fn keep_source(source: anyhow::Result<Box<dyn DbStatsSource>>) -> Option<Box<dyn DbStatsSource>> {
    match source {
        Ok(source) => Some(source),
        Err(e) => {
            crate::util::err(format_args!(
                "warning: no database statistics for this run: {}\n",
                crate::util::one_line(&format!("{e:#}"))
            ));
            None
        }
    }
}

/// The run's database probe: the sessions' BEGIN and COMMIT times, with
/// the server's statistics when it has them.
fn clock_probe<B: BankBackend>(
    backend: &B,
    server: Option<Box<dyn DbStatsSource>>,
) -> Option<crate::probe::DbProbe> {
    let source = ClockSource {
        clock: Arc::clone(backend.clock()),
        server,
    };
    crate::probe::DbProbe::start(source).ok()
}

/// Prints how the bank was made ready and returns it for the store.
fn load_setup(load: &LoadReport) -> serde_json::Value {
    if load.reused {
        crate::util::out(format_args!(
            "reused the loaded bank (checked in {})\n",
            crate::units::Latency(load.elapsed)
        ));
        serde_json::json!({ "reused": true, "seconds": load.elapsed.as_secs_f64() })
    } else {
        let rate = load.rows as f64 / load.elapsed.as_secs_f64().max(1e-9);
        crate::util::out(format_args!(
            "loaded {} rows in {} ({:.0} rows/s)\n",
            load.rows,
            crate::units::Latency(load.elapsed),
            rate
        ));
        serde_json::json!({
            "reused": false,
            "rows": load.rows,
            "seconds": load.elapsed.as_secs_f64(),
            "rows_per_second": rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `perflab run bank ARGS` validated into the bank's spec.
    fn spec(args: &[&str]) -> Result<BankSpec, PlanError> {
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            bank: BankArgs,
        }
        let flags = Flags::try_parse_from(std::iter::once("bank").chain(args.iter().copied()))
            .expect("flags parse");
        Bank::validate(&flags.bank)
    }

    #[test]
    fn the_embedded_default_is_the_target() {
        let s = spec(&[]).unwrap();
        assert_eq!(s.target.redacted(), DEFAULT_TARGET);
        assert_eq!((s.scale, s.mix, s.max_tries), (1, BankMix::Tpcb, 10));
    }

    #[test]
    fn bad_values_name_their_flag() {
        for (args, flag) in [
            (vec!["--mix", "tpcc"], "--mix"),
            (vec!["--scale", "0"], "--scale"),
            (vec!["--max-tries", "0"], "--max-tries"),
            (vec!["--isolation", "serializable"], "--isolation"),
            (vec!["--pipeline"], "--pipeline"),
            (vec!["--mix", "pgbench"], "--mix"),
            (vec!["--target", "sqlite:"], "--target"),
            (vec!["--pg-set", "a=b"], "--pg-set"),
            (
                vec!["--target", "postgres:managed", "--pg-set", "x"],
                "--pg-set",
            ),
        ] {
            let err = spec(&args).unwrap_err().to_string();
            assert!(err.starts_with(flag), "{args:?}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }

    /// A target that is no database is refused with every database target
    /// the bank takes, the managed ones included.
    #[test]
    fn a_refused_target_names_every_database_target() {
        let err = spec(&["--target", "file:/tmp/x.bin"])
            .unwrap_err()
            .to_string();
        for kind in crate::sut::managed::KINDS {
            assert_eq!(
                err.contains(kind.scheme),
                kind.target_kind.is_database(),
                "{}: {err}",
                kind.scheme
            );
        }
    }
}
