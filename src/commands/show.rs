//! `perflab runs`, `perflab show` and `perflab diff-hosts`: read the
//! store, print or export.

use super::output::{text_or_json, write, Destination};
use super::Exit;
use crate::cli::{DiffHostsArgs, ShowArgs};
use crate::error::PlanError;
use crate::report::{Format, Output};
use crate::store::Store;
use std::path::Path;

/// Opens a store that must already exist, read-only (reading never
/// creates one, nor needs to write it).
pub(super) fn existing_store(path: &Path) -> anyhow::Result<Store> {
    if !path.exists() {
        return Err(PlanError::new(format!(
            "there is no results store at {}; run `perflab run {} --quick` first or pass --store PATH",
            path.display(),
            crate::workload::first_name()
        ))
        .into());
    }
    Store::open_read(path)
}

/// `perflab runs`.
pub(crate) fn runs(path: &Path) -> anyhow::Result<Exit> {
    let store = existing_store(path)?;
    let rows = store.runs()?;
    let output = Output::Runs {
        store: path,
        rows: &rows,
    };
    write(&output, Format::Text, Destination::Stdout)?;
    Ok(Exit::Ok)
}

/// `perflab show RUN [--json FILE]`.
pub(crate) fn show(args: &ShowArgs) -> anyhow::Result<Exit> {
    let store = existing_store(&args.store.store)?;
    let id = store.resolve_run(&args.run)?;
    let run = store.load_run(id)?;
    let output = Output::Run(&run);
    text_or_json(&output, args.json.as_deref(), &format!("run {id}"))?;
    Ok(Exit::Ok)
}

/// `perflab diff-hosts A B`: the facts of two runs' hosts that differ.
pub(crate) fn diff_hosts(args: &DiffHostsArgs) -> anyhow::Result<Exit> {
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
    let output = Output::HostDiff {
        a,
        b,
        facts: ia.len().max(ib.len()),
        differences: &differences,
    };
    write(&output, Format::Text, Destination::Stdout)?;
    Ok(Exit::Ok)
}
