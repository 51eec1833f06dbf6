//! The CSV writer: a report's runs as two tables for a spreadsheet —
//! `steps.csv`, a row per step (the client's figures, then the server
//! host's: CPU and its split, run queue, busiest disk and link each way,
//! the database's main wait class), and `intervals.csv`, a row per
//! interval (throughput and p95 over time). Each throughput is followed by
//! its unit (`throughput_unit`: tps, req/s, IOPS or ops/s). Fields follow RFC 4180:
//! quoted when they hold a comma, quote or line break; a figure that was
//! not measured is an empty field. Times are seconds, shares fractions.

use super::format::{Document, Format, FormatError, Output, ReportRun};
use super::sections::{step_figures, StepFigures};
use crate::engine::StepResult;
use crate::measure::LatencySummary;
use crate::store::RunId;
use std::fmt::Write;

/// The header of `steps.csv`.
const STEPS_HEADER: &str = "run,step,load_kind,load,status,throughput,throughput_unit,p50_s,p95_s,p99_s,max_s,errors,retries,perflab_cpus,\
     cpu_busy,cpu_user,cpu_system,cpu_isr,cpu_iowait,cpu_steal,run_queue,\
     busiest_disk,disk_busy,busiest_link_rx,link_rx_busy,busiest_link_tx,link_tx_busy,\
     server_cpus,db_top_wait,db_top_wait_share\n";

/// The header of `intervals.csv`.
const INTERVALS_HEADER: &str =
    "run,step,load,interval,phase,start_s,length_s,throughput,throughput_unit,p95_s\n";

/// `output` as CSV files.
pub(super) fn write(output: &Output<'_>) -> Result<Document, FormatError> {
    match output {
        Output::Report { runs, .. } => Ok(Document::Files(vec![
            ("steps.csv", steps_csv(runs)),
            ("intervals.csv", intervals_csv(runs)),
        ])),
        _ => Err(FormatError::unsupported(output, Format::Csv)),
    }
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

/// A named busy share as two fields: the name and the share.
fn named(v: &Option<(String, f64)>) -> String {
    match v {
        Some((name, busy)) => format!("{},{busy:.4}", csv_text(name)),
        None => ",".to_string(),
    }
}

/// `steps.csv`: a row per step of every run.
fn steps_csv(runs: &[ReportRun<'_>]) -> String {
    let mut out = String::from(STEPS_HEADER);
    for r in runs {
        for (step, figures) in r.run.steps.iter().zip(step_figures(r.run)) {
            step_row(&mut out, r.run.id, step, &figures);
        }
    }
    out
}

/// One step's row of `steps.csv`.
fn step_row(out: &mut String, run: RunId, s: &StepResult, f: &StepFigures) {
    let p = &f.point;
    let e = &p.extras;
    let kind = s.level.kind();
    let _ = writeln!(
        out,
        "{},{},{kind},{},{},{:.3},{},{:.6},{:.6},{:.6},{:.6},{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{},{}",
        run,
        s.index,
        s.level.value(),
        s.status.as_str(),
        p.throughput,
        p.unit,
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
}

/// `intervals.csv`: a row per interval of every step of every run.
fn intervals_csv(runs: &[ReportRun<'_>]) -> String {
    let mut out = String::from(INTERVALS_HEADER);
    for r in runs {
        for s in &r.run.steps {
            for (i, iv) in s.intervals.iter().enumerate() {
                let secs = iv.length.as_secs_f64();
                let tally = iv.tally.unpack();
                let all = tally.all_ops();
                let _ = writeln!(
                    out,
                    "{},{},{},{i},{},{:.3},{:.3},{:.3},{},{:.6}",
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
                    r.run.rate_unit(),
                    LatencySummary::of(&tally.response()).p95.as_secs_f64()
                );
            }
        }
    }
    out
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
