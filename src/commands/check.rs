//! `perflab check bank`: the bank's data check on its own, outside a run.

use super::Exit;
use crate::cli::{validate_target, CheckArgs, CheckWorkload, PlanError};
use crate::plan::Target;
use crate::report::render_check;
use crate::workload::bank::sqlite::SqliteBank;
use crate::workload::bank::{check_database, BankBackend};

/// Runs `perflab check`.
pub fn check(args: &CheckArgs) -> anyhow::Result<Exit> {
    let CheckWorkload::Bank { target } = &args.workload;
    let target = validate_target(target.as_deref())?;
    let Target::Sqlite { path } = &target else {
        return Err(
            PlanError::new("the bank check runs on sqlite targets only in this build").into(),
        );
    };
    let bank = SqliteBank::existing(path)?;
    let report = check_database(&bank.figures()?);
    println!("bank in {}", target.redacted());
    print!("{}", render_check(&report));
    Ok(if report.passed {
        Exit::Ok
    } else {
        Exit::Failed
    })
}
