//! `perflab analyze RUN`: the verdict of a stored run, recomputed from the
//! store alone — what the run printed at its end, or the same run judged
//! by other objectives (`--slo`, `--max-cv`).

use super::Exit;
use crate::analyze::verdict_of_run;
use crate::cli::{parse_max_cv, parse_slos, AnalyzeArgs, PlanError};
use crate::report::render_verdict;
use anyhow::Context;

/// Runs `perflab analyze`.
pub fn analyze(args: &AnalyzeArgs) -> anyhow::Result<Exit> {
    let slos = if args.slo.is_empty() {
        None
    } else {
        Some(parse_slos(&args.slo)?)
    };
    let max_cv = args.max_cv.as_deref().map(parse_max_cv).transpose()?;
    let store = super::show::existing_store(&args.store.store)?;
    let id = store.resolve_run(&args.run)?;
    let run = store.load_run(id)?;
    let verdict = verdict_of_run(&run, slos, max_cv);
    match &args.json {
        None => print!("{}", render_verdict(&verdict, id)),
        Some(file) => {
            let text = serde_json::to_string_pretty(&verdict)?;
            if super::write_output(file, &text, "--json")
                .with_context(|| format!("writing the verdict of run {id}"))?
            {
                println!("wrote the verdict of run {id} to {}", file.display());
            }
        }
    }
    Ok(Exit::Ok)
}

/// Runs `perflab compare`.
pub fn compare(args: &crate::cli::CompareArgs) -> anyhow::Result<Exit> {
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
        runs.push(store.load_run(store.resolve_run(r)?)?);
    }
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
    let mut costs = vec![None; runs.len()];
    for c in &args.cost {
        let parsed = c.split_once('=').and_then(|(run, amount)| {
            let id = store.resolve_run(run).ok()?;
            let amount = amount.parse::<f64>().ok().filter(|a| *a > 0.0)?;
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
        costs[slot] = Some(amount);
    }
    let verdicts: Vec<_> = runs.iter().map(|r| verdict_of_run(r, None, None)).collect();
    let seed = runs[0].seed();
    let c = crate::analyze::compare::compare(&runs, &verdicts, &weights, &costs, seed);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else if args.md {
        print!("{}", crate::report::render_compare_md(&c));
    } else {
        print!("{}", crate::report::render_compare(&c));
    }
    Ok(Exit::Ok)
}
