//! `perflab check WORKLOAD`: a workload's data check on its own, outside a run.

use super::Exit;
use crate::cli::CheckArgs;
use crate::report::render_check;

/// Runs `perflab check`.
pub fn check(args: &CheckArgs) -> anyhow::Result<Exit> {
    let (what, report) = args.workload.choice.check()?;
    println!("{what}");
    print!("{}", render_check(&report));
    Ok(if report.passed {
        Exit::Ok
    } else {
        Exit::Failed
    })
}
