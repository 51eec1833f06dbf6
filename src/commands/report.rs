//! `perflab report RUN [RUN…]`: the runs as one self-contained HTML file
//! (`--html`), Markdown (`--md`) or CSV files (`--csv DIR`), made from the
//! store alone.

use super::Exit;
use crate::analyze::verdict_of_run;
use crate::cli::{PlanError, ReportArgs};
use crate::report::html::{render_html, ReportRun};
use crate::report::sections::{distribution, step_figures, StepChoice};
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
        let seed = runs[0].seed();
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

/// A CSV field: quoted when it holds a comma, quote or line break.
fn csv_text(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// A number, or an empty field when it was not measured.
fn csv_number(v: Option<f64>, places: usize) -> String {
    v.map_or(String::new(), |v| format!("{v:.places$}"))
}

fn csv(runs: &[ReportRun<'_>]) -> (String, String) {
    let mut steps = String::from(
        "run,step,load_kind,load,status,throughput,p50_s,p95_s,p99_s,max_s,errors,retries,perflab_cpus,\
         cpu_busy,cpu_user,cpu_system,cpu_isr,cpu_iowait,cpu_steal,run_queue,\
         busiest_disk,disk_busy,busiest_link_rx,link_rx_busy,busiest_link_tx,link_tx_busy,\
         server_cpus,db_top_wait,db_top_wait_share\n",
    );
    let mut intervals =
        String::from("run,step,load,interval,phase,start_s,length_s,throughput,p95_s\n");
    for r in runs {
        for (s, f) in r.run.steps.iter().zip(step_figures(r.run)) {
            let p = &f.point;
            let e = &p.extras;
            let kind = s.level.kind();
            let named = |v: &Option<(String, f64)>| match v {
                Some((name, busy)) => format!("{},{busy:.4}", csv_text(name)),
                None => ",".to_string(),
            };
            let _ = writeln!(
                steps,
                "{},{},{kind},{},{},{:.3},{:.6},{:.6},{:.6},{:.6},{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.run.id,
                s.index,
                s.level.value(),
                s.status.as_str(),
                p.throughput,
                p.response.p50.as_secs_f64(),
                p.response.p95.as_secs_f64(),
                p.response.p99.as_secs_f64(),
                p.response.max.as_secs_f64(),
                f.errors,
                p.retries,
                p.generator.cpus,
                csv_number(f.cpu, 4),
                csv_number(e.cpu_user, 4),
                csv_number(e.cpu_system, 4),
                csv_number(e.cpu_isr, 4),
                csv_number(e.cpu_iowait, 4),
                csv_number(e.steal, 4),
                csv_number(e.run_queue, 2),
                named(&f.disk),
                named(&f.link_rx),
                named(&f.link_tx),
                csv_number(e.server_cpus, 3),
                named(&f.top_wait),
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
    (steps, intervals)
}

#[cfg(test)]
mod tests {
    use super::csv_text;

    #[test]
    fn csv_fields_with_commas_or_quotes_are_quoted() {
        assert_eq!(csv_text("vda"), "vda");
        assert_eq!(csv_text("Lock, tuple"), "\"Lock, tuple\"");
        assert_eq!(csv_text("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
