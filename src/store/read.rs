//! Reading runs back: the list of runs, and one run rebuilt step by step
//! into the same types the engine produced, so every report can be made from
//! the store alone.

use super::{RunId, RunStatus, Store, StoredWord};
use crate::engine::{IntervalRecord, StepResult, StepStatus};
use crate::error::PlanError;
use crate::measure::{decode_histogram, ErrorCounts, PackedOp, PackedTally, Phase, Tally};
use crate::plan::{Level, Plan};
use crate::probe::ProbeSample;
use crate::probe::{HostFacts, SelfUsage};
use crate::sut::{Target, Traits};
use crate::workload::CheckReport;
use anyhow::{anyhow, Context};
use rusqlite::{params, OptionalExtension};
use std::time::{Duration, SystemTime};

/// One line of `perflab runs`.
#[derive(Debug, Clone)]
pub(crate) struct RunRow {
    pub(crate) id: RunId,
    pub(crate) started_at: String,
    pub(crate) status: RunStatus,
    pub(crate) workload: String,
    pub(crate) target: String,
    pub(crate) steps: u64,
    /// Highest measured throughput of any step, operations per second.
    pub(crate) peak_throughput: Option<f64>,
    /// The name of its first operation, which a net run's unit follows.
    pub(crate) first_op: Option<String>,
    /// Why the run's row could not be read (a damaged store); the other
    /// fields are then empty.
    pub(crate) damaged: Option<String>,
    /// Its labels (`run --label KEY=VALUE`).
    pub(crate) labels: super::Labels,
}

impl RunRow {
    /// The unit the run's throughput is counted in, from its workload
    /// and its operation.
    pub(crate) fn rate_unit(&self) -> crate::units::RateUnit {
        crate::workload::run_rate_unit(&self.workload, self.first_op.as_deref())
    }
}

/// A whole run as stored.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub(crate) id: RunId,
    pub(crate) started_at: String,
    pub(crate) finished_at: Option<String>,
    /// The effective status: a `running` run whose process is gone reads as partial.
    pub(crate) status: RunStatus,
    pub(crate) status_reason: Option<String>,
    pub(crate) workload: String,
    pub(crate) target: String,
    pub(crate) op_names: Vec<String>,
    pub(crate) plan_given: Vec<String>,
    /// The plan as stored (JSON), shown as it is by the export.
    pub(crate) plan_resolved: serde_json::Value,
    /// The same plan, typed; none when the stored plan is not one this
    /// version reads (a store written by a much older perflab).
    pub plan: Option<Plan>,
    pub(crate) tool_version: String,
    pub(crate) host: HostFacts,
    pub(crate) setup: Option<serde_json::Value>,
    pub(crate) check: Option<CheckReport>,
    /// The hosts' facts when the run started (`perflab diff-hosts`).
    pub(crate) inventory: Option<std::collections::BTreeMap<String, String>>,
    /// Its labels (`run --label KEY=VALUE`).
    pub(crate) labels: super::Labels,
    pub(crate) steps: Vec<StepResult>,
}

/// A `running` run whose writer is no longer alive on this host was cut
/// short (killed, crashed): it reads as partial. Alive means its pid is
/// there and, for a run that stored its writer's identity, is still that
/// process (a pid the kernel gave to another process since is not).
fn effective_status(
    stored: RunStatus,
    pid: i64,
    writer: Option<&str>,
    host: &HostFacts,
) -> RunStatus {
    if stored != RunStatus::Running {
        return stored;
    }
    let this_host = HostFacts::read().hostname;
    let alive = u32::try_from(pid).ok().is_some_and(|pid| match writer {
        Some(stored) => super::writer::identity(pid).as_deref() == Some(stored),
        None => std::path::Path::new(&format!("/proc/{pid}")).exists(),
    });
    if host.hostname == this_host && !alive {
        RunStatus::Partial
    } else {
        RunStatus::Running
    }
}

/// One line of `perflab runs` from its row of the query in
/// [`Store::runs`].
fn run_row(id: RunId, r: &rusqlite::Row<'_>) -> anyhow::Result<RunRow> {
    let status: String = r.get(2)?;
    let host: HostFacts = serde_json::from_str(&r.get::<_, String>(4)?).unwrap_or_default();
    let writer: Option<String> = r.get(9)?;
    let ops: Vec<String> = serde_json::from_str(&r.get::<_, String>(10)?).unwrap_or_default();
    Ok(RunRow {
        id,
        started_at: r.get(1)?,
        status: effective_status(parse_status(&status)?, r.get(3)?, writer.as_deref(), &host),
        workload: r.get(5)?,
        target: r.get(6)?,
        steps: r.get::<_, i64>(7)?.max(0) as u64,
        peak_throughput: r.get(8)?,
        first_op: ops.into_iter().next(),
        damaged: None,
        labels: super::labels::read_labels(r.get::<_, Option<String>>(11)?.as_deref()),
    })
}

impl RunRow {
    /// The line of a run whose row cannot be read: its id and why.
    fn damaged(id: RunId, why: &anyhow::Error) -> Self {
        RunRow {
            id,
            started_at: String::new(),
            status: RunStatus::Failed,
            workload: String::new(),
            target: String::new(),
            steps: 0,
            peak_throughput: None,
            first_op: None,
            damaged: Some(crate::util::one_line(&format!("{why:#}"))),
            labels: super::Labels::new(),
        }
    }
}

fn parse_status(text: &str) -> anyhow::Result<RunStatus> {
    RunStatus::read(text)
}

impl Store {
    /// Every run, oldest first.
    pub(crate) fn runs(&self) -> anyhow::Result<Vec<RunRow>> {
        let mut stmt = self.conn.prepare(
            "WITH measured AS (
                 SELECT i.step_id, sum(i.length_s) AS seconds,
                        (SELECT coalesce(sum(o.ok + o.refused), 0) FROM interval_ops o
                          JOIN intervals j ON j.step_id = o.step_id AND j.idx = o.interval_idx
                          WHERE j.step_id = i.step_id AND j.phase = 'measured') AS done
                 FROM intervals i WHERE i.phase = 'measured' GROUP BY i.step_id)
             SELECT r.id, r.started_at, r.status, r.pid, r.host, r.workload, r.target,
                    count(s.id), max(m.done / m.seconds), r.writer, r.op_names, r.labels
             FROM runs r
             LEFT JOIN steps s ON s.run_id = r.id AND s.status != 'running'
             LEFT JOIN measured m ON m.step_id = s.id
             GROUP BY r.id ORDER BY r.id",
        )?;
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            // The id is the table's rowid, always an integer; any other
            // column may be damaged, and then only this run's line says so.
            let id: RunId = row.get(0)?;
            out.push(run_row(id, row).unwrap_or_else(|e| RunRow::damaged(id, &e)));
        }
        Ok(out)
    }

    /// The newest run's id.
    pub(crate) fn latest_run(&self) -> anyhow::Result<Option<RunId>> {
        Ok(self
            .conn
            .query_row("SELECT max(id) FROM runs", [], |r| r.get(0))?)
    }

    /// Resolves `last` or a number to a run id that exists.
    pub(crate) fn resolve_run(&self, text: &str) -> anyhow::Result<RunId> {
        let id = if text == "last" {
            self.latest_run()?.ok_or_else(|| {
                PlanError::new(format!(
                    "the store {} holds no runs yet; start one with `perflab run {} --quick`",
                    self.path.display(),
                    crate::workload::first_name()
                ))
            })?
        } else {
            text.parse::<RunId>().map_err(|_| {
                PlanError::new(format!(
                    "'{text}' is not a run; give a run number from `perflab runs`, or last"
                ))
            })?
        };
        let exists: Option<i64> = self
            .conn
            .query_row("SELECT id FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()?;
        exists.ok_or_else(|| {
            PlanError::new(format!(
                "run {id} is not in {}; `perflab runs` lists the runs there",
                self.path.display()
            ))
            .into()
        })
    }

    /// Loads one run with every step and interval.
    pub fn load_run(&self, id: RunId) -> anyhow::Result<StoredRun> {
        self.load_run_unnamed(id).map_err(|e| {
            // A damaged field's line names the run itself.
            if e.is::<PlanError>() {
                e
            } else {
                e.context(format!("run {id} in the store is damaged"))
            }
        })
    }

    /// Run `id`'s row, as a run of no steps yet.
    fn run_fields(&self, id: RunId) -> anyhow::Result<StoredRun> {
        let mut stmt = self.conn.prepare(
            "SELECT started_at, finished_at, status, status_reason, workload, target, op_names,
                    plan_given, plan_resolved, tool_version, host, pid, setup, check_report,
                    writer
             FROM runs WHERE id = ?1",
        )?;
        let mut rows = stmt.query([id])?;
        let r = rows.next()?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
        let whose = || format!("run {id}");
        let f = |i| field::<String>(r, i, &whose);
        let o = |i| field::<Option<String>>(r, i, &whose);
        let row = (
            f(0)?,
            o(1)?,
            f(2)?,
            o(3)?,
            f(4)?,
            f(5)?,
            f(6)?,
            f(7)?,
            f(8)?,
            f(9)?,
            f(10)?,
            field::<i64>(r, 11, &whose)?,
            o(12)?,
            o(13)?,
            o(14)?,
        );
        let host: HostFacts = serde_json::from_str(&row.10).context("damaged host facts")?;
        let plan_resolved: serde_json::Value =
            serde_json::from_str(&row.8).context("damaged plan")?;
        let plan = typed_plan(&plan_resolved, &row.5);
        Ok(StoredRun {
            id,
            started_at: row.0,
            finished_at: row.1,
            status: effective_status(parse_status(&row.2)?, row.11, row.14.as_deref(), &host),
            status_reason: row.3,
            workload: row.4,
            target: row.5,
            op_names: serde_json::from_str(&row.6).context("damaged operation names")?,
            plan_given: serde_json::from_str(&row.7).context("damaged plan")?,
            plan,
            plan_resolved,
            tool_version: row.9,
            host,
            setup: row.12.map(|s| serde_json::from_str(&s)).transpose()?,
            check: row.13.map(|s| serde_json::from_str(&s)).transpose()?,
            inventory: None,
            labels: super::Labels::new(),
            steps: Vec::new(),
        })
    }

    fn load_run_unnamed(&self, id: RunId) -> anyhow::Result<StoredRun> {
        let mut run = self.run_fields(id)?;
        if run.status == RunStatus::Partial && run.status_reason.is_none() {
            run.status_reason =
                Some("the perflab process writing it ended before the run finished".to_string());
        }
        let inventory: Option<String> =
            self.conn
                .query_row("SELECT inventory FROM runs WHERE id = ?1", [id], |r| {
                    r.get(0)
                })?;
        run.inventory = inventory
            .map(|s| serde_json::from_str(&s))
            .transpose()
            .context("damaged inventory")?;
        run.labels = self.labels(id)?;
        run.steps = self.load_steps(id, run.op_names.len())?;
        Ok(run)
    }

    fn load_steps(&self, run: RunId, op_count: usize) -> anyhow::Result<Vec<StepResult>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, idx, level_kind, level, status, status_reason, started_at, usage, generators
             FROM steps WHERE run_id = ?1 AND status != 'running' ORDER BY idx",
        )?;
        let mut rows = Vec::new();
        let mut query = stmt.query([run])?;
        while let Some(r) = query.next()? {
            let row = rows.len();
            let idx = field::<i64>(r, 1, &|| format!("run {run}'s step in row {row}"))?;
            // Steps are counted from 1 wherever a user reads them.
            let whose = || format!("run {run}'s step {}", idx.saturating_add(1));
            rows.push((
                field::<i64>(r, 0, &whose)?,
                idx,
                field::<String>(r, 2, &whose)?,
                field::<f64>(r, 3, &whose)?,
                field::<String>(r, 4, &whose)?,
                field::<Option<String>>(r, 5, &whose)?,
                field::<String>(r, 6, &whose)?,
                field::<String>(r, 7, &whose)?,
                field::<Option<String>>(r, 8, &whose)?,
            ));
        }
        let mut steps = Vec::with_capacity(rows.len());
        for (step_id, idx, kind, level, status, reason, started_at, usage, generators) in rows {
            let number = idx.saturating_add(1);
            let level = Level::of_kind(&kind, level).ok_or_else(|| {
                anyhow!("step {number}: unknown level kind '{kind}' in the store")
            })?;
            let reason = reason.unwrap_or_default();
            let status = StepStatus::parse(&status, reason).ok_or_else(|| {
                anyhow!("step {number}: unknown step status '{status}' in the store")
            })?;
            let started_at =
                humantime::parse_rfc3339(&started_at).unwrap_or(SystemTime::UNIX_EPOCH);
            steps.push(StepResult {
                index: idx as usize,
                level,
                started_at,
                intervals: self
                    .load_intervals(step_id, op_count, &format!("run {run}'s step {number}"))
                    .map_err(|e| match e.is::<PlanError>() {
                        true => e,
                        false => e.context(format!("step {number}")),
                    })?,
                status,
                usage: serde_json::from_str::<SelfUsage>(&usage).unwrap_or_default(),
                generators: generators
                    .map(|g| serde_json::from_str(&g))
                    .transpose()
                    .with_context(|| format!("step {number}: damaged generators"))?
                    .unwrap_or_default(),
            });
        }
        Ok(steps)
    }

    /// Fills `tally` with the per-operation counts and histograms of one
    /// stored interval (`op_stmt` selects them by step and interval).
    fn load_op_tallies(
        op_stmt: &mut rusqlite::Statement<'_>,
        step_id: i64,
        idx: i64,
        tally: &mut PackedTally,
        whose: &str,
    ) -> anyhow::Result<()> {
        let mut ops = Vec::new();
        let mut query = op_stmt.query(params![step_id, idx])?;
        while let Some(r) = query.next()? {
            let row = ops.len();
            let whose = || format!("{whose}'s interval {idx}'s operation in row {row}");
            let int = |i| field::<i64>(r, i, &whose);
            let bytes = |i| field::<Vec<u8>>(r, i, &whose);
            ops.push((
                int(0)?,
                int(1)?,
                int(2)?,
                field::<String>(r, 3, &whose)?,
                int(4)?,
                int(5)?,
                bytes(6)?,
                bytes(7)?,
                field::<f64>(r, 8, &whose)?,
            ));
        }
        for (op_idx, ok, refused, errors, retries, bytes, service, response, failed_s) in ops {
            let Some(slot) = tally.ops.get_mut(op_idx as usize) else {
                continue;
            };
            // Decoded once as the check that they are whole, then kept
            // packed as stored.
            decode_histogram(&service).context("in the store")?;
            decode_histogram(&response).context("in the store")?;
            *slot = PackedOp {
                ok: ok as u64,
                refused: refused as u64,
                errors: serde_json::from_str::<ErrorCounts>(&errors)
                    .context("damaged error counts")?,
                retries: retries as u64,
                bytes: bytes as u64,
                service,
                response,
                failed_time: std::time::Duration::try_from_secs_f64(failed_s).unwrap_or_default(),
            };
        }
        Ok(())
    }

    /// What the database and this host reported over one stored interval,
    /// as stored (JSON), and what each remote probe reported.
    fn load_interval_samples(
        &self,
        step_id: i64,
        idx: i64,
    ) -> anyhow::Result<(Option<String>, Option<String>, Vec<ProbeSample>)> {
        let db: Option<String> = self
            .conn
            .query_row(
                "SELECT sample FROM interval_db WHERE step_id = ?1 AND interval_idx = ?2",
                params![step_id, idx],
                |r| r.get(0),
            )
            .optional()?;
        let host: Option<String> = self
            .conn
            .query_row(
                "SELECT sample FROM interval_host WHERE step_id = ?1 AND interval_idx = ?2",
                params![step_id, idx],
                |r| r.get(0),
            )
            .optional()?;
        let probes = self
            .conn
            .prepare_cached(
                "SELECT source, sample FROM interval_probe WHERE step_id = ?1 AND interval_idx = ?2 ORDER BY position",
            )?
            .query_map(params![step_id, idx], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .map(|(source, sample)| ProbeSample {
                source,
                sample: sample.and_then(|s| lenient(&s)),
            })
            .collect();
        Ok((db, host, probes))
    }

    fn load_intervals(
        &self,
        step_id: i64,
        op_count: usize,
        whose: &str,
    ) -> anyhow::Result<Vec<IntervalRecord>> {
        let mut stmt = self.conn.prepare(
            "SELECT idx, phase, start_s, length_s, dropped, lag_hist, think_total_s, thinks, unfinished_hist
             FROM intervals WHERE step_id = ?1 ORDER BY idx",
        )?;
        let mut op_stmt = self.conn.prepare(
            "SELECT op_idx, ok, refused, errors, retries, bytes, service_hist, response_hist, failed_s
             FROM interval_ops WHERE step_id = ?1 AND interval_idx = ?2 ORDER BY op_idx",
        )?;
        let mut rows = Vec::new();
        let mut query = stmt.query([step_id])?;
        while let Some(r) = query.next()? {
            let row = rows.len();
            let idx = field::<i64>(r, 0, &|| format!("{whose}'s interval in row {row}"))?;
            let whose = || format!("{whose}'s interval {idx}");
            let int = |i| field::<i64>(r, i, &whose);
            let real = |i| field::<f64>(r, i, &whose);
            rows.push((
                idx,
                field::<String>(r, 1, &whose)?,
                real(2)?,
                real(3)?,
                int(4)?,
                field::<Vec<u8>>(r, 5, &whose)?,
                real(6)?,
                int(7)?,
                field::<Option<Vec<u8>>>(r, 8, &whose)?,
            ));
        }
        drop(query);
        let mut intervals = Vec::with_capacity(rows.len());
        for (idx, phase, start, length, dropped, lag, think_total, thinks, unfinished) in rows {
            let seconds = |value: f64, field: &str| {
                Duration::try_from_secs_f64(value.max(0.0)).map_err(|_| {
                    anyhow!("interval {idx}: {field} = {value:?} is not a length of time")
                })
            };
            decode_histogram(&lag).context("in the store")?;
            let unfinished = unfinished.unwrap_or_default();
            if !unfinished.is_empty() {
                decode_histogram(&unfinished).context("in the store")?;
            }
            let mut tally = PackedTally::pack(&Tally::new(op_count));
            tally.dropped = dropped as u64;
            tally.lag = lag;
            tally.think_total = seconds(think_total, "think_total_s")?;
            tally.thinks = thinks as u64;
            tally.unfinished = unfinished;
            Self::load_op_tallies(&mut op_stmt, step_id, idx, &mut tally, whose)?;
            let (db, host, probes) = self.load_interval_samples(step_id, idx)?;
            intervals.push(IntervalRecord {
                phase: Phase::parse(&phase)
                    .ok_or_else(|| anyhow!("interval {idx}: unknown phase '{phase}'"))?,
                start: seconds(start, "start_s")?,
                length: seconds(length, "length_s")?,
                tally,
                db: db.and_then(|s| lenient(&s)),
                host: host.and_then(|s| lenient(&s)),
                probes,
            });
        }
        Ok(intervals)
    }
}

/// Column `i` of a stored row, `whose` naming the row ("run 12's step
/// 3"): a value of another type than perflab writes there is one line
/// naming the run, the row and the field.
fn field<T: rusqlite::types::FromSql>(
    r: &rusqlite::Row<'_>,
    i: usize,
    whose: &dyn Fn() -> String,
) -> anyhow::Result<T> {
    use rusqlite::types::Type;
    r.get(i).map_err(|e| {
        let name = r.as_ref().column_name(i).unwrap_or("?").to_string();
        let wanted = std::any::type_name::<T>();
        let wanted = if wanted.contains("String") {
            "text"
        } else if wanted.contains("Vec<u8>") {
            "bytes"
        } else if wanted.contains("f64") {
            "a number"
        } else {
            "an integer"
        };
        let why = match e {
            rusqlite::Error::InvalidColumnType(_, _, held) => {
                let held = match held {
                    Type::Null => "nothing (NULL)",
                    Type::Integer => "an integer",
                    Type::Real => "a number with a fraction",
                    Type::Text => "text",
                    Type::Blob => "bytes",
                };
                format!("it holds {held} where perflab writes {wanted}")
            }
            rusqlite::Error::IntegralValueOutOfRange(_, value) => {
                format!("{value} is out of range")
            }
            rusqlite::Error::FromSqlConversionFailure(_, _, why) => why.to_string(),
            other => other.to_string(),
        };
        PlanError::new(format!(
            "{} has a damaged field `{name}`: {}; the store was written by something else or is damaged",
            whose(),
            crate::util::printable(&why)
        ))
        .into()
    })
}

/// A stored sample, or none when it cannot be read: an older writer
/// stored a value from outside that was not a finite number as `null`, and
/// such a sample reads as absent (as if the source had not answered), not
/// as a run that cannot be read at all.
fn lenient<T: serde::de::DeserializeOwned>(json: &str) -> Option<T> {
    serde_json::from_str(json).ok()
}

/// The stored plan, typed, with the target's traits from its text when the
/// run predates stored traits.
pub(super) fn typed_plan(stored: &serde_json::Value, target: &str) -> Option<Plan> {
    let mut plan: Plan = serde_json::from_value(stored.clone()).ok()?;
    plan.target
        .get_or_insert_with(|| Target::traits_of_text(target));
    Some(plan)
}

impl StoredRun {
    /// The target's traits: from the plan, or from the stored target's text.
    pub fn target_traits(&self) -> Traits {
        self.plan
            .as_ref()
            .and_then(|p| p.target)
            .unwrap_or_else(|| Target::traits_of_text(&self.target))
    }

    /// The unit the run's throughput is counted in, from its workload
    /// and its operation.
    pub(crate) fn rate_unit(&self) -> crate::units::RateUnit {
        crate::workload::run_rate_unit(&self.workload, self.op_names.first().map(String::as_str))
    }

    /// The workload's own figures for each step, when it has any
    /// ([`crate::workload::figures`]).
    pub(crate) fn figures(&self) -> Option<crate::workload::figures::Figures> {
        crate::workload::figures_of(&self.workload, &self.steps, &self.op_names)
    }

    /// The run's seed (1 when its plan does not read).
    pub(crate) fn seed(&self) -> u64 {
        self.plan.as_ref().map_or(1, |p| p.seed)
    }
}
