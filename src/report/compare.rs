//! A comparison as a terminal table: per level each run's throughput and
//! p95, and for contenders the ratio to the baseline with its 95%
//! interval — `~` when the difference is not significant, `+` or `−` when
//! it is — then the summary: peaks, knees, bottlenecks, score, cost. The
//! rows and summary lines are shared with the Markdown and HTML writers.

use super::grid::Grid;
use crate::analyze::compare::{Comparison, Difference};
use crate::units::{Latency, OpsPerSec, Rate};
use std::fmt::Write;

fn verdict_mark(d: &Difference) -> &'static str {
    match (d.significant, d.ratio >= 1.0) {
        (false, _) => "~",
        (true, true) => "+",
        (true, false) => "-",
    }
}

fn diff_text(d: &Difference) -> String {
    format!(
        "{} {:.2} [{:.2}, {:.2}]",
        verdict_mark(d),
        d.ratio,
        d.ci.0,
        d.ci.1
    )
}

/// What a unit of work cost at a run's peak (its workload's own cost,
/// e.g. a net run's CPU per transaction), and which of it and the
/// baseline costs less.
fn cost_text(cost: &crate::analyze::compare::UnitCost, base: i64) -> String {
    let w = &cost.words;
    let work = w.work;
    let mut text = format!(
        "{:.1} {} per {work} ({})",
        w.scaled(cost.per_unit),
        w.unit,
        w.whom
    );
    if let Some(d) = &cost.vs_base {
        let word = match (d.significant, d.ratio < 1.0) {
            (false, _) => format!("no significant difference from run {base}"),
            (true, true) => format!("costs less per {work} than run {base}"),
            (true, false) => format!("costs more per {work} than run {base}"),
        };
        let _ = write!(
            text,
            ", vs run {base}: {:.2} [{:.2}, {:.2}], p = {:.3}: {word}",
            d.ratio, d.ci.0, d.ci.1, d.p_value
        );
    }
    text
}

/// The rows of the level table: header, then one row per level.
pub(crate) fn rows(c: &Comparison) -> Vec<Vec<String>> {
    let mut header = vec!["load".to_string()];
    for (i, r) in c.runs.iter().enumerate() {
        header.push(format!("run {} {}", r.run, r.rate_unit));
        header.push("p95".to_string());
        if i > 0 {
            header.push(format!("run {} / run {}", r.run, c.runs[0].run));
        }
    }
    let mut out = vec![header];
    for level in &c.levels {
        let mut row = vec![level.label.clone()];
        for (i, cell) in level.cells.iter().enumerate() {
            match cell {
                Some(cell) => {
                    row.push(OpsPerSec(cell.throughput).to_string());
                    row.push(Latency::secs(cell.p95_s).to_string());
                    if i > 0 {
                        row.push(cell.vs_base.as_ref().map_or("-".to_string(), diff_text));
                    }
                }
                None => {
                    row.extend(["-".to_string(), "-".to_string()]);
                    if i > 0 {
                        row.push("-".to_string());
                    }
                }
            }
        }
        out.push(row);
    }
    out
}

pub(crate) fn summary_lines(c: &Comparison) -> Vec<String> {
    let base = &c.runs[0];
    let mut out = Vec::new();
    for r in &c.runs {
        let mut line = format!(
            "run {}: peak {} at {}; knee {}; bottleneck {}",
            r.run,
            r.peak_throughput
                .map_or("-".to_string(), |x| Rate(x, r.rate_unit).to_string()),
            r.peak_load.as_deref().unwrap_or("-"),
            r.knee_load
                .as_deref()
                .map_or("none".to_string(), |k| format!("at {k}")),
            r.bottleneck.as_deref().unwrap_or("-")
        );
        if let Some(d) = &r.peak_vs_base {
            let _ = write!(
                line,
                "; peak vs run {}: {}{}",
                base.run,
                diff_text(d),
                if d.significant {
                    ""
                } else {
                    " (no significant difference)"
                }
            );
        }
        if r.run != base.run {
            let moved = r.bottleneck != base.bottleneck;
            let _ = write!(
                line,
                "; bottleneck {}",
                if moved { "moved" } else { "unchanged" }
            );
        }
        if let Some(score) = r.score {
            let _ = write!(line, "; score {score:.2}");
        }
        if let Some((cost, per)) = r.cost {
            let _ = write!(
                line,
                "; {:.2} {} per unit of cost ({cost})",
                per, r.rate_unit
            );
        }
        if let Some(cost) = &r.unit_cost {
            let _ = write!(line, "; {}", cost_text(cost, base.run));
        }
        out.push(line);
    }
    if !c.weights.is_empty() {
        out.push(format!(
            "score: Σ weight × (metric at the run's peak relative to run {}; lower p95 and cpu_per_op count as better), weights {}",
            base.run,
            c.weights
                .iter()
                .map(|(n, w)| format!("{n}={w}"))
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    out
}

/// The terminal form.
pub(crate) fn render_compare(c: &Comparison) -> String {
    let mut out = format!(
        "compare: run {} is the baseline; ratio [95% CI], ~ = no significant difference (Mann–Whitney, α = 0.05)\n",
        c.runs[0].run
    );
    out.push_str(&Grid::from_rows(rows(c)).terminal("  "));
    out.push('\n');
    for line in summary_lines(c) {
        let _ = writeln!(out, "  {line}");
    }
    out
}
