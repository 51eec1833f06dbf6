//! `perflab report RUN [RUN…]`: the runs as one self-contained HTML file
//! (`--html`), Markdown (`--md`) or CSV files (`--csv DIR`), made from the
//! store alone.

use super::output::{is_stdout, write, Destination};
use super::Exit;
use crate::analyze::{verdict_of_run, Verdict};
use crate::cli::ReportArgs;
use crate::error::PlanError;
use crate::report::sections::{distribution, StepChoice};
use crate::report::{Format, Output, ReportRun};
use crate::store::StoredRun;

/// Runs `perflab report`.
pub(crate) fn report(args: &ReportArgs) -> anyhow::Result<Exit> {
    if args.html.is_none() && args.md.is_none() && args.csv.is_none() {
        return Err(
            PlanError::new("say what to write: --html FILE, --md FILE or --csv DIR").into(),
        );
    }
    let signals = super::report_signals::end_at_signal("making the report")?;
    let store = super::show::existing_store(&args.store.store)?;
    let mut runs = Vec::new();
    for r in &args.runs {
        runs.push(super::show::load_run(&store, store.resolve_run(r)?)?);
    }
    let choices = step_choices(&args.steps)?;
    let verdicts: Vec<_> = runs.iter().map(|r| verdict_of_run(r, None, None)).collect();
    let pairs = report_runs(&runs, &verdicts, &choices)?;
    let comparison = (runs.len() > 1).then(|| {
        let seed = runs[0].seed();
        crate::analyze::compare::compare(&runs, &verdicts, &[], &vec![None; runs.len()], seed)
    });
    let output = Output::Report {
        runs: &pairs,
        comparison: comparison.as_ref(),
    };
    // A report on standard output (`-`) is followed by nothing else
    // there: what was written is then said on standard error.
    let to_stdout = [&args.html, &args.md]
        .iter()
        .any(|p| p.as_deref().is_some_and(is_stdout));
    let say = |text: std::fmt::Arguments<'_>| {
        if to_stdout {
            crate::util::err(text)
        } else {
            crate::util::out(text)
        }
    };
    if let Some(path) = &args.html {
        let to = Destination::File {
            path,
            flag: "--html",
        };
        if write(&output, Format::Html, to)? {
            say(format_args!("wrote {}\n", path.display()));
        }
    }
    if let Some(path) = &args.md {
        let to = Destination::File { path, flag: "--md" };
        if write(&output, Format::Markdown, to)? {
            say(format_args!("wrote {}\n", path.display()));
        }
    }
    if let Some(dir) = &args.csv {
        let to = Destination::Dir {
            path: dir,
            flag: "--csv",
        };
        write(&output, Format::Csv, to)?;
        say(format_args!(
            "wrote {}/steps.csv and intervals.csv\n",
            dir.display()
        ));
    }
    Ok(signals.exit(Exit::Ok))
}

/// The steps whose latency distribution to show (`--step`): the peak
/// step unless told.
fn step_choices(given: &[String]) -> anyhow::Result<Vec<StepChoice>> {
    let mut choices = Vec::new();
    for text in given {
        choices.push(StepChoice::parse(text).ok_or_else(|| {
            PlanError::flag(
                "--step",
                format!("'{text}' is not a load level"),
                "give a level of the sweep (8, 500) or peak",
            )
        })?);
    }
    if choices.is_empty() {
        choices.push(StepChoice::Peak);
    }
    Ok(choices)
}

/// Each run with its verdict and the chosen steps' distributions.
pub(super) fn report_runs<'a>(
    runs: &'a [StoredRun],
    verdicts: &'a [Verdict],
    choices: &[StepChoice],
) -> anyhow::Result<Vec<ReportRun<'a>>> {
    let mut pairs = Vec::new();
    for (run, verdict) in runs.iter().zip(verdicts) {
        let mut distributions = Vec::new();
        for choice in choices {
            let found = distribution(run, verdict, *choice)
                .map_err(|why| PlanError::flag("--step", why, "give one of its levels, or peak"))?;
            distributions.extend(found);
        }
        pairs.push(ReportRun {
            run,
            verdict,
            distributions,
        });
    }
    Ok(pairs)
}
