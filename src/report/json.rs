//! The JSON export of a stored run. Its shape is published as a JSON Schema
//! in `schema/run.schema.json`; a test validates exports against it. Times
//! are seconds; histograms are HdrHistogram V2 compressed, base64-encoded,
//! so any HdrHistogram library can decode them.

use crate::measure::{encode_histogram, LatencySummary};
use crate::store::StoredRun;
use base64::Engine;
use serde_json::{json, Value};

/// Identifies the export format and its version.
pub const SCHEMA_ID: &str = "perflab-run/1";

/// The run as a JSON value.
pub fn run_json(run: &StoredRun) -> Value {
    let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(bytes);
    let steps: Vec<Value> = run
        .steps
        .iter()
        .map(|step| {
            let (measured, _) = step.measured();
            let ops: Vec<Value> = run
                .op_names
                .iter()
                .zip(&measured.ops)
                .map(|(name, op)| {
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
                })
                .collect();
            let intervals: Vec<Value> = step
                .intervals
                .iter()
                .map(|interval| {
                    let all = interval.tally.all_ops();
                    let seconds = interval.length.as_secs_f64();
                    json!({
                        "phase": interval.phase.as_str(),
                        "start": interval.start.as_secs_f64(),
                        "length": seconds,
                        "ok": all.ok,
                        "refused": all.refused,
                        "errors": all.errors,
                        "dropped": interval.tally.dropped,
                        "throughput": if seconds > 0.0 { all.completed() as f64 / seconds } else { 0.0 },
                        "response": LatencySummary::of(&all.response),
                        "db": interval.db,
                        "host": interval.host,
                        "probes": interval.probes,
                    })
                })
                .collect();
            json!({
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
            })
        })
        .collect();
    json!({
        "schema": SCHEMA_ID,
        "run": {
            "id": run.id,
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "status": run.status.as_str(),
            "status_reason": run.status_reason,
            "workload": run.workload,
            "target": run.target,
            "tool_version": run.tool_version,
            "host": run.host,
            "plan_given": run.plan_given,
            "plan": run.plan_resolved,
            "setup": run.setup,
            "op_names": run.op_names,
            "check": run.check,
            "inventory": run.inventory,
        },
        "steps": steps,
        "verdict": crate::analyze::verdict_of_run(run, None, None),
    })
}
