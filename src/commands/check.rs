//! `perflab check bank`: the bank's data check on its own, outside a run.

use super::Exit;
use crate::cli::{validate_target, CheckArgs, CheckWorkload, PlanError};
use crate::plan::Target;
use crate::report::render_check;
use crate::workload::bank::mysql::{self, MyBank};
use crate::workload::bank::postgres::{config as pg_config, PgBank};
use crate::workload::bank::sqlite::SqliteBank;
use crate::workload::bank::{check_database, BankBackend};

/// Runs `perflab check`.
pub fn check(args: &CheckArgs) -> anyhow::Result<Exit> {
    let CheckWorkload::Bank { target, pgbench } = &args.workload;
    let target = validate_target(target.as_deref())?;
    let figures = match &target {
        Target::Sqlite { path } => SqliteBank::existing(path)?.figures()?,
        Target::Postgres { url } => {
            let env = |name: &str| std::env::var(name).ok();
            let pg = pg_config::resolve(url, &env, pg_config::read_pgpass(&env).as_deref())
                .map_err(|e| {
                    PlanError::flag(
                        "--target",
                        e,
                        "e.g. --target postgres://bank@localhost/bank",
                    )
                })?;
            PgBank::existing(pg, *pgbench)?.figures()?
        }
        Target::Mysql { url } => {
            let env = |name: &str| std::env::var(name).ok();
            let my = mysql::resolve(url, &env).map_err(|e| {
                PlanError::flag("--target", e, "e.g. --target mysql://bank@localhost/bank")
            })?;
            MyBank::existing(my)?.figures()?
        }
        _ => {
            return Err(PlanError::flag(
                "--target",
                "a managed server is gone after its run",
                "check a sqlite: or postgres:// target",
            )
            .into())
        }
    };
    let report = check_database(&figures);
    println!("bank in {}", target.redacted());
    print!("{}", render_check(&report));
    Ok(if report.passed {
        Exit::Ok
    } else {
        Exit::Failed
    })
}
