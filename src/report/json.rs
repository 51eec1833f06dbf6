//! The JSON writer. Every JSON document perflab prints or saves goes
//! through [`pretty`] (serde_json's pretty printer, two-space indent, a
//! final line break), so all of them look alike; a watched stream of
//! samples is JSON Lines instead ([`line`]: one compact object per line).
//!
//! The export of a stored run ([`run_json`]) has its shape published as a
//! JSON Schema in `schema/run.schema.json`; a test validates exports
//! against it. Times are seconds; histograms are HdrHistogram V2
//! compressed, base64-encoded, so any HdrHistogram library can decode them.

use super::format::{Document, Format, FormatError, Output};
use crate::engine::{IntervalRecord, StepResult};
use crate::measure::{encode_histogram, LatencySummary, OpTally};
use crate::store::StoredRun;
use base64::Engine;
use serde::Serialize;
use serde_json::{json, Value};

/// Identifies the export format and its version.
pub(crate) const SCHEMA_ID: &str = "perflab-run/1";

/// `output` as JSON.
pub(super) fn write(output: &Output<'_>) -> Result<Document, FormatError> {
    let what = output.name();
    let text = match output {
        Output::Run(run) => pretty(&run_json(run), what)?,
        Output::Verdict { verdict, .. } => pretty(verdict, what)?,
        Output::Comparison(c) => pretty(c, what)?,
        Output::Doctor(report) => pretty(report, what)?,
        Output::Check { report, .. } => pretty(report, what)?,
        Output::Sample { at, sample } => line(sample, at, what)?,
        Output::Runs { .. } | Output::Report { .. } | Output::HostDiff { .. } => {
            return Err(FormatError::unsupported(output, Format::Json))
        }
    };
    Ok(Document::Text(text))
}

/// Any value as pretty-printed JSON ending in a line break; `what` names
/// it in the error.
pub(crate) fn pretty<T: Serialize + ?Sized>(
    value: &T,
    what: &'static str,
) -> Result<String, FormatError> {
    serde_json::to_string_pretty(value)
        .map(|text| text + "\n")
        .map_err(|source| FormatError::Json { what, source })
}

/// A watched sample as one line of JSON, with the time it was taken as
/// `at`.
fn line<T: Serialize>(sample: &T, at: &str, what: &'static str) -> Result<String, FormatError> {
    let mut value =
        serde_json::to_value(sample).map_err(|source| FormatError::Json { what, source })?;
    if let Some(object) = value.as_object_mut() {
        object.insert("at".to_string(), json!(at));
    }
    Ok(format!("{value}\n"))
}

/// The run as a JSON value.
pub(crate) fn run_json(run: &StoredRun) -> Value {
    let mut steps: Vec<Value> = run.steps.iter().map(|step| step_json(run, step)).collect();
    // The workload's own figures per step (none for most workloads).
    super::figures::steps_json(run, &mut steps);
    json!({
        "schema": SCHEMA_ID,
        "run": {
            "id": run.id,
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "status": run.status.as_str(),
            "status_reason": run.status_reason,
            "workload": run.workload,
            "rate_unit": run.rate_unit(),
            "target": run.target,
            "tool_version": run.tool_version,
            "host": run.host,
            "plan_given": run.plan_given,
            "plan": run.plan_resolved,
            "setup": run.setup,
            "op_names": run.op_names,
            "check": run.check,
            "inventory": run.inventory,
            "labels": run.labels,
        },
        "steps": steps,
        "verdict": crate::analyze::verdict_of_run(run, None, None),
    })
}

/// One step: its load, status, perflab's usage, summary, operations over
/// the measured window, database counters and every interval.
fn step_json(run: &StoredRun, step: &StepResult) -> Value {
    let (measured, _) = step.measured();
    let ops: Vec<Value> = run
        .op_names
        .iter()
        .zip(&measured.ops)
        .map(|(name, op)| op_json(name, op))
        .collect();
    let intervals: Vec<Value> = step.intervals.iter().map(interval_json).collect();
    let mut out = json!({
        "index": step.index,
        "load": step.level,
        "status": step.status.as_str(),
        "status_reason": step.status.reason(),
        "started_at": humantime::format_rfc3339_millis(step.started_at).to_string(),
        "usage": step.usage,
        "summary": step.summary(),
        "ops": ops,
        "db": step.measured_db(),
        "intervals": intervals,
    });
    if !step.generators.is_empty() {
        out["generators"] = json!(step.generators);
    }
    if let Some(slos) = run.plan.as_ref().map(|p| &p.slos).filter(|s| !s.is_empty()) {
        out["slo"] = json!(crate::analyze::objectives::judge_step(step, slos));
    }
    out
}

/// One operation kind over a step's measured window, histograms included.
fn op_json(name: &str, op: &OpTally) -> Value {
    let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(bytes);
    json!({
        "name": name,
        "ok": op.ok,
        "refused": op.refused,
        "errors": op.errors,
        "retries": op.retries,
        "bytes": op.bytes,
        "response": LatencySummary::of(&op.response),
        "service": LatencySummary::of(&op.service),
        "response_histogram": b64(encode_histogram(&op.response)),
        "service_histogram": b64(encode_histogram(&op.service)),
    })
}

/// One interval: its phase and times, counts, throughput and response
/// times, and the samples taken in it.
fn interval_json(interval: &IntervalRecord) -> Value {
    let tally = interval.tally.unpack();
    let all = tally.all_ops();
    let seconds = interval.length.as_secs_f64();
    json!({
        "phase": interval.phase.as_str(),
        "start": interval.start.as_secs_f64(),
        "length": seconds,
        "ok": all.ok,
        "refused": all.refused,
        "errors": all.errors,
        "dropped": interval.tally.dropped,
        "unfinished": tally.unfinished.len(),
        "throughput": if seconds > 0.0 { all.completed() as f64 / seconds } else { 0.0 },
        "response": LatencySummary::of(&tally.response()),
        "db": interval.db,
        "host": interval.host,
        "probes": interval.probes,
    })
}
