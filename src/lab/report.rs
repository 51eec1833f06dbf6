//! The lab's matrix, from the store alone: for each variant its runs'
//! peak throughputs, their mean and 95% interval (Student's t over the
//! repetitions), the bottleneck each run's verdict named, and the peak
//! against the first variant's (ratio, interval, Mann–Whitney p, the
//! samples pooled from each run at its peak). Crossed axes print as seed
//! 004's table — the first axis down, the second across, further axes as
//! stacked tables — so the bottleneck is seen moving from cell to cell.
//!
//! Predictions are checked where one variant's verdict predicted another
//! variant's configuration: a server confined to fewer CPUs whose what-if
//! gave it the CPUs another variant has, every other knob the same. The
//! prediction (at the sweep's highest load) is set beside what that
//! variant measured there, with the error. Knobs the what-if has no rule
//! for are named as such: no prediction is made for them.

use super::LabSpec;
use crate::analyze::compare::{differ, peak_samples, Difference};
use crate::analyze::stats::mean_interval;
use crate::analyze::{verdict_of_run, Verdict};
use crate::store::{Store, StoredLab, StoredRun};
use std::fmt::Write;

/// One variant's figures over its repetitions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct VariantSummary {
    pub name: String,
    /// The runs of its cells that ran, in the lab's order.
    pub runs: Vec<i64>,
    /// Each run's peak throughput, operations per second.
    pub peaks: Vec<f64>,
    /// Mean of the peaks, with the 95% interval when it ran twice or more.
    pub peak: Option<f64>,
    pub interval: Option<(f64, f64)>,
    /// The bottleneck each run's verdict named, in run order.
    pub bottlenecks: Vec<String>,
    /// The peak against the first variant's.
    pub vs_base: Option<Difference>,
    /// Cells that did not complete, with why.
    pub not_done: Vec<String>,
}

impl VariantSummary {
    /// The bottleneck its runs named: one name when they agree, else each.
    pub fn bottleneck(&self) -> String {
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
pub struct PredictionCheck {
    /// The variant whose verdict predicted, and the one measured.
    pub from: String,
    pub to: String,
    /// The change, as the what-if words it.
    pub change: String,
    /// The load both are at: the sweep's highest.
    pub load: f64,
    /// Mean predicted throughput over the predicting variant's runs, and
    /// mean measured throughput over the other's, operations per second.
    pub predicted: f64,
    pub measured: f64,
    /// measured / predicted − 1.
    pub error: f64,
}

/// A whole lab's report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LabReport {
    pub lab: i64,
    pub name: String,
    pub status: String,
    pub workload: String,
    pub target: Option<String>,
    pub variants: Vec<VariantSummary>,
    /// Each prediction a variant made of another, with its error.
    pub predictions: Vec<PredictionCheck>,
    /// The varied knobs no what-if predicts.
    pub unpredicted: Vec<String>,
    #[serde(skip)]
    spec: LabSpec,
}

/// Reads lab `stored`'s runs from `store` and sums each variant up.
pub fn summarize(store: &Store, stored: &StoredLab) -> anyhow::Result<LabReport> {
    let spec: LabSpec = serde_json::from_str(&stored.spec).map_err(|e| {
        anyhow::anyhow!(
            "lab {} has a spec this perflab cannot read ({e})",
            stored.id
        )
    })?;
    let mut runs: Vec<Vec<(StoredRun, Verdict)>> = vec![Vec::new(); spec.variants.len()];
    let mut not_done: Vec<Vec<String>> = vec![Vec::new(); spec.variants.len()];
    for cell in &stored.cells {
        let Some(slot) = runs.get_mut(cell.variant) else {
            continue;
        };
        if cell.status != "done" {
            not_done[cell.variant].push(format!(
                "repetition {}: {}{}",
                cell.repetition,
                cell.status,
                cell.reason
                    .as_ref()
                    .map_or(String::new(), |r| format!(" ({r})"))
            ));
        }
        if let Some(id) = cell.run.filter(|_| cell.status == "done") {
            let run = store.load_run(id)?;
            let verdict = verdict_of_run(&run, None, None);
            slot.push((run, verdict));
        }
    }
    let pooled = |list: &[(StoredRun, Verdict)]| {
        peak_samples(&list.iter().map(|(r, v)| (r, v)).collect::<Vec<_>>())
    };
    let base = runs.first().map(|r| pooled(r)).unwrap_or_default();
    let variants = spec
        .variants
        .iter()
        .zip(&runs)
        .zip(not_done)
        .enumerate()
        .map(|(i, ((variant, list), not_done))| {
            let peaks: Vec<f64> = list
                .iter()
                .filter_map(|(_, v)| v.peak.map(|p| v.points[p].throughput))
                .collect();
            let interval = mean_interval(&peaks);
            VariantSummary {
                name: variant.name.clone(),
                runs: list.iter().map(|(r, _)| r.id).collect(),
                peak: (!peaks.is_empty()).then(|| peaks.iter().sum::<f64>() / peaks.len() as f64),
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
                vs_base: (i > 0)
                    .then(|| differ(&base, &pooled(list), spec.seed))
                    .flatten(),
                not_done,
            }
        })
        .collect();
    let predictions = predictions(&spec, &runs);
    let unpredicted = varied_knobs(&spec)
        .into_iter()
        .filter(|k| k != "cpus")
        .collect();
    Ok(LabReport {
        lab: stored.id,
        predictions,
        unpredicted,
        name: stored.name.clone(),
        status: stored.status.clone(),
        workload: spec.workload.clone(),
        target: spec.target.clone(),
        variants,
        spec,
    })
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
    let (_, list) = v.knobs.iter().find(|(k, _)| k == "cpus")?;
    crate::target::parse_kernel_cpu_list(list).map(|mut cpus| {
        cpus.sort_unstable();
        cpus.dedup();
        cpus.len()
    })
}

/// Every variant's CPU what-ifs set against the variant that has those
/// CPUs and the same other knobs.
fn predictions(spec: &LabSpec, runs: &[Vec<(StoredRun, Verdict)>]) -> Vec<PredictionCheck> {
    let others_same = |a: &super::Variant, b: &super::Variant| {
        let rest = |v: &super::Variant| {
            let mut r: Vec<(String, String)> = v
                .knobs
                .iter()
                .filter(|(k, _)| k != "cpus")
                .cloned()
                .collect();
            r.sort();
            r
        };
        rest(a) == rest(b)
    };
    let mut out = Vec::new();
    for (i, from) in spec.variants.iter().enumerate() {
        let Some(had) = cpu_count(from) else { continue };
        // (change, load, predicted, target CPUs) from each run's verdict.
        let made: Vec<(String, f64, f64, usize)> = runs[i]
            .iter()
            .filter_map(|(_, v)| v.what_if.as_ref())
            .flat_map(|w| w.scenarios.iter())
            .filter_map(|s| {
                let cpus = s.server_cpus?.ceil() as usize;
                (cpus > had).then(|| (s.change.clone(), s.load, s.throughput, cpus))
            })
            .collect();
        for (j, to) in spec.variants.iter().enumerate() {
            if i == j || !others_same(from, to) {
                continue;
            }
            let Some(has) = cpu_count(to) else { continue };
            let mine: Vec<&(String, f64, f64, usize)> =
                made.iter().filter(|m| m.3 == has).collect();
            let Some(first) = mine.first() else { continue };
            let load = first.1;
            let measured: Vec<f64> = runs[j]
                .iter()
                .filter_map(|(_, v)| {
                    v.points
                        .iter()
                        .find(|p| p.load == load)
                        .map(|p| p.throughput)
                })
                .collect();
            if measured.is_empty() {
                continue;
            }
            let predicted = mine.iter().map(|m| m.2).sum::<f64>() / mine.len() as f64;
            let measured = measured.iter().sum::<f64>() / measured.len() as f64;
            out.push(PredictionCheck {
                from: from.name.clone(),
                to: to.name.clone(),
                change: first.0.clone(),
                load,
                predicted,
                measured,
                error: measured / predicted - 1.0,
            });
        }
    }
    out
}

/// `1,234/s ±56` (the interval's half width), or `-`.
fn peak_text(v: &VariantSummary) -> String {
    match (v.peak, v.interval) {
        (Some(p), Some((lo, hi))) => format!("{}/s ±{}", group(p), group((hi - lo) / 2.0)),
        (Some(p), None) => format!("{}/s", group(p)),
        _ => "-".to_string(),
    }
}

/// A number rounded to a whole one, thousands grouped.
fn group(x: f64) -> String {
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

impl LabReport {
    /// The terminal text: the matrix (crossed axes), then every variant.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "lab {} · {} · {} on {} · {}",
            self.lab,
            self.name,
            self.workload,
            self.target.as_deref().unwrap_or("-"),
            self.status
        );
        self.render_matrix(&mut out);
        let width = self
            .variants
            .iter()
            .map(|v| v.name.len())
            .max()
            .unwrap_or(7)
            .max(7);
        let _ = writeln!(
            out,
            "\n  {:<width$}  {:>6}  {:>20}  {:>28}  bottleneck",
            "variant", "runs", "peak (95% interval)", "vs first (95% interval, p)"
        );
        for (i, v) in self.variants.iter().enumerate() {
            let vs = match (&v.vs_base, i) {
                (_, 0) => "baseline".to_string(),
                (Some(d), _) => format!(
                    "{:.2}x [{:.2}, {:.2}] p={:.3}{}",
                    d.ratio,
                    d.ci.0,
                    d.ci.1,
                    d.p_value,
                    if d.significant { "" } else { " (n.s.)" }
                ),
                (None, _) => "-".to_string(),
            };
            let _ = writeln!(
                out,
                "  {:<width$}  {:>6}  {:>20}  {:>28}  {}",
                v.name,
                v.runs.len(),
                peak_text(v),
                vs,
                v.bottleneck()
            );
            for missing in &v.not_done {
                let _ = writeln!(out, "  {:<width$}          not done: {missing}", "");
            }
        }
        if !self.predictions.is_empty() {
            let _ = writeln!(out, "\n  predictions checked (one variant's what-if against the variant with that change):");
        }
        for p in &self.predictions {
            let _ = writeln!(
                out,
                "    {} → {}: {} at load {}: predicted {}/s, measured {}/s ({:+.1}%)",
                p.from,
                p.to,
                p.change,
                p.load,
                group(p.predicted),
                group(p.measured),
                p.error * 100.0
            );
        }
        if !self.unpredicted.is_empty() {
            let _ = writeln!(
                out,
                "  no prediction is made for {}: the what-if has no rule for {} yet",
                self.unpredicted.join(", "),
                if self.unpredicted.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            );
        }
        out
    }

    /// Seed 004's table: peak and bottleneck at each crossing of the
    /// first two axes, one table per value of the axes beyond them.
    fn render_matrix(&self, out: &mut String) {
        let axes = &self.spec.axes;
        if axes.is_empty() || self.variants.len() < 2 {
            return;
        }
        let sizes: Vec<usize> = axes.iter().map(|a| a.values.len()).collect();
        let index = |coords: &[usize]| coords.iter().zip(&sizes).fold(0, |acc, (c, n)| acc * n + c);
        let (rows, cols) = (sizes[0], sizes.get(1).copied().unwrap_or(1));
        let rest: usize = sizes.iter().skip(2).product();
        for r in 0..rest {
            // The coordinates of the axes beyond the second, slowest first.
            let mut extra = Vec::new();
            let mut left = r;
            for n in sizes.iter().skip(2).rev() {
                extra.insert(0, left % n);
                left /= n;
            }
            let title = axes
                .iter()
                .skip(2)
                .zip(&extra)
                .map(|(a, &i)| format!("{}={}", a.knobs.join("/"), a.values[i]))
                .collect::<Vec<_>>()
                .join(" ");
            let header = match axes.get(1) {
                Some(a) => format!("{} ↓ / {} →", axes[0].knobs.join("/"), a.knobs.join("/")),
                None => format!("{} ↓", axes[0].knobs.join("/")),
            };
            let _ = writeln!(
                out,
                "\n  {header}{}",
                if title.is_empty() {
                    String::new()
                } else {
                    format!("   ({title})")
                }
            );
            let cell_text = |row: usize, col: usize| {
                let mut coords = vec![row];
                if axes.len() > 1 {
                    coords.push(col);
                }
                coords.extend(&extra);
                self.variants
                    .get(index(&coords))
                    .map_or(("-".to_string(), String::new()), |v| {
                        (peak_text(v), v.bottleneck())
                    })
            };
            let mut width = axes[0]
                .values
                .iter()
                .map(|v| v.len())
                .max()
                .unwrap_or(1)
                .max(8);
            width = width.min(40);
            let cell_width = (0..rows)
                .flat_map(|row| (0..cols).map(move |col| (row, col)))
                .map(|(row, col)| {
                    let (a, b) = cell_text(row, col);
                    a.len().max(b.len())
                })
                .chain(
                    axes.get(1)
                        .into_iter()
                        .flat_map(|a| a.values.iter().map(String::len)),
                )
                .max()
                .unwrap_or(8)
                + 2;
            let mut line = format!("  {:<width$}", "");
            for col in 0..cols {
                let label = axes.get(1).map_or("peak", |a| a.values[col].as_str());
                let _ = write!(line, "{label:>cell_width$}");
            }
            let _ = writeln!(out, "{line}");
            for row in 0..rows {
                let (mut peaks, mut names) = (
                    format!("  {:<width$}", axes[0].values[row]),
                    format!("  {:<width$}", ""),
                );
                for col in 0..cols {
                    let (peak, name) = cell_text(row, col);
                    let _ = write!(peaks, "{peak:>cell_width$}");
                    let _ = write!(names, "{name:>cell_width$}");
                }
                let _ = writeln!(out, "{peaks}\n{names}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::group;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(group(1234567.4), "1,234,567");
        assert_eq!(group(999.6), "1,000");
        assert_eq!(group(12.0), "12");
    }
}
