//! Labs in the store: a lab's spec (its variants and axes, as the lab
//! module writes them) and every cell, written whole before the first cell
//! runs and then marked as each cell ends, with the run it became. A lab
//! cut short keeps its finished cells and names the ones left.

use super::write::timestamp;
use super::{RunId, Store};
use crate::error::PlanError;
use rusqlite::{params, OptionalExtension};
use std::time::SystemTime;

/// Identifies a lab in a store.
pub type LabId = i64;

/// A cell as planned: one run of one variant.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCell {
    pub position: usize,
    pub variant: usize,
    pub repetition: u32,
    /// Its `perflab run` flags, as JSON.
    pub args: String,
}

/// A cell as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCell {
    pub position: usize,
    pub variant: usize,
    pub repetition: u32,
    pub args: String,
    /// `pending`, `running`, `done` (its run complete), `failed`
    /// (its run failed or did not start), `partial` (cut short).
    pub status: String,
    pub reason: Option<String>,
    pub run: Option<RunId>,
    /// The process of its run, once started.
    pub pid: Option<u32>,
    /// Its setup ran (or began) and its teardown has not run yet.
    pub teardown_owed: bool,
}

/// A lab as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredLab {
    pub id: LabId,
    pub name: String,
    pub file: String,
    pub started_at: String,
    /// `running`, `complete` or `partial`.
    pub status: String,
    /// The process that ran (or runs) it.
    pub pid: u32,
    /// The lab's spec, as the lab module wrote it (JSON).
    pub spec: String,
    pub cells: Vec<StoredCell>,
}

impl Store {
    /// Records a lab and all its cells (pending), in one transaction.
    pub fn create_lab(
        &mut self,
        name: &str,
        file: &str,
        spec: &str,
        cells: &[NewCell],
    ) -> anyhow::Result<LabId> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO labs (name, file, started_at, status, spec, pid) VALUES (?1, ?2, ?3, 'running', ?4, ?5)",
            params![name, file, timestamp(SystemTime::now()), spec, std::process::id()],
        )?;
        let lab = tx.last_insert_rowid();
        {
            let mut insert = tx.prepare(
                "INSERT INTO lab_cells (lab_id, position, variant, repetition, args, status) VALUES (?1, ?2, ?3, ?4, ?5, 'pending')",
            )?;
            for cell in cells {
                insert.execute(params![
                    lab,
                    cell.position,
                    cell.variant,
                    cell.repetition,
                    cell.args
                ])?;
            }
        }
        tx.commit()?;
        Ok(lab)
    }

    /// Marks a cell: `running` as it starts, then how it ended and the run
    /// it became.
    pub fn mark_cell(
        &mut self,
        lab: LabId,
        position: usize,
        status: &str,
        reason: Option<&str>,
        run: Option<RunId>,
    ) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE lab_cells SET status = ?3, status_reason = ?4, run_id = coalesce(?5, run_id) WHERE lab_id = ?1 AND position = ?2",
            params![lab, position, status, reason, run],
        )?;
        Ok(())
    }

    /// Records that cell `position` owes its variant's teardown (`true`,
    /// before its setup runs) or no longer does (once the teardown ran).
    pub fn owe_teardown(&mut self, lab: LabId, position: usize, owed: bool) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE lab_cells SET teardown_owed = ?3 WHERE lab_id = ?1 AND position = ?2",
            params![lab, position, owed],
        )?;
        Ok(())
    }

    /// Marks a cell running in process `pid`.
    pub fn cell_started(&mut self, lab: LabId, position: usize, pid: u32) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE lab_cells SET status = 'running', status_reason = NULL, pid = ?3 WHERE lab_id = ?1 AND position = ?2",
            params![lab, position, pid],
        )?;
        Ok(())
    }

    /// Marks a lab running again in this process (`lab resume`).
    pub fn resume_lab(&mut self, lab: LabId) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE labs SET status = 'running', finished_at = NULL, pid = ?2 WHERE id = ?1",
            params![lab, std::process::id()],
        )?;
        Ok(())
    }

    /// The status of run `run`, as stored.
    pub fn run_status(&self, run: RunId) -> anyhow::Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT status FROM runs WHERE id = ?1", [run], |r| r.get(0))
            .optional()?)
    }

    /// Records how a lab ended.
    pub fn finish_lab(&mut self, lab: LabId, status: &str) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE labs SET status = ?2, finished_at = ?3 WHERE id = ?1",
            params![lab, status, timestamp(SystemTime::now())],
        )?;
        Ok(())
    }

    /// The newest run written by process `pid` after run `after`.
    pub fn run_of_process(&self, pid: u32, after: RunId) -> anyhow::Result<Option<RunId>> {
        Ok(self.conn.query_row(
            "SELECT max(id) FROM runs WHERE pid = ?1 AND id > ?2",
            params![pid, after],
            |r| r.get::<_, Option<i64>>(0),
        )?)
    }

    /// The highest run number so far (0 for none).
    pub fn last_run_id(&self) -> anyhow::Result<RunId> {
        Ok(self
            .conn
            .query_row("SELECT coalesce(max(id), 0) FROM runs", [], |r| r.get(0))?)
    }

    /// A lab by number, or `last`.
    pub fn resolve_lab(&self, text: &str) -> anyhow::Result<LabId> {
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
    pub fn load_lab(&self, id: LabId) -> anyhow::Result<StoredLab> {
        let (name, file, started_at, status, spec, pid) = self.conn.query_row(
            "SELECT name, file, started_at, status, spec, pid FROM labs WHERE id = ?1",
            [id],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get::<_, i64>(5)?,
                ))
            },
        )?;
        let mut stmt = self.conn.prepare(
            "SELECT position, variant, repetition, args, status, status_reason, run_id, pid, teardown_owed FROM lab_cells WHERE lab_id = ?1 ORDER BY position",
        )?;
        let cells = stmt
            .query_map([id], |r| {
                Ok(StoredCell {
                    position: r.get::<_, i64>(0)?.max(0) as usize,
                    variant: r.get::<_, i64>(1)?.max(0) as usize,
                    repetition: r.get::<_, i64>(2)?.clamp(0, u32::MAX as i64) as u32,
                    args: r.get(3)?,
                    status: r.get(4)?,
                    reason: r.get(5)?,
                    run: r.get(6)?,
                    pid: r
                        .get::<_, Option<i64>>(7)?
                        .and_then(|p| u32::try_from(p).ok()),
                    teardown_owed: r.get::<_, i64>(8)? != 0,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StoredLab {
            id,
            name,
            file,
            started_at,
            status,
            pid: u32::try_from(pid).unwrap_or(0),
            spec,
            cells,
        })
    }
}
