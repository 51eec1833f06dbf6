//! The store's own listings as text: `perflab runs` (a line per stored
//! run) and `perflab diff-hosts` (the facts in which two runs' hosts
//! differ, one per line).

use crate::doctor::inventory::Difference;
use crate::store::{RunId, RunRow};
use crate::units::Rate;
use std::fmt::Write;
use std::path::Path;

/// Every run in the store at `store`, oldest first, or a line saying
/// there is none.
pub(crate) fn render_runs(store: &Path, rows: &[RunRow]) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        let _ = writeln!(out, "no runs in {}", store.display());
        return out;
    }
    let _ = writeln!(
        out,
        "{:>4}  {:<24}  {:<9}  {:<8}  {:>5}  {:>14}  target",
        "run", "started", "status", "workload", "steps", "peak"
    );
    for row in rows {
        if let Some(why) = &row.damaged {
            let _ = writeln!(
                out,
                "{:>4}  damaged, not readable: {}",
                row.id,
                crate::util::printable(why)
            );
            continue;
        }
        let _ = writeln!(
            out,
            "{:>4}  {:<24}  {:<9}  {:<8}  {:>5}  {:>14}  {}",
            row.id,
            row.started_at,
            row.status.as_str(),
            row.workload,
            row.steps,
            row.peak_throughput
                .map_or("-".to_string(), |t| Rate(t, row.rate_unit()).to_string()),
            row.target
        );
        if !row.labels.is_empty() {
            let _ = writeln!(out, "      {}", crate::store::labels_text(&row.labels));
        }
    }
    out
}

/// The facts in which the hosts of runs `a` and `b` differ, of `facts`
/// recorded: `key  a → b`, aligned on the keys.
pub(crate) fn render_host_diff(
    a: RunId,
    b: RunId,
    facts: usize,
    differences: &[Difference],
) -> String {
    let mut out = String::new();
    if differences.is_empty() {
        let _ = writeln!(
            out,
            "the hosts of runs {a} and {b} do not differ in any of the {facts} facts recorded"
        );
        return out;
    }
    let _ = writeln!(
        out,
        "the hosts of runs {a} and {b} differ in {} of {facts} facts:",
        differences.len()
    );
    let width = differences.iter().map(|d| d.key.len()).max().unwrap_or(0);
    for d in differences {
        let _ = writeln!(
            out,
            "  {:<width$}  {} → {}",
            d.key,
            d.a.as_deref().unwrap_or("(absent)"),
            d.b.as_deref().unwrap_or("(absent)")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RunStatus;

    #[test]
    fn an_empty_store_says_so_and_runs_line_up_under_the_header() {
        assert_eq!(render_runs(Path::new("x.db"), &[]), "no runs in x.db\n");
        let row = RunRow {
            id: 7,
            started_at: "2026-11-23T16:00:00Z".to_string(),
            status: RunStatus::Complete,
            workload: "bank".to_string(),
            target: "sqlite:bank.db".to_string(),
            steps: 6,
            peak_throughput: None,
            first_op: None,
            damaged: None,
            labels: crate::store::Labels::new(),
        };
        let base = row.clone();
        let damaged = RunRow {
            id: 8,
            damaged: Some("Invalid column type Blob at index: 1\x1b[2J".to_string()),
            ..row.clone()
        };
        let text = render_runs(Path::new("x.db"), &[row, damaged]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(
            lines[2],
            "   8  damaged, not readable: Invalid column type Blob at index: 1\u{fffd}[2J"
        );
        assert!(lines[0].starts_with(" run  started"), "{text}");
        let mut labelled = base;
        labelled
            .labels
            .insert("commit".to_string(), "abc123".to_string());
        let text = render_runs(Path::new("x.db"), &[labelled]);
        assert_eq!(text.lines().nth(2), Some("      commit=abc123"), "{text}");
        assert!(lines[1].starts_with("   7  2026-11-23T16:00:00Z"), "{text}");
        assert!(lines[1].ends_with("  sqlite:bank.db"), "{text}");
        assert_eq!(
            lines[0].find("target"),
            lines[1].find("sqlite"),
            "the target column lines up: {text}"
        );
    }

    #[test]
    fn host_differences_align_on_their_keys_and_name_absent_facts() {
        let differences = [
            Difference {
                key: "cpu.count".to_string(),
                a: Some("2".to_string()),
                b: Some("4".to_string()),
            },
            Difference {
                key: "disk.vda.scheduler".to_string(),
                a: None,
                b: Some("none".to_string()),
            },
        ];
        assert_eq!(
            render_host_diff(1, 2, 30, &differences),
            "the hosts of runs 1 and 2 differ in 2 of 30 facts:\n\
             \x20 cpu.count           2 → 4\n\
             \x20 disk.vda.scheduler  (absent) → none\n"
        );
        assert_eq!(
            render_host_diff(1, 2, 30, &[]),
            "the hosts of runs 1 and 2 do not differ in any of the 30 facts recorded\n"
        );
    }
}
