//! `perflab history [RUN] [--label KEY=VALUE]…`: the runs of one plan
//! (the plan of RUN, `last` by default: the same workload, target kind
//! and load shape, as the gate judges it, [`gate::plan_difference`]),
//! oldest first, as series per load level and metric with their change
//! points ([`crate::analyze::history`]); as text, JSON (`--json FILE`)
//! and an HTML page of charts (`--html FILE`). A plan with fewer than
//! two runs is bad input.

use super::output::{is_stdout, save, Readers, Saved};
use super::Exit;
use crate::analyze::gate;
use crate::analyze::history::{self, History, HistoryRun};
use crate::cli::HistoryArgs;
use crate::error::PlanError;
use crate::store::{Labels, RunId, RunStatus, Store};
use std::fmt::Write;

/// The most runs a history reads: the newest of them.
const MAX_RUNS: usize = 2_000;

/// Runs `perflab history`.
pub(crate) fn history(args: &HistoryArgs) -> anyhow::Result<Exit> {
    let signals = super::report_signals::end_at_signal("reading the history")?;
    let filter = crate::store::parse_labels(&args.labels)
        .map_err(|e| PlanError::flag("--label", e, "e.g. --label branch=main"))?;
    if !(args.penalty.is_finite() && args.penalty > 0.0 && args.penalty <= 100.0) {
        return Err(PlanError::flag(
            "--penalty",
            format!("{} is not a factor above 0 and at most 100", args.penalty),
            "e.g. --penalty 3 (the default); higher finds fewer changes",
        )
        .into());
    }
    let store = super::show::existing_store(&args.store.store)?;
    let id = store.resolve_run(&args.run)?;
    let runs = plan_runs(&store, id, &filter)?;
    let seed = super::show::load_run(&store, id)?.seed();
    let h = history::history(runs, args.penalty, seed);
    let title = format!("the plan of run {id}");
    let text = render(&h, &title, &filter);
    if args.json.as_deref().is_none_or(|p| !is_stdout(p)) {
        crate::util::out(format_args!("{text}"));
    }
    let json = serde_json::to_string_pretty(&h)? + "\n";
    let html = crate::report::history::history_html(&h, &title);
    let files = [
        (args.json.as_deref(), "--json", "the history as JSON", json),
        (args.html.as_deref(), "--html", "the history's charts", html),
    ];
    for (path, flag, what, body) in files {
        let Some(path) = path else { continue };
        if save(path, &body, flag, Readers::Umask)? == Saved::File {
            crate::util::out(format_args!("wrote {what} to {}\n", path.display()));
        }
    }
    Ok(signals.exit(Exit::Ok))
}

/// The runs of run `id`'s plan that carry every label of `filter`,
/// oldest first; fewer than two is bad input.
fn plan_runs(store: &Store, id: RunId, filter: &Labels) -> anyhow::Result<Vec<HistoryRun>> {
    let reference = crate::report::run_json(&super::show::load_run(store, id)?);
    let rows = store
        .runs()
        .map_err(|e| super::show::damaged(store.path(), e, |_| false))?;
    let workload = reference
        .pointer("/run/workload")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string();
    let candidates: Vec<RunId> = rows
        .iter()
        .filter(|r| r.damaged.is_none() && r.status == RunStatus::Complete)
        .filter(|r| r.workload == workload)
        .filter(|r| filter.iter().all(|(k, v)| r.labels.get(k) == Some(v)))
        .map(|r| r.id)
        .collect();
    let newest = &candidates[candidates.len().saturating_sub(MAX_RUNS)..];
    let mut out = Vec::new();
    for &run in newest {
        let stored = super::show::load_run(store, run)?;
        let export = crate::report::run_json(&stored);
        if gate::plan_difference(&reference, &export).is_none() {
            out.push(HistoryRun::of(run, stored.labels.clone(), &export));
        }
    }
    if out.len() < 2 {
        let with = if filter.is_empty() {
            String::new()
        } else {
            format!(" with {}", crate::store::labels_text(filter))
        };
        return Err(PlanError::new(format!(
            "the plan of run {id} has {} complete run{}{with} in {}: a history needs two or more; run the same plan again (perflab runs lists the runs)",
            out.len(),
            if out.len() == 1 { "" } else { "s" },
            store.path().display()
        ))
        .into());
    }
    Ok(out)
}

/// The history as text: its runs, each series in one line, each change.
fn render(h: &History, title: &str, filter: &Labels) -> String {
    let mut out = String::new();
    let ids: Vec<i64> = h.runs.iter().map(|r| r.id).collect();
    let _ = writeln!(
        out,
        "history of {title}: {} runs ({} … {}){}",
        ids.len(),
        ids.first().copied().unwrap_or(0),
        ids.last().copied().unwrap_or(0),
        if filter.is_empty() {
            String::new()
        } else {
            format!(", labelled {}", crate::store::labels_text(filter))
        }
    );
    for s in &h.series {
        let last = s.points.last().map_or(f64::NAN, |p| p.1);
        let value = if s.metric == "throughput" {
            format!("{}/s", crate::report::svg::number(last))
        } else {
            crate::report::svg::seconds(last)
        };
        let _ = writeln!(
            out,
            "  {} at {}: {} runs, noise {:.1}%, last {value}, {} change{}",
            s.metric,
            s.level,
            s.points.len(),
            s.noise * 100.0,
            s.changes.len(),
            if s.changes.len() == 1 { "" } else { "s" }
        );
    }
    let changes = h.changes();
    let _ = writeln!(
        out,
        "change points (PELT, penalty {} × ln n in the series' noise): {}",
        h.penalty,
        if changes.is_empty() { "none" } else { "" }
    );
    for c in changes {
        let _ = writeln!(out, "  {}", crate::util::printable(&c.said));
    }
    out
}
