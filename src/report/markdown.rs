//! The Markdown writer. The report: for each run its facts, the verdict
//! in sentences (and whole, as printed), the per-step table with the
//! server's columns, the chosen steps' latency distribution, errors by
//! kind and stability; with several runs, the comparison with the first.
//! Made from the store alone, like the HTML form. A comparison alone
//! (`perflab compare --md`) is its table and summary.

use super::format::{one_final_newline, Document, Format, FormatError, Output, ReportRun};
use super::grid::Grid;
use super::sections::{
    distribution_grid, error_grid, facts, stability_grid, step_grid, VerdictText,
};
use crate::analyze::compare::Comparison;
use std::fmt::Write;

/// `output` as Markdown.
pub(super) fn write(output: &Output<'_>) -> Result<Document, FormatError> {
    match output {
        Output::Report { runs, comparison } => Ok(Document::Text(one_final_newline(
            &render_markdown(runs, *comparison),
        ))),
        Output::Comparison(c) => Ok(Document::Text(render_compare_md(c))),
        _ => Err(FormatError::unsupported(output, Format::Markdown)),
    }
}

/// Text from outside inside Markdown prose: no markup, no raw HTML.
pub(crate) fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The whole Markdown report.
pub(crate) fn render_markdown(runs: &[ReportRun<'_>], comparison: Option<&Comparison>) -> String {
    let ids: Vec<String> = runs.iter().map(|r| r.run.id.to_string()).collect();
    let mut out = format!("# perflab report: run {}\n", ids.join(", "));
    for r in runs {
        run_section(&mut out, r);
    }
    if let Some(c) = comparison {
        out.push_str(&render_compare_md(c));
    }
    out
}

/// One run: its facts, verdict, steps, distribution, errors, stability.
fn run_section(out: &mut String, r: &ReportRun<'_>) {
    let _ = writeln!(out, "\n## Run {}\n", r.run.id);
    let mut grid = Grid::new(["", ""]);
    grid.left = vec![0, 1];
    grid.rows = facts(r.run)
        .into_iter()
        .map(|(k, v)| vec![k.to_string(), v])
        .collect();
    out.push_str(&grid.markdown());
    verdict_section(out, r);
    tables(out, r);
}

/// The verdict in sentences, then whole as printed.
fn verdict_section(out: &mut String, r: &ReportRun<'_>) {
    let _ = writeln!(out, "\n### Verdict\n");
    let text = VerdictText::of(r.verdict);
    if !text.lead.is_empty() {
        let _ = writeln!(out, "{}\n", plain(&text.lead));
    }
    if let Some((name, unreliable)) = &text.stop {
        let _ = writeln!(
            out,
            "What stops it: **{}**{}.\n",
            plain(name),
            if *unreliable { " (unreliable)" } else { "" }
        );
        for p in &text.points {
            let _ = writeln!(out, "- {}", plain(p));
        }
        if let Some(n) = &text.next {
            let _ = writeln!(out, "\nNext: {}.", plain(n));
        }
        out.push('\n');
    }
    if let Some((head, lines)) = &text.what_if {
        let _ = writeln!(out, "What would change — {}:\n", plain(head));
        for line in lines {
            let _ = writeln!(out, "- {}", plain(line));
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "<details><summary>The whole verdict as printed</summary>\n\n```\n{}```\n\n</details>",
        super::render_verdict(r.verdict, r.run.id).replace("```", "'''")
    );
}

/// The steps, the chosen distributions, errors by kind and stability.
fn tables(out: &mut String, r: &ReportRun<'_>) {
    let _ = writeln!(
        out,
        "\n### Steps\n\nServer columns are {}'s.\n\n{}",
        plain(&r.verdict.server_host),
        step_grid(r.run).markdown()
    );
    if !r.distributions.is_empty() {
        let _ = writeln!(
            out,
            "### Latency distribution\n\n{}",
            distribution_grid(&r.distributions).markdown()
        );
    }
    match error_grid(&r.run.steps) {
        Some(grid) => {
            let _ = writeln!(out, "### Errors by kind\n\n{}", grid.markdown());
        }
        None => out.push_str("No errors in any step.\n\n"),
    }
    if let Some(grid) = super::generators::generator_grid(&r.run.steps, |l| l.to_string()) {
        let _ = writeln!(
            out,
            "### The generators\n\ncpu: CPUs used, of those it could use.\n\n{}",
            grid.markdown()
        );
    }
    out.push_str(&super::figures::markdown(r.run));
    let _ = writeln!(
        out,
        "### Stability\n\n{}",
        stability_grid(r.verdict).markdown()
    );
}

/// A comparison: how to read it, the level table, the summary.
pub(crate) fn render_compare_md(c: &Comparison) -> String {
    let mut out = format!(
        "## Comparison with run {}\n\nRatio of mean throughput with its 95% bootstrap interval; `~` = no significant difference (Mann–Whitney U, α = 0.05), `+`/`-` = significantly higher/lower.\n\n",
        c.runs[0].run
    );
    out.push_str(&Grid::from_rows(super::compare::rows(c)).markdown());
    out.push('\n');
    for line in super::compare::summary_lines(c) {
        let _ = writeln!(out, "- {line}");
    }
    out
}
