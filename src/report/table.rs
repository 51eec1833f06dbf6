//! The terminal view of a run: a header saying what ran where, a load
//! lab's classic table (load → throughput, latency percentiles, errors), the
//! operations of the busiest step, and the check.

use crate::engine::{StepResult, StepStatus};
use crate::measure::LatencySummary;
use crate::plan::{Level, Slo};
use crate::probe::{DbSample, HostFacts};
use crate::store::StoredRun;
use crate::units::{Bytes, BytesPerSec, Latency, OpsPerSec, Percent, RateUnit};
use crate::workload::CheckReport;
use std::fmt::Write;

/// The per-step table, throughput in `unit`.
pub(crate) fn step_table(steps: &[StepResult], unit: RateUnit, slos: &[Slo]) -> String {
    let db: Vec<Option<DbSample>> = steps.iter().map(|s| s.measured_db()).collect();
    // Payload moved per second of the measured window, where a workload counts it.
    let rates: Vec<f64> = steps
        .iter()
        .map(|s| {
            let (tally, measured) = s.measured();
            tally.all_ops().bytes as f64 / measured.as_secs_f64().max(f64::MIN_POSITIVE)
        })
        .collect();
    let columns = StepColumns {
        open: steps.iter().any(|s| matches!(s.level, Level::Rate(_))),
        moved: rates.iter().any(|r| *r > 0.0),
        waits: db.iter().flatten().any(|d| d.top_wait().is_some()),
        unit,
        slos,
    };
    let mut out = columns.header();
    for ((step, db), rate) in steps.iter().zip(&db).zip(&rates) {
        columns.row(&mut out, step, db.as_ref(), *rate);
    }
    out
}

/// The step table's optional columns: an open loop's (dropped, lag), the
/// bytes moved, the database's top wait; the workload's unit of
/// throughput.
struct StepColumns<'a> {
    open: bool,
    moved: bool,
    waits: bool,
    unit: RateUnit,
    /// The run's objectives: a column judges each step by them.
    slos: &'a [Slo],
}

impl StepColumns<'_> {
    /// The header line.
    fn header(&self) -> String {
        let mut out = String::new();
        let load = if self.open { "rate/s" } else { "users" };
        let _ = write!(
            out,
            "{load:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
            self.unit.label(),
            "p50",
            "p95",
            "p99",
            "max",
            "errors",
            "refused",
            "retries"
        );
        if self.moved {
            let _ = write!(out, " {:>8}", "MB/s");
        }
        if self.open {
            let _ = write!(out, " {:>8} {:>9}", "dropped", "lag p99");
        }
        let _ = write!(out, " {:>8} {:>10} {:>10}", "cpu", "cpu/op", "rss");
        if self.waits {
            let _ = write!(out, "  {:<14}", "db wait");
        }
        if !self.slos.is_empty() {
            let _ = write!(out, "  {:<9}", "slo");
        }
        out.push('\n');
        out
    }

    /// One step's line, with `rate` its bytes per second.
    fn row(&self, out: &mut String, step: &StepResult, db: Option<&DbSample>, rate: f64) {
        let s = step.summary();
        let level = level_cell(step.level);
        let r = &s.response;
        let _ = write!(
            out,
            "{level:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
            OpsPerSec(s.throughput).to_string(),
            latency_cell(r, r.p50),
            latency_cell(r, r.p95),
            latency_cell(r, r.p99),
            latency_cell(r, r.max),
            s.errors,
            s.refused,
            s.retries,
        );
        if self.moved {
            let _ = write!(out, " {:>8}", BytesPerSec(rate).to_string());
        }
        if self.open {
            let _ = write!(
                out,
                " {:>8} {:>9}",
                s.dropped,
                latency_cell(&s.lag, s.lag.p99)
            );
        }
        let _ = write!(
            out,
            " {:>8} {:>10} {:>10}",
            Percent(step.usage.cpu_share()).to_string(),
            cpu_per_op(step),
            step.usage
                .rss_bytes
                .map_or("-".to_string(), |b| Bytes(b).to_string())
        );
        if self.waits {
            let top = db
                .and_then(|d| d.top_wait())
                .map_or("-".to_string(), |(class, share)| {
                    format!("{class} {}", Percent(share))
                });
            let _ = write!(out, "  {top:<14}");
        }
        if !self.slos.is_empty() {
            let judged = crate::analyze::objectives::judge_step(step, self.slos);
            let _ = write!(out, "  {:<9}", judged.decision.as_str());
        }
        out.push_str(&status_note(&step.status));
        out.push('\n');
    }
}

/// What a step's line says of a step that did not end well.
fn status_note(status: &StepStatus) -> String {
    match status {
        StepStatus::Ok => String::new(),
        StepStatus::Failed(why) => format!("  FAILED: {why}"),
        StepStatus::Partial(why) => format!("  partial: {why}"),
        StepStatus::Degraded(why) => format!("  degraded: {why}"),
        StepStatus::Stalled(why) => format!("  stalled: {why}"),
    }
}

/// A step's load as the tables' first column shows it.
fn level_cell(level: Level) -> String {
    match level {
        Level::Users(n) => n.to_string(),
        Level::Rate(r) => OpsPerSec(r).to_string(),
    }
}

fn latency_cell(summary: &LatencySummary, value: std::time::Duration) -> String {
    if summary.count == 0 {
        "-".to_string()
    } else {
        Latency(value).to_string()
    }
}

/// perflab's CPU time per operation over the whole step (warm-up included).
fn cpu_per_op(step: &StepResult) -> String {
    let all = step.everything().all_ops();
    let ops = all.completed() + all.error_count();
    if ops == 0 {
        return "-".to_string();
    }
    let cpu = step.usage.cpu_user + step.usage.cpu_system;
    Latency(cpu / u32::try_from(ops).unwrap_or(u32::MAX)).to_string()
}

/// The check's lines.
pub(crate) fn render_check(check: &CheckReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "check: {}",
        if check.passed { "passed" } else { "FAILED" }
    );
    for line in &check.lines {
        let _ = writeln!(
            out,
            "  {} {:<20} {}",
            if line.passed { "ok  " } else { "FAIL" },
            line.rule,
            line.detail
        );
    }
    out
}

/// A host's facts on one line: name, CPU model and count, memory, kernel.
pub(crate) fn host_text(host: &HostFacts) -> String {
    format!(
        "{} · {} · {} CPUs · {} · kernel {}",
        host.hostname.as_deref().unwrap_or("?"),
        host.cpu_model.as_deref().unwrap_or("unknown CPU"),
        host.cpus.map_or("?".to_string(), |n| n.to_string()),
        host.memory_bytes
            .map_or("? memory".to_string(), |b| Bytes(b).to_string()),
        host.kernel.as_deref().unwrap_or("?")
    )
}

/// A whole stored run: header, table, operations of the peak step, check.
pub(crate) fn render_run(run: &StoredRun) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} · {} on {} · {} · {}",
        run.id,
        run.workload,
        run.target,
        run.started_at,
        run.status.as_str()
    );
    if let Some(reason) = &run.status_reason {
        let _ = writeln!(out, "  {reason}");
    }
    let _ = writeln!(
        out,
        "host {} · perflab {}",
        host_text(&run.host),
        run.tool_version
    );
    if !run.labels.is_empty() {
        let _ = writeln!(out, "labels {}", crate::store::labels_text(&run.labels));
    }
    out.push('\n');
    if run.steps.is_empty() {
        let _ = writeln!(out, "no step finished");
    } else {
        let slos = run.plan.as_ref().map_or(&[][..], |p| &p.slos[..]);
        out.push_str(&step_table(&run.steps, run.rate_unit(), slos));
        out.push_str(&error_kinds(&run.steps));
        out.push_str(&super::host_tables(&run.steps));
        out.push_str(&server_status_table(&run.steps));
        out.push_str(&super::generators::generator_table(&run.steps, level_cell));
        out.push_str(&super::figures::table(run));
        if run.op_names.len() > 1 {
            out.push('\n');
            out.push_str(&op_breakdown(run));
        }
    }
    if let Some(check) = &run.check {
        out.push('\n');
        out.push_str(&render_check(check));
    }
    out
}

/// The gauges a status page may give, connections by state.
const STATUS_GAUGES: [&str; 5] = [
    "now_active",
    "now_reading",
    "now_writing",
    "now_waiting",
    "now_busy_workers",
];

/// What a web server's status page (nginx `stub_status`, Apache
/// `server-status?auto`) said over each step's measured window: its own
/// count of requests and accepted connections per second, and its
/// connections by state (means of the interval readings). Empty when no
/// step has a status reading.
pub(crate) fn server_status_table(steps: &[StepResult]) -> String {
    let rows: Vec<(&StepResult, StatusReadings)> =
        steps.iter().map(|s| (s, StatusReadings::of(s))).collect();
    if rows.iter().all(|(_, r)| r.0.is_empty()) {
        return String::new();
    }
    let shown: Vec<&str> = STATUS_GAUGES
        .iter()
        .copied()
        .filter(|g| rows.iter().any(|(_, r)| r.has(g)))
        .collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "\nthe server's status page during each step:\n{:>7} {:>11} {:>11}",
        "load", "requests/s", "accepts/s"
    );
    for g in &shown {
        let _ = write!(
            out,
            " {:>9}",
            g.trim_start_matches("now_").replace("_workers", "")
        );
    }
    out.push('\n');
    for (step, readings) in rows {
        let _ = write!(
            out,
            "{:>7} {:>11} {:>11}",
            level_cell(step.level),
            readings.per_s("requests"),
            readings.per_s("accepts")
        );
        for g in &shown {
            let _ = write!(out, " {:>9}", readings.mean(g));
        }
        out.push('\n');
    }
    out
}

/// A step's status-page readings over its measured window: each
/// interval's length, seconds, and what the page said.
struct StatusReadings(Vec<(f64, DbSample)>);

impl StatusReadings {
    fn of(step: &StepResult) -> StatusReadings {
        StatusReadings(
            step.intervals
                .iter()
                .filter(|i| i.phase == crate::measure::Phase::Measured)
                .filter_map(|i| i.db.as_ref().map(|d| (i.length.as_secs_f64(), d.clone())))
                .filter(|(_, d)| d.counters.contains_key("requests"))
                .collect(),
        )
    }

    /// Whether any reading has `key`.
    fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(_, d)| d.counters.contains_key(key))
    }

    fn sum(&self, key: &str) -> f64 {
        self.0
            .iter()
            .filter_map(|(_, d)| d.counters.get(key))
            .sum::<f64>()
    }

    /// A counter per second of the readings, or "-".
    fn per_s(&self, key: &str) -> String {
        if !self.has(key) {
            return "-".to_string();
        }
        let seconds = self
            .0
            .iter()
            .map(|(s, _)| s)
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
        format!("{:.0}", self.sum(key) / seconds)
    }

    /// A gauge's mean over the readings that have it, or "-".
    fn mean(&self, key: &str) -> String {
        let n = self
            .0
            .iter()
            .filter(|(_, d)| d.counters.contains_key(key))
            .count();
        if n == 0 {
            "-".to_string()
        } else {
            format!("{:.1}", self.sum(key) / n as f64)
        }
    }
}

/// For each step with errors, how many of each kind.
fn error_kinds(steps: &[StepResult]) -> String {
    let mut out = String::new();
    for step in steps {
        let (tally, _) = step.measured();
        let errors = tally.all_ops().errors.to_text();
        if errors.is_empty() {
            continue;
        }
        let kinds: Vec<String> = errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(out, "errors at {}: {}", step.level, kinds.join(", "));
    }
    out
}

/// The operations of the step with the highest throughput.
fn op_breakdown(run: &StoredRun) -> String {
    let mut out = String::new();
    let Some((_, peak)) = run
        .steps
        .iter()
        .map(|s| (s.summary().throughput, s))
        .max_by(|a, b| a.0.total_cmp(&b.0))
    else {
        return out;
    };
    let (tally, measured) = peak.measured();
    let seconds = measured.as_secs_f64().max(f64::MIN_POSITIVE);
    let _ = writeln!(out, "by operation at {} (the peak step):", peak.level);
    let width = run
        .op_names
        .iter()
        .map(|n| n.len())
        .max()
        .unwrap_or(0)
        .max(10);
    let moved = tally.ops.iter().any(|op| op.bytes > 0);
    let _ = write!(
        out,
        "{:>width$} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "operation",
        run.rate_unit().label(),
        "p50",
        "p95",
        "errors",
        "refused"
    );
    if moved {
        let _ = write!(out, " {:>8}", "MB/s");
    }
    out.push('\n');
    for (name, op) in run.op_names.iter().zip(&tally.ops) {
        let r = LatencySummary::of(&op.response);
        let _ = write!(
            out,
            "{name:>width$} {:>9} {:>9} {:>9} {:>8} {:>8}",
            OpsPerSec(op.completed() as f64 / seconds).to_string(),
            latency_cell(&r, r.p50),
            latency_cell(&r, r.p95),
            op.error_count(),
            op.refused
        );
        if moved {
            let _ = write!(
                out,
                " {:>8}",
                BytesPerSec(op.bytes as f64 / seconds).to_string()
            );
        }
        out.push('\n');
    }
    out
}
