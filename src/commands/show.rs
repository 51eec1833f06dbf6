//! `perflab runs` and `perflab show`: read the store, print or export.

use super::Exit;
use crate::cli::{DiffHostsArgs, PlanError, ShowArgs};
use crate::report::{render_run, run_json};
use crate::store::Store;
use crate::units::OpsPerSec;
use anyhow::Context;
use std::path::Path;

/// Opens a store that must already exist (reading never creates one).
pub(super) fn existing_store(path: &Path) -> anyhow::Result<Store> {
    if !path.exists() {
        return Err(PlanError::new(format!(
            "there is no results store at {}; run `perflab run {} --quick` first or pass --store PATH",
            path.display(),
            crate::workload::first_name()
        ))
        .into());
    }
    Store::open(path)
}

/// `perflab runs`.
pub fn runs(path: &Path) -> anyhow::Result<Exit> {
    let store = existing_store(path)?;
    let rows = store.runs()?;
    if rows.is_empty() {
        println!("no runs in {}", path.display());
        return Ok(Exit::Ok);
    }
    println!(
        "{:>4}  {:<24}  {:<9}  {:<8}  {:>5}  {:>10}  target",
        "run", "started", "status", "workload", "steps", "peak tps"
    );
    for row in rows {
        println!(
            "{:>4}  {:<24}  {:<9}  {:<8}  {:>5}  {:>10}  {}",
            row.id,
            row.started_at,
            row.status.as_str(),
            row.workload,
            row.steps,
            row.peak_throughput
                .map_or("-".to_string(), |t| OpsPerSec(t).to_string()),
            row.target
        );
    }
    Ok(Exit::Ok)
}

/// `perflab show RUN [--json FILE]`.
pub fn show(args: &ShowArgs) -> anyhow::Result<Exit> {
    let store = existing_store(&args.store.store)?;
    let id = store.resolve_run(&args.run)?;
    let run = store.load_run(id)?;
    match &args.json {
        None => print!("{}", render_run(&run)),
        Some(file) => {
            let text = serde_json::to_string_pretty(&run_json(&run))?;
            if super::write_output(file, &text, "--json")
                .with_context(|| format!("exporting run {id}"))?
            {
                println!("wrote run {id} to {}", file.display());
            }
        }
    }
    Ok(Exit::Ok)
}

/// `perflab diff-hosts A B`: the facts of two runs' hosts that differ.
pub fn diff_hosts(args: &DiffHostsArgs) -> anyhow::Result<Exit> {
    let store = existing_store(&args.store.store)?;
    let (a, b) = (store.resolve_run(&args.a)?, store.resolve_run(&args.b)?);
    let inventory = |id| -> anyhow::Result<_> {
        store.load_run(id)?.inventory.ok_or_else(|| {
            PlanError::new(format!(
                "run {id} has no host inventory (runs record one since this version of perflab); compare runs made since"
            ))
            .into()
        })
    };
    let (ia, ib) = (inventory(a)?, inventory(b)?);
    let differences = crate::doctor::inventory::diff(&ia, &ib);
    if differences.is_empty() {
        println!(
            "the hosts of runs {a} and {b} do not differ in any of the {} facts recorded",
            ia.len().max(ib.len())
        );
        return Ok(Exit::Ok);
    }
    println!(
        "the hosts of runs {a} and {b} differ in {} of {} facts:",
        differences.len(),
        ia.len().max(ib.len())
    );
    let width = differences.iter().map(|d| d.key.len()).max().unwrap_or(0);
    for d in differences {
        println!(
            "  {:<width$}  {} → {}",
            d.key,
            d.a.as_deref().unwrap_or("(absent)"),
            d.b.as_deref().unwrap_or("(absent)")
        );
    }
    Ok(Exit::Ok)
}
