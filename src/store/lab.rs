//! Labs in the store: a lab's spec (its variants and axes, as the lab
//! module writes them) and every cell, written whole before the first cell
//! runs and then marked as each cell ends, with the run it became. A lab
//! cut short keeps its finished cells and names the ones left.

use super::write::timestamp;
use super::{CellStatus, LabStatus, RunId, RunStatus, Store, StoredWord};
use crate::error::PlanError;
use anyhow::Context;
use rusqlite::{params, OptionalExtension};
use std::time::SystemTime;

/// Identifies a lab in a store.
pub(crate) type LabId = i64;

/// A cell as planned: one run of one variant.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewCell {
    pub(crate) position: usize,
    pub(crate) variant: usize,
    pub(crate) repetition: u32,
    /// Its `perflab run` flags, as JSON.
    pub(crate) args: String,
}

/// A cell as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredCell {
    pub(crate) position: usize,
    pub(crate) variant: usize,
    pub(crate) repetition: u32,
    pub(crate) args: String,
    pub(crate) status: CellStatus,
    pub(crate) reason: Option<String>,
    pub(crate) run: Option<RunId>,
    /// The process of its run, once started.
    pub(crate) pid: Option<u32>,
    /// Its setup ran (or began) and its teardown has not run yet.
    pub(crate) teardown_owed: bool,
}

/// A lab as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredLab {
    pub(crate) id: LabId,
    pub(crate) name: String,
    pub(crate) file: String,
    pub(crate) started_at: String,
    pub(crate) status: LabStatus,
    /// The process that ran (or runs) it.
    pub(crate) pid: u32,
    /// The lab's spec, as the lab module wrote it (JSON).
    pub(crate) spec: String,
    pub(crate) cells: Vec<StoredCell>,
}

/// How far a run has got, read from the store while it runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunProgress {
    pub(crate) status: RunStatus,
    /// Steps begun, the running one included.
    pub(crate) steps_begun: usize,
    /// The running step's index (from 0), if one runs.
    pub(crate) running_step: Option<usize>,
    /// Steps its plan holds (levels × repeats); none when its plan does
    /// not read.
    pub(crate) steps_planned: Option<usize>,
    /// Intervals stored so far, every step.
    pub(crate) intervals: u64,
    /// Operations stored so far, every step and phase: served, refused
    /// (declined for a business reason), failed.
    pub(crate) ok: u64,
    pub(crate) refused: u64,
    pub(crate) failed: u64,
}

impl Default for RunProgress {
    fn default() -> Self {
        RunProgress {
            status: RunStatus::Running,
            steps_begun: 0,
            running_step: None,
            steps_planned: None,
            intervals: 0,
            ok: 0,
            refused: 0,
            failed: 0,
        }
    }
}

impl Store {
    /// Records a lab and all its cells (pending), in one transaction.
    pub(crate) fn create_lab(
        &mut self,
        name: &str,
        file: &str,
        spec: &str,
        cells: &[NewCell],
    ) -> anyhow::Result<LabId> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO labs (name, file, started_at, status, spec, pid) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                name,
                file,
                timestamp(SystemTime::now()),
                LabStatus::Running.word(),
                spec,
                std::process::id()
            ],
        )?;
        let lab = tx.last_insert_rowid();
        {
            let mut insert = tx.prepare(
                "INSERT INTO lab_cells (lab_id, position, variant, repetition, args, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for cell in cells {
                insert.execute(params![
                    lab,
                    cell.position,
                    cell.variant,
                    cell.repetition,
                    cell.args,
                    CellStatus::Pending.word()
                ])?;
            }
        }
        tx.commit()?;
        Ok(lab)
    }

    /// Marks a cell: `running` as it starts, then how it ended and the run
    /// it became.
    pub(crate) fn mark_cell(
        &mut self,
        lab: LabId,
        position: usize,
        status: CellStatus,
        reason: Option<&str>,
        run: Option<RunId>,
    ) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE lab_cells SET status = ?3, status_reason = ?4, run_id = coalesce(?5, run_id) WHERE lab_id = ?1 AND position = ?2",
            params![lab, position, status.word(), reason, run],
        )?;
        Ok(())
    }

    /// Records that cell `position` owes its variant's teardown (`true`,
    /// before its setup runs) or no longer does (once the teardown ran).
    pub(crate) fn owe_teardown(
        &mut self,
        lab: LabId,
        position: usize,
        owed: bool,
    ) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE lab_cells SET teardown_owed = ?3 WHERE lab_id = ?1 AND position = ?2",
            params![lab, position, owed],
        )?;
        Ok(())
    }

    /// Marks a cell running in process `pid`.
    pub(crate) fn cell_started(
        &mut self,
        lab: LabId,
        position: usize,
        pid: u32,
    ) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE lab_cells SET status = ?4, status_reason = NULL, pid = ?3 WHERE lab_id = ?1 AND position = ?2",
            params![lab, position, pid, CellStatus::Running.word()],
        )?;
        Ok(())
    }

    /// Marks a lab running again in this process (`lab resume`).
    pub(crate) fn resume_lab(&mut self, lab: LabId) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE labs SET status = ?3, finished_at = NULL, pid = ?2 WHERE id = ?1",
            params![lab, std::process::id(), LabStatus::Running.word()],
        )?;
        Ok(())
    }

    /// The status of run `run`, as stored.
    pub(crate) fn run_status(&self, run: RunId) -> anyhow::Result<Option<RunStatus>> {
        let word: Option<String> = self
            .conn
            .query_row("SELECT status FROM runs WHERE id = ?1", [run], |r| r.get(0))
            .optional()?;
        word.map(|w| RunStatus::read(&w)).transpose()
    }

    /// Records how a lab ended.
    pub(crate) fn finish_lab(&mut self, lab: LabId, status: LabStatus) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE labs SET status = ?2, finished_at = ?3 WHERE id = ?1",
            params![lab, status.word(), timestamp(SystemTime::now())],
        )?;
        Ok(())
    }

    /// The newest run written by process `pid` after run `after`.
    pub(crate) fn run_of_process(&self, pid: u32, after: RunId) -> anyhow::Result<Option<RunId>> {
        Ok(self.conn.query_row(
            "SELECT max(id) FROM runs WHERE pid = ?1 AND id > ?2",
            params![pid, after],
            |r| r.get::<_, Option<i64>>(0),
        )?)
    }

    /// The newest run that process `pid` began at or after `since` (a
    /// stored timestamp): the run of a cell still running, before the
    /// lab marks the cell with it.
    pub(crate) fn run_begun_by(&self, pid: u32, since: &str) -> anyhow::Result<Option<RunId>> {
        Ok(self.conn.query_row(
            "SELECT max(id) FROM runs WHERE pid = ?1 AND started_at >= ?2",
            params![pid, since],
            |r| r.get::<_, Option<i64>>(0),
        )?)
    }

    /// The newest lab that process `pid` began after lab `after`: the
    /// lab a `perflab lab --serve` process is running.
    pub(crate) fn lab_of_process(&self, pid: u32, after: LabId) -> anyhow::Result<Option<LabId>> {
        Ok(self.conn.query_row(
            "SELECT max(id) FROM labs WHERE pid = ?1 AND id > ?2",
            params![pid, after],
            |r| r.get::<_, Option<i64>>(0),
        )?)
    }

    /// The highest lab number so far (0 for none).
    pub(crate) fn last_lab_id(&self) -> anyhow::Result<LabId> {
        Ok(self
            .conn
            .query_row("SELECT coalesce(max(id), 0) FROM labs", [], |r| r.get(0))?)
    }

    /// How far run `run` has got, read while its process writes it: the
    /// steps begun (the running one too, which a loaded run leaves out),
    /// the intervals and operations stored so far.
    pub(crate) fn run_progress(&self, run: RunId) -> anyhow::Result<RunProgress> {
        let (status, plan, target): (String, String, String) = self.conn.query_row(
            "SELECT status, plan_resolved, target FROM runs WHERE id = ?1",
            [run],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let steps_planned = serde_json::from_str(&plan)
            .ok()
            .and_then(|p| super::read::typed_plan(&p, &target))
            .map(|p| p.sweep.levels.len() * p.repeat.max(1) as usize);
        let (steps_begun, running_step): (i64, Option<i64>) = self.conn.query_row(
            "SELECT count(*), max(CASE WHEN status = 'running' THEN idx END) FROM steps WHERE run_id = ?1",
            [run],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let intervals: i64 = self.conn.query_row(
            "SELECT count(*) FROM intervals i JOIN steps s ON s.id = i.step_id WHERE s.run_id = ?1",
            [run],
            |r| r.get(0),
        )?;
        let mut progress = RunProgress {
            status: RunStatus::read(&status).with_context(|| format!("run {run}"))?,
            steps_begun: steps_begun.max(0) as usize,
            running_step: running_step.map(|i| i.max(0) as usize),
            steps_planned,
            intervals: intervals.max(0) as u64,
            ..RunProgress::default()
        };
        let mut stmt = self.conn.prepare(
            "SELECT o.ok, o.refused, o.errors FROM interval_ops o JOIN steps s ON s.id = o.step_id WHERE s.run_id = ?1",
        )?;
        let mut rows = stmt.query([run])?;
        while let Some(row) = rows.next()? {
            progress.ok += row.get::<_, i64>(0)?.max(0) as u64;
            progress.refused += row.get::<_, i64>(1)?.max(0) as u64;
            let errors: String = row.get(2)?;
            progress.failed += serde_json::from_str::<crate::measure::ErrorCounts>(&errors)
                .with_context(|| format!("run {run}: damaged error counts"))?
                .total();
        }
        Ok(progress)
    }

    /// The highest run number so far (0 for none).
    pub(crate) fn last_run_id(&self) -> anyhow::Result<RunId> {
        Ok(self
            .conn
            .query_row("SELECT coalesce(max(id), 0) FROM runs", [], |r| r.get(0))?)
    }

    /// A lab by number, or `last`.
    pub(crate) fn resolve_lab(&self, text: &str) -> anyhow::Result<LabId> {
        let id = if text == "last" {
            self.conn
                .query_row("SELECT max(id) FROM labs", [], |r| {
                    r.get::<_, Option<i64>>(0)
                })?
                .ok_or_else(|| {
                    PlanError::new(format!(
                        "the store {} holds no labs yet; start one with `perflab lab FILE.toml`",
                        self.path.display()
                    ))
                })?
        } else {
            text.parse::<LabId>().map_err(|_| {
                PlanError::new(format!("'{text}' is not a lab; give a lab number, or last"))
            })?
        };
        let exists: Option<i64> = self
            .conn
            .query_row("SELECT id FROM labs WHERE id = ?1", [id], |r| r.get(0))
            .optional()?;
        exists.ok_or_else(|| {
            PlanError::new(format!("lab {id} is not in {}", self.path.display())).into()
        })
    }

    /// Loads a lab and its cells, in their order.
    pub(crate) fn load_lab(&self, id: LabId) -> anyhow::Result<StoredLab> {
        let (name, file, started_at, status, spec, pid): (_, _, _, String, _, i64) =
            self.conn.query_row(
                "SELECT name, file, started_at, status, spec, pid FROM labs WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                },
            )?;
        Ok(StoredLab {
            id,
            name,
            file,
            started_at,
            status: LabStatus::read(&status).with_context(|| format!("lab {id}"))?,
            pid: u32::try_from(pid).unwrap_or(0),
            spec,
            cells: self.load_cells(id)?,
        })
    }

    /// The cells of lab `id`, in their order.
    fn load_cells(&self, id: LabId) -> anyhow::Result<Vec<StoredCell>> {
        let mut stmt = self.conn.prepare(
            "SELECT position, variant, repetition, args, status, status_reason, run_id, pid, teardown_owed FROM lab_cells WHERE lab_id = ?1 ORDER BY position",
        )?;
        let rows = stmt
            .query_map([id], |r| {
                let status: String = r.get(4)?;
                let cell = StoredCell {
                    position: r.get::<_, i64>(0)?.max(0) as usize,
                    variant: r.get::<_, i64>(1)?.max(0) as usize,
                    repetition: r.get::<_, i64>(2)?.clamp(0, u32::MAX as i64) as u32,
                    args: r.get(3)?,
                    // Set from the word just below, outside this closure.
                    status: CellStatus::Pending,
                    reason: r.get(5)?,
                    run: r.get(6)?,
                    pid: r
                        .get::<_, Option<i64>>(7)?
                        .and_then(|p| u32::try_from(p).ok()),
                    teardown_owed: r.get::<_, i64>(8)? != 0,
                };
                Ok((cell, status))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(cell, word)| {
                let status = CellStatus::read(&word)
                    .with_context(|| format!("lab {id}, cell {}", cell.position + 1))?;
                Ok(StoredCell { status, ..cell })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in a temporary directory holding one lab of two cells.
    fn lab_store() -> (tempfile::TempDir, Store, LabId) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("perflab.db")).unwrap();
        let cells: Vec<NewCell> = (0..2)
            .map(|position| NewCell {
                position,
                variant: position,
                repetition: 1,
                args: "[]".to_string(),
            })
            .collect();
        let lab = store.create_lab("two", "two.toml", "{}", &cells).unwrap();
        (dir, store, lab)
    }

    #[test]
    fn statuses_are_stored_as_their_words_and_read_back() {
        let (_dir, mut store, lab) = lab_store();
        let stored = store.load_lab(lab).unwrap();
        assert_eq!(stored.status, LabStatus::Running);
        assert!(stored.cells.iter().all(|c| c.status == CellStatus::Pending));
        store.cell_started(lab, 0, 7).unwrap();
        assert_eq!(
            store.load_lab(lab).unwrap().cells[0].status,
            CellStatus::Running
        );
        store
            .mark_cell(lab, 1, CellStatus::Failed, Some("no"), None)
            .unwrap();
        store.finish_lab(lab, LabStatus::Partial).unwrap();
        let words: (String, String) = store
            .conn
            .query_row(
                "SELECT l.status, c.status FROM labs l JOIN lab_cells c ON c.lab_id = l.id WHERE c.position = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(words, ("partial".to_string(), "failed".to_string()));
        let stored = store.load_lab(lab).unwrap();
        assert_eq!(stored.status, LabStatus::Partial);
        assert_eq!(stored.cells[1].status, CellStatus::Failed);
    }

    #[test]
    fn a_cell_status_no_perflab_writes_is_an_error_naming_it() {
        let (_dir, store, lab) = lab_store();
        store
            .conn
            .execute(
                "UPDATE lab_cells SET status = 'finished' WHERE position = 1",
                [],
            )
            .unwrap();
        let e = format!("{:#}", store.load_lab(lab).unwrap_err());
        assert_eq!(
            e,
            format!("lab {lab}, cell 2: unknown cell status 'finished' in the store")
        );
    }

    #[test]
    fn a_lab_status_no_perflab_writes_is_an_error_naming_it() {
        let (_dir, store, lab) = lab_store();
        store
            .conn
            .execute("UPDATE labs SET status = 'stopped'", [])
            .unwrap();
        let e = format!("{:#}", store.load_lab(lab).unwrap_err());
        assert_eq!(
            e,
            format!("lab {lab}: unknown lab status 'stopped' in the store")
        );
    }
}
