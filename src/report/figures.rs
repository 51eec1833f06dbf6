//! A workload's own figures ([`crate::workload::figures`]) in every
//! report format: one table per run, a row per step (its load, then the
//! workload's columns), under the workload's title and what its columns
//! count. The JSON export keeps each step's figures under the workload's
//! key ([`steps_json`]).

use super::grid::Grid;
use super::svg::escape;
use crate::store::StoredRun;
use crate::workload::figures::Figures;
use serde_json::Value;

/// The figures' grid: the load, then the workload's columns.
fn grid(run: &StoredRun, figures: &Figures) -> Grid {
    let mut grid = Grid::new(std::iter::once("load".to_string()).chain(figures.heads.clone()));
    for (step, own) in run.steps.iter().zip(&figures.steps) {
        let mut row = vec![step.level.to_string()];
        row.extend(own.cells.iter().cloned());
        grid.rows.push(row);
    }
    grid
}

/// `text` with its first letter in capitals.
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or(String::new(), |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// The terminal's section; empty when the run's workload has none.
pub(crate) fn table(run: &StoredRun) -> String {
    run.figures().map_or(String::new(), |f| {
        let mut out = format!(
            "\n{} ({}):\n{}",
            f.title,
            f.about,
            grid(run, &f).terminal("")
        );
        for line in &f.legend {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
        out
    })
}

/// The Markdown section; empty when the run's workload has none.
pub(crate) fn markdown(run: &StoredRun) -> String {
    run.figures().map_or(String::new(), |f| {
        let legend: String = f
            .legend
            .iter()
            .map(|l| format!("- `{}`\n", l.replace('`', "'")))
            .collect();
        format!(
            "### {}\n\n{}.\n\n{}\n{}",
            capitalised(&f.title),
            capitalised(&f.about),
            grid(run, &f).markdown(),
            if legend.is_empty() {
                String::new()
            } else {
                format!("{legend}\n")
            }
        )
    })
}

/// The HTML section of run `id`; empty when the run's workload has none.
pub(crate) fn html(run: &StoredRun, id: i64) -> String {
    run.figures().map_or(String::new(), |f| {
        let legend: String = f
            .legend
            .iter()
            .map(|l| format!("<li>{}</li>", escape(l)))
            .collect();
        format!(
            "<h3>Run {id}: {}</h3><p>{}.</p>{}{}",
            escape(&f.title),
            escape(&capitalised(&f.about)),
            grid(run, &f).html(),
            if legend.is_empty() {
                String::new()
            } else {
                format!("<ul>{legend}</ul>")
            }
        )
    })
}

/// Adds each step's figures to the export's `steps`, under the
/// workload's key.
pub(crate) fn steps_json(run: &StoredRun, steps: &mut [Value]) {
    let Some(figures) = run.figures() else {
        return;
    };
    for (step, own) in steps.iter_mut().zip(figures.steps) {
        if !own.export.is_null() {
            step[figures.key] = own.export;
        }
    }
}
