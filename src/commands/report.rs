//! `perflab report RUN [RUN…]`: the runs as one self-contained HTML file
//! (`--html`), Markdown (`--md`) or CSV files (`--csv DIR`), made from the
//! store alone.

use super::Exit;
use crate::analyze::verdict_of_run;
use crate::cli::{PlanError, ReportArgs};
use crate::report::html::{render_html, ReportRun};
use crate::report::sections::{distribution, StepChoice};
use std::fmt::Write;
use std::path::Path;

fn write_file(path: &Path, text: &str, flag: &str) -> anyhow::Result<()> {
    super::write_output(path, text.trim_end_matches('\n'), flag).map(|_| ())
}

/// Runs `perflab report`.
pub fn report(args: &ReportArgs) -> anyhow::Result<Exit> {
    if args.html.is_none() && args.md.is_none() && args.csv.is_none() {
        return Err(
            PlanError::new("say what to write: --html FILE, --md FILE or --csv DIR").into(),
        );
    }
    let store = super::show::existing_store(&args.store.store)?;
    let mut runs = Vec::new();
    for r in &args.runs {
        runs.push(store.load_run(store.resolve_run(r)?)?);
    }
    let mut choices = Vec::new();
    for text in &args.steps {
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
    let verdicts: Vec<_> = runs.iter().map(|r| verdict_of_run(r, None, None)).collect();
    let mut pairs: Vec<ReportRun<'_>> = Vec::new();
    for (run, verdict) in runs.iter().zip(&verdicts) {
        let mut distributions = Vec::new();
        for choice in &choices {
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
    let comparison = (runs.len() > 1).then(|| {
        let seed = runs[0].plan_resolved["seed"].as_u64().unwrap_or(1);
        crate::analyze::compare::compare(&runs, &verdicts, &[], &vec![None; runs.len()], seed)
    });
    if let Some(path) = &args.html {
        write_file(path, &render_html(&pairs, comparison.as_ref()), "--html")?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &args.md {
        let text = crate::report::render_markdown(&pairs, comparison.as_ref());
        write_file(path, &text, "--md")?;
        println!("wrote {}", path.display());
    }
    if let Some(dir) = &args.csv {
        std::fs::create_dir_all(dir).map_err(|e| {
            PlanError::flag(
                "--csv",
                format!("cannot make {}: {e}", dir.display()),
                "give a writable directory",
            )
        })?;
        let (steps, intervals) = csv(&pairs);
        write_file(&dir.join("steps.csv"), &steps, "--csv")?;
        write_file(&dir.join("intervals.csv"), &intervals, "--csv")?;
        println!("wrote {}/steps.csv and intervals.csv", dir.display());
    }
    Ok(Exit::Ok)
}

fn csv(runs: &[ReportRun<'_>]) -> (String, String) {
    let mut steps = String::from(
        "run,step,load_kind,load,status,throughput,p50_s,p95_s,p99_s,max_s,errors,retries,perflab_cpus\n",
    );
    let mut intervals =
        String::from("run,step,load,interval,phase,start_s,length_s,throughput,p95_s\n");
    for r in runs {
        for s in &r.run.steps {
            let sum = s.summary();
            let kind = match s.level {
                crate::plan::Level::Users(_) => "users",
                crate::plan::Level::Rate(_) => "rate",
            };
            let _ = writeln!(
                steps,
                "{},{},{kind},{},{},{:.3},{:.6},{:.6},{:.6},{:.6},{},{},{:.3}",
                r.run.id,
                s.index,
                s.level.value(),
                s.status.as_str(),
                sum.throughput,
                sum.response.p50.as_secs_f64(),
                sum.response.p95.as_secs_f64(),
                sum.response.p99.as_secs_f64(),
                sum.response.max.as_secs_f64(),
                sum.errors,
                sum.retries,
                s.usage.cpu_share()
            );
            for (i, iv) in s.intervals.iter().enumerate() {
                let secs = iv.length.as_secs_f64();
                let all = iv.tally.all_ops();
                let _ = writeln!(
                    intervals,
                    "{},{},{},{i},{},{:.3},{:.3},{:.3},{:.6}",
                    r.run.id,
                    s.index,
                    s.level.value(),
                    iv.phase.as_str(),
                    iv.start.as_secs_f64(),
                    secs,
                    if secs > 0.0 {
                        all.completed() as f64 / secs
                    } else {
                        0.0
                    },
                    crate::measure::LatencySummary::of(&all.response)
                        .p95
                        .as_secs_f64()
                );
            }
        }
    }
    // CSV fields here are numbers and fixed words only: nothing to quote.
    (steps, intervals)
}
