//! Writing runs: a run row when the run starts; a step row when a step
//! starts and each interval as it ends, each in its own transaction (a
//! long step keeps none in memory); the final status (with the check) when
//! the run ends. Each commit waits through another process's lock
//! (`retry.rs`).

use super::{RunId, RunStatus, Store};
use crate::engine::{FinishedStep, IntervalRecord, StepResult, StepStatus};
use crate::plan::Level;
use crate::probe::HostFacts;
use crate::probe::SelfUsage;
use crate::workload::CheckReport;
use anyhow::Context;
use rusqlite::params;
use std::time::SystemTime;

/// What is known of a run when it starts.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub started_at: SystemTime,
    pub workload: String,
    /// The target with credentials redacted.
    pub target: String,
    pub op_names: Vec<String>,
    /// The command line as typed.
    pub plan_given: Vec<String>,
    /// The validated plan.
    pub plan_resolved: serde_json::Value,
    pub host: HostFacts,
    /// How the target was made ready (the bank's load), if it was.
    pub setup: Option<serde_json::Value>,
}

/// A step row in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepId(i64);

/// The status a step has while it runs.
const STEP_RUNNING: &str = "running";

/// Inserts a step as running.
fn insert_step(
    conn: &rusqlite::Connection,
    run: RunId,
    index: usize,
    level: Level,
) -> rusqlite::Result<i64> {
    conn.execute(
        "INSERT INTO steps (run_id, idx, level_kind, level, status, started_at, usage)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, '{}')",
        params![
            run,
            index as i64,
            level.kind(),
            level.value(),
            STEP_RUNNING,
            timestamp(SystemTime::now()),
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Gives a running step how it ended.
fn end_step(
    conn: &rusqlite::Connection,
    step_id: i64,
    status: &StepStatus,
    started_at: SystemTime,
    usage: &SelfUsage,
) -> anyhow::Result<()> {
    conn.execute(
        "UPDATE steps SET status = ?2, status_reason = ?3, started_at = ?4, usage = ?5 WHERE id = ?1",
        params![
            step_id,
            status.as_str(),
            status.reason(),
            timestamp(started_at),
            serde_json::to_string(usage)?,
        ],
    )?;
    Ok(())
}

/// RFC 3339 with milliseconds, UTC: how the store writes every time.
pub(crate) fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

impl Store {
    /// Records a new run as `running`.
    pub fn create_run(&mut self, run: &NewRun) -> anyhow::Result<RunId> {
        let row = params![
            timestamp(run.started_at),
            RunStatus::Running.as_str(),
            run.workload,
            run.target,
            serde_json::to_string(&run.op_names)?,
            serde_json::to_string(&run.plan_given)?,
            run.plan_resolved.to_string(),
            env!("CARGO_PKG_VERSION"),
            serde_json::to_string(&run.host)?,
            std::process::id(),
            run.setup.as_ref().map(|s| s.to_string()),
            super::writer::identity(std::process::id()),
        ];
        let path = self.path.display().to_string();
        self.committed(|conn| {
            conn.execute(
                "INSERT INTO runs (started_at, status, workload, target, op_names, plan_given,
                    plan_resolved, tool_version, host, pid, setup, writer)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                row,
            )
            .with_context(|| format!("cannot write to the results store {path}"))?;
            Ok(conn.last_insert_rowid())
        })
    }

    /// Commits one whole step with all its intervals, in one transaction.
    pub fn commit_step(&mut self, run: RunId, step: &StepResult) -> anyhow::Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction()?;
        let step_id = insert_step(&tx, run, step.index, step.level)?;
        {
            let mut writer = IntervalWriter::prepare(&tx)?;
            for (idx, interval) in step.intervals.iter().enumerate() {
                writer.write(step_id, idx, interval)?;
            }
        }
        end_step(&tx, step_id, &step.status, step.started_at, &step.usage)?;
        tx.commit()
            .with_context(|| format!("cannot commit a step to {}", path.display()))?;
        Ok(())
    }

    /// Records a step as it starts, `running` (readers pass over it until it
    /// ends); its intervals follow one by one as they end.
    pub(crate) fn begin_step(
        &mut self,
        run: RunId,
        index: usize,
        level: Level,
    ) -> anyhow::Result<StepId> {
        let path = self.path.display().to_string();
        let id = self.committed(|conn| {
            insert_step(conn, run, index, level)
                .with_context(|| format!("cannot write to the results store {path}"))
        })?;
        Ok(StepId(id))
    }

    /// Commits interval `idx` of a running step.
    pub(crate) fn write_interval(
        &mut self,
        step: StepId,
        idx: usize,
        interval: &IntervalRecord,
    ) -> anyhow::Result<()> {
        let path = self.path.clone();
        self.committed(|conn| {
            let tx = conn.transaction()?;
            IntervalWriter::prepare(&tx)?.write(step.0, idx, interval)?;
            tx.commit()
                .with_context(|| format!("cannot commit an interval to {}", path.display()))
        })
    }

    /// Ends a running step: its drain, its status and perflab's usage.
    pub(crate) fn finish_step(
        &mut self,
        step: StepId,
        finished: &FinishedStep,
    ) -> anyhow::Result<()> {
        let path = self.path.clone();
        self.committed(|conn| {
            let tx = conn.transaction()?;
            IntervalWriter::prepare(&tx)?.write(step.0, finished.handed_over, &finished.drain)?;
            end_step(
                &tx,
                step.0,
                &finished.status,
                finished.started_at,
                &finished.usage,
            )?;
            if !finished.generators.is_empty() {
                tx.execute(
                    "UPDATE steps SET generators = ?2 WHERE id = ?1",
                    params![step.0, serde_json::to_string(&finished.generators)?],
                )?;
            }
            tx.commit()
                .with_context(|| format!("cannot commit a step to {}", path.display()))
        })
    }

    /// Removes a running step and what was written of it.
    pub(crate) fn drop_step(&mut self, step: StepId) -> anyhow::Result<()> {
        let tx = self.conn.transaction()?;
        for table in [
            "interval_ops",
            "interval_db",
            "interval_host",
            "interval_probe",
            "intervals",
        ] {
            tx.execute(&format!("DELETE FROM {table} WHERE step_id = ?1"), [step.0])?;
        }
        tx.execute("DELETE FROM steps WHERE id = ?1", [step.0])?;
        tx.commit()?;
        Ok(())
    }

    /// Records how a run ended.
    pub fn finish_run(
        &mut self,
        run: RunId,
        status: RunStatus,
        reason: Option<&str>,
        check: Option<&CheckReport>,
    ) -> anyhow::Result<()> {
        let check = check.map(serde_json::to_string).transpose()?;
        let finished_at = timestamp(SystemTime::now());
        self.committed(|conn| {
            conn.execute(
                "UPDATE runs SET status = ?2, status_reason = ?3, check_report = ?4, finished_at = ?5 WHERE id = ?1",
                params![run, status.as_str(), reason, check, finished_at],
            )?;
            Ok(())
        })
    }

    /// Stores the hosts' inventory of a run.
    pub fn save_inventory(
        &mut self,
        run: RunId,
        inventory: &std::collections::BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let inventory = serde_json::to_string(inventory)?;
        self.committed(|conn| {
            conn.execute(
                "UPDATE runs SET inventory = ?2 WHERE id = ?1",
                params![run, inventory],
            )?;
            Ok(())
        })
    }

    /// Stores a run's verdict (JSON), replacing any earlier one.
    pub(crate) fn save_verdict(
        &mut self,
        run: RunId,
        verdict: &serde_json::Value,
    ) -> anyhow::Result<()> {
        let verdict = serde_json::to_string(verdict)?;
        self.committed(|conn| {
            conn.execute(
                "UPDATE runs SET verdict = ?2 WHERE id = ?1",
                params![run, verdict],
            )?;
            Ok(())
        })
    }
}

/// The statements that write one step's intervals, prepared once per step.
struct IntervalWriter<'tx> {
    interval: rusqlite::Statement<'tx>,
    db: rusqlite::Statement<'tx>,
    host: rusqlite::Statement<'tx>,
    probe: rusqlite::Statement<'tx>,
    op: rusqlite::Statement<'tx>,
}

impl<'tx> IntervalWriter<'tx> {
    fn prepare(tx: &'tx rusqlite::Transaction<'_>) -> rusqlite::Result<Self> {
        let interval_stmt = tx.prepare(
            "INSERT INTO intervals (step_id, idx, phase, start_s, length_s, dropped, lag_hist, think_total_s, thinks, unfinished_hist)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?;
        let db_stmt = tx.prepare(
            "INSERT INTO interval_db (step_id, interval_idx, sample) VALUES (?1, ?2, ?3)",
        )?;
        let host_stmt = tx.prepare(
            "INSERT INTO interval_host (step_id, interval_idx, sample) VALUES (?1, ?2, ?3)",
        )?;
        let probe_stmt = tx.prepare(
            "INSERT INTO interval_probe (step_id, interval_idx, source, position, sample) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        let op_stmt = tx.prepare(
            "INSERT INTO interval_ops (step_id, interval_idx, op_idx, ok, refused, errors, retries, bytes, service_hist, response_hist, failed_s)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?;
        Ok(IntervalWriter {
            interval: interval_stmt,
            db: db_stmt,
            host: host_stmt,
            probe: probe_stmt,
            op: op_stmt,
        })
    }

    /// Writes interval `idx` of the step `step_id`: its tally, its samples
    /// and its operations' counts.
    fn write(&mut self, step_id: i64, idx: usize, interval: &IntervalRecord) -> anyhow::Result<()> {
        let idx = idx as i64;
        let t = &interval.tally;
        self.interval.execute(params![
            step_id,
            idx,
            interval.phase.as_str(),
            interval.start.as_secs_f64(),
            interval.length.as_secs_f64(),
            t.dropped as i64,
            &t.lag,
            t.think_total.as_secs_f64(),
            t.thinks as i64,
            &t.unfinished,
        ])?;
        if let Some(host) = &interval.host {
            self.host
                .execute(params![step_id, idx, serde_json::to_string(host)?])?;
        }
        for (position, probe) in interval.probes.iter().enumerate() {
            self.probe.execute(params![
                step_id,
                idx,
                probe.source,
                position as i64,
                probe
                    .sample
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()?
            ])?;
        }
        if let Some(db) = &interval.db {
            self.db
                .execute(params![step_id, idx, serde_json::to_string(db)?])?;
        }
        for (op_idx, op) in t.ops.iter().enumerate() {
            self.op.execute(params![
                step_id,
                idx,
                op_idx,
                op.ok as i64,
                op.refused as i64,
                serde_json::to_string(&op.errors)?,
                op.retries as i64,
                op.bytes as i64,
                &op.service,
                &op.response,
                op.failed_time.as_secs_f64(),
            ])?;
        }
        Ok(())
    }
}
