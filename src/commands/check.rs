//! `perflab check WORKLOAD`: a workload's data check on its own, outside a run.

use super::output::{write, Destination};
use super::Exit;
use crate::cli::CheckArgs;
use crate::report::{Format, Output};

/// Runs `perflab check`.
pub(crate) fn check(args: &CheckArgs) -> anyhow::Result<Exit> {
    let (what, report) = args.workload.choice.check()?;
    write(
        &Output::Check {
            what: &what,
            report: &report,
        },
        Format::Text,
        Destination::Stdout,
    )?;
    Ok(if report.passed {
        Exit::Ok
    } else {
        Exit::Failed
    })
}
