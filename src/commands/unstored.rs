//! A measured step the store would not take: when another process holds
//! the results store past the whole of a commit's patience (ten minutes,
//! `store::retry`), the step the run kept in memory is written beside the
//! store as a JSON export — the format of `perflab show RUN --json` —
//! and the run ends there, saying in one line where its step went.
//!
//! The export is made the way every export is, from a store: the step is
//! replayed into a fresh store in a temporary directory, read back and
//! rendered, so it is the same document a stored run would give.

use crate::engine::{FinishedStep, IntervalRecord};
use crate::plan::Level;
use crate::report::{Document, Format, Output};
use crate::store::{NewRun, RunId, RunStatus, Store};
use std::path::{Path, PathBuf};

/// The run ended because the store stayed locked; its words say where
/// the measured step went.
#[derive(Debug)]
pub(super) struct LockedOut(pub(super) String);

impl std::fmt::Display for LockedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LockedOut {}

/// The running step, kept in memory until the store has all of it.
pub(super) struct KeptStep {
    pub(super) index: usize,
    pub(super) level: Level,
    pub(super) intervals: Vec<IntervalRecord>,
}

/// Writes `step`, finished as `finished`, of run `run` (described by
/// `new_run`) as a JSON export beside the store at `store`, because the
/// store stayed locked (`why`). The line the run ends with, as an error.
pub(super) fn spill(
    store: &Path,
    run: RunId,
    new_run: &NewRun,
    step: &KeptStep,
    finished: &FinishedStep,
    why: &str,
) -> anyhow::Error {
    let what = format!(
        "step {} ({}) of run {run} was measured, but {why}",
        step.index + 1,
        step.level
    );
    let written =
        export(run, new_run, step, finished, why).and_then(|json| write_beside(store, run, &json));
    let line = match written {
        Ok(file) => format!(
            "{what}: it is written to {} instead (the JSON of perflab show --json); the steps before it are stored as run {run}",
            file.display()
        ),
        Err(e) => format!(
            "{what}, and it could not be written elsewhere ({}): it is lost",
            crate::util::one_line(&format!("{e:#}"))
        ),
    };
    LockedOut(line).into()
}

/// The step as the JSON export of a run that holds it alone.
fn export(
    run: RunId,
    new_run: &NewRun,
    step: &KeptStep,
    finished: &FinishedStep,
    why: &str,
) -> anyhow::Result<String> {
    let dir = tempfile::Builder::new()
        .prefix("perflab-unstored-")
        .tempdir()?;
    let mut scratch = Store::open(&dir.path().join("perflab.db"))?;
    let id = scratch.create_run(new_run)?;
    let begun = scratch.begin_step(id, step.index, step.level)?;
    for (idx, interval) in step.intervals.iter().enumerate() {
        scratch.write_interval(begun, idx, interval)?;
    }
    scratch.finish_step(begun, finished)?;
    let reason = format!("{why}; this step alone is here, the steps before it are in that store");
    scratch.finish_run(id, RunStatus::Partial, Some(&reason), None)?;
    let mut stored = scratch.load_run(id)?;
    stored.id = run;
    match crate::report::render(Format::Json, &Output::Run(&stored))? {
        Document::Text(json) => Ok(json),
        Document::Files(_) => Err(anyhow::anyhow!("the JSON export came as several files")),
    }
}

/// Writes `json` to a new file beside the store, never over one that is
/// there: `perflab-run-RUN-unstored.json`, numbered when taken.
fn write_beside(store: &Path, run: RunId, json: &str) -> anyhow::Result<PathBuf> {
    use std::io::Write;
    let dir = match store.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    for n in 0..100 {
        let name = match n {
            0 => format!("perflab-run-{run}-unstored.json"),
            n => format!("perflab-run-{run}-unstored-{n}.json"),
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                let written = file
                    .write_all(json.as_bytes())
                    .and_then(|()| file.sync_all());
                if let Err(e) = written {
                    let _ = std::fs::remove_file(&path);
                    return Err(anyhow::anyhow!("cannot write {}: {e}", path.display()));
                }
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(anyhow::anyhow!("cannot make {}: {e}", path.display())),
        }
    }
    Err(anyhow::anyhow!(
        "{} holds 100 files of run {run} not stored already",
        dir.display()
    ))
}
