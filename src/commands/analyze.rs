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
            if file.as_os_str() == "-" {
                println!("{text}");
            } else {
                std::fs::write(file, text + "\n")
                    .map_err(|e| {
                        PlanError::new(format!(
                            "cannot write {}: {e}; give --json a writable path",
                            file.display()
                        ))
                    })
                    .with_context(|| format!("writing the verdict of run {id}"))?;
                println!("wrote the verdict of run {id} to {}", file.display());
            }
        }
    }
    Ok(Exit::Ok)
}
