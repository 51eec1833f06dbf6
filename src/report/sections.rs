//! The parts of a report that the HTML and Markdown forms share: the run's
//! facts (what ran, where, when, with what), the verdict in sentences, the
//! per-step table with the
//! server host's columns, errors by kind per step, and stability per load
//! level — each as rows or a [`Grid`], so both forms say the same.

use super::grid::Grid;
use crate::analyze::capacity::load_text;
use crate::analyze::points::StepPoint;
use crate::analyze::{server_source, Verdict};
use crate::engine::{StepResult, StepStatus};
use crate::store::StoredRun;
use crate::units::{Latency, OpsPerSec, Percent, Rate};

/// What was run, where and when: (name, value) rows.
pub(crate) fn facts(run: &StoredRun) -> Vec<(&'static str, String)> {
    let plan = &run.plan_resolved;
    let levels: Vec<String> = run.steps.iter().map(|s| s.level.to_string()).collect();
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "?".to_string(),
        other => other.to_string(),
    };
    let mut rows = vec![
        ("workload", run.workload.clone()),
        ("target", run.target.clone()),
        ("load model", load_model(&plan["load"])),
        ("sweep", levels.join(", ")),
        (
            "measured",
            format!(
                "{} s per step after {} s warm-up, {} worker threads, seed {}",
                text(&plan["duration"]),
                text(&plan["warmup"]),
                text(&plan["threads"]),
                text(&plan["seed"])
            ),
        ),
        (
            "when",
            format!(
                "{} → {}",
                run.started_at,
                run.finished_at.as_deref().unwrap_or("(not finished)")
            ),
        ),
        ("host", super::table::host_text(&run.host)),
        ("perflab", run.tool_version.clone()),
        (
            "status",
            format!(
                "{}{}",
                run.status.as_str(),
                run.status_reason
                    .as_deref()
                    .map_or(String::new(), |r| format!(": {r}"))
            ),
        ),
    ];
    if !run.labels.is_empty() {
        rows.push(("labels", crate::store::labels_text(&run.labels)));
    }
    rows
}

/// The stored load model in words.
fn load_model(v: &serde_json::Value) -> String {
    let secs = |v: &serde_json::Value| {
        v.as_f64()
            .map_or("?".to_string(), |s| Latency::secs(s).to_string())
    };
    let think = &v["think"];
    match (v["kind"].as_str(), think["kind"].as_str()) {
        (Some("closed"), Some("zero")) => {
            "closed loop: each user starts its next operation when the last ends (no think time)"
                .to_string()
        }
        (Some("closed"), Some("fixed")) => {
            format!("closed loop, think time {}", secs(&think["wait"]))
        }
        (Some("closed"), Some("exponential")) => format!(
            "closed loop, think time exponential with mean {}",
            secs(&think["mean"])
        ),
        (Some("closed"), Some("uniform")) => format!(
            "closed loop, think time uniform between {} and {}",
            secs(&think["min"]),
            secs(&think["max"])
        ),
        (Some("open"), _) => format!(
            "open loop: {} arrivals served over {} connections, at most {} outstanding (the rest dropped){}",
            match v["arrivals"].as_str() {
                Some("poisson") => "Poisson",
                Some("uniform") => "evenly spaced",
                _ => "?",
            },
            v["connections"],
            v["max_outstanding"],
            match (v["slack"].as_f64(), v["slack"].as_str()) {
                (Some(s), _) if s > 0.0 => format!(
                    "; arrivals due within {} of the first waiting one sent with it (each up to that early, counted from when it went out)",
                    secs(&v["slack"])
                ),
                (_, Some("auto")) => {
                    let wakeups = crate::plan::slack::AUTO_WAKEUPS;
                    let most = std::time::Duration::from_secs_f64(1.0 / wakeups);
                    format!(
                        "; paced exactly up to {wakeups} arrivals/s per worker thread, above it \
                         in about {wakeups} batches/s (each arrival less than {} early, counted \
                         from when it went out; none late)",
                        crate::units::format_duration(most)
                    )
                }
                _ => String::new(),
            }
        ),
        _ => v.to_string(),
    }
}

fn share(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| Percent(v).to_string())
}

/// The busiest resource whose name starts with `prefix` (and ends with
/// `suffix`): its short name and busy share.
fn busiest(p: &StepPoint, prefix: &str, suffix: &str) -> Option<(String, f64)> {
    p.resources
        .iter()
        .filter(|r| r.name.starts_with(prefix) && r.name.ends_with(suffix))
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))
        .map(|r| {
            let name = r.name[prefix.len()..r.name.len() - suffix.len()].trim();
            (name.to_string(), r.utilisation)
        })
}

fn status_text(step: &StepResult) -> String {
    match &step.status {
        StepStatus::Ok => "ok".to_string(),
        StepStatus::Failed(why) => format!("failed: {why}"),
        StepStatus::Partial(why) => format!("partial: {why}"),
        StepStatus::Degraded(why) => format!("degraded: {why}"),
        StepStatus::Stalled(why) => format!("stalled: {why}"),
    }
}

/// One step's figures in the report's step table and steps.csv: the
/// client's view, then the server host's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepFigures {
    pub(crate) point: StepPoint,
    pub(crate) errors: u64,
    /// Open loop: arrivals dropped for being over the outstanding limit.
    pub(crate) dropped: Option<u64>,
    /// Busy share of all CPUs.
    pub(crate) cpu: Option<f64>,
    /// The busiest disk, link direction in and out: name and busy share.
    pub(crate) disk: Option<(String, f64)>,
    pub(crate) link_rx: Option<(String, f64)>,
    pub(crate) link_tx: Option<(String, f64)>,
    /// The database's commonest wait class and its share of samples.
    pub(crate) top_wait: Option<(String, f64)>,
    pub(crate) status: String,
}

/// The figures of every step of a run, the server's read where the
/// verdict reads them (the first remote probe, else this host).
pub(crate) fn step_figures(run: &StoredRun) -> Vec<StepFigures> {
    let (source, _) = server_source(run);
    run.steps
        .iter()
        .map(|step| {
            let point = StepPoint::of(step, source, run.rate_unit());
            let summary = step.summary();
            StepFigures {
                errors: summary.errors,
                dropped: matches!(step.level, crate::plan::Level::Rate(_))
                    .then_some(summary.dropped),
                cpu: point.resource("cpu").map(|c| c.utilisation),
                disk: busiest(&point, "disk ", ""),
                link_rx: busiest(&point, "link ", " rx"),
                link_tx: busiest(&point, "link ", " tx"),
                top_wait: step
                    .measured_db()
                    .and_then(|d| d.top_wait().map(|(c, s)| (c.to_string(), s))),
                status: status_text(step),
                point,
            }
        })
        .collect()
}

/// The step grid's columns; `throughput` is headed with the run's unit.
const STEP_COLUMNS: [&str; 26] = [
    "load",
    "throughput",
    "p50",
    "p95",
    "p99",
    "max",
    "errors",
    "retries",
    "dropped",
    "lag p99",
    "cpu",
    "user",
    "system",
    "%ISR",
    "iowait",
    "steal",
    "run queue",
    "busiest disk",
    "link rx",
    "link tx",
    "server cpus",
    "db wait",
    "perflab cpus",
    "status",
    "server threads",
    "perflab threads",
];

/// Every step: load, throughput, response percentiles, errors (and, open
/// loop, dropped arrivals and dispatch lag), then what
/// the server host did (CPU busy and its user/system/%ISR/iowait/steal
/// split, run queue, busiest disk, busiest link each way, the server's own
/// processes, the database's main wait class) and perflab's CPU. Columns
/// nothing was measured for are left out.
pub(crate) fn step_grid(run: &StoredRun) -> Grid {
    let unit = run.rate_unit().label();
    let mut grid = Grid::new(STEP_COLUMNS.map(|c| if c == "throughput" { unit } else { c }));
    grid.left = vec![17, 18, 19, 21, 23, 24, 25];
    grid.rows = step_figures(run).into_iter().map(grid_row).collect();
    grid.without_empty_columns()
}

/// One step's row of [`STEP_COLUMNS`].
fn grid_row(f: StepFigures) -> Vec<String> {
    let threads = |s: Option<&crate::probe::counters::threads::ThreadStates>| {
        s.map(|s| crate::analyze::threads::shares_text(s, 3))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "-".to_string())
    };
    let named = |v: &Option<(String, f64)>| {
        v.as_ref()
            .map_or("-".to_string(), |(n, s)| format!("{n} {}", Percent(*s)))
    };
    let p = &f.point;
    let r = &p.response;
    let latency = |d| {
        if r.count == 0 {
            "-".to_string()
        } else {
            Latency(d).to_string()
        }
    };
    let e = &p.extras;
    vec![
        p.level.to_string(),
        OpsPerSec(p.throughput).to_string(),
        latency(r.p50),
        latency(r.p95),
        latency(r.p99),
        latency(r.max),
        f.errors.to_string(),
        p.retries.to_string(),
        f.dropped.map_or("-".to_string(), |d| d.to_string()),
        p.generator
            .lag_p99_s
            .map_or("-".to_string(), |s| Latency::secs(s).to_string()),
        share(f.cpu),
        share(e.cpu_user),
        share(e.cpu_system),
        share(e.cpu_isr),
        share(e.cpu_iowait),
        share(e.steal),
        e.run_queue.map_or("-".to_string(), |q| format!("{q:.1}")),
        named(&f.disk),
        named(&f.link_rx),
        named(&f.link_tx),
        e.server_cpus.map_or("-".to_string(), |c| format!("{c:.2}")),
        named(&f.top_wait),
        format!("{:.2}", p.generator.cpus),
        f.status,
        threads(p.threads.server.as_ref()),
        threads(p.threads.perflab.as_ref()),
    ]
}

/// Errors by kind (columns) per step (rows); none when no step had one.
pub(crate) fn error_grid(steps: &[StepResult]) -> Option<Grid> {
    let per_step: Vec<_> = steps
        .iter()
        .map(|s| s.measured().0.all_ops().errors.to_text())
        .collect();
    let mut kinds: Vec<&String> = per_step.iter().flat_map(|e| e.keys()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return None;
    }
    let mut grid = Grid::new(std::iter::once("load").chain(kinds.iter().map(|k| k.as_str())));
    for (step, errors) in steps.iter().zip(&per_step) {
        let mut row = vec![step.level.to_string()];
        row.extend(
            kinds
                .iter()
                .map(|k| errors.get(*k).copied().unwrap_or(0).to_string()),
        );
        grid.rows.push(row);
    }
    Some(grid)
}

/// The coefficient of variation of throughput per load level, and whether
/// it stayed within the bound.
pub(crate) fn stability_grid(verdict: &Verdict) -> Grid {
    let mut grid = Grid::new([
        "load".to_string(),
        "runs".to_string(),
        "CV of throughput".to_string(),
        "across".to_string(),
        format!("within {}", Percent(verdict.max_cv)),
    ]);
    grid.left = vec![3, 4];
    for s in &verdict.stability {
        grid.rows.push(vec![
            super::svg::number(s.load),
            s.runs.to_string(),
            share(s.cv),
            s.across.to_string(),
            if s.unstable { "NO" } else { "yes" }.to_string(),
        ]);
    }
    grid
}

/// The verdict in sentences: peak and knee, what stops the server, the
/// evidence and what was ruled out, and what to look at next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VerdictText {
    /// Peak throughput and the knee (empty when no step completed).
    pub(crate) lead: String,
    /// What stops it, and whether the verdict is unreliable.
    pub(crate) stop: Option<(String, bool)>,
    /// Evidence, then what was ruled out (`Ruled out — …`).
    pub(crate) points: Vec<String>,
    pub(crate) next: Option<String>,
    /// What would change: the model's check, then a line per change.
    pub(crate) what_if: Option<(String, Vec<String>)>,
}

impl VerdictText {
    pub(crate) fn of(v: &Verdict) -> Self {
        let mut lead = String::new();
        if let Some(peak) = v.peak {
            let p = &v.points[peak];
            lead = format!(
                "Peak throughput {} at {}.",
                Rate(p.throughput, v.rate_unit),
                load_text(p)
            );
            match &v.knee {
                Some(k) => {
                    lead.push_str(&format!(
                        " The knee is at {}: {}.",
                        load_text(&v.points[k.at]),
                        k.because
                    ));
                }
                None => lead.push_str(" No knee: throughput kept pace with load."),
            }
        }
        let b = v.bottleneck.as_ref();
        VerdictText {
            lead,
            stop: b.map(|b| (b.name.clone(), b.unreliable)),
            points: b.map_or_else(Vec::new, |b| {
                b.evidence
                    .iter()
                    .cloned()
                    .chain(b.ruled_out.iter().map(|r| format!("Ruled out — {r}")))
                    .collect()
            }),
            next: b.and_then(|b| b.next.clone()),
            what_if: v
                .what_if
                .as_ref()
                .map(|w| super::what_if_lines(w, v.rate_unit)),
        }
    }
}

/// Which step's latency distribution to show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum StepChoice {
    /// The step of peak throughput.
    Peak,
    /// The step(s) at this load level (repetitions merged).
    Load(f64),
}

impl StepChoice {
    /// Parses `peak` or a load level (`8`, `500`).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("peak") {
            return Some(StepChoice::Peak);
        }
        text.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .map(StepChoice::Load)
    }
}

/// The quantiles of a percentile plot, from the median to 99.999%.
pub(crate) const QUANTILES: [f64; 11] = [
    0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999,
];

/// A chosen step's response times at [`QUANTILES`], in seconds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Distribution {
    /// `4 users`, with the number of runs merged when the level repeated.
    pub(crate) label: String,
    pub(crate) operations: u64,
    /// (quantile, seconds).
    pub(crate) points: Vec<(f64, f64)>,
    /// The slowest operation, seconds.
    pub(crate) max_s: f64,
}

/// The distribution of the step `choice` picks in `run`; `Err` names the
/// levels there are when the run has no such step.
pub(crate) fn distribution(
    run: &StoredRun,
    verdict: &Verdict,
    choice: StepChoice,
) -> Result<Option<Distribution>, String> {
    let load = match choice {
        StepChoice::Peak => match verdict.peak {
            Some(i) => verdict.points[i].load,
            None => return Ok(None),
        },
        StepChoice::Load(load) => load,
    };
    let steps: Vec<&StepResult> = run
        .steps
        .iter()
        .filter(|s| (s.level.value() - load).abs() <= 1e-9 * load.max(1.0))
        .collect();
    let Some(first) = steps.first() else {
        let mut levels: Vec<String> = run
            .steps
            .iter()
            .map(|s| super::svg::number(s.level.value()))
            .collect();
        levels.dedup();
        return Err(format!(
            "run {} has no step at {} (its levels: {})",
            run.id,
            super::svg::number(load),
            levels.join(", ")
        ));
    };
    let mut merged: Option<hdrhistogram::Histogram<u64>> = None;
    for step in &steps {
        let h = step.measured().0.response();
        match &mut merged {
            None => merged = Some(h),
            Some(m) => {
                // Both come from the same recorder settings; a mismatch
                // would only drop values beyond the bounds.
                let _ = m.add(&h);
            }
        }
    }
    let Some(h) = merged.filter(|h| !h.is_empty()) else {
        return Ok(None);
    };
    let label = if steps.len() > 1 {
        format!("{} ({} runs)", first.level, steps.len())
    } else {
        first.level.to_string()
    };
    Ok(Some(Distribution {
        label,
        operations: h.len(),
        points: QUANTILES
            .iter()
            .map(|q| (*q, h.value_at_quantile(*q).min(h.max()) as f64 / 1e6))
            .collect(),
        max_s: h.max() as f64 / 1e6,
    }))
}

/// The chosen steps' distributions side by side: a row per quantile.
pub(crate) fn distribution_grid(found: &[Distribution]) -> Grid {
    let mut grid = Grid::new(
        std::iter::once("percentile".to_string()).chain(found.iter().map(|d| d.label.clone())),
    );
    for (i, q) in QUANTILES.iter().enumerate().skip(1) {
        let mut row = vec![super::svg::percentile(*q)];
        row.extend(
            found
                .iter()
                .map(|d| Latency::secs(d.points[i].1).to_string()),
        );
        grid.rows.push(row);
    }
    let mut max = vec!["max".to_string()];
    max.extend(found.iter().map(|d| Latency::secs(d.max_s).to_string()));
    grid.rows.push(max);
    grid
}
