//! The lab's matrix, from the store alone: for each variant its runs'
//! peak throughputs, their mean and 95% interval (Student's t over the
//! repetitions), the bottleneck each run's verdict named, and the peak
//! against the first variant's (ratio, interval, Mann–Whitney p, the
//! samples pooled from each run at its peak). Crossed axes print as the
//! classic 2×2 of CPUs by memory does — the first axis down, the second
//! across, further axes as stacked tables — so the bottleneck is seen
//! moving from cell to cell.
//!
//! Predictions are checked where one variant's verdict predicted another
//! variant's configuration: a server confined to fewer CPUs whose what-if
//! gave it the CPUs another variant has, every other knob the same. The
//! prediction (at the sweep's highest load) is set beside what that
//! variant measured there, with the error. Knobs the what-if has no rule
//! for are named as such: no prediction is made for them.

use super::capacity::{answer, Ask, CapacityAnswer};
use super::value::{scores, value_of, Figures, Score};
use super::LabSpec;
use crate::analyze::compare::{differ, peak_samples, Difference};
use crate::analyze::held::{judge, Held};
use crate::analyze::memory::Memory;
use crate::analyze::stats::{mean, mean_interval};
use crate::analyze::whatif::log::LogDevice;
use crate::analyze::whatif::{AtLoad, Scenario};
use crate::analyze::{verdict_of_run, StepPoint, Verdict};
use crate::store::{CellStatus, LabStatus, Store, StoredLab, StoredRun};

/// One variant's figures over its repetitions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct VariantSummary {
    pub(crate) name: String,
    /// The runs of its cells that ran, in the lab's order.
    pub(crate) runs: Vec<i64>,
    /// Each run's peak throughput, operations per second.
    pub(crate) peaks: Vec<f64>,
    /// Mean of the peaks, with the 95% interval when it ran twice or more.
    pub(crate) peak: Option<f64>,
    pub(crate) interval: Option<(f64, f64)>,
    /// The bottleneck each run's verdict named, in run order.
    pub(crate) bottlenecks: Vec<String>,
    /// The peak against the first variant's.
    pub(crate) vs_base: Option<Difference>,
    /// Cells that did not complete, with why.
    pub(crate) not_done: Vec<String>,
    /// Mean over the runs of the p95 response time at each one's peak,
    /// seconds.
    pub(crate) p95_s: Option<f64>,
    /// Throughput and p95 at each load, means over the runs that ran it.
    pub(crate) curve: Vec<CurvePoint>,
    /// Through a caching accelerator: its cache's figures at each run's
    /// peak, means over the runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cache: Option<CacheAtPeak>,
    /// What it costs, and its peak per unit of that cost.
    pub(crate) cost: Option<f64>,
    pub(crate) value: Option<f64>,
    /// Its scorecard, when the lab weighs criteria.
    pub(crate) score: Option<Score>,
    /// Each run's answer within the objectives it was judged by (a line
    /// that begins `holds`), in run order; empty without objectives.
    pub(crate) holds: Vec<String>,
}

/// A caching accelerator's cache at a run's peak step, from its own
/// counters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct CacheAtPeak {
    /// Requests answered from the cache, over all.
    pub(crate) hit_ratio: f64,
    /// Bytes served that did not come from the origin, over all served.
    pub(crate) byte_hit_ratio: f64,
    /// Bytes the origin sent per second.
    pub(crate) origin_bytes_per_s: f64,
}

impl CacheAtPeak {
    /// The cache's figures at a step, when it went through a cache.
    fn of(p: &crate::analyze::points::StepPoint) -> Option<CacheAtPeak> {
        let get = |k: &str| p.db.get(k).copied().unwrap_or(0.0);
        let requests = p.db.get("cache_requests").copied().filter(|r| *r > 0.0)?;
        let served = get("served_bytes");
        let seconds = p.completed as f64 / p.throughput.max(f64::MIN_POSITIVE);
        Some(CacheAtPeak {
            hit_ratio: get("cache_hit") / requests,
            byte_hit_ratio: if served > 0.0 {
                (1.0 - get("origin_bytes") / served).clamp(0.0, 1.0)
            } else {
                1.0
            },
            origin_bytes_per_s: get("origin_bytes") / seconds.max(f64::MIN_POSITIVE),
        })
    }

    /// The means of `all`, none when empty.
    fn mean(all: &[CacheAtPeak]) -> Option<CacheAtPeak> {
        let n = all.len() as f64;
        (!all.is_empty()).then(|| CacheAtPeak {
            hit_ratio: all.iter().map(|c| c.hit_ratio).sum::<f64>() / n,
            byte_hit_ratio: all.iter().map(|c| c.byte_hit_ratio).sum::<f64>() / n,
            origin_bytes_per_s: all.iter().map(|c| c.origin_bytes_per_s).sum::<f64>() / n,
        })
    }
}

/// One load of a variant's curve.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct CurvePoint {
    pub(crate) load: f64,
    /// Operations per second.
    pub(crate) throughput: f64,
    /// Seconds.
    pub(crate) p95_s: f64,
}

impl VariantSummary {
    /// The bottleneck its runs named: one name when they agree, else each.
    pub(crate) fn bottleneck(&self) -> String {
        let mut names = self.bottlenecks.clone();
        names.dedup();
        match names.len() {
            0 => "-".to_string(),
            1 => names.remove(0),
            _ => names.join(" / "),
        }
    }
}

/// One variant's what-if checked against the variant that made the change.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct PredictionCheck {
    /// The variant whose verdict predicted, and the one measured.
    pub(crate) from: String,
    pub(crate) to: String,
    /// The change, as the what-if words it.
    pub(crate) change: String,
    /// The load both are at: the sweep's highest, or the predicting
    /// variant's peak's.
    pub(crate) load: f64,
    /// Mean predicted throughput over the predicting variant's runs, and
    /// mean measured throughput over the other's, operations per second.
    pub(crate) predicted: f64,
    /// The prediction's 95% interval (the mean of the runs' bounds).
    pub(crate) interval: Option<[f64; 2]>,
    pub(crate) measured: f64,
    /// The measured step's 95% interval: over the runs' throughputs, or
    /// over one run's intervals.
    pub(crate) measured_interval: Option<[f64; 2]>,
    /// measured / predicted − 1.
    pub(crate) error: f64,
    /// Whether the prediction held.
    pub(crate) held: Held,
    /// The prediction is a floor, not a figure.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) at_least: bool,
}

/// A whole lab's report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct LabReport {
    pub(crate) lab: i64,
    pub(crate) name: String,
    /// How the lab stands (`running`, `complete`, `partial` in JSON).
    pub(crate) status: LabStatus,
    pub(crate) workload: String,
    pub(crate) target: Option<String>,
    pub(crate) variants: Vec<VariantSummary>,
    /// Each prediction a variant made of another, with its error.
    pub(crate) predictions: Vec<PredictionCheck>,
    /// The varied knobs no what-if predicts.
    pub(crate) unpredicted: Vec<String>,
    /// What costs are counted in, and the scorecard's weights.
    pub(crate) cost_unit: Option<String>,
    pub(crate) weights: Vec<(String, f64)>,
    /// The answer to `--need`/`--slo`, when asked.
    pub(crate) capacity: Option<CapacityAnswer>,
    #[serde(skip)]
    pub(super) spec: LabSpec,
}

/// The mean throughput and p95 at each load the runs stepped through.
fn curve(list: &[(StoredRun, Verdict)]) -> Vec<CurvePoint> {
    let mut loads: Vec<f64> = list
        .iter()
        .flat_map(|(_, v)| v.points.iter().map(|p| p.load))
        .collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    loads
        .into_iter()
        .map(|load| {
            let at: Vec<_> = list
                .iter()
                .filter_map(|(_, v)| v.points.iter().find(|p| p.load == load))
                .collect();
            let n = at.len() as f64;
            CurvePoint {
                load,
                throughput: at.iter().map(|p| p.throughput).sum::<f64>() / n,
                p95_s: at.iter().map(|p| p.response.p95.as_secs_f64()).sum::<f64>() / n,
            }
        })
        .collect()
}

/// A variant's completed runs, each with its verdict.
type RunsOf = Vec<(StoredRun, Verdict)>;

/// Reads lab `stored`'s runs from `store` and sums each variant up;
/// answers `ask` when it asks something.
pub(crate) fn summarize(store: &Store, stored: &StoredLab, ask: &Ask) -> anyhow::Result<LabReport> {
    let spec = LabSpec::of_stored(stored)?;
    let (runs, not_done) = runs_by_variant(store, stored, spec.variants.len(), &ask.slos)?;
    let base = runs.first().map(|r| pooled(r)).unwrap_or_default();
    let mut variants: Vec<VariantSummary> = spec
        .variants
        .iter()
        .zip(&runs)
        .zip(not_done)
        .enumerate()
        .map(|(i, ((variant, list), not_done))| {
            let vs_base = (i > 0)
                .then(|| differ(&base, &pooled(list), spec.seed))
                .flatten();
            summarize_variant(variant, list, not_done, vs_base)
        })
        .collect();
    score(&spec, &mut variants);
    let predictions = predictions(&spec, &runs);
    // A need asked with no objectives is asked within the lab's own.
    let mut ask = ask.clone();
    if ask.need.is_some() && ask.slos.is_empty() {
        ask.slos = runs
            .iter()
            .flatten()
            .find_map(|(run, _)| run.plan.as_ref().map(|p| p.slos.clone()))
            .unwrap_or_default();
    }
    let capacity = (!ask.is_empty()).then(|| capacity(&ask, &spec, &runs, &predictions));
    let unpredicted = varied_knobs(&spec)
        .into_iter()
        .filter(|k| !checkable(k))
        .collect();
    Ok(LabReport {
        lab: stored.id,
        cost_unit: spec.valuation.cost_unit.clone(),
        weights: spec.valuation.weights.clone(),
        capacity,
        predictions,
        unpredicted,
        name: stored.name.clone(),
        status: stored.status,
        workload: spec.workload.clone(),
        // A lab stored before targets were masked in the store.
        target: spec.target.as_deref().map(crate::secret::redact),
        variants,
        spec,
    })
}

/// Per variant, the runs its cells completed (with their verdicts, judged
/// by `slos` when given, else by the lab's own objectives) and the cells
/// that did not complete, with why.
fn runs_by_variant(
    store: &Store,
    stored: &StoredLab,
    count: usize,
    slos: &[crate::plan::Slo],
) -> anyhow::Result<(Vec<RunsOf>, Vec<Vec<String>>)> {
    let mut runs: Vec<RunsOf> = vec![Vec::new(); count];
    let mut not_done: Vec<Vec<String>> = vec![Vec::new(); count];
    for cell in &stored.cells {
        let Some(slot) = runs.get_mut(cell.variant) else {
            continue;
        };
        if cell.status != CellStatus::Done {
            not_done[cell.variant].push(format!(
                "repetition {}: {}{}",
                cell.repetition,
                cell.status,
                cell.reason
                    .as_ref()
                    .map_or(String::new(), |r| format!(" ({r})"))
            ));
        }
        if let Some(id) = cell.run.filter(|_| cell.status == CellStatus::Done) {
            let run = store.load_run(id)?;
            let verdict = verdict_of_run(&run, (!slos.is_empty()).then(|| slos.to_vec()), None);
            slot.push((run, verdict));
        }
    }
    Ok((runs, not_done))
}

/// The samples of a variant's runs at their peaks, pooled.
fn pooled(list: &[(StoredRun, Verdict)]) -> Vec<f64> {
    peak_samples(&list.iter().map(|(r, v)| (r, v)).collect::<Vec<_>>())
}

/// One variant's line of the matrix, from its completed runs.
fn summarize_variant(
    variant: &super::Variant,
    list: &[(StoredRun, Verdict)],
    not_done: Vec<String>,
    vs_base: Option<Difference>,
) -> VariantSummary {
    let peaks: Vec<f64> = list
        .iter()
        .filter_map(|(_, v)| v.peak.map(|p| v.points[p].throughput))
        .collect();
    let interval = mean_interval(&peaks);
    let p95s: Vec<f64> = list
        .iter()
        .filter_map(|(_, v)| v.peak.map(|p| v.points[p].response.p95.as_secs_f64()))
        .collect();
    let peak = (!peaks.is_empty()).then(|| peaks.iter().sum::<f64>() / peaks.len() as f64);
    let caches: Vec<CacheAtPeak> = list
        .iter()
        .filter_map(|(_, v)| CacheAtPeak::of(&v.points[v.peak?]))
        .collect();
    VariantSummary {
        cache: CacheAtPeak::mean(&caches),
        p95_s: (!p95s.is_empty()).then(|| p95s.iter().sum::<f64>() / p95s.len() as f64),
        curve: curve(list),
        cost: variant.cost,
        value: value_of(peak, variant.cost),
        score: None,
        name: variant.name.clone(),
        runs: list.iter().map(|(r, _)| r.id).collect(),
        peak,
        interval: interval.map(|(_, lo, hi)| (lo, hi)),
        peaks,
        bottlenecks: list
            .iter()
            .map(|(_, v)| {
                v.bottleneck
                    .as_ref()
                    .map_or("none found".to_string(), |b| b.name.clone())
            })
            .collect(),
        vs_base,
        not_done,
        holds: list
            .iter()
            .filter_map(|(_, v)| v.slo.as_ref().map(|o| o.answer.clone()))
            .collect(),
    }
}

/// Scores each variant on the scorecard, when the lab weighs criteria.
fn score(spec: &LabSpec, variants: &mut [VariantSummary]) {
    if spec.valuation.weights.is_empty() {
        return;
    }
    let figures: Vec<Figures<'_>> = variants
        .iter()
        .zip(&spec.variants)
        .map(|(s, v)| Figures {
            peak: s.peak,
            p95_s: s.p95_s,
            cost: s.cost,
            ratings: &v.ratings,
        })
        .collect();
    let scored = scores(&spec.valuation.weights, &figures);
    for (s, score) in variants.iter_mut().zip(scored) {
        s.score = score;
    }
}

/// The answer to `ask`, each prediction set beside what another variant
/// measured of the same change.
fn capacity(
    ask: &Ask,
    spec: &LabSpec,
    runs: &[RunsOf],
    predictions: &[PredictionCheck],
) -> CapacityAnswer {
    let verdicts: Vec<Vec<&Verdict>> = runs
        .iter()
        .map(|list| list.iter().map(|(_, v)| v).collect())
        .collect();
    let mut capacity = answer(ask, &spec.variants, &verdicts);
    for p in capacity.predicted.iter_mut() {
        // The check at the prediction's own load, else at the highest.
        let of_it = || {
            predictions
                .iter()
                .filter(|c| c.from == p.variant && c.change == p.change)
        };
        p.measured_on = of_it()
            .find(|c| c.load == p.load)
            .or_else(|| of_it().next())
            .map(|c| (c.to.clone(), c.measured));
    }
    capacity
}

/// The knobs whose values differ between variants, in the file's order.
fn varied_knobs(spec: &LabSpec) -> Vec<String> {
    let mut knobs: Vec<String> = Vec::new();
    for v in &spec.variants {
        for (k, value) in &v.knobs {
            let differs = spec
                .variants
                .iter()
                .any(|o| o.knobs.iter().find(|(ok, _)| ok == k).map(|(_, ov)| ov) != Some(value));
            if differs && !knobs.contains(k) {
                knobs.push(k.clone());
            }
        }
    }
    knobs
}

/// The CPUs a variant's `cpus` knob gives the server, when it names them.
fn cpu_count(v: &super::Variant) -> Option<usize> {
    super::capacity::size("cpus", knob(v, "cpus")?).map(|n| n as usize)
}

/// The knobs a prediction can be checked on: the server's CPUs, its
/// memory (a cgroup's limit, or a managed MariaDB's buffer pool), its
/// link's rate, its disk's limits and its log's directory.
fn checkable(knob: &str) -> bool {
    knob == "cpus"
        || knob == "memory"
        || knob == "link.rate"
        || knob == "log_dir"
        || crate::sut::knobs::sizes_a_cache(knob)
        || knob.starts_with("disk.")
}

/// The device `to` put its log on, when it differs from `from` in that
/// alone: its flush as perflab timed it when each of `to`'s servers
/// started (the mean of its runs').
fn log_change(
    from: &super::Variant,
    to: &super::Variant,
    runs: &[(StoredRun, Verdict)],
) -> Option<LogDevice> {
    let dir = knob(to, "log_dir")?;
    if knob(from, "log_dir") == Some(dir) || !same_but(from, to, "log_dir") {
        return None;
    }
    let flushes: Vec<f64> = runs
        .iter()
        .filter_map(|(run, _)| {
            run.setup
                .as_ref()?
                .pointer("/managed_server/log_flush/mean_s")?
                .as_f64()
        })
        .collect();
    if flushes.is_empty() {
        return None;
    }
    let mean_s = mean(&flushes);
    Some(LogDevice {
        words: format!(
            "{dir}'s device (its flush {} mean, timed by perflab as the variant '{}' started)",
            crate::units::Latency::secs(mean_s),
            to.name
        ),
        mean_s,
    })
}

/// What the run of verdict `v` predicts with its log on `device`.
fn at_log(v: &Verdict, device: &LogDevice) -> Option<Scenario> {
    let mut v = v.clone();
    v.what_if = None;
    crate::analyze::whatif::log::add_to(&mut v, device);
    v.what_if?
        .scenarios
        .into_iter()
        .find(|s| s.change.starts_with("the log on "))
}

/// Whether `from` and `to` set the same knobs to the same values, but
/// for `name`.
fn same_but(from: &super::Variant, to: &super::Variant, name: &str) -> bool {
    let rest = |v: &super::Variant| -> Vec<(String, String)> {
        let mut r: Vec<(String, String)> =
            v.knobs.iter().filter(|(k, _)| k != name).cloned().collect();
        r.sort();
        r
    };
    rest(from) == rest(to)
}

/// The memory limit of `to`, or its InnoDB buffer pool's size, when it
/// differs from `from` in that alone.
fn memory_change(from: &super::Variant, to: &super::Variant) -> Option<Memory> {
    from.knobs.iter().find_map(|(name, a)| {
        let memory = if name == "memory" {
            Memory::Limit
        } else if crate::sut::knobs::sizes_a_cache(name) {
            Memory::Pool
        } else {
            return None;
        };
        let b = super::capacity::size(name, knob(to, name)?)?;
        (same_but(from, to, name) && super::capacity::size(name, a)? != b).then(|| memory(b))
    })
}

/// What the run of verdict `v` predicts for the server with `memory`.
fn at_memory(v: &Verdict, memory: Memory) -> Option<Scenario> {
    let peak = v
        .points
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.throughput.total_cmp(&b.1.throughput))?
        .0;
    crate::analyze::whatif::at_memory(
        &v.points,
        v.demands.as_ref()?,
        v.bottleneck.as_ref()?,
        peak,
        memory,
    )
}

/// A knob's value in `v`, if it sets it.
fn knob<'a>(v: &'a super::Variant, name: &str) -> Option<&'a str> {
    v.knobs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, x)| x.as_str())
}

/// A link rate or disk limit as a number; infinite when unlimited or not
/// set; none when it is not a number.
fn limit(knob_name: &str, value: Option<&str>) -> Option<f64> {
    match value {
        None => Some(f64::INFINITY),
        Some(v) => super::capacity::size(knob_name, v),
    }
}

/// Whether variant `to` is variant `from` with the change `s` made:
/// every other knob the same, and the changed one as the change says —
/// the CPUs it gives, a link rate or every disk limit multiplied by its
/// factor (2% either way), or unlimited for a resource out of the way.
fn made(from: &super::Variant, to: &super::Variant, s: &crate::analyze::whatif::Scenario) -> bool {
    use crate::analyze::points::ResourceKind;
    let changes = |k: &str| match s.changed.kind {
        ResourceKind::Cpu | ResourceKind::OneCpu | ResourceKind::CpuQuota => k == "cpus",
        ResourceKind::Link => k == "link.rate",
        ResourceKind::Disk => k.starts_with("disk."),
    };
    let rest = |v: &super::Variant| {
        let mut r: Vec<(String, String)> = v
            .knobs
            .iter()
            .filter(|(k, _)| !changes(k))
            .cloned()
            .collect();
        r.sort();
        r
    };
    if rest(from) != rest(to) {
        return false;
    }
    let scaled = |name: &str| {
        let (Some(a), Some(b)) = (limit(name, knob(from, name)), limit(name, knob(to, name)))
        else {
            return false;
        };
        match s.changed.factor {
            _ if a.is_infinite() => false,
            Some(f) => b.is_finite() && (b / (a * f) - 1.0).abs() <= 0.02,
            None => b.is_infinite(),
        }
    };
    match s.changed.kind {
        ResourceKind::Cpu | ResourceKind::OneCpu | ResourceKind::CpuQuota => {
            match (s.server_cpus, cpu_count(from), cpu_count(to)) {
                (Some(after), Some(had), Some(has)) => has > had && has == after.ceil() as usize,
                _ => false,
            }
        }
        ResourceKind::Link => scaled("link.rate"),
        ResourceKind::Disk => {
            let limits: Vec<&str> = from
                .knobs
                .iter()
                .map(|(k, _)| k.as_str())
                .filter(|k| k.starts_with("disk."))
                .collect();
            let only_these = to
                .knobs
                .iter()
                .filter(|(k, _)| k.starts_with("disk."))
                .all(|(k, _)| limits.contains(&k.as_str()));
            !limits.is_empty() && only_these && limits.iter().all(|k| scaled(k))
        }
    }
}

/// Every variant's what-ifs set against the variant that has the change
/// (`made`) and the same other knobs.
fn predictions(spec: &LabSpec, runs: &[Vec<(StoredRun, Verdict)>]) -> Vec<PredictionCheck> {
    let mut out = Vec::new();
    for (i, from) in spec.variants.iter().enumerate() {
        let scenarios: Vec<&Scenario> = runs[i]
            .iter()
            .filter_map(|(_, v)| v.what_if.as_ref())
            .flat_map(|w| w.scenarios.iter())
            .collect();
        for (j, to) in spec.variants.iter().enumerate() {
            if i == j {
                continue;
            }
            // A memory limit is predicted at the other variant's own, the
            // log on the device the other variant's was timed on.
            let log = log_change(from, to, &runs[j]);
            let mine: Vec<Scenario> = match (memory_change(from, to), log) {
                (Some(bytes), _) => runs[i]
                    .iter()
                    .filter_map(|(_, v)| at_memory(v, bytes))
                    .collect(),
                (None, Some(device)) => runs[i]
                    .iter()
                    .filter_map(|(_, v)| at_log(v, &device))
                    .collect(),
                (None, None) => scenarios
                    .iter()
                    .filter(|s| made(from, to, s))
                    .map(|s| (*s).clone())
                    .collect(),
            };
            let Some(first) = mine.first() else { continue };
            let mine: Vec<&Scenario> = mine
                .iter()
                .filter(|s| s.change == first.change && s.load == first.load)
                .collect();
            // At the highest load, then at the peak's when it is lower.
            let highest: Vec<AtLoad> = mine
                .iter()
                .map(|s| AtLoad {
                    load: s.load,
                    throughput: s.throughput,
                    at_least: s.at_least,
                    interval: s.interval,
                })
                .collect();
            let peaks: Vec<AtLoad> = mine.iter().filter_map(|s| s.at_peak).collect();
            for at in [highest, peaks] {
                let Some(check) = checked(&at, &runs[j]) else {
                    continue;
                };
                out.push(PredictionCheck {
                    from: from.name.clone(),
                    to: to.name.clone(),
                    change: first.change.clone(),
                    ..check
                });
            }
        }
    }
    out
}

/// The predictions `at` one load (one per run of the predicting
/// variant, all at the same load) against what the runs of the variant
/// with the change measured there; none when either has no figure.
fn checked(at: &[AtLoad], runs: &[(StoredRun, Verdict)]) -> Option<PredictionCheck> {
    let load = at.first()?.load;
    let at: Vec<&AtLoad> = at
        .iter()
        .filter(|a| a.load == load && a.throughput.is_finite())
        .collect();
    let steps: Vec<&StepPoint> = runs
        .iter()
        .filter_map(|(_, v)| v.points.iter().find(|p| p.load == load))
        .collect();
    if at.is_empty() || steps.is_empty() {
        return None;
    }
    let of = |f: &dyn Fn(&AtLoad) -> f64| mean(&at.iter().map(|a| f(a)).collect::<Vec<f64>>());
    let predicted = of(&|a| a.throughput);
    let interval = at.iter().all(|a| a.interval.is_some()).then(|| {
        [
            of(&|a| a.interval.map_or(0.0, |b| b[0])),
            of(&|a| a.interval.map_or(0.0, |b| b[1])),
        ]
    });
    let throughputs: Vec<f64> = steps.iter().map(|p| p.throughput).collect();
    let measured = mean(&throughputs);
    // Several runs: the interval of their mean; one: of its intervals'.
    let spread = if steps.len() >= 2 {
        mean_interval(&throughputs)
    } else {
        mean_interval(&steps[0].interval_throughputs)
    };
    let measured_interval = spread.map(|(_, lo, hi)| [lo, hi]);
    let at_least = at.iter().all(|a| a.at_least);
    let held = if at_least {
        crate::analyze::held::judge_floor(predicted, measured, measured_interval)
    } else {
        judge(predicted, interval, measured, measured_interval)
    };
    Some(PredictionCheck {
        from: String::new(),
        to: String::new(),
        change: String::new(),
        load,
        predicted,
        interval,
        measured,
        measured_interval,
        error: measured / predicted - 1.0,
        held,
        at_least,
    })
}

#[cfg(test)]
mod tests {
    use super::made;
    use crate::analyze::points::ResourceKind;
    use crate::analyze::whatif::{Changed, Scenario};
    use crate::lab::Variant;

    fn variant(knobs: &[(&str, &str)]) -> Variant {
        Variant {
            name: String::new(),
            knobs: knobs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cost: None,
            ratings: Vec::new(),
        }
    }

    fn scenario(kind: ResourceKind, factor: Option<f64>, server_cpus: Option<f64>) -> Scenario {
        Scenario {
            change: String::new(),
            load: 8.0,
            throughput: 100.0,
            response_s: None,
            gain: 2.0,
            limited_by: None,
            bound: None,
            still: false,
            server_cpus,
            server_memory: None,
            ends: None,
            sharing: 0.0,
            at_least: false,
            changed: Changed { kind, factor },
            at_peak: None,
            interval: None,
        }
    }

    /// A variant with another memory limit, or another buffer pool on a
    /// managed MariaDB, and nothing else changed, is that change of memory;
    /// one that changes another knob too, or neither, is none.
    #[test]
    fn a_memory_limit_or_a_buffer_pool_is_a_change_of_memory() {
        use super::{memory_change, Memory};
        const MIB: f64 = 1048576.0;
        let pool = |size: &str, cpus: &str| {
            variant(&[("cpus", cpus), ("mariadb.innodb_buffer_pool_size", size)])
        };
        assert_eq!(
            memory_change(&pool("8M", "0"), &pool("32M", "0")),
            Some(Memory::Pool(32.0 * MIB))
        );
        assert_eq!(memory_change(&pool("8M", "0"), &pool("32M", "0-1")), None);
        assert_eq!(memory_change(&pool("8M", "0"), &pool("8M", "0-1")), None);
        let limit = |size: &str| variant(&[("memory", size)]);
        assert_eq!(
            memory_change(&limit("96MiB"), &limit("1GiB")),
            Some(Memory::Limit(1024.0 * MIB))
        );
    }

    /// A link twice as fast is the variant at twice the rate (2% either
    /// way), the link out of the way the unlimited one; a disk twice as
    /// fast has every limit doubled; a change of CPUs is the variant with
    /// that many; any other knob that differs rules a variant out.
    #[test]
    fn a_change_is_the_variant_that_has_it_and_nothing_else() {
        let link = |r: &str| variant(&[("link.rate", r), ("pg.fsync", "on")]);
        let twice = scenario(ResourceKind::Link, Some(2.0), None);
        let gone = scenario(ResourceKind::Link, None, None);
        assert!(made(&link("2mbit"), &link("4mbit"), &twice));
        assert!(made(&link("2mbit"), &link("4001kbit"), &twice));
        assert!(!made(&link("2mbit"), &link("5mbit"), &twice));
        assert!(!made(&link("2mbit"), &link("unlimited"), &twice));
        assert!(made(&link("2mbit"), &link("unlimited"), &gone));
        assert!(!made(&link("unlimited"), &link("unlimited"), &gone));
        let other = variant(&[("link.rate", "4mbit"), ("pg.fsync", "off")]);
        assert!(!made(&link("2mbit"), &other, &twice));
        let disk = |r: &str, w: &str| variant(&[("disk.read_iops", r), ("disk.write_bps", w)]);
        let faster = scenario(ResourceKind::Disk, Some(2.0), None);
        assert!(made(&disk("300", "1MiB"), &disk("600", "2MiB"), &faster));
        assert!(!made(&disk("300", "1MiB"), &disk("600", "1MiB"), &faster));
        let cleared = scenario(ResourceKind::Disk, None, None);
        assert!(made(&disk("300", "1MiB"), &variant(&[]), &cleared));
        let second = scenario(ResourceKind::OneCpu, Some(2.0), Some(1.32));
        assert!(made(
            &variant(&[("cpus", "0")]),
            &variant(&[("cpus", "0-1")]),
            &second
        ));
        assert!(!made(
            &variant(&[("cpus", "0-1")]),
            &variant(&[("cpus", "0")]),
            &second
        ));
    }
}
