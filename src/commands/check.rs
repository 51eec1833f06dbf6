//! `perflab check WORKLOAD`: a workload's data check on its own, outside a
//! run. Ctrl-C, SIGTERM and SIGHUP end it at once (a server that went
//! silent, a large table), with their exit code.

use super::output::{write, Destination};
use super::{Exit, StopSignals};
use crate::cli::CheckArgs;
use crate::report::{Format, Output};

/// Runs `perflab check`.
pub(crate) fn check(args: &CheckArgs) -> anyhow::Result<Exit> {
    let signals = StopSignals::register(&crate::util::interrupt_flag())?;
    let (what, report) = match args.workload.choice.check() {
        Err(e) if e.chain().any(|c| c.is::<crate::util::Interrupted>()) => {
            let (by, exit) = super::signal_exit(signals.first());
            let what = e
                .chain()
                .find(|c| c.is::<crate::util::Interrupted>())
                .map_or_else(String::new, ToString::to_string);
            crate::util::err(format_args!("error: {what} ({by}); nothing was checked\n"));
            return Ok(exit);
        }
        other => other?,
    };
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
