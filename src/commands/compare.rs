//! `perflab compare RUN RUN…`: runs of the same load model compared with
//! the first, level by level, with significance, an optional weighted
//! score and cost per throughput; as a table, Markdown (`--md`) or JSON
//! (`--json`).

use super::output::{write, Destination};
use super::Exit;
use crate::analyze::verdict_of_run;
use crate::cli::CompareArgs;
use crate::error::PlanError;
use crate::report::{Format, Output};
use crate::store::{Store, StoredRun};

/// Runs `perflab compare`.
pub(crate) fn compare(args: &CompareArgs) -> anyhow::Result<Exit> {
    let signals = super::report_signals::end_at_signal("comparing the runs")?;
    let format = if args.json {
        Format::Json
    } else if args.md {
        Format::Markdown
    } else {
        Format::Text
    };
    if let Some(text) = &args.fail_on {
        let thresholds = super::gate::thresholds(text)?;
        let files = super::gate::CiFiles {
            junit: args.junit.clone(),
            markdown: args.markdown.clone(),
        };
        let exit =
            super::gate::run_gate(&args.runs, &args.store.store, &thresholds, format, &files)?;
        return Ok(signals.exit(exit));
    }
    let weights = args
        .weights
        .as_deref()
        .map(crate::analyze::compare::parse_weights)
        .transpose()
        .map_err(|e| {
            PlanError::flag(
                "--weights",
                e,
                "e.g. --weights throughput=0.4,p95=0.4,cpu_per_op=0.2",
            )
        })?
        .unwrap_or_default();
    let store = super::show::existing_store(&args.store.store)?;
    let mut runs = Vec::new();
    for r in &args.runs {
        runs.push(super::show::load_run(&store, store.resolve_run(r)?)?);
    }
    same_load_model(&runs)?;
    let costs = costs(&args.cost, &store, &runs)?;
    let verdicts: Vec<_> = runs.iter().map(|r| verdict_of_run(r, None, None)).collect();
    let seed = runs[0].seed();
    let c = crate::analyze::compare::compare(&runs, &verdicts, &weights, &costs, seed);
    write(&Output::Comparison(&c), format, Destination::Stdout)?;
    Ok(signals.exit(Exit::Ok))
}

/// Runs that swept users and runs that swept arrival rates do not compare.
fn same_load_model(runs: &[StoredRun]) -> anyhow::Result<()> {
    let kinds: Vec<bool> = runs
        .iter()
        .filter_map(|r| r.steps.first())
        .map(|s| matches!(s.level, crate::plan::Level::Users(_)))
        .collect();
    if kinds.windows(2).any(|k| k[0] != k[1]) {
        return Err(PlanError::new(
            "these runs swept different things (users and arrival rates): compare runs of the same load model",
        )
        .into());
    }
    Ok(())
}

/// Each run's cost from `--cost RUN=AMOUNT`, in the order of `runs`.
fn costs(given: &[String], store: &Store, runs: &[StoredRun]) -> anyhow::Result<Vec<Option<f64>>> {
    let mut costs = vec![None; runs.len()];
    for c in given {
        let parsed = c.split_once('=').and_then(|(run, amount)| {
            let id = store.resolve_run(run).ok()?;
            let amount = amount
                .parse::<f64>()
                .ok()
                .filter(|a| a.is_finite() && *a > 0.0)?;
            Some((id, amount))
        });
        let Some((id, amount)) = parsed else {
            return Err(PlanError::flag(
                "--cost",
                format!("'{c}' is not RUN=AMOUNT for a run being compared"),
                "e.g. --cost 3=1200",
            )
            .into());
        };
        let Some(slot) = runs.iter().position(|r| r.id == id) else {
            return Err(PlanError::flag(
                "--cost",
                format!("run {id} is not among the runs compared"),
                "give a cost for a run on the command line",
            )
            .into());
        };
        if costs[slot].is_some() {
            return Err(PlanError::flag(
                "--cost",
                format!("run {id} is given a cost twice"),
                "give each run one cost",
            )
            .into());
        }
        costs[slot] = Some(amount);
    }
    Ok(costs)
}
