//! `perflab runs`, `perflab show` and `perflab diff-hosts`: read the
//! store, print or export.

use super::output::{text_or_json, write, Destination};
use super::Exit;
use crate::cli::{DiffHostsArgs, ShowArgs};
use crate::error::PlanError;
use crate::report::{Format, Output};
use crate::store::{Store, StoredRun};
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

/// A stored run read back: one it cannot be (its plan, host facts or
/// words damaged, the file's pages malformed) is bad input naming the
/// store and the fix, not a failed command.
pub(super) fn load_run(store: &Store, id: crate::store::RunId) -> anyhow::Result<StoredRun> {
    store
        .load_run(id)
        .map_err(|e| damaged(store.path(), e, |_| true))
}

/// `e` as bad input naming the store at `path` and the fix, when it is
/// `damage` (or the file is malformed); as it is otherwise.
pub(super) fn damaged(
    path: &Path,
    e: anyhow::Error,
    damage: impl Fn(&anyhow::Error) -> bool,
) -> anyhow::Error {
    let malformed = e.chain().any(|c| {
        c.downcast_ref::<rusqlite::Error>()
            .and_then(rusqlite::Error::sqlite_error_code)
            .is_some_and(|code| {
                matches!(
                    code,
                    rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
                )
            })
    });
    if e.chain().any(|c| c.is::<PlanError>()) || !(malformed || damage(&e)) {
        return e;
    }
    PlanError::new(format!(
        "the results store {} is damaged ({}); restore it from a copy, or give --store another store",
        path.display(),
        crate::util::one_line(&format!("{e:#}"))
    ))
    .into()
}

/// `perflab runs`.
pub(crate) fn runs(path: &Path) -> anyhow::Result<Exit> {
    let signals = super::report_signals::end_at_signal("listing the runs")?;
    let store = existing_store(path)?;
    let rows = store.runs().map_err(|e| damaged(path, e, |_| false))?;
    let output = Output::Runs {
        store: path,
        rows: &rows,
    };
    write(&output, Format::Text, Destination::Stdout)?;
    Ok(signals.exit(Exit::Ok))
}

/// `perflab show RUN [--json FILE]`.
pub(crate) fn show(args: &ShowArgs) -> anyhow::Result<Exit> {
    let signals = super::report_signals::end_at_signal("showing the run")?;
    let store = existing_store(&args.store.store)?;
    let id = store.resolve_run(&args.run)?;
    let run = load_run(&store, id)?;
    let output = Output::Run(&run);
    text_or_json(&output, args.json.as_deref(), &format!("run {id}"))?;
    Ok(signals.exit(Exit::Ok))
}

/// `perflab diff-hosts A B`: the facts of two runs' hosts that differ.
pub(crate) fn diff_hosts(args: &DiffHostsArgs) -> anyhow::Result<Exit> {
    let signals = super::report_signals::end_at_signal("comparing the hosts")?;
    let store = existing_store(&args.store.store)?;
    let (a, b) = (store.resolve_run(&args.a)?, store.resolve_run(&args.b)?);
    let inventory = |id| -> anyhow::Result<_> {
        load_run(&store, id)?.inventory.ok_or_else(|| {
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
    Ok(signals.exit(Exit::Ok))
}
